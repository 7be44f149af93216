//! Vector cursors: one position per shard of a feed, in one opaque, checked token.

use std::fmt;
use std::str::FromStr;

use crate::cursor::{Cursor, CursorError, ALPHABET, CURSOR_BYTES};

/// The most shards a feed may have (a vector cursor holds a position for each).
pub const MAX_SHARDS: usize = 16;
/// Bytes of a version-2 cursor's head: the version and the number of positions.
const V2_HEAD: usize = 2;
/// Bytes of one position in a version-2 cursor: `seq` and `rec`, big-endian.
const V2_POSITION: usize = 16;
/// Bytes of the CRC-32 that ends a version-2 cursor.
const V2_CRC: usize = 4;
/// The longest binary vector cursor: version 2 with [`MAX_SHARDS`] positions.
pub const MAX_VECTOR_CURSOR_BYTES: usize = V2_HEAD + MAX_SHARDS * V2_POSITION + V2_CRC;
/// The longest vector cursor in characters.
pub const MAX_VECTOR_CURSOR_CHARS: usize = (MAX_VECTOR_CURSOR_BYTES * 4).div_ceil(3);
const V2: u8 = 2;

/// A reader's position in a feed of one or more shards: one [`Cursor`] per shard.
/// Reading from it returns, from every shard, the orders after that shard's position.
///
/// Shards it does not name are at their start, so a cursor from before a shard was
/// added reads the new shard from its beginning (a shard added later joins the
/// cursor), and [`VectorCursor::START`] names none. Two cursors are equal when every
/// shard's position is, however many positions each spells out.
///
/// Encoded ([`VectorCursor::to_bytes`]) as the 21-byte version-1 [`Cursor`] when it
/// names at most one shard — a one-shard feed's cursors are exactly those of a
/// [`Store`](crate::Store), and every cursor a store ever gave stays valid in a feed
/// that grew shards — and otherwise as version 2: a version byte (2), the number of
/// positions `n` (2 to [`MAX_SHARDS`]), `n` × (`seq`, `rec`) as big-endian `u64`s, and
/// a CRC-32 of everything before it: `6 + 16n` bytes. Its text form
/// ([`Display`](fmt::Display), [`FromStr`]) is those bytes in unpadded URL-safe
/// base64 (28 characters for one shard, 51 for two). The version, length and
/// checksum make a typo, a truncation or an edit an error naming which; the cursor is
/// not secret (anyone can write one, and it only moves a reader within what its token
/// lets it read anyway).
#[derive(Clone, Copy)]
pub struct VectorCursor {
    len: u8,
    positions: [Cursor; MAX_SHARDS],
}

impl PartialEq for VectorCursor {
    fn eq(&self, other: &VectorCursor) -> bool {
        // Positions past `len` are always START, so comparing them all compares
        // what the cursors mean.
        self.positions == other.positions
    }
}

impl Eq for VectorCursor {}

impl std::hash::Hash for VectorCursor {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.positions.hash(state);
    }
}

impl fmt::Debug for VectorCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.positions().iter().map(|p| (p.seq, p.rec)))
            .finish()
    }
}

impl Default for VectorCursor {
    fn default() -> VectorCursor {
        VectorCursor::START
    }
}

impl From<Cursor> for VectorCursor {
    /// A one-shard cursor.
    fn from(cursor: Cursor) -> VectorCursor {
        let mut vector = VectorCursor::START;
        vector.set(0, cursor);
        vector
    }
}

/// A vector cursor's binary form, without allocating: dereferences to its bytes.
#[derive(Clone, Copy)]
pub struct VectorCursorBytes {
    len: usize,
    bytes: [u8; MAX_VECTOR_CURSOR_BYTES],
}

impl std::ops::Deref for VectorCursorBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl fmt::Debug for VectorCursorBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl VectorCursor {
    /// Before every order of every shard: always valid, even after eviction.
    pub const START: VectorCursor = VectorCursor {
        len: 0,
        positions: [Cursor::START; MAX_SHARDS],
    };

