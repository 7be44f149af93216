//! An ACH entry as the caller gives it, its validation, and the key of the batch it
//! goes in.

use std::fmt;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::codes::{Direction, SecCode, ServiceClass, TransactionCode};
use crate::field::{
    check_text, excerpt, is_nacha_text, mask_account, shown, FieldError, Masked, Text,
    EXCERPT_BYTES,
};
use crate::routing::RoutingNumber;

/// The most a Same Day ACH entry may be: $1,000,000.00, in cents.
pub const SAME_DAY_LIMIT_CENTS: u64 = 100_000_000;
/// The most any entry may be: the ten digits of the amount field, $99,999,999.99.
pub const MAX_AMOUNT_CENTS: u64 = 9_999_999_999;
/// The longest entry id, in bytes (printable ASCII): the ledger's key, so one longer is
/// not stored at all (a ledger cannot key a row by a 10 MB id, nor look it up).
pub const MAX_ENTRY_ID: usize = 64;
/// The longest bank name, as the rules' `[[bank]] name` (lowercase letters, digits,
/// `-` and `_`).
pub const MAX_BANK_NAME: usize = 32;

/// Whether `name` could be a bank's name in the rules: 1 to [`MAX_BANK_NAME`]
/// lowercase letters, digits, `-` and `_`.
pub fn is_bank_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_BANK_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// A field of a rejected entry that was over its limit and is kept cut
/// ([`Entry::bounded`]): its name and its whole length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The field, as [`Entry`] names it.
    pub field: &'static str,
    /// Its length as sent, in bytes (what is kept is its first [`EXCERPT_BYTES`]).
    pub len: usize,
}

/// A receiver's account number (up to 17 characters). Its `Debug` shows only the last
/// four characters; [`AccountNumber::expose`] gives the whole number to whoever must
/// write it (the file writer, the ledger).
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AccountNumber(String);

impl AccountNumber {
    /// Wrap an account number (checked by [`Entry::validate`]).
    pub fn new(number: impl Into<String>) -> Self {
        AccountNumber(number.into())
    }

    /// The whole number.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// All but the last four characters masked: `*****6789`.
    pub fn masked(&self) -> String {
        mask_account(&self.0)
    }
}

impl fmt::Debug for AccountNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AccountNumber({:?})", Masked(&self.0))
    }
}

/// One ACH entry: a credit or debit to one receiver's account, with everything its
/// batch and its entry detail record need.
///
/// Text fields hold what goes into the file, unpadded; [`Entry::validate`] checks
/// their lengths and characters. Nothing is truncated or upper-cased when written.
/// A key (or column) that is no field is refused, not ignored: a misspelt optional
/// field (`sameday`) would otherwise be dropped and the entry go out as another.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The caller's id of the entry (not written into the file).
    pub entry_id: String,
    /// The originating bank (ODFI) the entry is sent through: the key of a
    /// [`BankProfile`](crate::BankProfile).
    pub bank: String,
    /// The originator's name as the receiver sees it (batch header, up to 16).
    pub company_name: String,
    /// The originator's identification (batch header, up to 10, often `1` + EIN).
    pub company_id: String,
    /// The Standard Entry Class code.
    pub sec_code: SecCode,
    /// Credit or debit, checking or savings, live or prenote.
    pub transaction_code: TransactionCode,
    /// The receiving bank's routing number (RDFI).
    pub rdfi_routing: RoutingNumber,
    /// The receiver's account number at the RDFI (up to 17).
    pub account_number: AccountNumber,
    /// The amount in cents: above zero, or zero for a prenote.
    pub amount_cents: u64,
    /// The receiver's identification at the originator (up to 15; may be blank).
    pub individual_id: String,
    /// The receiver's name (up to 22; required for PPD, WEB and TEL).
    pub individual_name: String,
    /// What the entry is for, as the receiver sees it (`PAYROLL`, up to 10).
    pub entry_description: String,
    /// The company descriptive date (up to 6, may be blank). `SDHHMM` asks for a
    /// Same Day window and is only allowed on same-day entries.
    #[serde(default)]
    pub descriptive_date: String,
    /// The date the entry is meant to settle.
    pub effective_date: NaiveDate,
    /// The date the entry is sent to the bank.
    pub submission_date: NaiveDate,
    /// A Same Day ACH entry: effective on its submission date, at most
    /// [`SAME_DAY_LIMIT_CENTS`].
    #[serde(default)]
    pub same_day: bool,
    /// Payment-related information for one addenda record of type 05 (up to 80).
    #[serde(default)]
    pub addenda: Option<String>,
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("entry_id", &self.entry_id)
            .field("bank", &self.bank)
            .field("company_name", &self.company_name)
            .field("company_id", &self.company_id)
            .field("sec_code", &self.sec_code)
            .field("transaction_code", &self.transaction_code.code())
            .field("rdfi_routing", &self.rdfi_routing)
            .field("account_number", &self.account_number)
            .field("amount_cents", &self.amount_cents)
            .field("individual_id", &self.individual_id)
            .field("individual_name", &self.individual_name)
            .field("entry_description", &self.entry_description)
            .field("descriptive_date", &self.descriptive_date)
            .field("effective_date", &self.effective_date)
            .field("submission_date", &self.submission_date)
            .field("same_day", &self.same_day)
            .field("addenda", &self.addenda)
            .finish()
    }
}

