//! The suite every [`Ledger`] implementation passes, against a real database.
//!
//! Each check uses its own banks and dates, so one ledger runs them all in turn. The
//! concurrent checks take two handles on the same ledger (two connections, as two
//! processes would hold) and a seed, and fail saying the seed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::NaiveDate;
use tranche_ach::{AccountKind, AccountNumber, Direction, Entry, SecCode, TransactionCode};
use tranche_types::Timestamp;

use crate::*;

/// The account number of every sample entry: no output may hold it whole.
pub const ACCOUNT: &str = "98765432101234";

/// A valid PPD credit of `cents` for `bank`, submitted on `date`, effective the next day.
pub fn sample_entry(entry_id: &str, bank: &str, date: NaiveDate, cents: u64) -> Entry {
    Entry {
        entry_id: entry_id.into(),
        bank: bank.into(),
        company_name: "ACME PAYROLL".into(),
        company_id: "1234567890".into(),
        sec_code: SecCode::Ppd,
        transaction_code: TransactionCode::new(AccountKind::Checking, Direction::Credit),
        rdfi_routing: "021000021".parse().expect("a routing number"),
        account_number: AccountNumber::new(ACCOUNT),
        amount_cents: cents,
        individual_id: "EMP0001".into(),
        individual_name: "JANE DOE".into(),
        entry_description: "PAYROLL".into(),
        descriptive_date: String::new(),
        effective_date: date.succ_opt().expect("a next day"),
        submission_date: date,
        same_day: false,
        addenda: None,
    }
}

/// A new file of `bank` on `date` (not same-day).
pub fn sample_file(file_id: &str, bank: &str, date: NaiveDate) -> NewFile {
    NewFile {
        file_id: file_id.into(),
        bank: bank.into(),
        submission_date: date,
        same_day: false,
        window: "regular".into(),
        name: format!("{file_id}.ach"),
        hash: format!("hash-{file_id}"),
    }
}

fn day(n: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 3, 1).expect("a date") + chrono::Days::new(u64::from(n))
}

fn submission(file: &NewFile) -> Submission {
    Submission {
        at: Timestamp(1_000),
        destination: "sftp://bank/inbound".into(),
        hash: file.hash.clone(),
    }
}

fn ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:04}")).collect()
}

/// The seq of each of `ids` (imported).
async fn seqs_of<'a>(
    ledger: &dyn Ledger,
    ids: impl IntoIterator<Item = &'a String>,
) -> HashMap<String, i64> {
    let mut seq = HashMap::new();
    for id in ids {
        seq.insert(id.clone(), ledger.entry(id).await.unwrap().unwrap().seq);
    }
    seq
}

/// A refusal's conflicts as (id, why), by id; `what` says why a refusal was expected.
fn conflicts_by_id(out: PackageOutcome, what: &str) -> Vec<(String, ConflictReason)> {
    let PackageOutcome::Refused(conflicts) = out else {
        panic!("{what}: got {out:?}");
    };
    let mut got: Vec<_> = conflicts.into_iter().map(|c| (c.entry_id, c.why)).collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    got
}

async fn import_all(ledger: &dyn Ledger, bank: &str, date: NaiveDate, ids: &[String]) {
    let entries = ids
        .iter()
        .map(|id| sample_entry(id, bank, date, 100))
        .collect();
    let out = ledger.import(entries).await.expect("import");
    for i in out {
        assert_eq!(
            i.outcome,
            ImportOutcome::New(State::Accepted),
            "{}",
            i.entry_id
        );
    }
}

async fn state_of(ledger: &dyn Ledger, id: &str) -> State {
    ledger
        .entry(id)
        .await
        .expect("entry")
        .unwrap_or_else(|| panic!("entry {id} is stored"))
        .state
}

/// Every check below in turn; `a` and `b` are two handles on one ledger.
pub async fn exercise(a: Arc<dyn Ledger>, b: Arc<dyn Ledger>) {
    import_is_idempotent_and_reports_conflicts(&*a).await;
    a_rejected_entry_keeps_a_bounded_excerpt(&*a).await;
    cancel_before_package_wins(&*a).await;
    cancel_after_package_forces_a_rebuild(&*a).await;
    cancels_are_idempotent_and_may_come_first(&*a).await;
    submissions_are_recorded_once(&*a).await;
    packaging_refuses_what_does_not_fit(&*a).await;
    a_name_is_held_until_released_unsent(&*a).await;
    eligible_pages_in_import_order(&*a).await;
    entries_are_read_by_seq(&*a).await;
    batch_keys_are_read_by_seq(&*a).await;
    packaging_by_seq_answers_as_by_id(&*a).await;
    packaging_what_was_read_checks_what_changed_since(&*a).await;
    status_counts_per_bank_and_state(&*a).await;
    nothing_shows_an_account_number(&*a).await;
    concurrent_packagers_never_share_an_entry(a.clone(), b.clone(), 7).await;
    cancels_racing_packagers_and_submitters(a, b, 11).await;
}

/// Re-importing an id is a no-op answering its state; a different payload under it
/// is a conflict; an invalid entry is stored rejected, with its field errors.
pub async fn import_is_idempotent_and_reports_conflicts(ledger: &dyn Ledger) {
    let d = day(1);
    let good = sample_entry("imp-1", "imp", d, 1_250);
    let mut invalid = sample_entry("imp-2", "imp", d, 0);
    invalid.company_name = String::new();
    let out = ledger
        .import(vec![good.clone(), invalid.clone(), good.clone()])
        .await
        .unwrap();
    assert_eq!(
        out.iter().map(|i| i.outcome.clone()).collect::<Vec<_>>(),
        vec![
            ImportOutcome::New(State::Accepted),
            ImportOutcome::New(State::Rejected),
            ImportOutcome::Existing(State::Accepted),
        ]
    );
    let stored = ledger.entry("imp-1").await.unwrap().expect("stored");
    assert_eq!(stored.entry, good, "every field reads back");
    assert_eq!(stored.entry.account_number.expose(), ACCOUNT);
    assert_eq!(stored.state, State::Accepted);
    assert_eq!(stored.recorded, State::Accepted);
    assert!(stored.file_id.is_none() && stored.cancellation.is_none());
    let rejected = ledger.entry("imp-2").await.unwrap().expect("stored");
    assert_eq!(rejected.state, State::Rejected);
    let reason = rejected.rejection.expect("a reason");
    assert!(
        reason.contains("company_name") && reason.contains("amount_cents"),
        "{reason}"
    );

    let mut changed = good.clone();
    changed.amount_cents = 9_999;
    let mut absurd = sample_entry("imp-3", "imp", d, u64::MAX);
    absurd.amount_cents = u64::MAX;
    let out = ledger
        .import(vec![good.clone(), changed, invalid, absurd])
        .await
        .unwrap();
    assert_eq!(out[0].outcome, ImportOutcome::Existing(State::Accepted));
    assert_eq!(out[1].outcome, ImportOutcome::Conflict(State::Accepted));
    assert_eq!(out[2].outcome, ImportOutcome::Existing(State::Rejected));
    assert!(
        matches!(&out[3].outcome, ImportOutcome::Unstorable(why) if why.contains("amount_cents")),
        "{:?}",
        out[3]
    );
    assert!(ledger.entry("imp-3").await.unwrap().is_none());
    assert_eq!(
        ledger
            .entry("imp-1")
            .await
            .unwrap()
            .unwrap()
            .entry
            .amount_cents,
        1_250,
        "a conflict never overwrites"
    );
    assert_eq!(
        ledger.reject("imp-1", "blocked payee").await.unwrap(),
        RejectOutcome::Rejected
    );
    assert_eq!(
        ledger.reject("imp-1", "again").await.unwrap(),
        RejectOutcome::NotAccepted(State::Rejected)
    );
    assert_eq!(
        ledger.reject("imp-none", "x").await.unwrap(),
        RejectOutcome::Unknown
    );
    let stored = ledger.entry("imp-1").await.unwrap().unwrap();
    assert_eq!(stored.rejection.as_deref(), Some("blocked payee"));
    assert!(ledger.entry("imp-none").await.unwrap().is_none());
}

