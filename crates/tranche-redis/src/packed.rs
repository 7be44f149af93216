//! The job hash's `d` field: what only Rust reads (task kind, max attempts, args),
//! packed by the client into one field, so that enqueue writes and reserve reads a
//! few fields instead of many (Redis time per hash field is a large part of a job's
//! cost). `kind \x1f max_attempts \x1f args`: a kind has no control characters and
//! the args come last, so they may hold anything. The retry path of
//! `scripts/common.lua` reads max_attempts back with the same layout.

pub(crate) const SEPARATOR: char = '\u{1f}';

pub(crate) fn pack(kind: &str, max_attempts: u32, args: &str) -> String {
    format!("{kind}{SEPARATOR}{max_attempts}{SEPARATOR}{args}")
}

/// The kind, max attempts and args of a packed field; None when it is malformed.
pub(crate) fn unpack(d: &str) -> Option<(&str, u32, &str)> {
    let mut parts = d.splitn(3, SEPARATOR);
    let kind = parts.next()?;
    let max = parts.next()?.parse().ok()?;
    Some((kind, max, parts.next()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_may_hold_the_separator() {
        let d = pack("render", 3, "{\"s\":\"a\u{1f}b\"}");
        assert_eq!(unpack(&d), Some(("render", 3, "{\"s\":\"a\u{1f}b\"}")));
        assert_eq!(unpack("render"), None);
        assert_eq!(unpack("render\u{1f}x\u{1f}{}"), None);
    }
}