/// The fields that decide which batch an entry goes in: entries whose keys are equal
/// share a batch (one batch header, one batch control).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BatchKey {
    /// The originating bank's key.
    pub bank: String,
    /// Company name (batch header 5-20).
    pub company_name: String,
    /// Company identification (41-50).
    pub company_id: String,
    /// SEC code (51-53).
    pub sec_code: SecCode,
    /// Service class (2-4).
    pub service_class: ServiceClass,
    /// Company entry description (54-63).
    pub entry_description: String,
    /// Company descriptive date (64-69).
    pub descriptive_date: String,
    /// Effective entry date (70-75).
    pub effective_date: NaiveDate,
    /// Same Day ACH.
    pub same_day: bool,
}

impl Entry {
    /// An entry's fields as CSV columns (and JSON keys), in the order serde writes
    /// them: the header row of an entries file (`tranche ach import` reads columns by
    /// name, in any order).
    pub const CSV_COLUMNS: [&'static str; 17] = [
        "entry_id",
        "bank",
        "company_name",
        "company_id",
        "sec_code",
        "transaction_code",
        "rdfi_routing",
        "account_number",
        "amount_cents",
        "individual_id",
        "individual_name",
        "entry_description",
        "descriptive_date",
        "effective_date",
        "submission_date",
        "same_day",
        "addenda",
    ];

