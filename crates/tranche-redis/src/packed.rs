//! A job's packed spec (the first text of its record, see `scripts/common.lua`): what
//! only Rust reads (task kind, max attempts, args), packed by the client into one text,
//! so that enqueue writes and reserve reads a few values instead of many (Redis time
//! per value is a large part of a job's cost). `kind \x1f max_attempts \x1f args`: a
//! kind has no control characters and the args come last, so they may hold anything.
//! The retry path of `scripts/common.lua` (`max_attempts`) reads max_attempts back with
//! the same layout.

pub(crate) const SEPARATOR: char = '\u{1f}';

/// The parts of a packed spec, borrowed from it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct PackedSpec<'a> {
    pub kind: &'a str,
    pub max_attempts: u32,
    pub args: &'a str,
}

pub(crate) fn pack(kind: &str, max_attempts: u32, args: &str) -> String {
    format!("{kind}{SEPARATOR}{max_attempts}{SEPARATOR}{args}")
}

/// The parts of a packed spec; None when it is malformed.
pub(crate) fn unpack(packed: &str) -> Option<PackedSpec<'_>> {
    let mut parts = packed.splitn(3, SEPARATOR);
    let kind = parts.next()?;
    let max_attempts = parts.next()?.parse().ok()?;
    Some(PackedSpec {
        kind,
        max_attempts,
        args: parts.next()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_may_hold_the_separator() {
        let packed = pack("render", 3, "{\"s\":\"a\u{1f}b\"}");
        assert_eq!(
            unpack(&packed),
            Some(PackedSpec {
                kind: "render",
                max_attempts: 3,
                args: "{\"s\":\"a\u{1f}b\"}"
            })
        );
        assert_eq!(unpack("render"), None);
        assert_eq!(unpack("render\u{1f}x\u{1f}{}"), None);
    }
}
