//! Cursors: a position `(seq, rec)` in the feed, and its compact, checked encoding.

use std::fmt;
use std::str::FromStr;

/// A reader's position in the feed: the `(seq, rec)` of the last order version it has
/// seen. Reading from a cursor returns the orders whose position is after it, in
/// `(seq, rec)` order. Cursors order by `seq`, then `rec`.
///
/// Encoded as 21 bytes ([`Cursor::to_bytes`]: a version byte, `seq` and `rec` big-endian,
/// a CRC-32 of those 17 bytes) or as those bytes in unpadded URL-safe base64, 28
/// characters ([`Display`](fmt::Display) and [`FromStr`]). The checksum catches a
/// client's typo or truncation; it is not a secret (anyone can forge a cursor, which
/// only lets them read what they could read anyway).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Cursor {
    /// The sequence number of the last change seen.
    pub seq: u64,
    /// The record number of the order that change was about.
    pub rec: u64,
}

/// Why an encoded cursor was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// Not the expected number of bytes or characters.
    #[error("malformed cursor: expected {expected} {unit}, got {got}")]
    Length {
        /// Bytes or characters expected.
        expected: usize,
        /// What was given.
        got: usize,
        /// "bytes" or "characters".
        unit: &'static str,
    },
    /// A character outside the URL-safe base64 alphabet.
    #[error(
        "malformed cursor: expected URL-safe base64, got {character:?} at position {position}"
    )]
    Character {
        /// The offending character.
        character: char,
        /// Its position (0-based, in characters).
        position: usize,
    },
    /// An encoding version this build does not know.
    #[error("malformed cursor: expected version 1, got {got}")]
    Version {
        /// The version byte found.
        got: u8,
    },
    /// The checksum does not match: the cursor was altered or mistyped.
    #[error("malformed cursor: checksum mismatch (altered or mistyped)")]
    Checksum,
    /// A vector cursor's version byte is neither 1 nor 2.
    #[error("malformed cursor: expected version 1 or 2, got {got}")]
    VectorVersion {
        /// The version byte found.
        got: u8,
    },
    /// A vector cursor names more shards than a feed may have, or a version-2 cursor
    /// fewer than two.
    #[error(
        "malformed cursor: expected 2 to {} shard positions (version 2), got {got}",
        crate::MAX_SHARDS
    )]
    Shards {
        /// The number of positions.
        got: usize,
    },
    /// The last character of a vector cursor's text sets bits that encode nothing.
    #[error("malformed cursor: the character at position {position} sets bits past the cursor's last byte (altered or mistyped)")]
    Trailing {
        /// Its position (0-based, in characters).
        position: usize,
    },
}

const VERSION: u8 = 1;
/// Length of [`Cursor::to_bytes`].
pub const CURSOR_BYTES: usize = 21;
/// Length of a cursor's string form.
pub const CURSOR_CHARS: usize = 28;
pub(crate) const ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

impl Cursor {
    /// The cursor before every order: reading from it returns every order the store
    /// holds. Always valid, even after old history was evicted.
    pub const START: Cursor = Cursor { seq: 0, rec: 0 };

    /// The cursor `(seq, rec)`.
    pub fn new(seq: u64, rec: u64) -> Cursor {
        Cursor { seq, rec }
    }

    /// The 21-byte binary form.
    pub fn to_bytes(&self) -> [u8; CURSOR_BYTES] {
        let mut out = [0u8; CURSOR_BYTES];
        out[0] = VERSION;
        out[1..9].copy_from_slice(&self.seq.to_be_bytes());
        out[9..17].copy_from_slice(&self.rec.to_be_bytes());
        let crc = crc32fast::hash(&out[..17]);
        out[17..].copy_from_slice(&crc.to_be_bytes());
        out
    }