/// `n` capital letters that do not compress (a database that compresses what it
/// stores would otherwise hide a field kept whole).
pub fn noise(seed: u64, n: usize) -> String {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n).map(|_| char::from(rng.u8(b'A'..=b'Z'))).collect()
}

/// Ten rejected entries of a 10 MB field each (100 MB sent, of text that does not
/// compress) grow the ledger by well under a megabyte, as `stored_bytes` measures it
/// (the database's files, a table's size): each keeps an excerpt. The entries are of
/// bank `g` on `date`, which the caller's ledger should hold no other entries of.
pub async fn huge_rejected_fields_stay_small(
    ledger: &dyn Ledger,
    date: NaiveDate,
    stored_bytes: impl Fn() -> u64,
) {
    ledger
        .import(vec![sample_entry("g-0", "g", date, 1)])
        .await
        .unwrap();
    let before = stored_bytes();
    for i in 1..=10 {
        let mut e = sample_entry(&format!("g-{i}"), "g", date, 1);
        e.individual_name = noise(i, 10 << 20);
        let out = ledger.import(vec![e]).await.unwrap();
        assert_eq!(out[0].outcome, ImportOutcome::New(State::Rejected));
    }
    let grown = stored_bytes() - before;
    assert!(grown < 1 << 20, "the ledger grew by {grown} bytes");
}

/// A rejected entry keeps at most an excerpt of each field over its limit (its first
/// [`tranche_ach::EXCERPT_BYTES`] bytes), and its reason names each such field with
/// its length: a 10 MB field costs the ledger a few hundred bytes, and the row is still
/// accounted for. Importing the same entry again answers it known; an entry whose id is
/// over [`tranche_ach::MAX_ENTRY_ID`] is not stored at all, and the answer gives an
/// excerpt of its id.
pub async fn a_rejected_entry_keeps_a_bounded_excerpt(ledger: &dyn Ledger) {
    use tranche_ach::{EXCERPT_BYTES, MAX_ENTRY_ID};
    const BIG: usize = 10 << 20;
    let d = day(2);
    let mut huge = sample_entry("big-1", "big", d, 100);
    huge.individual_name = noise(1, BIG);
    huge.addenda = Some(noise(2, BIG));
    huge.company_name = noise(3, BIG);
    huge.account_number = AccountNumber::new(noise(4, 1_000));
    let mut long_id = sample_entry(&"L".repeat(BIG), "big", d, 100);
    long_id.individual_name = noise(5, BIG);
    let out = ledger
        .import(vec![huge.clone(), long_id])
        .await
        .expect("import");
    assert_eq!(out[0].outcome, ImportOutcome::New(State::Rejected));
    assert_eq!(out[0].entry_id, "big-1");
    let ImportOutcome::Unstorable(why) = &out[1].outcome else {
        panic!(
            "an id over {MAX_ENTRY_ID} bytes is not stored: {:?}",
            out[1].outcome
        );
    };
    assert!(
        why.starts_with("entry_id: expected at most 64 characters"),
        "{why}"
    );
    assert!(why.len() < 200, "{why}");
    assert_eq!(out[1].entry_id, format!("{}…", "L".repeat(EXCERPT_BYTES)));

    let stored = ledger.entry("big-1").await.unwrap().expect("stored");
    assert_eq!(stored.state, State::Rejected);
    let e = &stored.entry;
    assert_eq!(e.individual_name, huge.individual_name[..EXCERPT_BYTES]);
    assert_eq!(e.company_name, huge.company_name[..EXCERPT_BYTES]);
    assert_eq!(
        e.addenda.as_deref(),
        Some(&huge.addenda.as_deref().unwrap()[..EXCERPT_BYTES])
    );
    assert_eq!(
        e.account_number.expose(),
        &huge.account_number.expose()[..EXCERPT_BYTES]
    );
    assert_eq!(
        e.company_id, huge.company_id,
        "a field within its limit is whole"
    );
    let reason = stored.rejection.expect("a reason");
    assert!(
        reason.len() < 2_000,
        "a bounded reason: {} bytes",
        reason.len()
    );
    for field in [
        "individual_name",
        "company_name",
        "addenda",
        "account_number",
    ] {
        assert!(
            reason.contains(&format!("{field}: expected at most")),
            "{reason}"
        );
    }
    assert!(
        reason.contains("individual_name: stored as its first 64 bytes of 10485760"),
        "{reason}"
    );
    // The receiver's text is personal data: never in the reason, not even in part.
    for personal in [&huge.individual_name, huge.addenda.as_ref().unwrap()] {
        assert!(!reason.contains(&personal[..8]), "{reason}");
    }

    // The same entry again is known; another beyond the excerpt is known too (what
    // was stored is the same), one that differs within it conflicts.
    let mut beyond = huge.clone();
    beyond.individual_name.push('X');
    let mut within = huge.clone();
    within.individual_name.replace_range(
        ..1,
        if &huge.individual_name[..1] == "A" {
            "B"
        } else {
            "A"
        },
    );
    let out = ledger
        .import(vec![huge, beyond, within])
        .await
        .expect("import");
    assert_eq!(
        out.iter().map(|i| i.outcome.clone()).collect::<Vec<_>>(),
        [
            ImportOutcome::Existing(State::Rejected),
            ImportOutcome::Existing(State::Rejected),
            ImportOutcome::Conflict(State::Rejected),
        ]
    );
}

/// An entry cancelled before it is packaged cannot be packaged.
pub async fn cancel_before_package_wins(ledger: &dyn Ledger) {
    let d = day(2);
    let ids = ids("cbp", 3);
    import_all(ledger, "cbp", d, &ids).await;
    assert_eq!(
        ledger.cancel(&ids[1], "customer asked").await.unwrap(),
        CancelOutcome::Cancelled {
            known: true,
            file_id: None
        }
    );
    let out = ledger
        .package(sample_file("cbp-F1", "cbp", d), ids.clone())
        .await
        .unwrap();
    assert_eq!(
        out,
        PackageOutcome::Refused(vec![PackageConflict {
            entry_id: ids[1].clone(),
            why: ConflictReason::State(State::Cancelled),
        }])
    );
    assert!(
        ledger.file("cbp-F1").await.unwrap().is_none(),
        "nothing recorded"
    );
    assert_eq!(state_of(ledger, &ids[0]).await, State::Accepted);
    let eligible = ledger
        .eligible(&EligibleQuery {
            bank: "cbp".into(),
            submission_date: d,
            same_day: false,
            after: None,
            limit: 10,
        })
        .await
        .unwrap();
    let listed: Vec<_> = eligible.iter().map(|e| e.entry.entry_id.clone()).collect();
    assert_eq!(
        listed,
        vec![ids[0].clone(), ids[2].clone()],
        "cancelled is not eligible"
    );
}

