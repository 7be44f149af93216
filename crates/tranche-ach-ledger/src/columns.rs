//! An entry's columns: what both backends store, and the checks before storing.

use chrono::{Datelike, NaiveDate};
use tranche_ach::{
    excerpt, AccountNumber, BatchKey, Direction, Entry, RoutingNumber, SecCode, ServiceClass,
    TransactionCode, EXCERPT_BYTES, MAX_ENTRY_ID,
};

/// Whether an entry can be stored at all (valid or not): `Err` says why not. Asked of
/// the entry as it would be stored ([`intake`]'s).
pub(crate) fn storable(e: &Entry) -> Result<(), String> {
    if e.entry_id.len() > MAX_ENTRY_ID {
        // The key of its row: never cut, so never stored.
        return Err(format!(
            "entry_id: expected at most {MAX_ENTRY_ID} characters (the ledger's key), got {} characters",
            e.entry_id.chars().count()
        ));
    }
    if i64::try_from(e.amount_cents).is_err() {
        return Err(format!(
            "amount_cents: expected at most {}, got {}",
            i64::MAX,
            e.amount_cents
        ));
    }
    let texts: [(&str, &str); 10] = [
        ("entry_id", &e.entry_id),
        ("bank", &e.bank),
        ("company_name", &e.company_name),
        ("company_id", &e.company_id),
        ("account_number", e.account_number.expose()),
        ("individual_id", &e.individual_id),
        ("individual_name", &e.individual_name),
        ("entry_description", &e.entry_description),
        ("descriptive_date", &e.descriptive_date),
        ("addenda", e.addenda.as_deref().unwrap_or("")),
    ];
    for (field, text) in texts {
        if text.contains('\0') {
            return Err(format!("{field}: expected no NUL character, got one"));
        }
    }
    if e.entry_id.is_empty() {
        return Err("entry_id: expected not empty, got \"\"".into());
    }
    Ok(())
}

/// An entry as an import stores it, and why it is rejected (`None`: valid).
///
/// The reason is its field errors (account numbers masked, long values cut to an
/// excerpt, a receiver's text never shown), so it is bounded whatever was sent. The
/// entry is [`Entry::bounded`]: a valid one whole, a rejected one with every field
/// over its limit cut to its first [`EXCERPT_BYTES`] bytes, which the reason then
/// says with each such field's length. Both backends store this, and compare a
/// repeated import with it: the same entry sent again is the same stored entry.
pub(crate) fn intake(e: Entry) -> (Entry, Option<String>) {
    let reason = e.validate().err().map(|errors| {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    });
    let (e, cuts) = e.bounded();
    let reason = reason.map(|mut r| {
        for c in &cuts {
            r.push_str(&format!(
                "; {}: stored as its first {EXCERPT_BYTES} bytes of {}",
                c.field, c.len
            ));
        }
        r
    });
    (e, reason)
}

/// An entry id as an import's answer gives it back: whole, or an excerpt of one over
/// [`MAX_ENTRY_ID`] (which is not stored).
pub(crate) fn answered_id(id: &str) -> String {
    if id.len() > MAX_ENTRY_ID {
        format!("{}…", excerpt(id))
    } else {
        id.to_string()
    }
}

/// A date as SQLite stores it: days since 0001-01-01 (CE day 1).
pub(crate) fn day_number(d: NaiveDate) -> i64 {
    i64::from(d.num_days_from_ce())
}

/// The date of a [`day_number`].
pub(crate) fn from_day_number(n: i64) -> Option<NaiveDate> {
    i32::try_from(n)
        .ok()
        .and_then(NaiveDate::from_num_days_from_ce_opt)
}

/// An entry's columns as read back, before they are checked.
pub(crate) struct EntryColumns {
    pub entry_id: String,
    pub bank: String,
    pub company_name: String,
    pub company_id: String,
    pub sec_code: String,
    pub transaction_code: i64,
    pub rdfi_routing: String,
    pub account_number: String,
    pub amount_cents: i64,
    pub individual_id: String,
    pub individual_name: String,
    pub entry_description: String,
    pub descriptive_date: String,
    pub effective_date: NaiveDate,
    pub submission_date: NaiveDate,
    pub same_day: bool,
    pub addenda: Option<String>,
}

