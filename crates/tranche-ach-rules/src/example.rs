//! The shipped example ach.toml, and the same rules for other bank names (what
//! `generate::write_day` writes next to a generated day).

/// The commented example ach.toml: the Same Day ACH windows in Eastern time
/// (cut-offs 10:30, 14:45, 16:45; settlement 13:00, 17:00, 18:00), next-day windows
/// the evening and night before, and a second bank with its own cut-offs. Outboxes
/// are `outbox/<bank>` next to the file.
pub const EXAMPLE: &str = include_str!("ach.example.toml");

/// The example's rules with its banks named `banks` instead: the first takes the
/// example's first bank, the second its second, and so on alternately (so any number
/// of banks can be had), each with its outbox at `outbox/<name>`.
pub fn example_for(banks: &[impl AsRef<str>]) -> String {
    let (preamble, blocks) = split_banks(EXAMPLE);
    let mut out = preamble.to_string();
    for (i, name) in banks.iter().enumerate() {
        let (original, block) = blocks[i % blocks.len()];
        let name = name.as_ref();
        out.push_str(
            &block
                .replace(
                    &format!("name = \"{original}\""),
                    &format!("name = \"{name}\""),
                )
                .replace(
                    &format!("dir = \"outbox/{original}\""),
                    &format!("dir = \"outbox/{name}\""),
                ),
        );
    }
    out
}

/// The text before the first bank, and each bank's block (with the comment lines
/// just above its `[[bank]]`) with the bank's name.
fn split_banks(text: &str) -> (&str, Vec<(&str, &str)>) {
    let lines: Vec<(usize, &str)> = text
        .split_inclusive('\n')
        .scan(0, |at, line| {
            let start = *at;
            *at += line.len();
            Some((start, line))
        })
        .collect();
    let mut starts = Vec::new();
    for (i, (_, line)) in lines.iter().enumerate() {
        if line.trim_end() == "[[bank]]" {
            let comments = lines[..i]
                .iter()
                .rev()
                .take_while(|(_, l)| l.starts_with('#'))
                .count();
            starts.push(lines[i - comments].0);
        }
    }
    let mut blocks = Vec::new();
    for (k, &start) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(text.len());
        let block = &text[start..end];
        let name = block
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|rest| rest.split('"').next())
            .expect("every example bank has a name");
        blocks.push((name, block));
    }
    (&text[..starts[0]], blocks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Delivery, Rules};
    use std::path::Path;

    #[test]
    fn the_example_splits_into_its_two_banks() {
        let (preamble, blocks) = split_banks(EXAMPLE);
        assert!(preamble.contains("[engine]"));
        assert!(!preamble.contains("[[bank]]"));
        let names: Vec<&str> = blocks.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["first", "second"]);
        assert!(blocks[0].1.starts_with("# One [[bank]] table"));
        assert!(blocks[1].1.starts_with("# A second bank"));
    }

    #[test]
    fn renamed_examples_are_valid_rules_with_their_outboxes() {
        let text = example_for(&["alpha", "beta", "gamma"]);
        let rules = Rules::parse(&text, Path::new("/day/ach.toml")).unwrap();
        let names: Vec<&str> = rules.banks.iter().map(|b| b.name()).collect();
        assert_eq!(names, ["alpha", "beta", "gamma"]);
        for b in &rules.banks {
            assert_eq!(
                b.delivery,
                Delivery::Outbox {
                    dir: Path::new("/day/outbox").join(b.name())
                }
            );
        }
        assert_eq!(rules.banks[2].windows, rules.banks[0].windows);
        assert_eq!(example_for(&["first", "second"]), EXAMPLE);
    }
}
