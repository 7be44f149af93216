//! "Did you mean": the nearest known word to a misspelt one.

/// The candidate nearest to `got` by edit distance, when near enough to be what was
/// meant: a case-only difference always is; otherwise at most a third of its
/// letters (at least one) may differ.
pub(crate) fn nearest<'a>(
    got: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = got.to_lowercase();
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        if c.to_lowercase() == lower {
            return Some(c);
        }
        let d = distance(&lower, &c.to_lowercase());
        if best.is_none_or(|(b, _)| d < b) {
            best = Some((d, c));
        }
    }
    let allowed = (got.chars().count() / 3).max(1);
    best.filter(|(d, _)| *d <= allowed).map(|(_, c)| c)
}

/// `did you mean "x"?` for the nearest candidate.
pub(crate) fn did_you_mean<'a>(
    got: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    nearest(got, candidates).map(|c| format!("did you mean {c:?}?"))
}

/// Edit distance over characters, a swap of two neighbours counting one (optimal
/// string alignment): "sfpt" is one edit from "sftp".
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // d[i][j]: distance between a[..i] and b[..j].
    let mut d: Vec<Vec<usize>> = (0..=a.len())
        .map(|i| (0..=b.len()).map(|j| if i == 0 { j } else { i }).collect())
        .collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("same", "same"), 0);
        assert_eq!(distance("sfpt", "sftp"), 1);
    }

    #[test]
    fn near_words_are_suggested_far_ones_not() {
        let keys = ["submission_begin", "submission_end", "settlement", "lead"];
        assert_eq!(nearest("submision_end", keys), Some("submission_end"));
        assert_eq!(nearest("LEAD", keys), Some("lead"));
        assert_eq!(nearest("colour", keys), None);
        assert_eq!(
            nearest("sameday", ["same-day", "next-day"]),
            Some("same-day")
        );
        assert_eq!(nearest("sftp", ["outbox", "sftp"]), Some("sftp"));
        assert_eq!(nearest("ftp", ["outbox", "sftp"]), Some("sftp"));
        assert_eq!(nearest("x", ["outbox", "sftp"]), None);
        assert_eq!(nearest("sfpt", ["outbox", "sftp"]), Some("sftp"));
        assert_eq!(nearest("seperate", ["separate", "mixed"]), Some("separate"));
    }
}