    /// The cursor at these positions, shard 0 first (at most [`MAX_SHARDS`]).
    pub fn from_positions(positions: &[Cursor]) -> Result<VectorCursor, CursorError> {
        if positions.len() > MAX_SHARDS {
            return Err(CursorError::Shards {
                got: positions.len(),
            });
        }
        let mut vector = VectorCursor::START;
        for (shard, &position) in positions.iter().enumerate() {
            vector.set(shard, position);
        }
        vector.len = positions.len() as u8;
        Ok(vector)
    }

    /// How many shards' positions it spells out (the others are at their start).
    pub fn shards(&self) -> usize {
        usize::from(self.len)
    }

    /// The positions it spells out, shard 0 first.
    pub fn positions(&self) -> &[Cursor] {
        &self.positions[..self.shards()]
    }

    /// Shard `shard`'s position ([`Cursor::START`] if the cursor does not name it).
    pub fn position(&self, shard: usize) -> Cursor {
        self.positions.get(shard).copied().unwrap_or(Cursor::START)
    }

    /// Sets shard `shard`'s position, spelling out the shards up to it.
    ///
    /// # Panics
    /// If `shard` is not below [`MAX_SHARDS`].
    pub fn set(&mut self, shard: usize, position: Cursor) {
        self.positions[shard] = position;
        self.len = self.len.max(shard as u8 + 1);
    }

    /// The binary form: 21 bytes for at most one shard, else `6 + 16n` (see the type).
    pub fn to_bytes(&self) -> VectorCursorBytes {
        let mut out = VectorCursorBytes {
            len: 0,
            bytes: [0; MAX_VECTOR_CURSOR_BYTES],
        };
        if self.len <= 1 {
            out.bytes[..CURSOR_BYTES].copy_from_slice(&self.positions[0].to_bytes());
            out.len = CURSOR_BYTES;
            return out;
        }
        let b = &mut out.bytes;
        b[0] = V2;
        b[1] = self.len;
        let mut at = V2_HEAD;
        for position in self.positions() {
            b[at..at + 8].copy_from_slice(&position.seq.to_be_bytes());
            b[at + 8..at + 16].copy_from_slice(&position.rec.to_be_bytes());
            at += V2_POSITION;
        }
        let crc = crc32fast::hash(&b[..at]);
        b[at..at + V2_CRC].copy_from_slice(&crc.to_be_bytes());
        out.len = at + V2_CRC;
        out
    }

    /// Reads the binary form (either version), checking its version, length and
    /// checksum.
    pub fn from_bytes(bytes: &[u8]) -> Result<VectorCursor, CursorError> {
        match bytes.first() {
            None => Err(CursorError::Length {
                expected: CURSOR_BYTES,
                got: 0,
                unit: "bytes",
            }),
            Some(1) => Cursor::from_bytes(bytes).map(VectorCursor::from),
            Some(&V2) => {
                let Some(&count) = bytes.get(1) else {
                    return Err(CursorError::Length {
                        expected: V2_HEAD + 2 * V2_POSITION + V2_CRC,
                        got: bytes.len(),
                        unit: "bytes",
                    });
                };
                let count = usize::from(count);
                if !(2..=MAX_SHARDS).contains(&count) {
                    return Err(CursorError::Shards { got: count });
                }
                let expected = V2_HEAD + count * V2_POSITION + V2_CRC;
                if bytes.len() != expected {
                    return Err(CursorError::Length {
                        expected,
                        got: bytes.len(),
                        unit: "bytes",
                    });
                }
                let body = expected - V2_CRC;
                let crc = u32::from_be_bytes(bytes[body..].try_into().expect("4 bytes"));
                if crc32fast::hash(&bytes[..body]) != crc {
                    return Err(CursorError::Checksum);
                }
                let mut vector = VectorCursor::START;
                for (shard, b) in bytes[V2_HEAD..body].chunks_exact(V2_POSITION).enumerate() {
                    vector.set(
                        shard,
                        Cursor::new(
                            u64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
                            u64::from_be_bytes(b[8..].try_into().expect("8 bytes")),
                        ),
                    );
                }
                Ok(vector)
            }
            Some(&got) => Err(CursorError::VectorVersion { got }),
        }
    }
}

