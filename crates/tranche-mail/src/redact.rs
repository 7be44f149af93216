//! Server replies often quote the recipient (`550 5.1.1 <asha@client.example>: ...`);
//! they end up in job records and logs, where addresses must not.

/// `text` with every word that contains an `@` replaced by `<address>`.
pub(crate) fn addresses(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if word.contains('@') {
            out.push_str("<address>");
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_whitespace() {
            flush(&mut word, &mut out);
            out.push(c);
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn words_with_an_at_sign_are_blanked() {
        assert_eq!(
            super::addresses("550 5.1.1 <asha@client.example>: Recipient address rejected"),
            "550 5.1.1 <address> Recipient address rejected"
        );
        assert_eq!(super::addresses("451 try later"), "451 try later");
    }
}
