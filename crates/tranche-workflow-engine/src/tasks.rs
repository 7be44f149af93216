//! Workers' side: polling steps and updating them, as Conductor's `/api/tasks` does.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tranche_types::{
    Commit, CommitAck, Completion, JobId, JobState, LeaseRef, RecordWrite, ReserveRequest,
    ReservedJob, Resolution, Timestamp,
};
use tranche_workflow_def::TaskDef;

use crate::engine::{Engine, StepEnd, TIMED_OUT};
use crate::state::{parse_task_id, task_id, Header, StepArgs};
use crate::timeouts;
use crate::WorkflowError;

/// The lease of a step of a task without a definition (Conductor's default response
/// timeout).
const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(3_600);

/// A step leased to a worker.
#[derive(Clone, Debug)]
pub struct PolledTask {
    /// The job leased.
    pub job: ReservedJob,
    /// Its arguments, when it is a workflow's step.
    pub args: Option<StepArgs>,
    /// The worker that polled it.
    pub worker_id: Option<String>,
    /// Its lease, in seconds.
    pub response_timeout_seconds: u64,
}

impl PolledTask {
    /// Conductor's `Task` JSON, as a poll answers it.
    pub fn to_conductor(&self) -> Value {
        let job = &self.job;
        let args = self.args.as_ref();
        json!({
            "taskId": task_id(job.id, job.attempt),
            "taskType": job.kind,
            "taskDefName": job.kind,
            "referenceTaskName": args.map_or("", |a| a.reference.as_str()),
            "workflowInstanceId": args.map_or("", |a| a.wf.as_str()),
            "workflowType": args.map_or("", |a| a.wf_type.as_str()),
            "status": "IN_PROGRESS",
            "inputData": args.map_or_else(|| serde_json::from_str(&job.args).unwrap_or(Value::Null), |a| a.input.clone()),
            "retryCount": job.attempt - 1,
            "pollCount": job.attempt,
            "seq": job.id.0,
            "startTime": job.lease_until.0 / 1_000 - (self.response_timeout_seconds as i64) * 1_000,
            "scheduledTime": job.available_at.0 / 1_000,
            "responseTimeoutSeconds": self.response_timeout_seconds,
            "workerId": self.worker_id,
            "callbackAfterSeconds": 0,
        })
    }
}

/// What a worker says of a step, as Conductor's `TaskResult.status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    /// Still working: with `callbackAfterSeconds`, give the step back until then.
    InProgress,
    /// Done, with its output.
    Completed,
    /// Failed: retried per its task definition, then the workflow decides.
    Failed,
    /// Failed for good, whatever retries are left.
    FailedWithTerminalError,
}

impl TaskStatus {
    /// The status Conductor spells `name`.
    pub fn parse(name: &str) -> Option<TaskStatus> {
        Some(match name {
            "IN_PROGRESS" => TaskStatus::InProgress,
            "COMPLETED" => TaskStatus::Completed,
            "FAILED" => TaskStatus::Failed,
            "FAILED_WITH_TERMINAL_ERROR" => TaskStatus::FailedWithTerminalError,
            _ => return None,
        })
    }
}

/// A worker's update of one step (Conductor's `TaskResult`).
#[derive(Clone, Debug)]
pub struct TaskUpdate {
    /// The task id the poll gave.
    pub task_id: String,
    /// What became of it.
    pub status: TaskStatus,
    /// Its output.
    pub output: Map<String, Value>,
    /// Why it failed.
    pub reason: Option<String>,
    /// `IN_PROGRESS`: poll it again after this many seconds.
    pub callback_after_seconds: u64,
}

async fn task_def(
    engine: &Engine,
    name: &str,
) -> Result<Option<std::sync::Arc<TaskDef>>, WorkflowError> {
    Ok(engine.defs.task(name).await?)
}

