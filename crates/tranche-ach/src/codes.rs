//! The closed sets of codes an entry carries: SEC codes, transaction codes, service
//! classes.

use std::fmt;
use std::str::FromStr;

use crate::field::{shown, FieldError};

/// The Standard Entry Class code of an entry we originate (batch header positions
/// 51-53). The validator knows more codes (files from others): see
/// [`KNOWN_SEC_CODES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SecCode {
    /// Prearranged Payment and Deposit: to or from a consumer's account.
    Ppd,
    /// Corporate Credit or Debit: between businesses.
    Ccd,
    /// Internet-initiated (or mobile) entry: a consumer's authorisation online.
    Web,
    /// Telephone-initiated entry: a consumer's debit authorised by phone (debits only;
    /// no addenda).
    Tel,
}

impl SecCode {
    /// Every code we originate.
    pub const ALL: [SecCode; 4] = [SecCode::Ppd, SecCode::Ccd, SecCode::Web, SecCode::Tel];

    /// The three letters.
    pub fn as_str(self) -> &'static str {
        match self {
            SecCode::Ppd => "PPD",
            SecCode::Ccd => "CCD",
            SecCode::Web => "WEB",
            SecCode::Tel => "TEL",
        }
    }
}

/// Every SEC code in the NACHA rules; the validator takes batches of these (and checks
/// the standard entry detail layout, which is not IAT's).
pub const KNOWN_SEC_CODES: [&str; 23] = [
    "ACK", "ADV", "ARC", "ATX", "BOC", "CCD", "CIE", "COR", "CTX", "DNE", "ENR", "IAT", "MTE",
    "POP", "POS", "PPD", "RCK", "SHR", "TEL", "TRC", "TRX", "WEB", "XCK",
];

impl FromStr for SecCode {
    type Err = FieldError;

    fn from_str(s: &str) -> Result<Self, FieldError> {
        SecCode::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| FieldError::new("sec_code", "one of PPD, CCD, WEB, TEL", shown(s)))
    }
}

impl fmt::Display for SecCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which way money moves, seen from the receiver's account.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Money into the receiver's account.
    Credit,
    /// Money out of the receiver's account.
    Debit,
}

/// The kind of the receiver's account.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum AccountKind {
    /// A demand deposit (checking) account: codes 2x.
    Checking,
    /// A savings account: codes 3x.
    Savings,
}

/// A transaction code we originate (entry detail positions 2-3): an account kind, a
/// direction, and whether it is a prenote (a zero-amount test entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TransactionCode {
    /// Checking or savings.
    pub account: AccountKind,
    /// Credit or debit.
    pub direction: Direction,
    /// A prenotification: amount zero, no money moves.
    pub prenote: bool,
}

impl TransactionCode {
    /// The codes we originate: 22, 23, 27, 28 (checking), 32, 33, 37, 38 (savings).
    pub const CODES: [u8; 8] = [22, 23, 27, 28, 32, 33, 37, 38];

    /// A live (non-prenote) code.
    pub fn new(account: AccountKind, direction: Direction) -> Self {
        TransactionCode {
            account,
            direction,
            prenote: false,
        }
    }

    /// The two-digit code.
    pub fn code(self) -> u8 {
        let base = match self.account {
            AccountKind::Checking => 20,
            AccountKind::Savings => 30,
        };
        let unit = match (self.direction, self.prenote) {
            (Direction::Credit, false) => 2,
            (Direction::Credit, true) => 3,
            (Direction::Debit, false) => 7,
            (Direction::Debit, true) => 8,
        };
        base + unit
    }

    /// The code from its number; the error names `transaction_code`.
    pub fn from_code(code: u8) -> Result<Self, FieldError> {
        let account = match code / 10 {
            2 => AccountKind::Checking,
            3 => AccountKind::Savings,
            _ => return Err(Self::unknown(code)),
        };
        let (direction, prenote) = match code % 10 {
            2 => (Direction::Credit, false),
            3 => (Direction::Credit, true),
            7 => (Direction::Debit, false),
            8 => (Direction::Debit, true),
            _ => return Err(Self::unknown(code)),
        };
        Ok(TransactionCode {
            account,
            direction,
            prenote,
        })
    }

    fn unknown(code: u8) -> FieldError {
        FieldError::new(
            "transaction_code",
            "one of 22, 23, 27, 28, 32, 33, 37, 38",
            code.to_string(),
        )
    }
}

impl fmt::Display for TransactionCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code())
    }
}

impl FromStr for TransactionCode {
    type Err = FieldError;

    fn from_str(s: &str) -> Result<Self, FieldError> {
        match s.parse::<u8>() {
            Ok(n) => TransactionCode::from_code(n),
            Err(_) => Err(FieldError::new(
                "transaction_code",
                "one of 22, 23, 27, 28, 32, 33, 37, 38",
                shown(s),
            )),
        }
    }
}

