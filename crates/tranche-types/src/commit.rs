//! Commits: a step's completion together with what it makes ready, all or nothing.
//!
//! A workflow (see `docs/workflows.md`) decides, when a step ends, which steps it makes
//! ready and how the workflow's state changes. Those changes must commit with the
//! completion that caused them, or a crash between the two loses a step or runs one
//! twice. A [`Commit`] carries them to the backend as one transaction.

use serde::{Deserialize, Serialize};

use crate::{Completion, EnqueueRequest, Enqueued, JobId};

/// A small document kept by the backend under a key, with a version that moves by one
/// at every write: a workflow's state (its header, its variables).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// 1 after the first write, one more at each.
    pub version: u64,
    /// The document, as the writer gave it (JSON text for workflows).
    pub value: String,
}

/// A write of a record, applied only if the record is still at the version its writer
/// read (optimistic concurrency): two deciders that read the same state cannot both
/// write it, the second is refused with [`BackendError::Conflict`](crate::BackendError)
/// and decides again on what the first wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordWrite {
    /// The record's key (at most [`RecordWrite::MAX_KEY_LEN`] bytes).
    pub key: String,
    /// The version read; 0 when the record was absent (the write creates it).
    pub expect: u64,
    /// The new document.
    pub value: String,
    /// What the record is about has ended (a workflow that completed, a step's log):
    /// the backend forgets the record after its retention, as it forgets finished
    /// runs, unless it is written again first without this. Otherwise it is kept until
    /// written so.
    #[serde(default)]
    pub ended: bool,
}

impl RecordWrite {
    /// Longest record key, in bytes.
    pub const MAX_KEY_LEN: usize = 512;

    /// A write of `value` over version `expect` of `key`, kept until written ended.
    pub fn new(key: impl Into<String>, expect: u64, value: impl Into<String>) -> Self {
        RecordWrite {
            key: key.into(),
            expect,
            value: value.into(),
            ended: false,
        }
    }

    /// The same write, its record forgotten after the backend's retention.
    pub fn ended(mut self, ended: bool) -> Self {
        self.ended = ended;
        self
    }
}

/// Changes applied in one transaction, or not at all.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    /// An attempt's completion. When its lease is stale nothing of the commit is
    /// applied ([`CommitAck::Stale`]).
    pub completion: Option<Completion>,
    /// Records written, each checked against the version its writer read.
    pub records: Vec<RecordWrite>,
    /// Jobs enqueued, as [`Backend::enqueue`] would.
    pub enqueue: Option<EnqueueRequest>,
    /// Gates (see [`EnqueueItem::Gate`](crate::EnqueueItem::Gate)) this commit arrives
    /// at, once each; an arrival at a gate already released, ended or unknown changes
    /// nothing.
    pub arrive: Vec<JobId>,
}

/// The backend's answer to a [`Commit`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommitAck {
    /// Everything was applied; what the enqueue made, one per item.
    Applied(Vec<Enqueued>),
    /// The completion's attempt no longer holds its job: nothing was applied.
    Stale,
}
