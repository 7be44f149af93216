//! ABA routing numbers: nine digits, the last a check digit.

use std::fmt;
use std::str::FromStr;

use crate::field::{shown, FieldError};

/// The check digit of the first eight digits of a routing number (ASCII digits):
/// weights 3, 7, 1 repeated, and the digit that brings the weighted sum to a multiple
/// of ten. `None` when a byte is not a digit.
pub fn check_digit(first8: &[u8]) -> Option<u8> {
    if first8.len() != 8 {
        return None;
    }
    const WEIGHTS: [u32; 8] = [3, 7, 1, 3, 7, 1, 3, 7];
    let mut sum = 0;
    for (b, w) in first8.iter().zip(WEIGHTS) {
        if !b.is_ascii_digit() {
            return None;
        }
        sum += u32::from(b - b'0') * w;
    }
    Some(((10 - sum % 10) % 10) as u8)
}

/// A routing number whose check digit is right: nine ASCII digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoutingNumber([u8; 9]);

impl RoutingNumber {
    /// Parse nine digits with their check digit. The error names `field`.
    pub fn parse_field(field: &'static str, s: &str) -> Result<Self, FieldError> {
        let b = s.as_bytes();
        if b.len() != 9 || !b.iter().all(u8::is_ascii_digit) {
            return Err(FieldError::new(field, "9 digits", shown(s)));
        }
        let want = check_digit(&b[..8]).expect("digits");
        if b[8] - b'0' != want {
            return Err(FieldError::new(
                field,
                format!("check digit {want} (3-7-1 weights over the first 8 digits)"),
                format!("{} in {s}", b[8] - b'0'),
            ));
        }
        let mut out = [0; 9];
        out.copy_from_slice(b);
        Ok(RoutingNumber(out))
    }

    /// The nine digits.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("digits")
    }

    /// The nine digits, as bytes.
    pub fn digits(&self) -> &[u8; 9] {
        &self.0
    }

    /// The first eight digits (the DFI identification: an ODFI's in batch headers and
    /// trace numbers, an RDFI's in entry details and the entry hash).
    pub fn dfi(&self) -> &[u8] {
        &self.0[..8]
    }

    /// The first eight digits as a number, as the entry hash adds them.
    pub fn dfi_value(&self) -> u64 {
        self.0[..8]
            .iter()
            .fold(0, |n, d| n * 10 + u64::from(d - b'0'))
    }
}

impl FromStr for RoutingNumber {
    type Err = FieldError;

    fn from_str(s: &str) -> Result<Self, FieldError> {
        RoutingNumber::parse_field("routing", s)
    }
}

impl fmt::Display for RoutingNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for RoutingNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RoutingNumber({})", self.as_str())
    }
}

impl serde::Serialize for RoutingNumber {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for RoutingNumber {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_digits_of_known_routing_numbers() {
        // Published routing numbers (Federal Reserve Bank of New York, JPMorgan Chase,
        // Bank of America, Wells Fargo).
        for r in [
            "021001208",
            "021000021",
            "026009593",
            "121000248",
            "011000015",
        ] {
            let b = r.as_bytes();
            assert_eq!(check_digit(&b[..8]), Some(b[8] - b'0'), "{r}");
            assert!(r.parse::<RoutingNumber>().is_ok(), "{r}");
        }
        assert_eq!(check_digit(b"0210002x"), None);
        assert_eq!(check_digit(b"0210"), None);
    }

    #[test]
    fn a_wrong_check_digit_is_named() {
        let e = "021000022".parse::<RoutingNumber>().unwrap_err();
        assert_eq!(e.field, "routing");
        assert!(e.expected.starts_with("check digit 1"), "{e}");
        assert_eq!(e.got, "2 in 021000022");
        let e = RoutingNumber::parse_field("rdfi_routing", "02100002").unwrap_err();
        assert_eq!(
            e.to_string(),
            "rdfi_routing: expected 9 digits, got \"02100002\""
        );
    }

    #[test]
    fn dfi_value_is_the_first_eight_digits() {
        let r: RoutingNumber = "021000021".parse().unwrap();
        assert_eq!(r.dfi_value(), 2100002);
        assert_eq!(r.dfi(), b"02100002");
    }
}