/// An entry cancelled after it is packaged shows cancelled; its file cannot be
/// submitted, is listed for the rebuild, and released its other entries are packaged
/// and submitted again.
pub async fn cancel_after_package_forces_a_rebuild(ledger: &dyn Ledger) {
    let d = day(3);
    let ids = ids("cap", 4);
    import_all(ledger, "cap", d, &ids).await;
    let file = sample_file("cap-F1", "cap", d);
    let PackageOutcome::Packaged(record) = ledger.package(file.clone(), ids.clone()).await.unwrap()
    else {
        panic!("packaged");
    };
    assert_eq!(
        (record.entries, record.credit_cents, record.debit_cents),
        (4, 400, 0)
    );
    assert_eq!(record.state, FileState::Packaged);
    assert_eq!(state_of(ledger, &ids[2]).await, State::Packaged);
    assert_eq!(
        ledger.cancel(&ids[2], "fraud").await.unwrap(),
        CancelOutcome::Cancelled {
            known: true,
            file_id: Some("cap-F1".into())
        }
    );
    let stored = ledger.entry(&ids[2]).await.unwrap().unwrap();
    assert_eq!(
        (stored.state, stored.recorded),
        (State::Cancelled, State::Packaged),
        "the cancellation overrides the row"
    );
    assert_eq!(stored.cancellation.map(|c| c.reason), Some("fraud".into()));
    assert_eq!(
        ledger
            .begin_submission("cap-F1", "sftp://bank")
            .await
            .unwrap(),
        BeginOutcome::Refused {
            cancelled: vec![ids[2].clone()]
        }
    );
    assert_eq!(
        ledger
            .mark_submitted("cap-F1", submission(&file))
            .await
            .unwrap(),
        SubmitOutcome::Refused {
            cancelled: vec![ids[2].clone()]
        }
    );
    let listed = ledger.unsubmitted_files_with_cancellations().await.unwrap();
    assert!(
        listed.contains(&FileWithCancellations {
            file_id: "cap-F1".into(),
            cancelled: vec![ids[2].clone()]
        }),
        "{listed:?}"
    );
    assert_eq!(
        ledger.release_file("cap-F1").await.unwrap(),
        ReleaseOutcome::Released {
            returned: 3,
            cancelled: 1
        }
    );
    assert_eq!(
        ledger.release_file("cap-F1").await.unwrap(),
        ReleaseOutcome::AlreadyReleased
    );
    assert!(!ledger
        .unsubmitted_files_with_cancellations()
        .await
        .unwrap()
        .iter()
        .any(|f| f.file_id == "cap-F1"));
    assert_eq!(state_of(ledger, &ids[0]).await, State::Accepted);
    assert_eq!(state_of(ledger, &ids[2]).await, State::Cancelled);
    assert_eq!(
        ledger.file("cap-F1").await.unwrap().unwrap().record.state,
        FileState::Released
    );
    assert_eq!(
        ledger
            .begin_submission("cap-F1", "sftp://bank")
            .await
            .unwrap(),
        BeginOutcome::Released
    );

    let rest: Vec<String> = ids.iter().filter(|i| **i != ids[2]).cloned().collect();
    let file2 = sample_file("cap-F2", "cap", d);
    assert!(matches!(
        ledger.package(file2.clone(), ids.clone()).await.unwrap(),
        PackageOutcome::Refused(c) if c.len() == 1 && c[0].entry_id == ids[2]
    ));
    assert!(matches!(
        ledger.package(file2.clone(), rest.clone()).await.unwrap(),
        PackageOutcome::Packaged(_)
    ));
    assert!(matches!(
        ledger
            .begin_submission("cap-F2", "sftp://bank")
            .await
            .unwrap(),
        BeginOutcome::Started { .. }
    ));
    assert_eq!(
        ledger.cancel(&ids[0], "too late").await.unwrap(),
        CancelOutcome::TooLate {
            file_id: "cap-F2".into(),
            file_state: FileState::Submitting
        },
        "no cancel once the upload may have begun"
    );
    assert_eq!(
        ledger
            .mark_submitted("cap-F2", submission(&file2))
            .await
            .unwrap(),
        SubmitOutcome::Submitted
    );
    for id in &rest {
        let e = ledger.entry(id).await.unwrap().unwrap();
        assert_eq!(
            (e.state, e.file_id.as_deref()),
            (State::Submitted, Some("cap-F2"))
        );
        assert!(e.submitted_at.is_some() && e.packaged_at.is_some());
    }
    assert_eq!(
        ledger.cancel(&ids[1], "too late").await.unwrap(),
        CancelOutcome::TooLate {
            file_id: "cap-F2".into(),
            file_state: FileState::Submitted
        }
    );
    assert_eq!(state_of(ledger, &ids[1]).await, State::Submitted);
}