/// The column of a stored entry that does not read back: (column, expected, got).
pub(crate) type Unreadable = (&'static str, &'static str, String);

impl EntryColumns {
    pub(crate) fn into_entry(self) -> Result<Entry, Unreadable> {
        let sec_code: SecCode = self
            .sec_code
            .parse()
            .map_err(|_| ("sec_code", "an SEC code", self.sec_code.clone()))?;
        let transaction_code = u8::try_from(self.transaction_code)
            .ok()
            .and_then(|c| TransactionCode::from_code(c).ok())
            .ok_or((
                "transaction_code",
                "a transaction code",
                self.transaction_code.to_string(),
            ))?;
        let rdfi_routing =
            RoutingNumber::parse_field("rdfi_routing", &self.rdfi_routing).map_err(|_| {
                (
                    "rdfi_routing",
                    "a routing number",
                    self.rdfi_routing.clone(),
                )
            })?;
        let amount_cents = u64::try_from(self.amount_cents).map_err(|_| {
            (
                "amount_cents",
                "a positive amount",
                self.amount_cents.to_string(),
            )
        })?;
        Ok(Entry {
            entry_id: self.entry_id,
            bank: self.bank,
            company_name: self.company_name,
            company_id: self.company_id,
            sec_code,
            transaction_code,
            rdfi_routing,
            account_number: AccountNumber::new(self.account_number),
            amount_cents,
            individual_id: self.individual_id,
            individual_name: self.individual_name,
            entry_description: self.entry_description,
            descriptive_date: self.descriptive_date,
            effective_date: self.effective_date,
            submission_date: self.submission_date,
            same_day: self.same_day,
            addenda: self.addenda,
        })
    }
}

/// The batch-level columns of an entry as read (text borrowed from the row): what its
/// batch key is made of, compared with a key before one is allocated.
pub(crate) struct KeyColumns<'a> {
    pub bank: &'a str,
    pub company_name: &'a str,
    pub company_id: &'a str,
    pub sec_code: SecCode,
    pub service_class: ServiceClass,
    pub entry_description: &'a str,
    pub descriptive_date: &'a str,
    pub effective_date: NaiveDate,
    pub same_day: bool,
}

impl KeyColumns<'_> {
    /// The service class of a batch of entries of transaction code `code`'s direction,
    /// or `None` for a code that is none.
    fn service_class(code: i64) -> Option<ServiceClass> {
        let code = TransactionCode::from_code(u8::try_from(code).ok()?).ok()?;
        Some(match code.direction {
            Direction::Credit => ServiceClass::CreditsOnly,
            Direction::Debit => ServiceClass::DebitsOnly,
        })
    }

    /// The SEC code and service class of the stored `sec_code` and `transaction_code`
    /// columns, or the one that does not read back: (column, expected, got).
    pub(crate) fn read_codes(
        sec_code: &str,
        transaction_code: i64,
    ) -> Result<(SecCode, ServiceClass), Unreadable> {
        let sec = sec_code
            .parse()
            .map_err(|_| ("sec_code", "an SEC code", sec_code.to_string()))?;
        let class = Self::service_class(transaction_code).ok_or((
            "transaction_code",
            "a transaction code",
            transaction_code.to_string(),
        ))?;
        Ok((sec, class))
    }

    /// Whether `key` is these columns' key.
    pub(crate) fn matches(&self, key: &BatchKey) -> bool {
        self.bank == key.bank
            && self.company_name == key.company_name
            && self.company_id == key.company_id
            && self.sec_code == key.sec_code
            && self.service_class == key.service_class
            && self.entry_description == key.entry_description
            && self.descriptive_date == key.descriptive_date
            && self.effective_date == key.effective_date
            && self.same_day == key.same_day
    }

    pub(crate) fn to_key(&self) -> BatchKey {
        BatchKey {
            bank: self.bank.to_string(),
            company_name: self.company_name.to_string(),
            company_id: self.company_id.to_string(),
            sec_code: self.sec_code,
            service_class: self.service_class,
            entry_description: self.entry_description.to_string(),
            descriptive_date: self.descriptive_date.to_string(),
            effective_date: self.effective_date,
            same_day: self.same_day,
        }
    }
}
