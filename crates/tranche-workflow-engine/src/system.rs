//! The steps the engine runs itself: a join opened by its last branch, a
//! sub-workflow's step opened by its child's end, a wait that is over, a script. They
//! are jobs on [`SYSTEM_QUEUE`], leased and retried like any other, so a process killed
//! while running one leaves it to another.
//!
//! It also ends the steps whose last attempt's lease expired (a worker killed, or one
//! that never answered): the backend fails such a step by itself, outside any
//! decision, so the change feed is followed for them and their workflow decided.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tranche_types::{
    Commit, Completion, JobState, RecordWrite, ReserveRequest, ReservedJob, Resolution,
};
use tranche_workflow::Graph;
use tranche_workflow_expr::{inline, json_jq_transform, Limits};

use crate::engine::{succeeded, Engine, StepEnd, SYSTEM_QUEUE, TIMED_OUT};
use crate::state::{StepArgs, WorkflowStatus};
use crate::tasks::wait_record;
use crate::timeouts;
use crate::WorkflowError;

/// Most system steps run at once by one process.
const BATCH: usize = 64;

pub async fn run(engine: Arc<Engine>, shutdown: CancellationToken) {
    let feed = tokio::spawn(follow_expiries(engine.clone(), shutdown.clone()));
    let mut running = JoinSet::new();
    while !shutdown.is_cancelled() {
        let reserve = engine.client.worker_protocol().reserve(ReserveRequest {
            queue: SYSTEM_QUEUE.into(),
            max: BATCH,
            lease: Duration::from_secs(60),
            wait: Duration::from_secs(1),
        });
        let jobs = tokio::select! {
            _ = shutdown.cancelled() => break,
            jobs = reserve => jobs,
        };
        match jobs {
            Ok(jobs) => {
                for job in jobs {
                    let engine = engine.clone();
                    running.spawn(async move { run_one(&engine, job).await });
                }
                while running.len() >= BATCH {
                    running.join_next().await;
                }
                while running.try_join_next().is_some() {}
            }
            Err(e) => {
                tracing::warn!(error = %e, "workflow system steps: reserve failed; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
            }
        }
    }
    while running.join_next().await.is_some() {}
    let _ = feed.await;
}

async fn run_one(engine: &Engine, job: ReservedJob) {
    let lease = job.lease();
    let Ok(args) = serde_json::from_str::<StepArgs>(&job.args) else {
        let _ = engine
            .client
            .worker_protocol()
            .complete(vec![Completion {
                lease,
                resolution: Resolution::Failed {
                    error: "not a workflow step's arguments".into(),
                },
            }])
            .await;
        return;
    };
    if timeouts::is_watch(&args.kind) {
        if let Err(e) = timeouts::run_watch(engine, &job, &args).await {
            // Its lease runs out and it comes due again.
            tracing::warn!(workflow = %args.wf, step = %args.reference, error = %e, "a workflow's timeout watch could not be run; it will be tried again");
        }
        return;
    }
    let outcome = match outcome_of(engine, &job, &args).await {
        Ok(outcome) => outcome,
        Err(e) => {
            // The lease runs out and the step is tried again (by this or another
            // process): the backend may be away for a moment.
            tracing::warn!(workflow = %args.wf, step = %args.reference, error = %e, "a workflow's system step could not be run; it will be tried again");
            return;
        }
    };
    let completion = match &outcome {
        Ok(output) => succeeded(lease, output),
        Err(reason) => Completion {
            lease,
            resolution: Resolution::Failed {
                error: reason.clone(),
            },
        },
    };
    let end = StepEnd {
        args,
        completion: Some(completion),
        outcome,
        timed_out: false,
    };
    if let Err(e) = engine.step_ended(end).await {
        tracing::warn!(error = %e, "a workflow's system step could not be committed; it will be tried again");
    }
}

/// What a system step ends with: its output, or why it failed.
async fn outcome_of(
    engine: &Engine,
    job: &ReservedJob,
    args: &StepArgs,
) -> Result<Result<Value, String>, WorkflowError> {
    Ok(match args.kind.as_str() {
        "JOIN" => Ok(join_output(engine, args).await?),
        "SUB_WORKFLOW" => {
            let child = args.child.as_deref().unwrap_or_default();
            let (header, _) = engine.header(child).await?;
            match header.status {
                WorkflowStatus::Completed => Ok(header.output),
                status => Err(format!(
                    "sub-workflow {child} {}: {}",
                    status.as_str(),
                    header.reason.unwrap_or_default()
                )),
            }
        }
        "WAIT" => {
            let record = engine
                .client
                .records(&[wait_record(job.id)])
                .await?
                .remove(0);
            match record.and_then(|r| serde_json::from_str::<Value>(&r.value).ok()) {
                Some(v) if v.get("failed").is_some() => Err(v["failed"]
                    .as_str()
                    .unwrap_or("failed from outside")
                    .to_string()),
                Some(v) => Ok(v
                    .get("output")
                    .cloned()
                    .unwrap_or(Value::Object(Map::new()))),
                None => Ok(Value::Object(Map::new())),
            }
        }
        "INLINE" => inline(&args.input, &Limits::default()).map_err(|e| format!("INLINE: {e}")),
        "JSON_JQ_TRANSFORM" => json_jq_transform(&args.input, &Limits::default())
            .map_err(|e| format!("JSON_JQ_TRANSFORM: {e}")),
        other => Err(format!("a {other} step is not run by this engine")),
    })
}

/// A join's output: each joined step's output by its reference name.
async fn join_output(engine: &Engine, args: &StepArgs) -> Result<Value, WorkflowError> {
    let (header, _) = engine.header(&args.wf).await?;
    let prepared = engine
        .defs
        .workflow(&header.name, Some(header.version))
        .await?;
    let graph = Graph::of(&prepared.def);
    let joined = graph
        .task(&args.reference)
        .map(|t| t.join_on.clone())
        .unwrap_or_default();
    let keys: Vec<String> = joined
        .iter()
        .map(|r| prepared.step_key(&header, r))
        .collect();
    let ids = engine.client.unique_jobs(&header.run(), &keys).await?;
    let mut output = Map::new();
    for (reference, id) in joined.iter().zip(ids) {
        let Some(id) = id else { continue };
        if let Some(job) = engine.client.job(id).await? {
            let value = job
                .result
                .as_deref()
                .and_then(|r| serde_json::from_str(r).ok())
                .unwrap_or(Value::Null);
            output.insert(reference.clone(), value);
        }
    }
    Ok(Value::Object(output))
}

/// The record of how far the followers of the change feed have decided: every failure
/// at or before it was decided by some process. A process starts from it, so a step
/// whose last lease expired while no server ran is decided at the next start.
const FOLLOWED: &str = "wf-feed/followed";

/// How often a follower keeps its position.
const KEEP_POSITION_EVERY: Duration = Duration::from_secs(1);

/// Follow the change feed for workflow steps that failed because their last lease
/// expired, and decide their workflows. Each such failure is claimed once (an effect
/// record), however many processes follow the feed; a failure whose decision failed
/// (the backend away) is tried again before the follower goes past it.
async fn follow_expiries(engine: Arc<Engine>, shutdown: CancellationToken) {
    let mut position = loop {
        match Position::read(&engine).await {
            Ok(p) => break p,
            Err(e) => {
                tracing::warn!(error = %e, "workflows: cannot read where the change feed was followed to; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
            }
        }
    };
    let mut after = position.seq;
    while !shutdown.is_cancelled() {
        let events = tokio::select! {
            _ = shutdown.cancelled() => break,
            events = engine.client.events(after, 1_000, Duration::from_secs(1)) => events,
        };
        let events = match events {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(error = %e, "workflows: reading the change feed failed; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        for event in &events {
            if event.state == JobState::Failed && event.run.as_str().starts_with("wf/") {
                if let Err(e) = decide_expired(&engine, event.job).await {
                    tracing::warn!(job = event.job.0, error = %e, "workflows: could not decide a step whose lease expired; trying again");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    break;
                }
            }
            after = after.max(event.seq);
        }
        position.keep(&engine, after, false).await;
    }
    position.keep(&engine, after, true).await;
}

/// A follower's position, and the version of [`FOLLOWED`] it last saw.
struct Position {
    seq: u64,
    version: u64,
    kept_at: Instant,
}

impl Position {
    /// Where the followers got to; the feed's end when none ever followed it (kept at
    /// once, so that a later start begins there).
    async fn read(engine: &Engine) -> Result<Position, WorkflowError> {
        Ok(match Position::stored(engine).await? {
            Some((seq, version)) => Position {
                seq,
                version,
                kept_at: Instant::now(),
            },
            None => {
                let end = engine.client.last_event().await?;
                let mut first = Position {
                    seq: 0,
                    version: 0,
                    kept_at: Instant::now(),
                };
                first.keep(engine, end, true).await;
                first.seq = first.seq.max(end);
                first
            }
        })
    }

    /// The position kept, and its record's version.
    async fn stored(engine: &Engine) -> Result<Option<(u64, u64)>, WorkflowError> {
        let stored = engine.client.records(&[FOLLOWED.into()]).await?.remove(0);
        Ok(stored.map(|r| (r.value.parse().unwrap_or(0), r.version)))
    }

    /// Keep `seq` as the followers' position, at most every [`KEEP_POSITION_EVERY`]
    /// unless `now`, never moving it back (another follower may be further on).
    async fn keep(&mut self, engine: &Engine, seq: u64, now: bool) {
        if seq <= self.seq && self.version > 0 {
            return;
        }
        if !now && self.kept_at.elapsed() < KEEP_POSITION_EVERY {
            return;
        }
        self.kept_at = Instant::now();
        for _ in 0..3 {
            let write = Commit {
                records: vec![RecordWrite::new(FOLLOWED, self.version, seq.to_string())],
                ..Commit::default()
            };
            match engine.client.worker_protocol().commit(write).await {
                Ok(_) => {
                    self.seq = seq;
                    self.version += 1;
                    return;
                }
                Err(tranche_types::BackendError::Conflict { .. }) => {
                    match Position::stored(engine).await {
                        Ok(Some((further, version))) if further >= seq => {
                            (self.seq, self.version) = (further, version);
                            return;
                        }
                        Ok(found) => self.version = found.map_or(0, |(_, v)| v),
                        Err(_) => return,
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "workflows: could not keep where the change feed was followed to");
                    return;
                }
            }
        }
    }
}

async fn decide_expired(engine: &Engine, id: tranche_types::JobId) -> Result<(), WorkflowError> {
    let Some(job) = engine.client.job(id).await? else {
        return Ok(());
    };
    let error = job.error.clone().unwrap_or_default();
    if !error.starts_with("lease expired") {
        return Ok(());
    }
    let Ok(args) = serde_json::from_str::<StepArgs>(&job.args) else {
        return Ok(());
    };
    let claim = format!("wf-expired/{}", id.0);
    if !engine
        .client
        .record_effect(tranche_types::EffectRecord {
            key: &claim,
            job: Some(id),
            value: "decided",
        })
        .await?
    {
        return Ok(());
    }
    let (header, _) = engine.header(&args.wf).await?;
    // A step of an earlier generation (the workflow was restarted since) decides
    // nothing.
    let current_step = job
        .unique_key
        .as_deref()
        .is_some_and(|k| k.starts_with(&header.generation_prefix()));
    if header.status.is_terminal() || !current_step {
        return Ok(());
    }
    engine
        .step_ended(StepEnd {
            args,
            completion: None,
            outcome: Err(format!(
                "{TIMED_OUT}no answer within the step's response timeout ({error})"
            )),
            timed_out: true,
        })
        .await
        .map(drop)
}