    /// The columns an entries file may leave out (their fields have defaults).
    pub const OPTIONAL_CSV_COLUMNS: [&'static str; 3] = ["descriptive_date", "same_day", "addenda"];

    /// Credit or debit.
    pub fn direction(&self) -> Direction {
        self.transaction_code.direction
    }

    /// The service class of a batch that holds only entries of this direction: 220 for
    /// credits, 225 for debits.
    pub fn service_class(&self) -> ServiceClass {
        match self.direction() {
            Direction::Credit => ServiceClass::CreditsOnly,
            Direction::Debit => ServiceClass::DebitsOnly,
        }
    }

    /// The key of this entry's batch, credits and debits apart (service class 220 or
    /// 225, see [`Entry::service_class`]).
    pub fn batch_key(&self) -> BatchKey {
        self.key_with(self.service_class())
    }

    /// The key of this entry's batch when credits and debits share batches (service
    /// class 200), for banks that take mixed batches.
    pub fn mixed_batch_key(&self) -> BatchKey {
        self.key_with(ServiceClass::Mixed)
    }

    fn key_with(&self, service_class: ServiceClass) -> BatchKey {
        BatchKey {
            bank: self.bank.clone(),
            company_name: self.company_name.clone(),
            company_id: self.company_id.clone(),
            sec_code: self.sec_code,
            service_class,
            entry_description: self.entry_description.clone(),
            descriptive_date: self.descriptive_date.clone(),
            effective_date: self.effective_date,
            same_day: self.same_day,
        }
    }

    /// Whether this entry belongs in the batch of `key` (without building its own
    /// key: no allocation). A 200 batch takes either direction.
    pub fn fits(&self, key: &BatchKey) -> bool {
        self.bank == key.bank
            && self.company_name == key.company_name
            && self.company_id == key.company_id
            && self.sec_code == key.sec_code
            && key.service_class.admits(self.direction())
            && self.entry_description == key.entry_description
            && self.descriptive_date == key.descriptive_date
            && self.effective_date == key.effective_date
            && self.same_day == key.same_day
    }

    /// Every problem with this entry, each naming its field; `Ok` when it can be
    /// written. Allocates nothing when the entry is valid.
    ///
    /// Checks: lengths and the NACHA character set of every text field; required
    /// fields not blank; the amount above zero (zero for prenotes) and within
    /// [`MAX_AMOUNT_CENTS`], or [`SAME_DAY_LIMIT_CENTS`] for same-day entries; a
    /// same-day entry effective on its submission date, any other after it; `SD`
    /// descriptive dates only on same-day entries; TEL entries debits without addenda.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        if self.entry_id.is_empty() {
            errors.push(FieldError::new(
                "entry_id",
                "not empty",
                shown(&self.entry_id),
            ));
        } else {
            check_text(
                "entry_id",
                &self.entry_id,
                MAX_ENTRY_ID,
                false,
                Text::Shown,
                &mut errors,
            );
        }
        if !is_bank_name(&self.bank) {
            errors.push(FieldError::new(
                "bank",
                format!("a bank name: 1 to {MAX_BANK_NAME} lowercase letters, digits, - and _"),
                if self.bank.len() > MAX_BANK_NAME {
                    format!("{} characters", self.bank.chars().count())
                } else {
                    shown(&self.bank)
                },
            ));
        }
        check_text(
            "company_name",
            &self.company_name,
            16,
            true,
            Text::Shown,
            &mut errors,
        );
        check_text(
            "company_id",
            &self.company_id,
            10,
            true,
            Text::Shown,
            &mut errors,
        );
        self.check_account(&mut errors);
        let consumer = matches!(self.sec_code, SecCode::Ppd | SecCode::Web | SecCode::Tel);
        check_text(
            "individual_id",
            &self.individual_id,
            15,
            false,
            Text::Personal,
            &mut errors,
        );
        check_text(
            "individual_name",
            &self.individual_name,
            22,
            consumer,
            Text::Personal,
            &mut errors,
        );
        check_text(
            "entry_description",
            &self.entry_description,
            10,
            true,
            Text::Shown,
            &mut errors,
        );
        check_text(
            "descriptive_date",
            &self.descriptive_date,
            6,
            false,
            Text::Shown,
            &mut errors,
        );
        if let Some(addenda) = &self.addenda {
            check_text("addenda", addenda, 80, false, Text::Personal, &mut errors);
        }
        self.check_amount(&mut errors);
        self.check_dates(&mut errors);
        if self.sec_code == SecCode::Tel {
            if self.direction() != Direction::Debit {
                errors.push(FieldError::new(
                    "transaction_code",
                    "a debit (TEL entries are debits)",
                    self.transaction_code.to_string(),
                ));
            }
            if self.addenda.is_some() {
                errors.push(FieldError::new(
                    "addenda",
                    "none (TEL entries have no addenda)",
                    "addenda text",
                ));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// This entry as a ledger may keep it: every text field longer than both its limit
    /// and [`EXCERPT_BYTES`] cut to its first `EXCERPT_BYTES` bytes (at a character
    /// boundary), and which were cut, with their lengths. A valid entry is within
    /// every limit and comes back whole with no cut. The entry id is never cut (it
    /// is the ledger's key): an id over [`MAX_ENTRY_ID`] is not stored at all.
    ///
    /// Why: a rejected entry is stored with its reason so that every row is accounted
    /// for, but a 10 MB field must not become 10 MB of ledger. Its reason says the
    /// field and its length; the excerpt keeps what it began with.
    pub fn bounded(mut self) -> (Entry, Vec<Cut>) {
        let mut cuts = Vec::new();
        let mut cut = |field: &'static str, limit: usize, value: &mut String| {
            if value.len() > limit.max(EXCERPT_BYTES) {
                cuts.push(Cut {
                    field,
                    len: value.len(),
                });
                let keep = excerpt(value).len();
                value.truncate(keep);
                value.shrink_to_fit();
            }
        };
        cut("bank", MAX_BANK_NAME, &mut self.bank);
        cut("company_name", 16, &mut self.company_name);
        cut("company_id", 10, &mut self.company_id);
        let mut account = std::mem::take(&mut self.account_number.0);
        cut("account_number", 17, &mut account);
        self.account_number.0 = account;
        cut("individual_id", 15, &mut self.individual_id);
        cut("individual_name", 22, &mut self.individual_name);
        cut("entry_description", 10, &mut self.entry_description);
        cut("descriptive_date", 6, &mut self.descriptive_date);
        if let Some(addenda) = &mut self.addenda {
            cut("addenda", 80, addenda);
        }
        (self, cuts)
    }

    fn check_account(&self, errors: &mut Vec<FieldError>) {
        let account = self.account_number.expose();
        let len = account.chars().count();
        if len > 17 {
            errors.push(FieldError::new(
                "account_number",
                "at most 17 characters",
                format!("{len} characters"),
            ));
        }
        if !is_nacha_text(account) {
            errors.push(FieldError::new(
                "account_number",
                "characters of the NACHA set (printable ASCII)",
                shown(&mask_account(account)),
            ));
        } else if account.trim().is_empty() {
            errors.push(FieldError::new(
                "account_number",
                "not blank",
                shown(account),
            ));
        }
    }

    fn check_amount(&self, errors: &mut Vec<FieldError>) {
        let got = || format!("{} cents", self.amount_cents);
        if self.transaction_code.prenote {
            if self.amount_cents != 0 {
                errors.push(FieldError::new("amount_cents", "0 for a prenote", got()));
            }
        } else if self.amount_cents == 0 {
            errors.push(FieldError::new("amount_cents", "more than 0", got()));
        } else if self.same_day && self.amount_cents > SAME_DAY_LIMIT_CENTS {
            errors.push(FieldError::new(
                "amount_cents",
                format!(
                    "at most {SAME_DAY_LIMIT_CENTS} cents ($1,000,000.00) for a same-day entry"
                ),
                got(),
            ));
        } else if self.amount_cents > MAX_AMOUNT_CENTS {
            errors.push(FieldError::new(
                "amount_cents",
                format!("at most {MAX_AMOUNT_CENTS} cents (10 digits)"),
                got(),
            ));
        }
    }

    fn check_dates(&self, errors: &mut Vec<FieldError>) {
        if self.same_day {
            if self.effective_date != self.submission_date {
                errors.push(FieldError::new(
                    "effective_date",
                    format!(
                        "the submission date {} for a same-day entry",
                        self.submission_date
                    ),
                    self.effective_date.to_string(),
                ));
            }
        } else {
            if self.effective_date <= self.submission_date {
                errors.push(FieldError::new(
                    "effective_date",
                    format!(
                        "after the submission date {} (or same_day)",
                        self.submission_date
                    ),
                    self.effective_date.to_string(),
                ));
            }
            if self.descriptive_date.starts_with("SD") {
                errors.push(FieldError::new(
                    "descriptive_date",
                    "no SD prefix (SDHHMM asks for Same Day ACH) unless same_day",
                    shown(&self.descriptive_date),
                ));
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::codes::AccountKind;

    pub(crate) fn good() -> Entry {
        Entry {
            entry_id: "E-1".into(),
            bank: "first".into(),
            company_name: "ACME PAYROLL".into(),
            company_id: "1234567890".into(),
            sec_code: SecCode::Ppd,
            transaction_code: TransactionCode::new(AccountKind::Checking, Direction::Credit),
            rdfi_routing: "021000021".parse().unwrap(),
            account_number: AccountNumber::new("123456789"),
            amount_cents: 125_000,
            individual_id: "EMP0001".into(),
            individual_name: "JANE DOE".into(),
            entry_description: "PAYROLL".into(),
            descriptive_date: String::new(),
            effective_date: NaiveDate::from_ymd_opt(2026, 3, 3).unwrap(),
            submission_date: NaiveDate::from_ymd_opt(2026, 3, 2).unwrap(),
            same_day: false,
            addenda: None,
        }
    }

    fn only_error(e: &Entry) -> FieldError {
        let errors = e.validate().unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        errors.into_iter().next().unwrap()
    }

    #[test]
    fn csv_columns_are_the_fields_in_serde_order() {
        let json = serde_json::to_value(good()).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut columns = Entry::CSV_COLUMNS.to_vec();
        let mut sorted_keys = keys.clone();
        columns.sort_unstable();
        sorted_keys.sort_unstable();
        assert_eq!(sorted_keys, columns, "every field is a column");
        let text = serde_json::to_string(&good()).unwrap();
        let mut at = 0;
        for c in Entry::CSV_COLUMNS {
            let found = text.find(&format!("\"{c}\":")).unwrap();
            assert!(found >= at, "{c} out of serde's order");
            at = found;
        }
        assert!(Entry::OPTIONAL_CSV_COLUMNS
            .iter()
            .all(|c| Entry::CSV_COLUMNS.contains(c)));
    }

    #[test]
    fn a_good_entry_is_valid() {
        good().validate().unwrap();
    }

    #[test]
    fn debug_masks_the_account_number() {
        let mut e = good();
        e.account_number = AccountNumber::new("98765432101");
        let d = format!("{e:?}");
        assert!(!d.contains("9876543"), "{d}");
        assert!(d.contains("AccountNumber(\"*******2101\")"), "{d}");
    }

    #[test]
    fn each_field_error_names_its_field() {
        let mut e = good();
        e.amount_cents = 0;
        assert_eq!(
            only_error(&e).to_string(),
            "amount_cents: expected more than 0, got 0 cents"
        );

        let mut e = good();
        e.amount_cents = MAX_AMOUNT_CENTS + 1;
        assert_eq!(only_error(&e).field, "amount_cents");

        let mut e = good();
        e.same_day = true;
        e.effective_date = e.submission_date;
        e.amount_cents = SAME_DAY_LIMIT_CENTS + 1;
        let err = only_error(&e);
        assert_eq!(err.field, "amount_cents");
        assert!(err.expected.contains("same-day"), "{err}");
        e.amount_cents = SAME_DAY_LIMIT_CENTS;
        e.validate().unwrap();

        let mut e = good();
        e.transaction_code.prenote = true;
        assert_eq!(
            only_error(&e).to_string(),
            "amount_cents: expected 0 for a prenote, got 125000 cents"
        );
        e.amount_cents = 0;
        e.validate().unwrap();

        let mut e = good();
        e.company_name = "A COMPANY NAME TOO LONG".into();
        assert_eq!(
            only_error(&e).to_string(),
            "company_name: expected at most 16 characters, got 23 characters"
        );

        // A name is personal data: said by position, never shown.
        let mut e = good();
        e.individual_name = "JOSÉ".into();
        assert_eq!(
            only_error(&e).to_string(),
            "individual_name: expected characters of the NACHA set (printable ASCII), got byte 0xC3 at position 4 (of 5 bytes)"
        );
        let mut e = good();
        e.company_name = "CAFÉ".into();
        assert_eq!(
            only_error(&e).to_string(),
            "company_name: expected characters of the NACHA set (printable ASCII), got \"CAFÉ\""
        );

        let mut e = good();
        e.entry_id = "X".repeat(MAX_ENTRY_ID + 1);
        assert_eq!(
            only_error(&e).to_string(),
            "entry_id: expected at most 64 characters, got 65 characters"
        );
        e.entry_id = "X".repeat(MAX_ENTRY_ID);
        e.validate().unwrap();

        let mut e = good();
        e.bank = "b".repeat(MAX_BANK_NAME + 1);
        assert_eq!(
            only_error(&e).to_string(),
            "bank: expected a bank name: 1 to 32 lowercase letters, digits, - and _, got 33 characters"
        );
        e.bank = "First Bank".into();
        assert_eq!(only_error(&e).got, "\"First Bank\"");

        let mut e = good();
        e.individual_name = "  ".into();
        assert_eq!(only_error(&e).field, "individual_name");
        e.sec_code = SecCode::Ccd;
        e.validate().unwrap();

        let mut e = good();
        e.entry_description = String::new();
        assert_eq!(only_error(&e).field, "entry_description");

        let mut e = good();
        e.addenda = Some("X".repeat(81));
        assert_eq!(only_error(&e).field, "addenda");

        let mut e = good();
        e.effective_date = e.submission_date;
        assert_eq!(only_error(&e).field, "effective_date");
        e.same_day = true;
        e.validate().unwrap();
        e.effective_date = e.submission_date.succ_opt().unwrap();
        assert_eq!(only_error(&e).field, "effective_date");

        let mut e = good();
        e.descriptive_date = "SD1300".into();
        assert_eq!(only_error(&e).field, "descriptive_date");

        let mut e = good();
        e.sec_code = SecCode::Tel;
        assert_eq!(only_error(&e).field, "transaction_code");
        e.transaction_code.direction = Direction::Debit;
        e.addenda = Some("NOTE".into());
        assert_eq!(only_error(&e).field, "addenda");
    }

    #[test]
    fn account_errors_never_show_the_number() {
        let mut e = good();
        e.account_number = AccountNumber::new("12345678901234567890");
        let err = only_error(&e);
        assert_eq!(
            err.to_string(),
            "account_number: expected at most 17 characters, got 20 characters"
        );

        e.account_number = AccountNumber::new("1234567\u{e9}89");
        let err = only_error(&e);
        assert_eq!(err.field, "account_number");
        assert!(!err.to_string().contains("1234567"), "{err}");
        assert!(err.got.ends_with("89\""), "{err}");
    }

    #[test]
    fn a_bounded_entry_keeps_an_excerpt_of_each_field_over_its_limit() {
        let (same, cuts) = good().bounded();
        assert_eq!(same, good());
        assert!(cuts.is_empty());

        let mut e = good();
        e.individual_name = "N".repeat(10 << 20);
        e.company_name = "C".repeat(40); // over its limit, within the excerpt: kept
        e.addenda = Some("A".repeat(80)); // at its limit: kept
        e.account_number = AccountNumber::new("9".repeat(100));
        let (b, cuts) = e.clone().bounded();
        assert_eq!(
            cuts,
            [
                Cut {
                    field: "account_number",
                    len: 100
                },
                Cut {
                    field: "individual_name",
                    len: 10 << 20
                },
            ]
        );
        assert_eq!(b.individual_name, "N".repeat(EXCERPT_BYTES));
        assert_eq!(b.account_number.expose(), "9".repeat(EXCERPT_BYTES));
        assert_eq!(b.company_name, e.company_name);
        assert_eq!(b.addenda, e.addenda);
        // Bounding is a fixed point: the same entry bounded twice is the same.
        assert_eq!(b.clone().bounded(), (b, Vec::new()));
    }

    #[test]
    fn batch_keys_group_by_batch_fields() {
        let a = good();
        let mut b = good();
        b.entry_id = "E-2".into();
        b.account_number = AccountNumber::new("999");
        b.amount_cents = 1;
        assert_eq!(a.batch_key(), b.batch_key());
        assert!(b.fits(&a.batch_key()));
        b.transaction_code.direction = Direction::Debit;
        assert_ne!(a.batch_key(), b.batch_key());
        assert_eq!(b.batch_key().service_class, ServiceClass::DebitsOnly);
        assert!(!b.fits(&a.batch_key()));
        assert_eq!(a.mixed_batch_key(), b.mixed_batch_key());
        assert!(b.fits(&a.mixed_batch_key()));
        let mut c = good();
        c.effective_date = c.effective_date.succ_opt().unwrap();
        assert_ne!(a.batch_key(), c.batch_key());
    }
}