/// Cancelling twice keeps the first; an id may be cancelled before it is imported.
pub async fn cancels_are_idempotent_and_may_come_first(ledger: &dyn Ledger) {
    let d = day(4);
    assert_eq!(
        ledger.cancel("early-1", "first").await.unwrap(),
        CancelOutcome::Cancelled {
            known: false,
            file_id: None
        }
    );
    let CancelOutcome::AlreadyCancelled(c) = ledger.cancel("early-1", "second").await.unwrap()
    else {
        panic!("already cancelled");
    };
    assert_eq!(c.reason, "first");
    assert!(ledger.entry("early-1").await.unwrap().is_none());
    let out = ledger
        .import(vec![sample_entry("early-1", "early", d, 5)])
        .await
        .unwrap();
    assert_eq!(out[0].outcome, ImportOutcome::New(State::Cancelled));
    let out = ledger
        .import(vec![sample_entry("early-1", "early", d, 5)])
        .await
        .unwrap();
    assert_eq!(out[0].outcome, ImportOutcome::Existing(State::Cancelled));
    assert_eq!(
        ledger.reject("early-1", "x").await.unwrap(),
        RejectOutcome::NotAccepted(State::Cancelled)
    );
    let eligible = ledger
        .eligible(&EligibleQuery {
            bank: "early".into(),
            submission_date: d,
            same_day: false,
            after: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert!(eligible.is_empty());
}

/// Begin, in doubt, reset, begin, hash checked, submitted once.
pub async fn submissions_are_recorded_once(ledger: &dyn Ledger) {
    let d = day(5);
    let ids = ids("sub", 2);
    import_all(ledger, "sub", d, &ids).await;
    let file = sample_file("sub-F1", "sub", d);
    assert!(matches!(
        ledger.package(file.clone(), ids.clone()).await.unwrap(),
        PackageOutcome::Packaged(_)
    ));
    let BeginOutcome::Started { began_at } =
        ledger.begin_submission("sub-F1", "sftp://a").await.unwrap()
    else {
        panic!("started");
    };
    assert_eq!(
        ledger.begin_submission("sub-F1", "sftp://a").await.unwrap(),
        BeginOutcome::InDoubt {
            began_at,
            destination: "sftp://a".into()
        },
        "a second begin (after a crash mid-upload) never starts another upload"
    );
    assert_eq!(
        ledger.release_file("sub-F1").await.unwrap(),
        ReleaseOutcome::NotReleasable(FileState::Submitting)
    );
    assert_eq!(
        ledger.reset_submission("sub-F1").await.unwrap(),
        ResetOutcome::Reset
    );
    assert_eq!(
        ledger.reset_submission("sub-F1").await.unwrap(),
        ResetOutcome::NotSubmitting(FileState::Packaged)
    );
    assert!(matches!(
        ledger.begin_submission("sub-F1", "sftp://b").await.unwrap(),
        BeginOutcome::Started { .. }
    ));
    let mut wrong = submission(&file);
    wrong.hash = "other".into();
    assert_eq!(
        ledger.mark_submitted("sub-F1", wrong).await.unwrap(),
        SubmitOutcome::HashMismatch {
            expected: file.hash.clone()
        }
    );
    assert_eq!(
        ledger
            .mark_submitted("sub-F1", submission(&file))
            .await
            .unwrap(),
        SubmitOutcome::Submitted
    );
    let again = ledger
        .mark_submitted("sub-F1", submission(&file))
        .await
        .unwrap();
    let SubmitOutcome::AlreadySubmitted(record) = again else {
        panic!("already submitted: {again:?}");
    };
    assert_eq!(record.submitted_at, Some(Timestamp(1_000)));
    assert!(matches!(
        ledger.begin_submission("sub-F1", "sftp://b").await.unwrap(),
        BeginOutcome::AlreadySubmitted(_)
    ));
    assert_eq!(
        ledger.release_file("sub-F1").await.unwrap(),
        ReleaseOutcome::NotReleasable(FileState::Submitted)
    );
    let detail = ledger.file("sub-F1").await.unwrap().unwrap();
    assert_eq!(detail.record.state, FileState::Submitted);
    assert_eq!(detail.entry_ids, ids);
    assert!(detail.cancelled.is_empty());
    for unknown in [
        ledger.begin_submission("sub-none", "x").await.unwrap() == BeginOutcome::UnknownFile,
        ledger
            .mark_submitted("sub-none", submission(&file))
            .await
            .unwrap()
            == SubmitOutcome::UnknownFile,
        ledger.reset_submission("sub-none").await.unwrap() == ResetOutcome::UnknownFile,
        ledger.release_file("sub-none").await.unwrap() == ReleaseOutcome::UnknownFile,
    ] {
        assert!(unknown, "an unknown file is said to be unknown");
    }
    let files = ledger
        .files(&FileFilter {
            bank: Some("sub".into()),
            ..FileFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].file, file);

    // mark_submitted alone (no begin) is accepted from a packaged file.
    let ids2 = self::ids("sub2", 1);
    import_all(ledger, "sub", d, &ids2).await;
    let file2 = sample_file("sub-F2", "sub", d);
    assert!(matches!(
        ledger.package(file2.clone(), ids2).await.unwrap(),
        PackageOutcome::Packaged(_)
    ));
    assert_eq!(
        ledger
            .mark_submitted("sub-F2", submission(&file2))
            .await
            .unwrap(),
        SubmitOutcome::Submitted
    );
}

/// Packaging refuses unknown, duplicate, foreign and busy entries, changing nothing,
/// and a repeated call is answered, not applied twice.
pub async fn packaging_refuses_what_does_not_fit(ledger: &dyn Ledger) {
    let d = day(6);
    let ids = ids("pkg", 3);
    import_all(ledger, "pkg", d, &ids).await;
    ledger
        .import(vec![sample_entry("pkg-other", "elsewhere", d, 1)])
        .await
        .unwrap();
    let file = sample_file("pkg-F1", "pkg", d);
    assert_eq!(
        ledger.package(file.clone(), vec![]).await.unwrap(),
        PackageOutcome::Empty
    );
    let out = ledger
        .package(
            file.clone(),
            vec![
                ids[0].clone(),
                "pkg-none".into(),
                ids[0].clone(),
                "pkg-other".into(),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        out,
        PackageOutcome::Refused(vec![
            PackageConflict {
                entry_id: "pkg-none".into(),
                why: ConflictReason::Unknown
            },
            PackageConflict {
                entry_id: ids[0].clone(),
                why: ConflictReason::Duplicate
            },
            PackageConflict {
                entry_id: "pkg-other".into(),
                why: ConflictReason::OtherFile
            },
        ])
    );
    assert_eq!(state_of(ledger, &ids[0]).await, State::Accepted);
    let PackageOutcome::Packaged(first) = ledger
        .package(file.clone(), vec![ids[0].clone(), ids[1].clone()])
        .await
        .unwrap()
    else {
        panic!("packaged");
    };
    assert_eq!(
        ledger
            .package(file.clone(), vec![ids[1].clone(), ids[0].clone()])
            .await
            .unwrap(),
        PackageOutcome::AlreadyPackaged(first),
        "a repeated call answers the file"
    );
    assert_eq!(
        ledger
            .package(file.clone(), vec![ids[2].clone()])
            .await
            .unwrap(),
        PackageOutcome::FileIdTaken
    );
    assert_eq!(
        ledger
            .package(
                sample_file("pkg-F2", "pkg", d),
                vec![ids[1].clone(), ids[2].clone()]
            )
            .await
            .unwrap(),
        PackageOutcome::Refused(vec![PackageConflict {
            entry_id: ids[1].clone(),
            why: ConflictReason::State(State::Packaged)
        }]),
        "an entry is in one file at most"
    );
}

/// A name at the bank is one file's at a time: a second file of the bank under it is
/// refused (`NameTaken`, by id and by seq) while the first is packaged, taken once the
/// first is released before its submission began, and refused for good once a
/// submission of its holder began, even after a reset and a release (its bytes may be
/// at the bank).
pub async fn a_name_is_held_until_released_unsent(ledger: &dyn Ledger) {
    let d = day(4);
    let ids = ids("name", 4);
    import_all(ledger, "name", d, &ids).await;
    let seq = seqs_of(ledger, &ids).await;
    let named = |file_id: &str| NewFile {
        name: "name-A.ach".into(),
        ..sample_file(file_id, "name", d)
    };
    let packaged = |out: PackageOutcome, what: &str| match out {
        PackageOutcome::Packaged(r) => r,
        other => panic!("{what}: got {other:?}"),
    };
    let first = packaged(
        ledger
            .package(named("name-A"), vec![ids[0].clone(), ids[1].clone()])
            .await
            .unwrap(),
        "the first file under the name",
    );
    assert!(first.holds_name() && !first.submission_began);
    assert_eq!(
        ledger
            .package(named("name-A-2"), vec![ids[2].clone()])
            .await
            .unwrap(),
        PackageOutcome::NameTaken {
            file_id: "name-A".into()
        },
        "a packaged file holds its name"
    );
    assert_eq!(
        ledger
            .package_seqs(named("name-A-2"), vec![seq[&ids[2]]])
            .await
            .unwrap(),
        PackageOutcome::NameTaken {
            file_id: "name-A".into()
        },
        "by seq as by id"
    );
    assert_eq!(state_of(ledger, &ids[2]).await, State::Accepted);
    assert!(matches!(
        ledger.release_file("name-A").await.unwrap(),
        ReleaseOutcome::Released { .. }
    ));
    let released = ledger.file("name-A").await.unwrap().unwrap().record;
    assert!(!released.holds_name(), "released unsent: {released:?}");

    // Taken again by a file rebuilt from the released one's entries; its submission
    // begins, in doubt, is reset, and a cancel releases it.
    let second = named("name-A-2");
    packaged(
        ledger
            .package_seqs(second.clone(), vec![seq[&ids[0]], seq[&ids[2]]])
            .await
            .unwrap(),
        "a file taking the name given back",
    );
    assert!(matches!(
        ledger
            .begin_submission("name-A-2", "sftp://bank/inbound")
            .await
            .unwrap(),
        BeginOutcome::Started { .. }
    ));
    assert_eq!(
        ledger.reset_submission("name-A-2").await.unwrap(),
        ResetOutcome::Reset
    );
    assert!(matches!(
        ledger.cancel(&ids[0], "test").await.unwrap(),
        CancelOutcome::Cancelled { .. }
    ));
    assert!(matches!(
        ledger.release_file("name-A-2").await.unwrap(),
        ReleaseOutcome::Released { .. }
    ));
    let began = ledger.file("name-A-2").await.unwrap().unwrap().record;
    assert!(
        began.submission_began && began.holds_name(),
        "a file whose submission began keeps its name: {began:?}"
    );
    assert_eq!(
        ledger
            .package(named("name-A-3"), vec![ids[2].clone(), ids[3].clone()])
            .await
            .unwrap(),
        PackageOutcome::NameTaken {
            file_id: "name-A-2".into()
        },
    );
    // Another name of the bank is free.
    packaged(
        ledger
            .package(
                NewFile {
                    name: "name-B.ach".into(),
                    ..sample_file("name-B", "name", d)
                },
                vec![ids[2].clone(), ids[3].clone()],
            )
            .await
            .unwrap(),
        "another name",
    );
}

/// `eligible` pages through accepted, uncancelled entries of one bank, date and
/// same-day flag, in import order.
pub async fn eligible_pages_in_import_order(ledger: &dyn Ledger) {
    let d = day(7);
    let mut entries = Vec::new();
    for i in 0..25 {
        entries.push(sample_entry(&format!("elg-{i:03}"), "elg", d, 10));
        let mut sd = sample_entry(&format!("elg-sd-{i:03}"), "elg", d, 10);
        sd.same_day = true;
        sd.effective_date = d;
        entries.push(sd);
        entries.push(sample_entry(&format!("elg-x-{i:03}"), "elg", day(8), 10));
    }
    ledger.import(entries).await.unwrap();
    ledger.cancel("elg-003", "x").await.unwrap();
    ledger.reject("elg-004", "x").await.unwrap();
    assert!(matches!(
        ledger
            .package(sample_file("elg-F", "elg", d), vec!["elg-005".into()])
            .await
            .unwrap(),
        PackageOutcome::Packaged(_)
    ));
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = ledger
            .eligible(&EligibleQuery {
                bank: "elg".into(),
                submission_date: d,
                same_day: false,
                after,
                limit: 10,
            })
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 10);
        assert!(page.windows(2).all(|w| w[0].seq < w[1].seq), "in seq order");
        let seqs = ledger
            .eligible_seqs(&EligibleQuery {
                bank: "elg".into(),
                submission_date: d,
                same_day: false,
                after,
                limit: 10,
            })
            .await
            .unwrap();
        assert_eq!(
            seqs,
            page.iter().map(|e| e.seq).collect::<Vec<_>>(),
            "the same page"
        );
        after = page.last().map(|e| e.seq);
        seen.extend(page.into_iter().map(|e| e.entry.entry_id));
    }
    let want: Vec<String> = (0..25)
        .filter(|i| ![3, 4, 5].contains(i))
        .map(|i| format!("elg-{i:03}"))
        .collect();
    assert_eq!(seen, want);
    let same_day = ledger
        .eligible(&EligibleQuery {
            bank: "elg".into(),
            submission_date: d,
            same_day: true,
            after: None,
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(same_day.len(), 25);
    assert!(same_day.iter().all(|e| e.entry.same_day));
}

/// `entries_at` reads entries by seq, in seq order, with their effective states; seqs
/// no entry has are left out and repeats answered once.
pub async fn entries_are_read_by_seq(ledger: &dyn Ledger) {
    let d = day(10);
    let ids = ids("seq", 6);
    import_all(ledger, "seq", d, &ids).await;
    let mut seqs = Vec::new();
    for id in &ids {
        seqs.push(ledger.entry(id).await.unwrap().unwrap().seq);
    }
    ledger.cancel(&ids[1], "x").await.unwrap();
    ledger.reject(&ids[2], "x").await.unwrap();
    assert!(matches!(
        ledger
            .package(sample_file("seq-F", "seq", d), vec![ids[3].clone()])
            .await
            .unwrap(),
        PackageOutcome::Packaged(_)
    ));
    // Out of order, repeated, with a gap and a seq no entry has.
    let unknown = seqs.iter().max().unwrap() + 1_000_000;
    let asked = vec![
        seqs[5], seqs[0], unknown, seqs[3], seqs[1], seqs[2], seqs[0],
    ];
    let got = ledger.entries_at(&asked).await.unwrap();
    let got: Vec<(i64, String, State)> = got
        .into_iter()
        .map(|e| (e.seq, e.entry.entry_id, e.state))
        .collect();
    let want = vec![
        (seqs[0], ids[0].clone(), State::Accepted),
        (seqs[1], ids[1].clone(), State::Cancelled),
        (seqs[2], ids[2].clone(), State::Rejected),
        (seqs[3], ids[3].clone(), State::Packaged),
        (seqs[5], ids[5].clone(), State::Accepted),
    ];
    assert_eq!(got, want);
    let whole = ledger.entries_at(&seqs).await.unwrap();
    assert_eq!(whole.len(), 6);
    assert_eq!(whole[4].entry, sample_entry(&ids[4], "seq", d, 100));
    assert!(ledger.entries_at(&[]).await.unwrap().is_empty());
}

/// `batch_keys_at` answers, for what `entries_at` answers, each entry's batch key,
/// effective state and submission date; consecutive entries sharing a key share one.
pub async fn batch_keys_are_read_by_seq(ledger: &dyn Ledger) {
    let d = day(13);
    let mut entries: Vec<Entry> = (0..6)
        .map(|i| sample_entry(&format!("keys-{i}"), "keys", d, 100))
        .collect();
    // A debit goes in a batch of its own (service class 225), and so does another
    // company; the entry after them shares the first key again.
    entries[2].transaction_code = TransactionCode::new(AccountKind::Checking, Direction::Debit);
    entries[3].company_name = "OTHER CO".into();
    // A savings credit shares the checking credits' key (one service class).
    entries[4].transaction_code = TransactionCode::new(AccountKind::Savings, Direction::Credit);
    let ids: Vec<String> = entries.iter().map(|e| e.entry_id.clone()).collect();
    ledger.import(entries.clone()).await.expect("import");
    let mut seqs = Vec::new();
    for id in &ids {
        seqs.push(ledger.entry(id).await.unwrap().unwrap().seq);
    }
    ledger.cancel(&ids[1], "x").await.unwrap();
    assert!(matches!(
        ledger
            .package(sample_file("keys-F", "keys", d), vec![ids[5].clone()])
            .await
            .unwrap(),
        PackageOutcome::Packaged(_)
    ));
    let unknown = seqs.iter().max().unwrap() + 1_000_000;
    let mut asked = seqs.clone();
    asked.extend([unknown, seqs[0]]);
    asked.reverse();
    let got = ledger.batch_keys_at(&asked).await.unwrap();
    let whole = ledger.entries_at(&asked).await.unwrap();
    assert_eq!(got.entries.len(), whole.len());
    for (k, e) in got.entries.iter().zip(&whole) {
        assert_eq!(
            (k.seq, k.state, k.submission_date),
            (e.seq, e.state, e.entry.submission_date)
        );
        assert_eq!(got.keys[k.key], e.entry.batch_key(), "seq {}", k.seq);
    }
    let states: Vec<State> = got.entries.iter().map(|k| k.state).collect();
    assert_eq!(
        states,
        [
            State::Accepted,
            State::Cancelled,
            State::Accepted,
            State::Accepted,
            State::Accepted,
            State::Packaged
        ]
    );
    let key_of: Vec<usize> = got.entries.iter().map(|k| k.key).collect();
    assert_eq!(key_of, [0, 0, 1, 2, 3, 3], "one key per run of equal keys");
    assert_eq!(got.keys[0], got.keys[3]);
    assert!(ledger.batch_keys_at(&[]).await.unwrap().keys.is_empty());
}

/// `package_seqs` is `package` with the entries named by seq: the same refusals
/// (each naming the entry's id, or `seq:<n>` for a seq no entry has), the same repeat
/// and file-id answers, the same file.
pub async fn packaging_by_seq_answers_as_by_id(ledger: &dyn Ledger) {
    let d = day(11);
    let ids = ids("pbs", 8);
    import_all(ledger, "pbs", d, &ids).await;
    ledger
        .import(vec![sample_entry("pbs-other", "pbs-x", d, 5)])
        .await
        .unwrap();
    let seq = seqs_of(ledger, ids.iter().chain([&"pbs-other".to_string()])).await;
    ledger.cancel(&ids[1], "x").await.unwrap();
    ledger.reject(&ids[2], "x").await.unwrap();
    let unknown = seq.values().max().unwrap() + 1_000_000;
    let asked = vec![
        seq[&ids[0]],
        seq[&ids[1]],
        seq[&ids[2]],
        seq[&ids[3]],
        seq[&ids[3]],
        seq["pbs-other"],
        unknown,
    ];
    let out = ledger.package_seqs(sample_file("pbs-F0", "pbs", d), asked);
    let got = conflicts_by_id(out.await.unwrap(), "a file of conflicting seqs is refused");
    let mut want = vec![
        (ids[1].clone(), ConflictReason::State(State::Cancelled)),
        (ids[2].clone(), ConflictReason::State(State::Rejected)),
        (ids[3].clone(), ConflictReason::Duplicate),
        ("pbs-other".to_string(), ConflictReason::OtherFile),
        (format!("seq:{unknown}"), ConflictReason::Unknown),
    ];
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, want);
    assert_eq!(
        state_of(ledger, &ids[0]).await,
        State::Accepted,
        "nothing changed"
    );

    // Consecutive and scattered seqs, in any order: one file, as by id.
    let good: Vec<i64> = [7, 3, 0, 4, 6].iter().map(|&i| seq[&ids[i]]).collect();
    let file = sample_file("pbs-F1", "pbs", d);
    let PackageOutcome::Packaged(record) = ledger
        .package_seqs(file.clone(), good.clone())
        .await
        .unwrap()
    else {
        panic!("good seqs are packaged");
    };
    assert_eq!((record.entries, record.credit_cents), (5, 500));
    let detail = ledger.file("pbs-F1").await.unwrap().unwrap();
    let mut held = detail.entry_ids.clone();
    held.sort();
    let mut expected: Vec<String> = [0, 3, 4, 6, 7].iter().map(|&i| ids[i].clone()).collect();
    expected.sort();
    assert_eq!(held, expected);
    assert!(matches!(
        ledger
            .package_seqs(file.clone(), good.clone())
            .await
            .unwrap(),
        PackageOutcome::AlreadyPackaged(_)
    ));
    assert_eq!(
        ledger.package_seqs(file, vec![seq[&ids[5]]]).await.unwrap(),
        PackageOutcome::FileIdTaken
    );
    assert_eq!(
        ledger
            .package_seqs(sample_file("pbs-F2", "pbs", d), vec![good[0]])
            .await
            .unwrap(),
        PackageOutcome::Refused(vec![PackageConflict {
            entry_id: ids[7].clone(),
            why: ConflictReason::State(State::Packaged)
        }])
    );
    assert_eq!(
        ledger
            .package_seqs(sample_file("pbs-F3", "pbs", d), Vec::new())
            .await
            .unwrap(),
        PackageOutcome::Empty
    );
}

/// `package_read` of entries read by `entries_to_package` answers as `package_seqs`,
/// whatever changed since the read (a cancel, a reject, another file) and whatever the
/// mark is asked to vouch for (seqs it did not read, another bank's file).
pub async fn packaging_what_was_read_checks_what_changed_since(ledger: &dyn Ledger) {
    let d = day(12);
    let ids = ids("prd", 8);
    import_all(ledger, "prd", d, &ids).await;
    let mut debit = sample_entry("prd-debit", "prd", d, 300);
    debit.transaction_code = TransactionCode::new(AccountKind::Savings, Direction::Debit);
    ledger.import(vec![debit]).await.unwrap();
    let seq = seqs_of(ledger, ids.iter().chain([&"prd-debit".to_string()])).await;
    let all: Vec<i64> = seq.values().copied().collect();
    let (read, mark) = ledger.entries_to_package(&all).await.unwrap();
    assert_eq!(
        read,
        ledger.entries_at(&all).await.unwrap(),
        "as entries_at"
    );

    ledger.cancel(&ids[1], "x").await.unwrap();
    ledger.reject(&ids[2], "x").await.unwrap();
    let other = ledger
        .package_seqs(sample_file("prd-Fx", "prd", d), vec![seq[&ids[3]]])
        .await
        .unwrap();
    assert!(matches!(other, PackageOutcome::Packaged(_)), "{other:?}");
    let asked: Vec<i64> = [0, 1, 2, 3].iter().map(|&i| seq[&ids[i]]).collect();
    let out = ledger.package_read(sample_file("prd-F1", "prd", d), asked, &mark);
    let got = conflicts_by_id(out.await.unwrap(), "what changed since the read is refused");
    assert_eq!(
        got,
        vec![
            (ids[1].clone(), ConflictReason::State(State::Cancelled)),
            (ids[2].clone(), ConflictReason::State(State::Rejected)),
            (ids[3].clone(), ConflictReason::State(State::Packaged)),
        ]
    );
    assert!(
        ledger.file("prd-F1").await.unwrap().is_none(),
        "nothing recorded"
    );

    // Another bank's file, and a seq repeated: refused as by package_seqs.
    let x = sample_file("prd-F2", "prd-x", d);
    let out = ledger
        .package_read(x, vec![seq[&ids[0]]], &mark)
        .await
        .unwrap();
    assert!(matches!(out, PackageOutcome::Refused(_)), "{out:?}");
    let twice = vec![seq[&ids[0]], seq[&ids[0]]];
    let file = sample_file("prd-F2", "prd", d);
    let out = ledger.package_read(file, twice, &mark).await.unwrap();
    assert!(matches!(out, PackageOutcome::Refused(_)), "{out:?}");

    // With no reject since the read: a cancel and another file since are still
    // refused; what did not change is packaged, with its totals; a seq the read did
    // not see is checked.
    let seen: Vec<i64> = [0, 4, 5, 6].iter().map(|&i| seq[&ids[i]]).collect();
    let (_, mark) = ledger
        .entries_to_package(&[seen.as_slice(), &[seq["prd-debit"]]].concat())
        .await
        .unwrap();
    let refused = |i: usize, state| {
        PackageOutcome::Refused(vec![PackageConflict {
            entry_id: ids[i].clone(),
            why: ConflictReason::State(state),
        }])
    };
    ledger.cancel(&ids[6], "x").await.unwrap();
    let f3 = sample_file("prd-F3", "prd", d);
    let out = ledger.package_read(f3.clone(), vec![seq[&ids[6]]], &mark);
    assert_eq!(out.await.unwrap(), refused(6, State::Cancelled));
    let out = ledger
        .package_seqs(sample_file("prd-Fy", "prd", d), vec![seq[&ids[5]]])
        .await
        .unwrap();
    assert!(matches!(out, PackageOutcome::Packaged(_)), "{out:?}");
    let out = ledger.package_read(f3, vec![seq[&ids[5]]], &mark);
    assert_eq!(out.await.unwrap(), refused(5, State::Packaged));
    let good = vec![seq[&ids[0]], seq["prd-debit"], seq[&ids[4]]];
    let file = sample_file("prd-F3", "prd", d);
    let PackageOutcome::Packaged(record) = ledger
        .package_read(file.clone(), good.clone(), &mark)
        .await
        .unwrap()
    else {
        panic!("unchanged entries are packaged");
    };
    assert_eq!(
        (record.entries, record.credit_cents, record.debit_cents),
        (3, 200, 300)
    );
    assert_eq!(state_of(ledger, "prd-debit").await, State::Packaged);
    assert!(matches!(
        ledger.package_read(file, good, &mark).await.unwrap(),
        PackageOutcome::AlreadyPackaged(_)
    ));
    let PackageOutcome::Packaged(record) = ledger
        .package_read(sample_file("prd-F4", "prd", d), vec![seq[&ids[7]]], &mark)
        .await
        .unwrap()
    else {
        panic!("a seq the read did not see is checked, then packaged");
    };
    assert_eq!(record.entries, 1);
}

/// `status` counts entries by bank and effective state, and files by state.
pub async fn status_counts_per_bank_and_state(ledger: &dyn Ledger) {
    let d = day(9);
    let ids = ids("sta", 6);
    import_all(ledger, "sta", d, &ids).await;
    import_all(ledger, "stb", d, &self::ids("stb", 2)).await;
    let mut bad = sample_entry("sta-bad", "sta", d, 0);
    bad.individual_name = String::new();
    ledger.import(vec![bad]).await.unwrap();
    let f1 = sample_file("sta-F1", "sta", d);
    ledger
        .package(f1.clone(), vec![ids[0].clone(), ids[1].clone()])
        .await
        .unwrap();
    ledger
        .mark_submitted("sta-F1", submission(&f1))
        .await
        .unwrap();
    ledger
        .package(
            sample_file("sta-F2", "sta", d),
            vec![ids[2].clone(), ids[3].clone()],
        )
        .await
        .unwrap();
    ledger.cancel(&ids[3], "x").await.unwrap();
    ledger.cancel(&ids[4], "x").await.unwrap();
    let status = ledger.status(d).await.unwrap();
    assert_eq!(status.date, d);
    let a = status.bank("sta");
    let t = |entries, cents| Tally { entries, cents };
    assert_eq!(a.tally(State::Accepted), t(1, 100));
    assert_eq!(a.tally(State::Packaged), t(1, 100));
    assert_eq!(a.tally(State::Submitted), t(2, 200));
    assert_eq!(a.tally(State::Cancelled), t(2, 200));
    assert_eq!(a.tally(State::Rejected), t(1, 0));
    assert_eq!(a.file_count(FileState::Packaged), 1);
    assert_eq!(a.file_count(FileState::Submitted), 1);
    assert_eq!(status.bank("stb").tally(State::Accepted), t(2, 200));
    assert_eq!(
        status
            .banks
            .iter()
            .map(|b| b.bank.as_str())
            .collect::<Vec<_>>(),
        vec!["sta", "stb"]
    );
    assert!(ledger.status(day(300)).await.unwrap().banks.is_empty());

    // A released file holds nothing: its uncancelled entry is accepted again.
    ledger.release_file("sta-F2").await.unwrap();
    let a = ledger.status(d).await.unwrap().bank("sta");
    assert_eq!(a.tally(State::Accepted), t(2, 200));
    assert_eq!(a.tally(State::Packaged), t(0, 0));
    assert_eq!(a.tally(State::Submitted), t(2, 200));
    assert_eq!(a.tally(State::Cancelled), t(2, 200));
    assert_eq!(a.file_count(FileState::Released), 1);
    assert_eq!(a.file_count(FileState::Packaged), 0);
}

/// No answer, reason or `Debug` output holds a whole account number.
pub async fn nothing_shows_an_account_number(ledger: &dyn Ledger) {
    let d = day(10);
    let mut bad = sample_entry("mask-1", "mask", d, 5);
    bad.account_number = AccountNumber::new(format!("{ACCOUNT}\u{e9}"));
    let mut nul = sample_entry("mask-2", "mask", d, 5);
    nul.account_number = AccountNumber::new(format!("{ACCOUNT}\0"));
    let good = sample_entry("mask-3", "mask", d, 5);
    let out = ledger.import(vec![bad, nul, good]).await.unwrap();
    assert!(matches!(out[1].outcome, ImportOutcome::Unstorable(_)));
    let mut shown = format!("{out:?}");
    for id in ["mask-1", "mask-3"] {
        let e = ledger.entry(id).await.unwrap().unwrap();
        shown.push_str(&format!("{e:?} {:?}", e.rejection));
    }
    shown.push_str(&format!(
        "{:?}",
        ledger
            .eligible(&EligibleQuery {
                bank: "mask".into(),
                submission_date: d,
                same_day: false,
                after: None,
                limit: 10
            })
            .await
            .unwrap()
    ));
    assert!(!shown.contains(ACCOUNT), "{shown}");
    assert!(!shown.contains(&ACCOUNT[..10]), "{shown}");
}

/// Two packagers (on two handles) race to package overlapping sets of entries:
/// every entry ends in at most one file, and the files hold exactly the packaged
/// entries.
pub async fn concurrent_packagers_never_share_an_entry(
    a: Arc<dyn Ledger>,
    b: Arc<dyn Ledger>,
    seed: u64,
) {
    let d = day(11);
    let bank = format!("race-{seed}");
    let all = ids(&bank, 200);
    import_all(&*a, &bank, d, &all).await;
    let mut tasks = Vec::new();
    for (n, ledger) in [a.clone(), b.clone(), a.clone(), b.clone()]
        .into_iter()
        .enumerate()
    {
        let all = all.clone();
        let bank = bank.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(seed * 100 + n as u64);
            let mut won = Vec::new();
            for round in 0..25 {
                let start = rng.usize(0..all.len() - 20);
                let take: Vec<String> = all[start..start + rng.usize(1..20)].to_vec();
                let file_id = format!("{bank}-p{n}-r{round}");
                match ledger
                    .package(sample_file(&file_id, &bank, d), take.clone())
                    .await
                    .expect("package")
                {
                    PackageOutcome::Packaged(r) => {
                        assert_eq!(r.entries as usize, take.len());
                        won.push((file_id, take));
                    }
                    PackageOutcome::Refused(c) => assert!(!c.is_empty()),
                    other => panic!("seed {seed}: {other:?}"),
                }
                if rng.bool() {
                    tokio::task::yield_now().await;
                }
            }
            won
        }));
    }
    let mut owner: HashMap<String, String> = HashMap::new();
    for t in futures::future::join_all(tasks).await {
        for (file_id, entries) in t.expect("packager") {
            for e in entries {
                if let Some(other) = owner.insert(e.clone(), file_id.clone()) {
                    panic!("seed {seed}: {e} is in {other} and {file_id}");
                }
            }
        }
    }
    for id in &all {
        let e = a.entry(id).await.unwrap().unwrap();
        assert_eq!(e.file_id.as_ref(), owner.get(id), "seed {seed}: {id}");
        let want = if owner.contains_key(id) {
            State::Packaged
        } else {
            State::Accepted
        };
        assert_eq!(e.state, want, "seed {seed}: {id}");
    }
    let files = b
        .files(&FileFilter {
            bank: Some(bank.clone()),
            ..FileFilter::default()
        })
        .await
        .unwrap();
    let held: usize = files.iter().map(|f| f.entries as usize).sum();
    assert_eq!(held, owner.len(), "seed {seed}");
}