pub async fn poll(
    engine: &Engine,
    task_type: &str,
    count: usize,
    wait: Duration,
    worker_id: Option<&str>,
) -> Result<Vec<PolledTask>, WorkflowError> {
    let lease = task_def(engine, task_type)
        .await?
        .map_or(DEFAULT_RESPONSE_TIMEOUT, |d| {
            Duration::from_secs(d.response_timeout_seconds.max(1))
        });
    let jobs = engine
        .client
        .worker_protocol()
        .reserve(ReserveRequest {
            queue: task_type.to_string(),
            max: count.clamp(1, 1_000),
            lease,
            wait,
        })
        .await?;
    let tasks: Vec<PolledTask> = jobs
        .into_iter()
        .map(|job| PolledTask {
            args: serde_json::from_str(&job.args).ok(),
            job,
            worker_id: worker_id.map(str::to_string),
            response_timeout_seconds: lease.as_secs(),
        })
        .collect();
    let mut polled = engine.polled.lock().unwrap();
    if polled.len() >= 200_000 {
        polled.clear();
    }
    for t in &tasks {
        if let Some(args) = &t.args {
            polled.insert(t.job.id, (Arc::new(args.clone()), t.job.max_attempts));
        }
    }
    Ok(tasks)
}

pub async fn update(engine: &Engine, update: TaskUpdate) -> Result<(), WorkflowError> {
    let (job_id, attempt) = parse_task_id(&update.task_id).ok_or_else(|| {
        WorkflowError::Invalid(format!(
            "taskId: expected an id a poll gave (<job>-<attempt>), got {:?}",
            update.task_id
        ))
    })?;
    let known = engine.polled.lock().unwrap().remove(&job_id);
    let (args, max_attempts, kind) = match known {
        // Leased by this process's poll: no need to read the job.
        Some((args, max_attempts)) => {
            let kind = args.name.clone();
            (Some((*args).clone()), max_attempts, kind)
        }
        None => {
            let job = engine
                .client
                .job(job_id)
                .await?
                .ok_or_else(|| WorkflowError::NotFound(format!("task {}", update.task_id)))?;
            let args: Option<StepArgs> = serde_json::from_str(&job.args).ok();
            if job.state == JobState::Cancelled {
                // Its workflow was terminated (or the step cancelled): the worker's
                // answer is no longer wanted, and an error would only make it retry.
                return Ok(());
            }
            if job.state == JobState::Pending {
                if let Some(args) = args.as_ref().filter(|a| a.kind == "WAIT") {
                    return complete_gate(engine, job_id, args, update.status, update.output).await;
                }
            }
            (args, job.max_attempts, job.kind)
        }
    };
    let step = UpdatedStep {
        lease: LeaseRef {
            job: job_id,
            attempt,
        },
        args,
        max_attempts,
        kind,
    };
    let result = apply_update(engine, &update, step).await;
    match result {
        // A step cancelled since the poll (its workflow terminated) is not the
        // worker's error.
        Err(WorkflowError::Conflict(_)) => {
            let state = engine.client.job(job_id).await?.map(|j| j.state);
            if state == Some(JobState::Cancelled) {
                Ok(())
            } else {
                result
            }
        }
        other => other,
    }
}

/// The step a worker's update is about: the attempt it names, and what its poll (or a
/// read of its job) said of it.
struct UpdatedStep {
    lease: LeaseRef,
    args: Option<StepArgs>,
    max_attempts: u32,
    /// Its task (the queue it was polled from).
    kind: String,
}

