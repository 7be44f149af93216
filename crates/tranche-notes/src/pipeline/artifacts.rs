//! Where a client's note lives in the store, step by step: every key is made here, from
//! the chain's date, client and version, so no step spells one out.

use chrono::NaiveDate;
use tranche_storage::{InvalidKey, StoreKey};

use super::plan::entity;

/// The artifact kinds in the store.
pub(crate) const DATA_KIND: &str = "contract-notes-data";
pub(crate) const TMP_PDF_KIND: &str = "tmp-pdf";
pub(crate) const SIGNED_PDF_KIND: &str = "signed-pdf";
/// What stays of a note's data once it is mailed (see `steps::AuditRecord`).
pub(crate) const AUDIT_KIND: &str = "contract-notes-audit";

/// The store keys of one chain's artifacts (a client's note of one version).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Artifacts {
    /// The note's data and address, written by `process`; removed once mailed.
    pub(crate) data: StoreKey,
    /// The rendered, unencrypted PDF; removed once its signed copy is stored.
    pub(crate) tmp_pdf: StoreKey,
    /// The signed, password-protected PDF: what is mailed.
    pub(crate) signed_pdf: StoreKey,
    /// What an audit needs once the note's personal data is gone.
    pub(crate) audit: StoreKey,
}

impl Artifacts {
    /// Fails for a client code that cannot name a file (the planner fails such a
    /// client's chain at `process`).
    pub(crate) fn new(
        date: NaiveDate,
        client_code: &str,
        version: u32,
    ) -> Result<Self, InvalidKey> {
        let date = date.to_string();
        let at = entity(client_code, version);
        let key = |kind, ext| StoreKey::partitioned(kind, &date, &at, ext);
        Ok(Artifacts {
            data: key(DATA_KIND, "json")?,
            tmp_pdf: key(TMP_PDF_KIND, "pdf")?,
            signed_pdf: key(SIGNED_PDF_KIND, "pdf")?,
            audit: key(AUDIT_KIND, "json")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_version_has_its_own_keys_in_the_partitioned_layout() {
        let date = NaiveDate::from_ymd_opt(2026, 11, 20).unwrap();
        let first = Artifacts::new(date, "C001", 1).unwrap();
        let digit = |k: &StoreKey| k.as_str().split('-').next().unwrap().to_string();
        let d = digit(&first.data);
        assert_eq!(
            first.data.as_str(),
            format!("{d}-contract-notes-data/2026-11-20/C001.json")
        );
        assert_eq!(
            first.signed_pdf.as_str(),
            format!("{d}-signed-pdf/2026-11-20/C001.pdf")
        );
        let second = Artifacts::new(date, "C001", 2).unwrap();
        assert!(second.tmp_pdf.as_str().ends_with("/2026-11-20/C001.v2.pdf"));
        assert!(second
            .audit
            .as_str()
            .contains("-contract-notes-audit/2026-11-20/C001.v2.json"));
    }

    #[test]
    fn a_code_that_cannot_name_a_file_has_no_keys() {
        let date = NaiveDate::from_ymd_opt(2026, 11, 20).unwrap();
        assert!(Artifacts::new(date, "../C001", 1).is_err());
    }
}