/// Cancels race two packager-submitters over many rounds (seeded): no cancelled entry
/// is ever in a submitted file; every entry not cancelled ends in exactly one
/// submitted file; a cancel answered `Cancelled` never has its entry submitted, one
/// answered `TooLate` always has.
pub async fn cancels_racing_packagers_and_submitters(
    a: Arc<dyn Ledger>,
    b: Arc<dyn Ledger>,
    seed: u64,
) {
    let d = day(12);
    let bank = format!("cr-{seed}");
    let all = ids(&bank, 300);
    import_all(&*a, &bank, d, &all).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));

    // The packagers start once the first cancel is in: on a loaded machine the
    // canceller task could otherwise first run after every file was submitted, and
    // the race would test nothing.
    let started = Arc::new(tokio::sync::Notify::new());
    let canceller = {
        let (ledger, all, stop, started) = (b.clone(), all.clone(), stop.clone(), started.clone());
        tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut answers = Vec::new();
            for i in 0..120 {
                let id = all[rng.usize(0..all.len())].clone();
                let answer = ledger.cancel(&id, "race").await.expect("cancel");
                answers.push((id, answer));
                if i == 0 {
                    started.notify_one();
                }
                if rng.bool() {
                    tokio::task::yield_now().await;
                }
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            answers
        })
    };
    started.notified().await;
    let mut workers = Vec::new();
    for (n, ledger) in [a.clone(), b.clone()].into_iter().enumerate() {
        let (bank, stop) = (bank.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(seed * 1000 + n as u64);
            let mut round = 0;
            loop {
                let stopping = stop.load(std::sync::atomic::Ordering::SeqCst);
                let worked = package_and_submit(&*ledger, &bank, d, n, &mut round, &mut rng).await;
                if stopping && !worked {
                    break;
                }
            }
        }));
    }
    let answers = canceller.await.expect("canceller");
    for w in workers {
        w.await.expect("worker");
    }
    // Drain what the race left (a file refused after the last round).
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut round = 0;
    while package_and_submit(&*a, &bank, d, 9, &mut round, &mut rng).await {}

    let files = a
        .files(&FileFilter {
            bank: Some(bank.clone()),
            ..FileFilter::default()
        })
        .await
        .unwrap();
    let mut in_submitted: HashMap<String, usize> = HashMap::new();
    for f in &files {
        assert_ne!(f.state, FileState::Submitting, "seed {seed}: {f:?}");
        assert_ne!(f.state, FileState::Packaged, "seed {seed}: {f:?} left over");
        if f.state == FileState::Submitted {
            let detail = a.file(&f.file.file_id).await.unwrap().unwrap();
            assert!(
                detail.cancelled.is_empty(),
                "seed {seed}: submitted {} holds cancelled {:?}",
                f.file.file_id,
                detail.cancelled
            );
            for id in detail.entry_ids {
                *in_submitted.entry(id).or_default() += 1;
            }
        }
    }
    let mut cancelled = HashSet::new();
    for id in &all {
        let e = a.entry(id).await.unwrap().unwrap();
        match e.state {
            State::Cancelled => {
                cancelled.insert(id.clone());
                assert_eq!(
                    in_submitted.get(id),
                    None,
                    "seed {seed}: cancelled {id} submitted"
                );
            }
            State::Submitted => {
                assert_eq!(in_submitted.get(id), Some(&1), "seed {seed}: {id}");
            }
            other => panic!("seed {seed}: {id} ended {other}"),
        }
    }
    for (id, answer) in answers {
        match answer {
            CancelOutcome::Cancelled { .. } | CancelOutcome::AlreadyCancelled(_) => {
                assert!(
                    cancelled.contains(&id),
                    "seed {seed}: {id} cancelled but not"
                )
            }
            CancelOutcome::TooLate { .. } => {
                assert!(
                    !cancelled.contains(&id),
                    "seed {seed}: {id} too late but cancelled"
                )
            }
        }
    }
    assert!(!cancelled.is_empty(), "seed {seed}: some cancels landed");
}

