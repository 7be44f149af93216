//! Timeouts: Conductor's `timeoutSeconds`, `responseTimeoutSeconds`,
//! `pollTimeoutSeconds` and `timeoutPolicy`, on the engine's leases, retries and
//! system steps rather than a sweeper beside them.
//!
//! - A step's `responseTimeoutSeconds` is its lease: a worker that stops answering
//!   loses the step when the lease runs out, and the engine's retry runs it again.
//! - A step's `timeoutSeconds` bounds an attempt from its poll. Without heartbeats an
//!   attempt cannot outlive it (Conductor keeps the response timeout within it, and so
//!   does the definition check); a worker that keeps its step with `IN_PROGRESS`
//!   updates is timed out by the first update past it.
//! - `pollTimeoutSeconds` and a workflow's own `timeoutSeconds` need a clock: a watch,
//!   a system step not runnable before the deadline, enqueued in the commit that
//!   schedules the step or starts the workflow — only for definitions that set them, so
//!   a workflow without them pays nothing.
//!
//! What a timeout does is the policy's: `RETRY` fails the attempt (the engine's retry
//! runs it again while attempts are left), `TIME_OUT_WF` ends the workflow `TIMED_OUT`,
//! `ALERT_ONLY` only says so in the log. A step whose attempts are spent, or that
//! `TIME_OUT_WF` ends, ends its workflow `TIMED_OUT` unless it is optional.

use serde_json::json;
use tranche_types::{
    CancelTarget, Completion, EnqueueItem, JobSpec, JobState, ReservedJob, Resolution, Timestamp,
};
use tranche_workflow_def::{TaskDef, WorkflowDef};

use crate::engine::{Engine, StepEnd, SYSTEM_QUEUE, TIMED_OUT};
use crate::state::{Header, StepArgs, WorkflowStatus};
use crate::WorkflowError;

/// The kind of a workflow's timeout watch.
pub const WORKFLOW_WATCH: &str = "WORKFLOW_TIMEOUT";
/// The kind of a step's poll-timeout watch.
pub const POLL_WATCH: &str = "POLL_TIMEOUT";

/// Whether a system step of this kind is a timeout watch (not a step of the
/// workflow's: views leave it out).
pub fn is_watch(kind: &str) -> bool {
    matches!(kind, WORKFLOW_WATCH | POLL_WATCH)
}

/// What a timeout policy does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Fail the attempt; the retry runs it again while attempts are left.
    Retry,
    /// End the workflow `TIMED_OUT`.
    TimeOutWorkflow,
    /// Only log it.
    AlertOnly,
}

impl Policy {
    fn parse(name: &str) -> Policy {
        match name {
            "TIME_OUT_WF" => Policy::TimeOutWorkflow,
            "ALERT_ONLY" => Policy::AlertOnly,
            _ => Policy::Retry,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Policy::Retry => "RETRY",
            Policy::TimeOutWorkflow => "TIME_OUT_WF",
            Policy::AlertOnly => "ALERT_ONLY",
        }
    }
}

/// The watch of a workflow of `def` whose clock starts at `since` (ms): `None` when
/// the definition sets no `timeoutSeconds`. Keyed with `since`, so a retry or a rerun
/// arms a watch of its own while an older one still waits.
pub fn workflow_watch(def: &WorkflowDef, header: &Header, since: i64) -> Option<EnqueueItem> {
    if def.timeout_seconds == 0 {
        return None;
    }
    let deadline = since.saturating_add(def.timeout_seconds.saturating_mul(1_000) as i64);
    let args = StepArgs {
        wf: header.id.clone(),
        wf_type: header.name.clone(),
        reference: "__timeout".into(),
        kind: WORKFLOW_WATCH.into(),
        name: WORKFLOW_WATCH.into(),
        input: json!({
            "timeoutSeconds": def.timeout_seconds,
            // Conductor's default for a workflow.
            "timeoutPolicy": def.timeout_policy.as_deref().unwrap_or("ALERT_ONLY"),
        }),
        fork: None,
        optional: false,
        child: None,
    };
    let key = format!("{}__timeout@{since}", header.generation_prefix());
    Some(EnqueueItem::Job(watch(args, key, deadline)))
}

/// The poll-timeout watch of the step under `key`: `None` unless its task sets
/// `pollTimeoutSeconds`.
pub fn poll_watch(def: &TaskDef, step: &StepArgs, key: &str, now_ms: i64) -> Option<EnqueueItem> {
    if def.poll_timeout_seconds == 0 {
        return None;
    }
    let deadline = now_ms.saturating_add(def.poll_timeout_seconds.saturating_mul(1_000) as i64);
    let args = StepArgs {
        kind: POLL_WATCH.into(),
        input: json!({
            "step": key,
            "pollTimeoutSeconds": def.poll_timeout_seconds,
            "timeoutPolicy": def.timeout_policy,
            "retryCount": def.retry_count,
        }),
        ..step.clone()
    };
    Some(EnqueueItem::Job(watch(
        args,
        format!("{key}__poll"),
        deadline,
    )))
}

fn watch(args: StepArgs, key: String, deadline_ms: i64) -> JobSpec {
    JobSpec::new(
        args.kind.clone(),
        serde_json::to_string(&args).expect("serialises"),
    )
    .queue(SYSTEM_QUEUE)
    .max_attempts(u32::MAX)
    .unique_key(key)
    .not_before(Timestamp(deadline_ms.saturating_mul(1_000)))
}

/// A watch came due: do what it watches for, and end (or re-arm) it.
pub async fn run_watch(
    engine: &Engine,
    job: &ReservedJob,
    args: &StepArgs,
) -> Result<(), WorkflowError> {
    let done = Completion {
        lease: job.lease(),
        resolution: Resolution::Succeeded {
            result: "null".into(),
        },
    };
    match args.kind.as_str() {
        WORKFLOW_WATCH => workflow_due(engine, args, done).await,
        _ => poll_due(engine, job, args, done).await,
    }
}

