//! The Lua scripts, each with the shared library (`common.lua`) prepended, and the
//! arguments every one of them takes first.

use redis::{Script, ScriptInvocation};
use tranche_types::{JobState, LATENCY_BUCKETS_US};

use crate::RedisBackend;

/// The first lines of every script: the constants `common.lua` describes, written out
/// from their one definition in tranche-types.
fn prelude() -> String {
    format!("{}\n{}", states(), bounds())
}

/// The job states as Lua constants named after them (`RUNNING = 2`), holding the
/// numbers stored in job records and feed entries, and `STATE_NAME`: each state's name,
/// which is also its run counter's field.
fn states() -> String {
    let names: Vec<String> = JobState::ALL
        .iter()
        .map(|s| s.as_str().to_uppercase())
        .collect();
    let codes: Vec<String> = JobState::ALL.iter().map(|s| s.code().to_string()).collect();
    let state_names: Vec<String> = JobState::ALL
        .iter()
        .map(|s| format!("[{}] = '{}'", s.code(), s.as_str()))
        .collect();
    format!(
        "local {} = {}\nlocal STATE_NAME = {{ {} }}",
        names.join(", "),
        codes.join(", "),
        state_names.join(", ")
    )
}

/// The latency histograms' bucket bounds (µs) and the statistics' field names per
/// bucket.
fn bounds() -> String {
    let mut bounds: Vec<String> = LATENCY_BUCKETS_US.iter().map(|b| b.to_string()).collect();
    assert!(
        bounds.len() < 31,
        "the bucket search in common.lua handles 31 bounds"
    );
    bounds.resize(31, "math.huge".into());
    let fields = |letter: char| -> Vec<String> {
        (1..=LATENCY_BUCKETS_US.len() + 1)
            .map(|i| format!("'{letter}{i}'"))
            .collect()
    };
    format!(
        "local BOUNDS = {{ [0] = -1, {} }}\nlocal WAIT_F = {{ {} }}\nlocal RUN_F = {{ {} }}",
        bounds.join(", "),
        fields('w').join(", "),
        fields('r').join(", ")
    )
}

macro_rules! script {
    // A guard run before another script's body, in one script (`fire_schedule.lua`,
    // `commit.lua`).
    ($guard:literal + $file:literal) => {
        Script::new(&format!(
            "{}\n{}\n{}\n{}",
            prelude(),
            include_str!("scripts/common.lua"),
            include_str!(concat!("scripts/", $guard)),
            include_str!(concat!("scripts/", $file))
        ))
    };
    ($file:literal) => {
        Script::new(&format!(
            "{}\n{}\n{}",
            prelude(),
            include_str!("scripts/common.lua"),
            include_str!(concat!("scripts/", $file))
        ))
    };
}

pub struct Scripts {
    pub enqueue: Script,
    pub reserve: Script,
    pub complete: Script,
    pub heartbeat: Script,
    pub release: Script,
    pub cancel: Script,
    pub retry_run: Script,
    pub claim_locks: Script,
    pub release_locks: Script,
    pub record_effect: Script,
    pub claim_finish_hook: Script,
    pub read_jobs: Script,
    pub prune: Script,
    pub pause_queue: Script,
    pub resume_queue: Script,
    pub retry_job: Script,
    pub delete_job: Script,
    pub list_jobs: Script,
    pub put_schedule: Script,
    pub delete_schedule: Script,
    pub fire_schedule: Script,
    pub commit: Script,
    pub put_limit: Script,
    pub delete_limit: Script,
    pub read_limits: Script,
}

impl Scripts {
    pub fn new() -> Self {
        Scripts {
            enqueue: script!("enqueue.lua"),
            reserve: script!("limits.lua" + "reserve.lua"),
            complete: script!("complete.lua"),
            heartbeat: script!("heartbeat.lua"),
            release: script!("release.lua"),
            cancel: script!("cancel.lua"),
            retry_run: script!("retry_run.lua"),
            claim_locks: script!("claim_locks.lua"),
            release_locks: script!("release_locks.lua"),
            record_effect: script!("record_effect.lua"),
            claim_finish_hook: script!("claim_finish_hook.lua"),
            read_jobs: script!("read_jobs.lua"),
            prune: script!("prune.lua"),
            pause_queue: script!("pause_queue.lua"),
            resume_queue: script!("resume_queue.lua"),
            retry_job: script!("retry_job.lua"),
            delete_job: script!("delete_job.lua"),
            list_jobs: script!("list_jobs.lua"),
            put_schedule: script!("put_schedule.lua"),
            delete_schedule: script!("delete_schedule.lua"),
            fire_schedule: script!("fire_schedule.lua" + "enqueue.lua"),
            commit: script!("commit.lua" + "enqueue.lua"),
            put_limit: script!("limits.lua" + "put_limit.lua"),
            delete_limit: script!("limits.lua" + "delete_limit.lua"),
            read_limits: script!("limits.lua" + "read_limits.lua"),
        }
    }
}

impl RedisBackend {
    /// An invocation with the common arguments filled in: the prefix as the one key
    /// (it routes the call to the prefix's slot), now from the clock, the retention and
    /// the feed's length bound.
    pub(crate) fn invoke<'a>(&self, script: &'a Script) -> ScriptInvocation<'a> {
        let mut inv = script.prepare_invoke();
        inv.key(&self.keys.prefix)
            .arg(self.options.clock.now().micros())
            .arg(self.options.retention.as_secs().max(1))
            .arg(self.options.feed_max_len);
        inv
    }
}

#[cfg(test)]
mod tests {
    use tranche_types::JobState;

    #[test]
    fn the_prelude_names_every_job_state() {
        assert_eq!(
            super::states(),
            "local PENDING, AVAILABLE, RUNNING, SUCCEEDED, FAILED, CANCELLED = 0, 1, 2, 3, 4, 5\n\
             local STATE_NAME = { [0] = 'pending', [1] = 'available', [2] = 'running', \
             [3] = 'succeeded', [4] = 'failed', [5] = 'cancelled' }"
        );
        // The scripts take `state < SUCCEEDED` for a job that has not ended.
        for s in JobState::ALL {
            assert_eq!(s.is_terminal(), s.code() >= JobState::Succeeded.code());
        }
    }

    #[test]
    fn the_prelude_writes_out_every_bucket() {
        let prelude = super::bounds();
        assert!(prelude.starts_with("local BOUNDS = { [0] = -1, 500, 1000, 2500,"));
        assert!(prelude.contains("1800000000, math.huge,"));
        assert_eq!(prelude.matches("math.huge").count(), 31 - 18);
        assert!(prelude.contains("'w1', ") && prelude.contains("'w19' }"));
        assert!(prelude.contains("'r19' }") && !prelude.contains("'r20'"));
    }
}
