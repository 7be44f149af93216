//! A fault-injecting ledger, as `tranche-backend-tests`' `Faulty` is for the engine's
//! backend (after asynq's test broker): it wraps a real ledger and fails the calls a
//! test scripts — refused before reaching the database, or applied with the reply lost
//! — so the payment day's retry and in-doubt paths are tested against real state. For
//! faults a real database cannot be made to give on cue; a database that really goes
//! away is tested with PostgreSQL itself (`tests/postgres.rs`).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::NaiveDate;
use tranche_ach::Entry;
use tranche_test_support::FaultScript;

use crate::{
    BeginOutcome, CancelOutcome, EligibleEntry, EligibleQuery, FileDetail, FileFilter, FileRecord,
    FileWithCancellations, Imported, Ledger, LedgerError, NewFile, PackageOutcome, ReadMark,
    RejectOutcome, ReleaseOutcome, ResetOutcome, SeqEntry, SeqKeys, Status, StoredEntry,
    Submission, SubmitOutcome,
};

/// The ledger calls a test can script faults for: the writes of a payment day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LedgerOp {
    /// [`Ledger::import`].
    Import,
    /// [`Ledger::package`], [`Ledger::package_seqs`] and [`Ledger::package_read`].
    Package,
    /// [`Ledger::begin_submission`].
    BeginSubmission,
    /// [`Ledger::mark_submitted`].
    MarkSubmitted,
    /// [`Ledger::reset_submission`].
    ResetSubmission,
    /// [`Ledger::release_file`].
    ReleaseFile,
}

/// What the next call of a [`LedgerOp`] does instead of (or after) reaching the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Fails without reaching the ledger (a refused connection).
    Refuse,
    /// Reaches the ledger and commits, then fails as if the reply was lost.
    LoseReply,
}

/// A [`Ledger`] that fails scripted calls of the one it wraps (see the module docs).
pub struct FaultyLedger {
    inner: Arc<dyn Ledger>,
    script: FaultScript<LedgerOp, Fault>,
}

impl FaultyLedger {
    /// Wrap `inner`; no faults until [`inject`](Self::inject)ed.
    pub fn new(inner: Arc<dyn Ledger>) -> Arc<Self> {
        Arc::new(FaultyLedger {
            inner,
            script: FaultScript::default(),
        })
    }

    /// The next calls of `op` meet these faults, in order; later ones go through.
    pub fn inject(&self, op: LedgerOp, faults: impl IntoIterator<Item = Fault>) {
        self.script.inject(op, faults);
    }

    /// Calls of `op` so far, failed ones included.
    pub fn calls(&self, op: LedgerOp) -> u64 {
        self.script.calls(op)
    }

    /// Faults scripted for `op` and not met yet.
    pub fn pending(&self, op: LedgerOp) -> usize {
        self.script.pending(op)
    }

    /// Runs `call` as `op`'s fault says.
    async fn faulted<T>(
        &self,
        op: LedgerOp,
        call: impl std::future::Future<Output = Result<T, LedgerError>>,
    ) -> Result<T, LedgerError> {
        let fault = self.script.next(op);
        if fault == Some(Fault::Refuse) {
            return Err(lost(op, "connection refused"));
        }
        let answer = call.await?;
        match fault {
            Some(Fault::LoseReply) => Err(lost(op, "connection reset after the request")),
            _ => Ok(answer),
        }
    }
}

fn lost(op: LedgerOp, why: &str) -> LedgerError {
    LedgerError::Unavailable {
        location: "faulty ledger".into(),
        source: format!("{op:?}: {why} (injected)").into(),
    }
}

#[async_trait]
impl Ledger for FaultyLedger {
    async fn import(&self, entries: Vec<Entry>) -> Result<Vec<Imported>, LedgerError> {
        self.faulted(LedgerOp::Import, self.inner.import(entries))
            .await
    }
    async fn reject(&self, entry_id: &str, reason: &str) -> Result<RejectOutcome, LedgerError> {
        self.inner.reject(entry_id, reason).await
    }
    async fn entry(&self, entry_id: &str) -> Result<Option<StoredEntry>, LedgerError> {
        self.inner.entry(entry_id).await
    }
    async fn cancel(&self, entry_id: &str, reason: &str) -> Result<CancelOutcome, LedgerError> {
        self.inner.cancel(entry_id, reason).await
    }
    async fn eligible(&self, query: &EligibleQuery) -> Result<Vec<EligibleEntry>, LedgerError> {
        self.inner.eligible(query).await
    }
    async fn eligible_seqs(&self, query: &EligibleQuery) -> Result<Vec<i64>, LedgerError> {
        self.inner.eligible_seqs(query).await
    }
    async fn entries_at(&self, seqs: &[i64]) -> Result<Vec<SeqEntry>, LedgerError> {
        self.inner.entries_at(seqs).await
    }
    async fn batch_keys_at(&self, seqs: &[i64]) -> Result<SeqKeys, LedgerError> {
        self.inner.batch_keys_at(seqs).await
    }
    async fn package(
        &self,
        file: NewFile,
        entry_ids: Vec<String>,
    ) -> Result<PackageOutcome, LedgerError> {
        self.faulted(LedgerOp::Package, self.inner.package(file, entry_ids))
            .await
    }
    async fn package_seqs(
        &self,
        file: NewFile,
        seqs: Vec<i64>,
    ) -> Result<PackageOutcome, LedgerError> {
        self.faulted(LedgerOp::Package, self.inner.package_seqs(file, seqs))
            .await
    }
    async fn entries_to_package(
        &self,
        seqs: &[i64],
    ) -> Result<(Vec<SeqEntry>, ReadMark), LedgerError> {
        self.inner.entries_to_package(seqs).await
    }
    async fn package_read(
        &self,
        file: NewFile,
        seqs: Vec<i64>,
        mark: &ReadMark,
    ) -> Result<PackageOutcome, LedgerError> {
        self.faulted(LedgerOp::Package, self.inner.package_read(file, seqs, mark))
            .await
    }
    async fn file(&self, file_id: &str) -> Result<Option<FileDetail>, LedgerError> {
        self.inner.file(file_id).await
    }
    async fn files(&self, filter: &FileFilter) -> Result<Vec<FileRecord>, LedgerError> {
        self.inner.files(filter).await
    }
    async fn begin_submission(
        &self,
        file_id: &str,
        destination: &str,
    ) -> Result<BeginOutcome, LedgerError> {
        self.faulted(
            LedgerOp::BeginSubmission,
            self.inner.begin_submission(file_id, destination),
        )
        .await
    }
    async fn mark_submitted(
        &self,
        file_id: &str,
        submission: Submission,
    ) -> Result<SubmitOutcome, LedgerError> {
        self.faulted(
            LedgerOp::MarkSubmitted,
            self.inner.mark_submitted(file_id, submission),
        )
        .await
    }
    async fn reset_submission(&self, file_id: &str) -> Result<ResetOutcome, LedgerError> {
        self.faulted(
            LedgerOp::ResetSubmission,
            self.inner.reset_submission(file_id),
        )
        .await
    }
    async fn unsubmitted_files_with_cancellations(
        &self,
    ) -> Result<Vec<FileWithCancellations>, LedgerError> {
        self.inner.unsubmitted_files_with_cancellations().await
    }
    async fn release_file(&self, file_id: &str) -> Result<ReleaseOutcome, LedgerError> {
        self.faulted(LedgerOp::ReleaseFile, self.inner.release_file(file_id))
            .await
    }
    async fn status(&self, date: NaiveDate) -> Result<Status, LedgerError> {
        self.inner.status(date).await
    }
}
