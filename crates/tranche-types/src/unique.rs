//! Unique jobs within a window, across runs.
//!
//! A [`JobSpec`] with a `unique_key` alone is unique within its run, forever: the same
//! key enqueued again into that run returns the first job, whatever became of it.
//!
//! With `unique_for` as well ([`JobSpec::unique_for`]), the key lives in a namespace of
//! its own, shared by every run of the backend (`unique_across_runs`), and only for a
//! while. An item whose identity (a job, a chain's first step, a group's callback)
//! carries key K and a window is a **duplicate** while the newest job enqueued under K
//! with a window
//!
//! - was enqueued less than *its own* window ago (the window runs from the enqueue that
//!   created the job; duplicates do not extend it, and the duplicate's own window
//!   length plays no part), and
//! - has not failed for good or been cancelled (a job revived by a run retry holds
//!   its key again, if it is still the newest and inside its window).
//!
//! A duplicate adds nothing and returns that job's ids (`Enqueued::existed` is true);
//! otherwise the item is enqueued and its job opens a new window from now. Checked and
//! recorded in the enqueue's own transaction, so two producers racing with the same key
//! get one job.
//!
//! What counts, and why: as with River's unique jobs by period (whose default states
//! leave out cancelled and discarded jobs) and BullMQ's deduplication with a TTL, a job
//! that waits, runs **or has already succeeded** inside the window keeps its key: a
//! periodic producer enqueueing "refresh report X" every minute with a one-hour window
//! gets one job an hour, whether or not that job has run yet. A job that failed for good
//! or was cancelled does not: its work was not done, so a new enqueue inside the window
//! is taken. (asynq also frees the key when the task succeeds, which would let such a
//! producer run the work once a minute; that is not what a window is asked for.)
//!
//! The two namespaces never meet: a windowed key does not match a run-scoped one, even
//! in the same run, and a run's key listings (`unique_jobs`, `unique_keys`) leave
//! windowed keys out. A job's record shows its key either way.

use std::time::Duration;

use crate::{BackendError, EnqueueItem, EnqueueRequest, JobSpec};

impl JobSpec {
    /// Longest window: a year and a day, far past any producer's period, and small
    /// enough that a window added to any clock time stays a valid time.
    pub const MAX_UNIQUE_FOR: Duration = Duration::from_secs(366 * 24 * 3600);

    /// `unique_for` comes with a `unique_key` and lies in 1 ms ..= [`MAX_UNIQUE_FOR`].
    ///
    /// [`MAX_UNIQUE_FOR`]: JobSpec::MAX_UNIQUE_FOR
    pub fn check_unique_for(&self) -> Result<(), BackendError> {
        let Some(window) = self.unique_for else {
            return Ok(());
        };
        if self.unique_key.is_none() {
            return Err(invalid("a unique_key with it", "no unique_key".into()));
        }
        if window < Duration::from_millis(1) {
            return Err(invalid("at least 1 ms", format!("{window:?}")));
        }
        if window > Self::MAX_UNIQUE_FOR {
            return Err(invalid(
                "at most 31622400000 ms (366 days)",
                format!("{} ms", window.as_millis()),
            ));
        }
        Ok(())
    }
}

fn invalid(expected: &str, got: String) -> BackendError {
    BackendError::Invalid {
        field: "unique_for",
        expected: expected.to_string(),
        got,
    }
}

impl EnqueueItem {
    /// The job an item is known by for a unique key: the job, a chain's first step, a
    /// group's callback (`None` for an empty chain).
    pub fn identity(&self) -> Option<&JobSpec> {
        match self {
            EnqueueItem::Job(spec) => Some(spec),
            EnqueueItem::Chain(steps) => steps.first(),
            EnqueueItem::Group { callback, .. } => Some(callback),
            EnqueueItem::Gate { job, .. } => Some(job),
        }
    }

    /// The spec's window, when the item's identity carries one (checked by
    /// [`EnqueueRequest::check_unique_windows`] first).
    pub fn unique_window(&self) -> Option<(&str, Duration)> {
        let spec = self.identity()?;
        Some((spec.unique_key.as_deref()?, spec.unique_for?))
    }
}

impl EnqueueRequest {
    /// Every window is well formed and on an item's identity: a window on a later
    /// chain step, a group member or the on-done job would be silently ignored, so it
    /// is refused instead. Backends call this before writing anything.
    pub fn check_unique_windows(&self) -> Result<(), BackendError> {
        if self
            .on_done
            .as_ref()
            .is_some_and(|s| s.unique_for.is_some())
        {
            return Err(invalid(
                "no window on the on-done job (it is enqueued once per finish)",
                "a window on on_done".into(),
            ));
        }
        for item in &self.items {
            let (identity, others): (&JobSpec, Box<dyn Iterator<Item = &JobSpec>>) = match item {
                EnqueueItem::Job(spec) => (spec, Box::new(std::iter::empty())),
                EnqueueItem::Chain(steps) => match steps.split_first() {
                    Some((head, rest)) => (head, Box::new(rest.iter())),
                    None => continue,
                },
                EnqueueItem::Group { members, callback } => (callback, Box::new(members.iter())),
                EnqueueItem::Gate { job, .. } => (job, Box::new(std::iter::empty())),
            };
            identity.check_unique_for()?;
            if others.into_iter().any(|s| s.unique_for.is_some()) {
                return Err(invalid(
                    "a window only on a job, a chain's first step or a group's callback",
                    "a window on a later chain step or a group member".into(),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RunName;

    fn req(items: Vec<EnqueueItem>) -> EnqueueRequest {
        EnqueueRequest {
            run: RunName::new("r").unwrap(),
            items,
            on_done: None,
        }
    }

    fn refused(r: &EnqueueRequest) -> String {
        r.check_unique_windows().unwrap_err().to_string()
    }

    #[test]
    fn windows_are_checked() {
        let hour = Duration::from_secs(3600);
        let ok = JobSpec::new("k", "null").unique_for("x", hour);
        assert!(req(vec![
            EnqueueItem::Job(ok.clone()),
            EnqueueItem::Chain(vec![ok.clone(), JobSpec::new("k", "null")]),
            EnqueueItem::Group {
                members: vec![JobSpec::new("k", "null")],
                callback: ok.clone()
            },
        ])
        .check_unique_windows()
        .is_ok());

        let mut keyless = JobSpec::new("k", "null");
        keyless.unique_for = Some(hour);
        assert!(refused(&req(vec![EnqueueItem::Job(keyless)])).contains("no unique_key"));
        let zero = JobSpec::new("k", "null").unique_for("x", Duration::ZERO);
        assert!(refused(&req(vec![EnqueueItem::Job(zero)])).contains("at least 1 ms"));
        let long = JobSpec::new("k", "null").unique_for("x", JobSpec::MAX_UNIQUE_FOR * 2);
        assert!(refused(&req(vec![EnqueueItem::Job(long)])).contains("63244800000 ms"));
        let later = EnqueueItem::Chain(vec![JobSpec::new("k", "null"), ok.clone()]);
        assert!(refused(&req(vec![later])).contains("later chain step"));
        let mut with_hook = req(vec![]);
        with_hook.on_done = Some(ok);
        assert!(refused(&with_hook).contains("on_done"));
    }
}