/// Whether a two-digit transaction code is one of the NACHA rules' (for files from
/// others: returns, zero-dollar entries, general ledger and loan accounts too), and
/// if so whether it is a credit.
pub fn known_transaction_code(code: u8) -> Option<Direction> {
    match code {
        21..=24 | 31..=34 | 41..=44 | 51..=53 => Some(Direction::Credit),
        26..=29 | 36..=39 | 46..=49 | 55 | 56 => Some(Direction::Debit),
        _ => None,
    }
}

/// Whether a transaction code moves no money (prenotes, zero-dollar remittance
/// entries): its amount must be zero.
pub fn is_zero_amount_code(code: u8) -> bool {
    (20..50).contains(&code) && matches!(code % 10, 3 | 4 | 8 | 9) || code == 53
}

/// The service class of a batch (batch header and control positions 2-4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServiceClass {
    /// 200: credits and debits.
    Mixed,
    /// 220: credits only.
    CreditsOnly,
    /// 225: debits only.
    DebitsOnly,
}

impl ServiceClass {
    /// The three-digit code.
    pub fn code(self) -> u16 {
        match self {
            ServiceClass::Mixed => 200,
            ServiceClass::CreditsOnly => 220,
            ServiceClass::DebitsOnly => 225,
        }
    }

    /// The class from its code (200, 220, 225).
    pub fn from_code(code: u16) -> Option<Self> {
        match code {
            200 => Some(ServiceClass::Mixed),
            220 => Some(ServiceClass::CreditsOnly),
            225 => Some(ServiceClass::DebitsOnly),
            _ => None,
        }
    }

    /// Whether an entry of `direction` may be in a batch of this class.
    pub fn admits(self, direction: Direction) -> bool {
        !matches!(
            (self, direction),
            (ServiceClass::CreditsOnly, Direction::Debit)
                | (ServiceClass::DebitsOnly, Direction::Credit)
        )
    }
}

impl serde::Serialize for ServiceClass {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u16(self.code())
    }
}

impl<'de> serde::Deserialize<'de> for ServiceClass {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let code = u16::deserialize(d)?;
        ServiceClass::from_code(code).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "expected a service class 200, 220 or 225, got {code}"
            ))
        })
    }
}

macro_rules! serde_as_str {
    ($t:ty, $to:expr, $from:expr) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let f: fn(&$t) -> String = $to;
                s.serialize_str(&f(self))
            }
        }
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = StrOrNum::deserialize(d)?;
                let f: fn(&str) -> Result<$t, FieldError> = $from;
                f(&raw.0).map_err(serde::de::Error::custom)
            }
        }
    };
}

/// A string or a number, read as text (a transaction code may come as `22` or `"22"`).
struct StrOrNum(String);

impl<'de> serde::Deserialize<'de> for StrOrNum {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = StrOrNum;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<StrOrNum, E> {
                Ok(StrOrNum(v.to_owned()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<StrOrNum, E> {
                Ok(StrOrNum(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<StrOrNum, E> {
                Ok(StrOrNum(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

serde_as_str!(SecCode, |c| c.as_str().to_owned(), |s| s.parse());
serde_as_str!(TransactionCode, |c| c.code().to_string(), |s| s.parse());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_codes_round_trip() {
        for code in TransactionCode::CODES {
            assert_eq!(TransactionCode::from_code(code).unwrap().code(), code);
        }
        let e = TransactionCode::from_code(24).unwrap_err();
        assert_eq!(
            e.to_string(),
            "transaction_code: expected one of 22, 23, 27, 28, 32, 33, 37, 38, got 24"
        );
        assert!("2x".parse::<TransactionCode>().is_err());
    }

    #[test]
    fn unknown_sec_code_is_named() {
        assert_eq!("WEB".parse::<SecCode>().unwrap(), SecCode::Web);
        let e = "XYZ".parse::<SecCode>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "sec_code: expected one of PPD, CCD, WEB, TEL, got \"XYZ\""
        );
    }

    #[test]
    fn zero_amount_codes() {
        for c in [23, 24, 28, 29, 33, 34, 38, 39, 43, 44, 48, 49, 53] {
            assert!(is_zero_amount_code(c), "{c}");
        }
        for c in [22, 27, 32, 37, 42, 47, 52, 55, 56, 21, 26] {
            assert!(!is_zero_amount_code(c), "{c}");
        }
    }

    #[test]
    fn service_classes_admit_directions() {
        assert!(ServiceClass::Mixed.admits(Direction::Debit));
        assert!(!ServiceClass::CreditsOnly.admits(Direction::Debit));
        assert!(!ServiceClass::DebitsOnly.admits(Direction::Credit));
        assert_eq!(ServiceClass::from_code(225), Some(ServiceClass::DebitsOnly));
    }
}