/// One packager-submitter round: rebuild files holding cancellations, package a page
/// of eligible entries and submit it. Whether there was anything to do.
async fn package_and_submit(
    ledger: &dyn Ledger,
    bank: &str,
    d: NaiveDate,
    worker: usize,
    round: &mut usize,
    rng: &mut fastrand::Rng,
) -> bool {
    let mut worked = false;
    for f in ledger
        .unsubmitted_files_with_cancellations()
        .await
        .expect("list")
    {
        if f.file_id.starts_with(bank) {
            ledger.release_file(&f.file_id).await.expect("release");
            worked = true;
        }
    }
    let page = ledger
        .eligible(&EligibleQuery {
            bank: bank.into(),
            submission_date: d,
            same_day: false,
            after: None,
            limit: 1 + rng.u32(0..40),
        })
        .await
        .expect("eligible");
    if page.is_empty() {
        return worked;
    }
    *round += 1;
    let file = sample_file(&format!("{bank}-w{worker}-{round}"), bank, d);
    let ids = page.into_iter().map(|e| e.entry.entry_id).collect();
    if !matches!(
        ledger.package(file.clone(), ids).await.expect("package"),
        PackageOutcome::Packaged(_)
    ) {
        return true; // the other worker got some of them, or a cancel did
    }
    if rng.bool() {
        tokio::task::yield_now().await;
    }
    match ledger
        .begin_submission(&file.file_id, "sftp://bank")
        .await
        .expect("begin")
    {
        BeginOutcome::Started { .. } => {}
        BeginOutcome::Refused { .. } => {
            ledger.release_file(&file.file_id).await.expect("release");
            return true;
        }
        // The other worker's rebuild step released it (it held a cancelled entry).
        BeginOutcome::Released => return true,
        other => panic!("begin {}: {other:?}", file.file_id),
    }
    if rng.bool() {
        tokio::task::yield_now().await;
    }
    let out = ledger
        .mark_submitted(&file.file_id, submission(&file))
        .await
        .expect("submit");
    assert_eq!(out, SubmitOutcome::Submitted, "{}", file.file_id);
    true
}