async fn apply_update(
    engine: &Engine,
    update: &TaskUpdate,
    step: UpdatedStep,
) -> Result<(), WorkflowError> {
    let UpdatedStep {
        lease,
        args,
        max_attempts,
        kind,
    } = step;
    let attempt = lease.attempt;
    let kind = kind.as_str();
    let now = engine.client.clock().now();
    let stale = || {
        WorkflowError::Conflict(format!(
            "task {}: attempt {attempt} no longer holds the step (its lease expired, or the step was cancelled or already updated)",
            update.task_id
        ))
    };
    let output = Value::Object(update.output.clone());
    let reason = update
        .reason
        .clone()
        .unwrap_or_else(|| "the worker reported FAILED".into());
    let Some(args) = args else {
        return Err(WorkflowError::Invalid(format!(
            "task {}: its job is not a workflow's step",
            update.task_id
        )));
    };
    let complete_alone = |resolution: Resolution| async move {
        let acks = engine
            .client
            .worker_protocol()
            .complete(vec![Completion { lease, resolution }])
            .await?;
        match acks.first() {
            Some(tranche_types::CompletionAck::Applied) => Ok(()),
            _ => Err(stale()),
        }
    };
    match update.status {
        TaskStatus::InProgress => {
            if update.callback_after_seconds > 0 {
                let at = Timestamp(now.0 + update.callback_after_seconds as i64 * 1_000_000);
                complete_alone(Resolution::Snooze { at }).await
            } else {
                let def = task_def(engine, kind).await?;
                if let Some(def) = &def {
                    // Keeping a step with updates cannot keep it past its
                    // `timeoutSeconds`.
                    if let Some(reason) = timeouts::past_timeout(engine, def, lease.job).await? {
                        return timed_out(engine, def, lease, args, max_attempts, reason).await;
                    }
                }
                let lease_for = def.map_or(DEFAULT_RESPONSE_TIMEOUT, |d| {
                    Duration::from_secs(d.response_timeout_seconds.max(1))
                });
                let lost = engine
                    .client
                    .worker_protocol()
                    .heartbeat(vec![lease], lease_for)
                    .await?;
                if lost.is_empty() {
                    Ok(())
                } else {
                    Err(stale())
                }
            }
        }
        TaskStatus::Failed if attempt < max_attempts => {
            let def = task_def(engine, kind).await?;
            let delay = def
                .as_deref()
                .map_or(Duration::ZERO, |d| retry_delay(d, attempt));
            let at = Timestamp(now.0 + delay.as_micros() as i64);
            complete_alone(Resolution::Retry { error: reason, at }).await
        }
        TaskStatus::Failed | TaskStatus::FailedWithTerminalError => {
            let ack = fail_for_good(engine, args, lease, reason, false).await?;
            applied(ack).ok_or_else(stale)
        }
        TaskStatus::Completed => {
            let ack = engine
                .step_ended(StepEnd {
                    args,
                    completion: Some(crate::engine::succeeded(lease, &output)),
                    outcome: Ok(output),
                    timed_out: false,
                })
                .await?;
            applied(ack).ok_or_else(stale)
        }
    }
}

/// A step past its `timeoutSeconds`, as its policy says: `ALERT_ONLY` logs it and lets
/// it go on; `RETRY` fails the attempt (retried while attempts are left); the last
/// attempt, or `TIME_OUT_WF`, ends the step timed out, and with it the workflow unless
/// the step is optional.
async fn timed_out(
    engine: &Engine,
    def: &TaskDef,
    lease: LeaseRef,
    args: StepArgs,
    max_attempts: u32,
    reason: String,
) -> Result<(), WorkflowError> {
    let stale = || {
        WorkflowError::Conflict(format!(
            "task {}: the step timed out and its attempt no longer holds it",
            task_id(lease.job, lease.attempt)
        ))
    };
    match timeouts::policy_of(def) {
        timeouts::Policy::AlertOnly => {
            tracing::warn!(workflow = %args.wf, step = %args.reference, "{reason}");
            let lease_for = Duration::from_secs(def.response_timeout_seconds.max(1));
            let lost = engine
                .client
                .worker_protocol()
                .heartbeat(vec![lease], lease_for)
                .await?;
            return if lost.is_empty() {
                Ok(())
            } else {
                Err(stale())
            };
        }
        timeouts::Policy::Retry if lease.attempt < max_attempts => {
            let at = Timestamp(
                engine.client.clock().now().0 + retry_delay(def, lease.attempt).as_micros() as i64,
            );
            let acks = engine
                .client
                .worker_protocol()
                .complete(vec![Completion {
                    lease,
                    resolution: Resolution::Retry { error: reason, at },
                }])
                .await?;
            return match acks.first() {
                Some(tranche_types::CompletionAck::Applied) => Ok(()),
                _ => Err(stale()),
            };
        }
        _ => {}
    }
    let ack = fail_for_good(engine, args, lease, format!("{TIMED_OUT}{reason}"), true).await?;
    applied(ack).ok_or_else(stale)
}