    /// Reads the binary form, checking its length, version and checksum.
    pub fn from_bytes(bytes: &[u8]) -> Result<Cursor, CursorError> {
        if bytes.len() != CURSOR_BYTES {
            return Err(CursorError::Length {
                expected: CURSOR_BYTES,
                got: bytes.len(),
                unit: "bytes",
            });
        }
        if bytes[0] != VERSION {
            return Err(CursorError::Version { got: bytes[0] });
        }
        let crc = u32::from_be_bytes(bytes[17..].try_into().expect("4 bytes"));
        if crc32fast::hash(&bytes[..17]) != crc {
            return Err(CursorError::Checksum);
        }
        Ok(Cursor {
            seq: u64::from_be_bytes(bytes[1..9].try_into().expect("8 bytes")),
            rec: u64::from_be_bytes(bytes[9..17].try_into().expect("8 bytes")),
        })
    }
}

impl fmt::Display for Cursor {
    /// The 28-character URL-safe base64 form (no padding).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.to_bytes();
        let mut out = [0u8; CURSOR_CHARS];
        for (chunk, chars) in bytes.chunks(3).zip(out.chunks_mut(4)) {
            let n = (u32::from(chunk[0]) << 16) | (u32::from(chunk[1]) << 8) | u32::from(chunk[2]);
            for (i, c) in chars.iter_mut().enumerate() {
                *c = ALPHABET[((n >> (18 - 6 * i)) & 63) as usize];
            }
        }
        f.write_str(std::str::from_utf8(&out).expect("base64 is ASCII"))
    }
}

/// The value of one URL-safe base64 character.
pub(crate) fn decode_char(c: u8) -> Option<u8> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        b'_' => 63,
        _ => return None,
    })
}

impl FromStr for Cursor {
    type Err = CursorError;

    fn from_str(text: &str) -> Result<Cursor, CursorError> {
        let chars = text.chars().count();
        if chars != CURSOR_CHARS || text.len() != CURSOR_CHARS {
            return Err(CursorError::Length {
                expected: CURSOR_CHARS,
                got: chars,
                unit: "characters",
            });
        }
        let mut bytes = [0u8; CURSOR_BYTES];
        for (group, (chars, out)) in text
            .as_bytes()
            .chunks(4)
            .zip(bytes.chunks_mut(3))
            .enumerate()
        {
            let mut n = 0u32;
            for (i, &c) in chars.iter().enumerate() {
                let value = decode_char(c).ok_or(CursorError::Character {
                    character: char::from(c),
                    position: group * 4 + i,
                })?;
                n = (n << 6) | u32::from(value);
            }
            out[0] = (n >> 16) as u8;
            out[1] = (n >> 8) as u8;
            out[2] = n as u8;
        }
        Cursor::from_bytes(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        for cursor in [
            Cursor::START,
            Cursor::new(1, 1),
            Cursor::new(u64::MAX, u64::MAX),
            Cursor::new(123_456_789, 42),
        ] {
            let text = cursor.to_string();
            assert_eq!(text.len(), CURSOR_CHARS);
            assert_eq!(text.parse::<Cursor>(), Ok(cursor));
            assert_eq!(Cursor::from_bytes(&cursor.to_bytes()), Ok(cursor));
        }
        let text = Cursor::new(7, 3).to_string();
        let mut altered = text.clone().into_bytes();
        altered[5] = if altered[5] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            String::from_utf8(altered).unwrap().parse::<Cursor>(),
            Err(CursorError::Checksum)
        );
        assert!(matches!(
            text[..27].parse::<Cursor>(),
            Err(CursorError::Length { got: 27, .. })
        ));
        let mut bad = text.clone();
        bad.replace_range(3..4, "*");
        assert_eq!(
            bad.parse::<Cursor>(),
            Err(CursorError::Character {
                character: '*',
                position: 3
            })
        );
        let mut bytes = Cursor::new(7, 3).to_bytes();
        bytes[0] = 9;
        assert_eq!(
            Cursor::from_bytes(&bytes),
            Err(CursorError::Version { got: 9 })
        );
        assert_eq!(
            CursorError::Checksum.to_string(),
            "malformed cursor: checksum mismatch (altered or mistyped)"
        );
    }
}
