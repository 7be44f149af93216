use std::collections::BTreeMap;
use std::path::Path;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use super::InputError;
use crate::rates::{default_rates, rates_on, RateTable};

/// The broker's details, printed on every note, and its charge rates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Broker {
    /// Registered name; also the mail's sender name by default.
    pub name: String,
    /// SEBI registration number, e.g. `INZ000123456`.
    pub sebi_registration: String,
    /// Trading member code per exchange, e.g. NSE = "12345".
    pub member_codes: BTreeMap<String, String>,
    /// Registered office.
    pub address: String,
    /// GST identification number.
    pub gstin: String,
    /// The broker's state for GST: CGST+SGST for clients in it, IGST otherwise.
    pub gst_state: String,
    /// Starts every note number, e.g. `CN` in `CN/20261120/0000003`.
    pub note_prefix: String,
    /// Printed on every note for grievances; sends the mail when `mail_from` is not given.
    pub compliance_officer: ComplianceOfficer,
    /// The sender of contract-note e-mails, e.g. `"Example Securities <notes@example.in>"`;
    /// the compliance officer's address when not given.
    #[serde(default)]
    pub mail_from: Option<String>,
    /// Dated charge-rate tables; the built-in ones when none are given.
    #[serde(default)]
    pub rates: Vec<RateTable>,
}

/// Whom clients write to about a note: `broker.toml`'s `[compliance_officer]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComplianceOfficer {
    /// As printed on the note.
    pub name: String,
    /// As printed on the note, and the mail's sender address by default.
    pub email: String,
    /// As printed on the note.
    pub phone: String,
}

impl Broker {
    /// The rate table in force on a trade date.
    pub(crate) fn rates_on(&self, date: NaiveDate) -> Option<&RateTable> {
        rates_on(&self.rates, date)
    }

    /// The `From` of contract-note e-mails.
    pub(crate) fn sender(&self) -> String {
        match &self.mail_from {
            Some(from) => from.clone(),
            None => format!("{} <{}>", self.name, self.compliance_officer.email),
        }
    }

    /// The domain message ids are minted in.
    pub(crate) fn mail_domain(&self) -> String {
        let from = self.sender();
        let addr = from
            .rsplit_once('<')
            .map_or(from.as_str(), |(_, a)| a.trim_end_matches('>'));
        addr.rsplit_once('@')
            .map_or("tranche.invalid".to_string(), |(_, d)| d.trim().to_string())
    }

    /// Whether a client in `client_state` pays CGST+SGST (else IGST); case and spaces
    /// around it do not matter.
    pub(crate) fn same_state(&self, client_state: &str) -> bool {
        self.gst_state
            .trim()
            .eq_ignore_ascii_case(client_state.trim())
    }
}

/// Read and check `broker.toml`; without `[[rates]]` tables the built-in rates apply.
pub fn load_broker(path: &Path) -> Result<Broker, InputError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| InputError::File {
        file: file.clone(),
        message: format!("could not read: {e}"),
    })?;
    let mut broker: Broker = toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() as u64 + 1)
            .unwrap_or(0);
        InputError::Syntax {
            file: file.clone(),
            line,
            message: e.message().to_string(),
        }
    })?;
    if broker.rates.is_empty() {
        broker.rates = default_rates();
    }
    for (field, value) in [
        ("name", &broker.name),
        ("sebi_registration", &broker.sebi_registration),
        ("gstin", &broker.gstin),
        ("gst_state", &broker.gst_state),
        ("note_prefix", &broker.note_prefix),
    ] {
        if value.trim().is_empty() {
            return Err(InputError::File {
                file,
                message: format!("field {field}: expected a value, got an empty string"),
            });
        }
    }
    Ok(broker)
}