/// The attempt under `lease` fails the step for good, for `reason` (a timeout under
/// `TIME_OUT_WF` when `timed_out`), and its end is decided.
async fn fail_for_good(
    engine: &Engine,
    args: StepArgs,
    lease: LeaseRef,
    reason: String,
    timed_out: bool,
) -> Result<CommitAck, WorkflowError> {
    engine
        .step_ended(StepEnd {
            args,
            completion: Some(Completion {
                lease,
                resolution: Resolution::Failed {
                    error: reason.clone(),
                },
            }),
            outcome: Err(reason),
            timed_out,
        })
        .await
}

fn applied(ack: CommitAck) -> Option<()> {
    (ack != CommitAck::Stale).then_some(())
}

/// The delay before retry `attempt + 1`, as the task definition's retry logic says.
fn retry_delay(def: &TaskDef, attempt: u32) -> Duration {
    let base = def.retry_delay_seconds;
    let secs = match def.retry_logic.as_str() {
        "EXPONENTIAL_BACKOFF" => base.saturating_mul(1u64 << attempt.saturating_sub(1).min(20)),
        "LINEAR_BACKOFF" => {
            let scale = def
                .extra
                .get("backoffScaleFactor")
                .and_then(Value::as_u64)
                .unwrap_or(1);
            base.saturating_mul(scale)
                .saturating_mul(u64::from(attempt))
        }
        _ => base,
    };
    Duration::from_secs(secs)
}

/// The record a `WAIT` completed from outside leaves for the system step that ends it.
pub fn wait_record(job: JobId) -> String {
    format!("wait/{}", job.0)
}

/// A `WAIT` step completed from outside: its outcome kept, and its gate opened, in one
/// commit; the engine's system step ends it.
async fn complete_gate(
    engine: &Engine,
    job: JobId,
    args: &StepArgs,
    status: TaskStatus,
    output: Map<String, Value>,
) -> Result<(), WorkflowError> {
    let outcome = match status {
        TaskStatus::Completed => json!({ "output": output }),
        TaskStatus::Failed | TaskStatus::FailedWithTerminalError => {
            json!({ "failed": output.get("reason").cloned().unwrap_or_else(|| "failed from outside".into()) })
        }
        TaskStatus::InProgress => return Ok(()),
    };
    let ack = engine
        .client
        .worker_protocol()
        .commit(Commit {
            records: vec![
                // Read once, by the system step that ends the wait.
                RecordWrite::new(wait_record(job), 0, outcome.to_string()).ended(true),
            ],
            arrive: vec![job],
            ..Commit::default()
        })
        .await;
    match ack {
        Ok(_) => Ok(()),
        Err(tranche_types::BackendError::Conflict { .. }) => Err(WorkflowError::Conflict(format!(
            "step {} of workflow {} was already completed",
            args.reference, args.wf
        ))),
        Err(e) => Err(e.into()),
    }
}

pub async fn complete_waiting(
    engine: &Engine,
    workflow: &str,
    reference: &str,
    status: TaskStatus,
    output: Map<String, Value>,
) -> Result<(), WorkflowError> {
    let (header, _) = engine.header(workflow).await?;
    let prepared = engine
        .defs
        .workflow(&header.name, Some(header.version))
        .await?;
    let key = prepared.step_key(&header, reference);
    let job = engine
        .client
        .unique_jobs(&Header::run_of(&header.root), &[key])
        .await?
        .remove(0)
        .ok_or_else(|| {
            WorkflowError::NotFound(format!("step {reference:?} of workflow {workflow}"))
        })?;
    let record = engine.client.job(job).await?.ok_or_else(|| {
        WorkflowError::NotFound(format!("step {reference:?} of workflow {workflow}"))
    })?;
    let args: StepArgs = serde_json::from_str(&record.args)
        .map_err(|e| WorkflowError::Invalid(format!("step {reference:?}: {e}")))?;
    if record.state != JobState::Pending || args.kind != "WAIT" {
        return Err(WorkflowError::Conflict(format!(
            "step {reference:?} of workflow {workflow} is a {} step {}: only a WAIT not yet ended is completed by reference name",
            args.kind,
            crate::engine::conductor_status(record.state)
        )));
    }
    complete_gate(engine, job, &args, status, output).await
}