async fn workflow_due(
    engine: &Engine,
    args: &StepArgs,
    done: Completion,
) -> Result<(), WorkflowError> {
    let (header, _) = engine.header(&args.wf).await?;
    let timeout = args.input["timeoutSeconds"].as_u64().unwrap_or(0);
    let since = header.timed_from.unwrap_or(header.start_time);
    let elapsed = engine.now_ms() - since;
    let live = !header.status.is_terminal();
    if !live || elapsed < (timeout as i64) * 1_000 {
        // Ended, or retried since it was armed (a younger watch waits for that).
        engine.client.worker_protocol().complete(vec![done]).await?;
        return Ok(());
    }
    let policy = Policy::parse(args.input["timeoutPolicy"].as_str().unwrap_or_default());
    let reason = format!(
        "Workflow timed out after {} seconds. Timeout configured as {timeout} seconds. \
         Timeout policy configured to {}",
        elapsed / 1_000,
        policy.name()
    );
    if policy != Policy::TimeOutWorkflow {
        tracing::warn!(workflow = %args.wf, workflow_type = %args.wf_type, "{reason}");
        engine.client.worker_protocol().complete(vec![done]).await?;
        return Ok(());
    }
    match engine
        .end_from_outside(
            &args.wf,
            WorkflowStatus::TimedOut,
            None,
            format!("{TIMED_OUT}{reason}"),
            Some(done.clone()),
        )
        .await
    {
        // It ended meanwhile: nothing to time out.
        Err(WorkflowError::Conflict(_)) => {
            engine.client.worker_protocol().complete(vec![done]).await?;
            Ok(())
        }
        other => other.map(drop),
    }
}

async fn poll_due(
    engine: &Engine,
    watch: &ReservedJob,
    args: &StepArgs,
    done: Completion,
) -> Result<(), WorkflowError> {
    let key = args.input["step"].as_str().unwrap_or_default().to_string();
    let poll_timeout = args.input["pollTimeoutSeconds"].as_u64().unwrap_or(0);
    let (header, _) = engine.header(&args.wf).await?;
    let found = engine
        .client
        .unique_jobs(&header.run(), std::slice::from_ref(&key))
        .await?;
    let step = match found.first().copied().flatten() {
        Some(id) => engine.client.job(id).await?,
        None => None,
    };
    let waiting = step
        .as_ref()
        .is_some_and(|j| j.state == JobState::Available && j.attempt == 0);
    let Some(step) = step.filter(|_| waiting && !header.status.is_terminal()) else {
        // Polled in time, or nothing left to watch.
        engine.client.worker_protocol().complete(vec![done]).await?;
        return Ok(());
    };
    let policy = Policy::parse(args.input["timeoutPolicy"].as_str().unwrap_or_default());
    let reason = format!(
        "Task poll timed out after {poll_timeout} seconds (nobody polled {}). Timeout \
         policy configured to {}",
        args.name,
        policy.name()
    );
    let retries = args.input["retryCount"].as_u64().unwrap_or(0);
    let again = Timestamp(engine.client.clock().now().0 + (poll_timeout as i64) * 1_000_000);
    match policy {
        Policy::AlertOnly => {
            tracing::warn!(workflow = %args.wf, step = %args.reference, "{reason}");
            engine.client.worker_protocol().complete(vec![done]).await?;
            return Ok(());
        }
        // A poll timeout is retried as Conductor retries it: the step waits for
        // another window, up to its retry count.
        Policy::Retry if u64::from(watch.attempt) <= retries => {
            engine
                .client
                .worker_protocol()
                .complete(vec![Completion {
                    lease: watch.lease(),
                    resolution: Resolution::Retry {
                        error: reason,
                        at: again,
                    },
                }])
                .await?;
            return Ok(());
        }
        _ => {}
    }
    // Timed out for good: the step is withdrawn (a late poll finds nothing) and its
    // end decided as a timed-out failure.
    engine
        .client
        .cancel(CancelTarget::Job(step.id), "poll timed out")
        .await?;
    let Ok(step_args) = serde_json::from_str::<StepArgs>(&step.args) else {
        engine.client.worker_protocol().complete(vec![done]).await?;
        return Ok(());
    };
    engine
        .step_ended(StepEnd {
            args: step_args,
            completion: Some(done),
            outcome: Err(format!("{TIMED_OUT}{reason}")),
            timed_out: true,
        })
        .await
        .map(drop)
}

/// What an `IN_PROGRESS` update of attempt `attempt` of a step of task `def` meets:
/// `Some(reason)` when the attempt is past its `timeoutSeconds` (the policy is the
/// caller's to apply), read from when the attempt was polled.
pub async fn past_timeout(
    engine: &Engine,
    def: &TaskDef,
    job: tranche_types::JobId,
) -> Result<Option<String>, WorkflowError> {
    if def.timeout_seconds == 0 {
        return Ok(None);
    }
    let Some(record) = engine.client.job(job).await? else {
        return Ok(None);
    };
    let Some(started) = record.started_at else {
        return Ok(None);
    };
    let elapsed = (engine.client.clock().now().0 - started.0) / 1_000_000;
    if elapsed < def.timeout_seconds as i64 {
        return Ok(None);
    }
    Ok(Some(format!(
        "Task timed out after {elapsed} seconds. Timeout configured as {} seconds. \
         Timeout policy configured to {}",
        def.timeout_seconds, def.timeout_policy
    )))
}

/// The policy `def` names.
pub fn policy_of(def: &TaskDef) -> Policy {
    Policy::parse(&def.timeout_policy)
}
