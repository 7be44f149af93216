//! A job's packed spec (the first text of its record, see `scripts/common.lua`): what
//! only Rust reads (task kind, max attempts, args), packed by the client into one text,
//! so that enqueue writes and reserve reads a few values instead of many (Redis time
//! per value is a large part of a job's cost). `kind \x1f max_attempts \x1f args`: a
//! kind has no control characters and the args come last, so they may hold anything.
//! The retry path of `scripts/common.lua` (`max_attempts`) reads max_attempts back with
//! the same layout.
//!
//! A traced job's spec starts with its trace context between two `\x1e`:
//! `\x1e trace \x1e kind \x1f max_attempts \x1f args`. A kind never starts with a
//! control character, so a spec without one (every record written before traces, and
//! every untraced job) reads as before, byte for byte. `common.lua`'s `with_trace`
//! replaces it when a traced chain step hands its attempt's context on.

pub(crate) const SEPARATOR: char = '\u{1f}';
/// Opens and closes the trace context at the start of a packed spec.
pub(crate) const TRACE_MARK: char = '\u{1e}';

/// The parts of a packed spec, borrowed from it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct PackedSpec<'a> {
    pub kind: &'a str,
    pub max_attempts: u32,
    pub args: &'a str,
    pub trace: Option<&'a str>,
}

pub(crate) fn pack(kind: &str, max_attempts: u32, args: &str, trace: Option<&str>) -> String {
    match trace {
        None => format!("{kind}{SEPARATOR}{max_attempts}{SEPARATOR}{args}"),
        Some(trace) => format!(
            "{TRACE_MARK}{trace}{TRACE_MARK}{kind}{SEPARATOR}{max_attempts}{SEPARATOR}{args}"
        ),
    }
}

/// The parts of a packed spec; None when it is malformed.
pub(crate) fn unpack(packed: &str) -> Option<PackedSpec<'_>> {
    let (trace, packed) = match packed.strip_prefix(TRACE_MARK) {
        Some(rest) => {
            let (trace, rest) = rest.split_once(TRACE_MARK)?;
            (Some(trace), rest)
        }
        None => (None, packed),
    };
    let mut parts = packed.splitn(3, SEPARATOR);
    let kind = parts.next()?;
    let max_attempts = parts.next()?.parse().ok()?;
    Some(PackedSpec {
        kind,
        max_attempts,
        args: parts.next()?,
        trace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_may_hold_the_separator() {
        let packed = pack("render", 3, "{\"s\":\"a\u{1f}b\"}", None);
        assert_eq!(
            unpack(&packed),
            Some(PackedSpec {
                kind: "render",
                max_attempts: 3,
                args: "{\"s\":\"a\u{1f}b\"}",
                trace: None,
            })
        );
        assert_eq!(unpack("render"), None);
        assert_eq!(unpack("render\u{1f}x\u{1f}{}"), None);
    }

    #[test]
    fn a_trace_context_comes_first_and_may_be_absent() {
        let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let packed = pack("render", 3, "{\"s\":\"\u{1e}\"}", Some(tp));
        assert_eq!(
            unpack(&packed),
            Some(PackedSpec {
                kind: "render",
                max_attempts: 3,
                args: "{\"s\":\"\u{1e}\"}",
                trace: Some(tp),
            })
        );
        // Written before traces existed: the same bytes as an untraced spec.
        assert_eq!(
            pack("render", 3, "{}", None),
            "render\u{1f}3\u{1f}{}".to_string()
        );
        assert_eq!(unpack("\u{1e}unterminated render\u{1f}3\u{1f}{}"), None);
    }
}