impl fmt::Display for VectorCursor {
    /// Unpadded URL-safe base64 of [`VectorCursor::to_bytes`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.to_bytes();
        let mut out = [0u8; MAX_VECTOR_CURSOR_CHARS];
        let mut len = 0;
        for chunk in bytes.chunks(3) {
            let mut n = 0u32;
            for (i, &b) in chunk.iter().enumerate() {
                n |= u32::from(b) << (16 - 8 * i);
            }
            for i in 0..=chunk.len() {
                out[len] = ALPHABET[((n >> (18 - 6 * i)) & 63) as usize];
                len += 1;
            }
        }
        f.write_str(std::str::from_utf8(&out[..len]).expect("base64 is ASCII"))
    }
}

impl FromStr for VectorCursor {
    type Err = CursorError;

    fn from_str(text: &str) -> Result<VectorCursor, CursorError> {
        if let Some((position, character)) = text.chars().enumerate().find(|(_, c)| !c.is_ascii()) {
            return Err(CursorError::Character {
                character,
                position,
            });
        }
        if text.is_empty() || text.len() > MAX_VECTOR_CURSOR_CHARS {
            return Err(CursorError::Length {
                expected: if text.is_empty() {
                    crate::cursor::CURSOR_CHARS
                } else {
                    MAX_VECTOR_CURSOR_CHARS
                },
                got: text.len(),
                unit: "characters",
            });
        }
        // A length no cursor has is reported as such, against the next length one has
        // (a cut cursor's).
        let lengths = std::iter::once(CURSOR_BYTES)
            .chain((2..=MAX_SHARDS).map(|n| V2_HEAD + n * V2_POSITION + V2_CRC))
            .map(|bytes| (bytes * 4).div_ceil(3));
        if !lengths.clone().any(|chars| chars == text.len()) {
            return Err(CursorError::Length {
                expected: lengths
                    .filter(|&chars| chars > text.len())
                    .min()
                    .unwrap_or(MAX_VECTOR_CURSOR_CHARS),
                got: text.len(),
                unit: "characters",
            });
        }
        // The first two bytes (three characters) say how long the cursor is: a cut or
        // padded one is reported as such, not by whatever its last bits look like.
        let head: Option<[u8; 3]> = text.as_bytes().get(..3).and_then(|h| h.try_into().ok());
        if let Some(head) = head.and_then(|h| {
            h.map(crate::cursor::decode_char)
                .into_iter()
                .collect::<Option<Vec<u8>>>()
        }) {
            let first = (head[0] << 2) | (head[1] >> 4);
            let count = usize::from(((head[1] & 15) << 4) | (head[2] >> 2));
            let expected = match first {
                1 => Some(CURSOR_BYTES),
                V2 if (2..=MAX_SHARDS).contains(&count) => {
                    Some(V2_HEAD + count * V2_POSITION + V2_CRC)
                }
                _ => None,
            };
            if let Some(expected) = expected.map(|bytes| (bytes * 4).div_ceil(3)) {
                if text.len() != expected {
                    return Err(CursorError::Length {
                        expected,
                        got: text.len(),
                        unit: "characters",
                    });
                }
            }
        }
        let mut bytes = [0u8; MAX_VECTOR_CURSOR_BYTES];
        let mut len = 0;
        for (group, chunk) in text.as_bytes().chunks(4).enumerate() {
            let mut n = 0u32;
            for (i, &c) in chunk.iter().enumerate() {
                let value =
                    crate::cursor::decode_char(c).ok_or_else(|| CursorError::Character {
                        character: char::from(c),
                        position: group * 4 + i,
                    })?;
                n |= u32::from(value) << (18 - 6 * i);
            }
            let whole = chunk.len() - 1;
            for i in 0..whole {
                bytes[len] = (n >> (16 - 8 * i)) as u8;
                len += 1;
            }
            // The bits of a last, partial group that encode no byte must be 0:
            // otherwise several texts would name one cursor, and an edit of them
            // would go unnoticed.
            if whole < 3 && n & ((1 << (24 - 8 * whole)) - 1) != 0 {
                return Err(CursorError::Trailing {
                    position: group * 4 + whole,
                });
            }
        }
        VectorCursor::from_bytes(&bytes[..len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> VectorCursor {
        VectorCursor::from_positions(&[Cursor::new(7, 3), Cursor::new(1 << 40, 9)]).unwrap()
    }

    #[test]
    fn one_shard_is_a_plain_cursor_and_more_are_version_2() {
        let one = VectorCursor::from(Cursor::new(7, 3));
        assert_eq!(one.to_string(), Cursor::new(7, 3).to_string());
        assert_eq!(&*one.to_bytes(), &Cursor::new(7, 3).to_bytes()[..]);
        assert_eq!(VectorCursor::START.to_string(), Cursor::START.to_string());
        for vector in [
            one,
            VectorCursor::START,
            two(),
            VectorCursor::from_positions(&[Cursor::new(u64::MAX, u64::MAX); MAX_SHARDS]).unwrap(),
            VectorCursor::from_positions(&[Cursor::START, Cursor::START, Cursor::new(5, 5)])
                .unwrap(),
        ] {
            let text = vector.to_string();
            assert!(text.len() <= MAX_VECTOR_CURSOR_CHARS);
            assert_eq!(text.parse::<VectorCursor>(), Ok(vector), "{text}");
            assert_eq!(VectorCursor::from_bytes(&vector.to_bytes()), Ok(vector));
        }
        assert_eq!(two().to_bytes().len(), 38);
        assert_eq!(two().to_string().len(), 51);
        assert_eq!(
            VectorCursor::from_positions(&[Cursor::new(7, 3), Cursor::START]).unwrap(),
            one,
            "a shard at its start need not be spelled out"
        );
        assert_eq!(two().position(5), Cursor::START);
    }

    #[test]
    fn damage_is_refused_naming_what_is_wrong() {
        let text = two().to_string();
        // Every single-character edit is caught (the checksum, or the trailing bits).
        for at in 0..text.len() {
            for replacement in ['A', 'B', 'Q', 'g', '_'] {
                let mut edited = text.clone();
                edited.replace_range(at..at + 1, &replacement.to_string());
                if edited != text {
                    assert!(edited.parse::<VectorCursor>().is_err(), "{edited}");
                }
            }
        }
        let mut bytes = two().to_bytes().to_vec();
        bytes[10] ^= 1;
        assert_eq!(VectorCursor::from_bytes(&bytes), Err(CursorError::Checksum));
        let bytes = two().to_bytes();
        assert_eq!(
            VectorCursor::from_bytes(&bytes[..30]),
            Err(CursorError::Length {
                expected: 38,
                got: 30,
                unit: "bytes"
            })
        );
        let mut bytes = two().to_bytes().to_vec();
        bytes[1] = 17;
        assert_eq!(
            VectorCursor::from_bytes(&bytes),
            Err(CursorError::Shards { got: 17 })
        );
        bytes[0] = 3;
        assert_eq!(
            VectorCursor::from_bytes(&bytes),
            Err(CursorError::VectorVersion { got: 3 })
        );
        assert!(matches!(
            text[..text.len() - 4].parse::<VectorCursor>(),
            Err(CursorError::Length { .. })
        ));
        assert!(matches!(
            "A".repeat(MAX_VECTOR_CURSOR_CHARS + 1)
                .parse::<VectorCursor>(),
            Err(CursorError::Length { .. })
        ));
        let mut bad = text.clone();
        bad.replace_range(7..8, "*");
        assert_eq!(
            bad.parse::<VectorCursor>(),
            Err(CursorError::Character {
                character: '*',
                position: 7
            })
        );
        assert!(matches!(
            format!("{}é", &text[..text.len() - 1]).parse::<VectorCursor>(),
            Err(CursorError::Character { position: 50, .. })
        ));
        assert!(matches!(
            "".parse::<VectorCursor>(),
            Err(CursorError::Length { got: 0, .. })
        ));
        assert_eq!(
            VectorCursor::from_positions(&[Cursor::START; MAX_SHARDS + 1]),
            Err(CursorError::Shards { got: 17 })
        );
    }
}
