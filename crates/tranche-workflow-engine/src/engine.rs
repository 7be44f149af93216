//! Deciding and committing: a workflow's start and each step's end read the
//! workflow's header and the outputs its mappings need, run the pure decider, and turn
//! its actions into one [`Commit`]: the step's completion, the steps it makes ready,
//! the gates it arrives at and the header's new version when it changed. A conflict (the
//! header moved since it was read) decides again on what is there now.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tranche_core::Client;
use tranche_types::{
    BackendError, CancelTarget, Commit, CommitAck, Completion, EnqueueItem, EnqueueRequest, JobId,
    JobSpec, JobState, LeaseRef, RecordWrite, Resolution, Timestamp,
};
use tranche_workflow::{
    decide_end, decide_end_forked, decide_loop, decide_rerun, decide_start, loop_goes_again,
    Action, Ended, Ending, Graph, Schedule,
};
use tranche_workflow_def::TaskType;
use tranche_workflow_expr::Context;

use crate::defs::{Definitions, Prepared};
use crate::state::{Header, HeldEnd, Parent, StepArgs, WorkflowStatus};
use crate::timeouts;
use crate::WorkflowError;

/// The queue of the steps the engine runs itself (joins, sub-workflows, waits,
/// scripts): system tasks are tasks, leased and retried as any other.
pub const SYSTEM_QUEUE: &str = "_workflow_system";

/// How many times a decision is made again after a conflict before giving up.
const DECIDE_ATTEMPTS: usize = 50;

/// Most workflows whose step outputs are kept in memory; past it the cache starts
/// over (outputs are read from the backend again, which is only slower).
const OUTPUT_CACHE_WORKFLOWS: usize = 100_000;

/// How a step ended, as its decision needs it.
#[derive(Clone, Debug)]
pub struct StepEnd {
    /// The step's arguments (which workflow, which step).
    pub args: StepArgs,
    /// The attempt's completion, committed with the decision.
    pub completion: Option<Completion>,
    /// Completed with this output, or failed for this reason.
    pub outcome: Result<Value, String>,
    /// A failure that is a timeout under `TIME_OUT_WF`: its workflow ends `TIMED_OUT`.
    pub timed_out: bool,
}

pub(crate) struct Engine {
    pub client: Client,
    pub defs: Definitions,
    /// Outputs of steps ended in this process, by workflow then reference name.
    outputs: Mutex<HashMap<String, HashMap<String, Value>>>,
    /// Headers this process read or wrote lately, with their versions: a step's end
    /// decides on one younger than [`HEADER_CACHE_FOR`] instead of reading it again.
    /// What another process changes meanwhile is seen after that at the latest, or at
    /// once by a commit that writes the header (its version is checked); a terminated
    /// workflow's steps are cancelled, so their completions apply nothing.
    headers: Mutex<HashMap<String, (Arc<Header>, u64, Instant)>>,
    /// What a poll leased, by job: its arguments and attempts, so that the update that
    /// follows need not read the job again.
    pub polled: Mutex<HashMap<JobId, (Arc<StepArgs>, u32)>>,
}

/// How the reason of a step that timed out begins (its status is said by
/// [`StepEnd::timed_out`], never read from the text).
pub(crate) const TIMED_OUT: &str = "TIMED_OUT: ";

/// How long a header this process read or wrote is decided on without reading it.
const HEADER_CACHE_FOR: Duration = Duration::from_secs(1);

/// Most entries of the header and poll caches before they start over.
const CACHE_ENTRIES: usize = 200_000;

/// What a decision writes, gathered while its actions are planned.
struct Plan {
    header: Header,
    header_changed: bool,
    /// Workflows started by this decision (sub-workflows), written with `expect` 0.
    children: Vec<Header>,
    items: Vec<EnqueueItem>,
    arrive: Vec<JobId>,
    /// Joins (and sub-workflow gates) enqueued by this decision: arrivals at them are
    /// taken off their count instead of committed.
    gates: HashMap<String, (usize, u32)>,
    /// After the commit: cancel what is left of the run.
    cancel_run: bool,
}

impl Engine {
    pub fn new(client: Client) -> Self {
        Engine {
            defs: Definitions::new(client.clone()),
            client,
            outputs: Mutex::new(HashMap::new()),
            headers: Mutex::new(HashMap::new()),
            polled: Mutex::new(HashMap::new()),
        }
    }

    pub fn now_ms(&self) -> i64 {
        self.client.clock().now().0 / 1_000
    }

    /// Workflow `id`'s header and its record's version.
    pub async fn header(&self, id: &str) -> Result<(Header, u64), WorkflowError> {
        let record = self
            .client
            .records(&[Header::key(id)])
            .await?
            .remove(0)
            // A removed workflow's header is an empty record (records are not deleted).
            .filter(|r| !r.value.is_empty())
            .ok_or_else(|| WorkflowError::NotFound(format!("workflow {id}")))?;
        let header: Header = serde_json::from_str(&record.value)
            .map_err(|e| BackendError::store("read a workflow's header", e))?;
        Ok((header, record.version))
    }

    /// Workflow `id`'s header as this process last knew it, if that is recent, else
    /// read.
    async fn header_recent(&self, id: &str) -> Result<(Header, u64), WorkflowError> {
        if let Some((h, v, at)) = self.headers.lock().unwrap().get(id) {
            if at.elapsed() < HEADER_CACHE_FOR {
                return Ok(((**h).clone(), *v));
            }
        }
        let (h, v) = self.header(id).await?;
        self.know_header(&h, v);
        Ok((h, v))
    }

    fn know_header(&self, header: &Header, version: u64) {
        let mut headers = self.headers.lock().unwrap();
        if header.status.is_terminal() {
            headers.remove(&header.id);
            return;
        }
        if headers.len() >= CACHE_ENTRIES {
            headers.clear();
        }
        headers.insert(
            header.id.clone(),
            (Arc::new(header.clone()), version, Instant::now()),
        );
    }

    /// Start a workflow of `prepared` with `header` (status running, not yet stored):
    /// its header and first steps in one commit. `extra` records are written with it
    /// (an idempotency key's).
    pub async fn start(
        &self,
        prepared: &Prepared,
        header: Header,
        extra: Vec<RecordWrite>,
    ) -> Result<(), WorkflowError> {
        self.start_at(prepared, header, extra, 0, None).await
    }

    /// Restart an ended workflow: `header` (its next generation) written against the
    /// version read, with its first steps.
    pub async fn start_again(
        &self,
        prepared: &Prepared,
        header: Header,
        version: u64,
    ) -> Result<(), WorkflowError> {
        self.start_at(prepared, header, Vec::new(), version, None)
            .await
    }

    /// Rerun an ended workflow from step `from`: `header` (running again) written
    /// against the version read, with that step decided anew on what the steps before
    /// it gave (the caller has removed the steps of its rerun scope). `task_input`
    /// replaces the step's input.
    pub async fn rerun_from(
        &self,
        prepared: &Prepared,
        header: Header,
        version: u64,
        from: &str,
        task_input: Option<Value>,
    ) -> Result<(), WorkflowError> {
        self.start_at(
            prepared,
            header,
            Vec::new(),
            version,
            Some((from, task_input)),
        )
        .await
    }

    async fn start_at(
        &self,
        prepared: &Prepared,
        header: Header,
        extra: Vec<RecordWrite>,
        version: u64,
        from: Option<(&str, Option<Value>)>,
    ) -> Result<(), WorkflowError> {
        let graph = Graph::of(&prepared.def);
        let context = match from {
            // A start (or a restart's new generation): no step has run.
            None => Self::start_context(&header),
            // A rerun decides on the outputs of the steps before its step.
            Some(_) => self.context(&header, prepared, None).await?,
        };
        let actions = match from {
            None => decide_start(&graph, &context),
            Some((reference, task_input)) => {
                let mut actions = decide_rerun(&graph, &context, reference);
                if let Some(input) = task_input {
                    for action in &mut actions {
                        if let Action::Schedule(s) = action {
                            if s.reference == reference {
                                s.input = input.clone();
                            }
                        }
                    }
                }
                actions
            }
        };
        let since = header.timed_from.unwrap_or(header.start_time);
        let mut plan = Plan::new(header);
        plan.header_changed = true;
        plan.items
            .extend(timeouts::workflow_watch(&prepared.def, &plan.header, since));
        self.plan(&mut plan, prepared, &graph, &context, actions)
            .await?;
        let mut commit = plan.commit(None, version);
        commit.records.extend(extra);
        self.client.worker_protocol().commit(commit).await?;
        self.know_header(&plan.header, version + 1);
        for child in &plan.children {
            self.know_header(child, 1);
        }
        if plan.cancel_run {
            self.cancel_rest(&plan.header).await;
        }
        Ok(())
    }

    /// Decide what the end of a step does and commit it with the step's completion.
    /// `Stale` when the completion's attempt no longer held the step (nothing done).
    pub async fn step_ended(&self, end: StepEnd) -> Result<CommitAck, WorkflowError> {
        for attempt in 0..DECIDE_ATTEMPTS {
            // After a conflict, what is stored now.
            let (mut header, version) = if attempt == 0 {
                self.header_recent(&end.args.wf).await?
            } else {
                let (h, v) = self.header(&end.args.wf).await?;
                self.know_header(&h, v);
                (h, v)
            };
            if header.status.is_terminal() {
                // The step's end is kept; the workflow goes nowhere from it.
                return self.commit_only(&end).await;
            }
            let failed = end.outcome.as_ref().err().cloned();
            if header.status == WorkflowStatus::Paused {
                header.held.push(HeldEnd {
                    reference: end.args.reference.clone(),
                    failed,
                    timed_out: end.timed_out,
                    fork: end.args.fork.clone(),
                    optional: end.args.optional,
                });
                let mut plan = Plan::new(header);
                plan.header_changed = true;
                match self
                    .client
                    .worker_protocol()
                    .commit(plan.commit(end.completion.clone(), version))
                    .await
                {
                    Err(BackendError::Conflict { .. }) => continue,
                    other => {
                        let ack = other?;
                        self.remember_output(&end);
                        return Ok(ack);
                    }
                }
            }
            let prepared = self
                .defs
                .workflow(&header.name, Some(header.version))
                .await?;
            let graph = Graph::of(&prepared.def);
            let context = self.context(&header, &prepared, Some(&end)).await?;
            let actions = decided(&graph, &context, &end.args, failed, end.timed_out);
            let mut plan = Plan::new(header);
            self.plan(&mut plan, &prepared, &graph, &context, actions)
                .await?;
            match self
                .client
                .worker_protocol()
                .commit(plan.commit(end.completion.clone(), version))
                .await
            {
                Err(BackendError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
                Ok(ack) => {
                    if ack != CommitAck::Stale {
                        if plan.header_changed {
                            self.know_header(&plan.header, version + 1);
                        }
                        for child in &plan.children {
                            self.know_header(child, 1);
                        }
                        self.remember_output(&end);
                        self.after_commit(&plan).await;
                    }
                    return Ok(ack);
                }
            }
        }
        Err(WorkflowError::Busy("a workflow's header"))
    }

    /// Resume a paused workflow: its status back to running, and the step ends held
    /// while it was paused decided, in one commit.
    pub async fn resume(&self, id: &str) -> Result<(), WorkflowError> {
        for _ in 0..DECIDE_ATTEMPTS {
            let (header, version) = self.header(id).await?;
            if header.status != WorkflowStatus::Paused {
                return Err(WorkflowError::Conflict(format!(
                    "workflow {id} is {}, not PAUSED",
                    header.status.as_str()
                )));
            }
            let prepared = self
                .defs
                .workflow(&header.name, Some(header.version))
                .await?;
            let graph = Graph::of(&prepared.def);
            let mut plan = Plan::new(header);
            plan.header.status = WorkflowStatus::Running;
            plan.header_changed = true;
            let held = std::mem::take(&mut plan.header.held);
            for end in held {
                let context = self.context(&plan.header, &prepared, None).await?;
                let args = StepArgs {
                    wf: id.to_string(),
                    wf_type: plan.header.name.clone(),
                    reference: end.reference,
                    kind: String::new(),
                    name: String::new(),
                    input: Value::Null,
                    fork: end.fork,
                    optional: end.optional,
                    child: None,
                };
                let actions = decided(&graph, &context, &args, end.failed, end.timed_out);
                self.plan(&mut plan, &prepared, &graph, &context, actions)
                    .await?;
            }
            match self
                .client
                .worker_protocol()
                .commit(plan.commit(None, version))
                .await
            {
                Err(BackendError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
                Ok(_) => {
                    self.know_header(&plan.header, version + 1);
                    self.after_commit(&plan).await;
                    return Ok(());
                }
            }
        }
        Err(WorkflowError::Busy("a workflow's header"))
    }

    /// Change a workflow's header (terminate, pause, retry): `change` says what, or
    /// refuses; written against the version read, read again on a conflict.
    pub async fn change_header(
        &self,
        id: &str,
        change: impl Fn(&mut Header) -> Result<(), WorkflowError>,
    ) -> Result<Header, WorkflowError> {
        for _ in 0..DECIDE_ATTEMPTS {
            let (mut header, version) = self.header(id).await?;
            change(&mut header)?;
            let write = header_write(&header, version);
            match self
                .client
                .worker_protocol()
                .commit(Commit {
                    records: vec![write],
                    ..Commit::default()
                })
                .await
            {
                Err(BackendError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
                Ok(_) => {
                    self.know_header(&header, version + 1);
                    return Ok(header);
                }
            }
        }
        Err(WorkflowError::Busy("a workflow's header"))
    }

    /// Arm `header`'s workflow timeout from its `timed_from` (a retry's), when its
    /// definition has one.
    pub async fn arm_timeout(&self, header: &Header) -> Result<(), WorkflowError> {
        let prepared = self
            .defs
            .workflow(&header.name, Some(header.version))
            .await?;
        let since = header.timed_from.unwrap_or(header.start_time);
        if let Some(item) = timeouts::workflow_watch(&prepared.def, header, since) {
            self.client
                .enqueue(EnqueueRequest {
                    run: header.run(),
                    items: vec![item],
                    on_done: None,
                })
                .await?;
        }
        Ok(())
    }

    /// End running (or paused) workflow `id` from outside its steps — a terminate, a
    /// timeout — as `status` for `reason`, blamed on `step` when one is named: its
    /// parent's step is told as by any end, what is left of its steps is cancelled,
    /// and `completion` (a watch's own) is committed with it. A workflow already ended
    /// is a conflict.
    pub async fn end_from_outside(
        &self,
        id: &str,
        status: WorkflowStatus,
        step: Option<String>,
        reason: String,
        completion: Option<Completion>,
    ) -> Result<Header, WorkflowError> {
        for _ in 0..DECIDE_ATTEMPTS {
            let (header, version) = self.header(id).await?;
            if header.status.is_terminal() {
                return Err(WorkflowError::Conflict(format!(
                    "workflow {id} has already ended ({})",
                    header.status.as_str()
                )));
            }
            let mut plan = Plan::new(header);
            self.end_workflow(&mut plan, status, Value::Null, None)
                .await?;
            plan.header.reason = Some(reason.clone());
            plan.header.failed_step = step.clone();
            match self
                .client
                .worker_protocol()
                .commit(plan.commit(completion.clone(), version))
                .await
            {
                Err(BackendError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
                Ok(_) => {
                    self.know_header(&plan.header, version + 1);
                    self.after_commit(&plan).await;
                    return Ok(plan.header);
                }
            }
        }
        Err(WorkflowError::Busy("a workflow's header"))
    }

    async fn commit_only(&self, end: &StepEnd) -> Result<CommitAck, WorkflowError> {
        Ok(self
            .client
            .worker_protocol()
            .commit(Commit {
                completion: end.completion.clone(),
                ..Commit::default()
            })
            .await?)
    }

    fn remember_output(&self, end: &StepEnd) {
        let Ok(output) = &end.outcome else { return };
        let mut outputs = self.outputs.lock().unwrap();
        if outputs.len() >= OUTPUT_CACHE_WORKFLOWS && !outputs.contains_key(&end.args.wf) {
            outputs.clear();
        }
        outputs.entry(end.args.wf.clone()).or_default().insert(
            end.args.reference.clone(),
            step_view(&end.args.input, output, "COMPLETED"),
        );
    }

    async fn after_commit(&self, plan: &Plan) {
        for header in std::iter::once(&plan.header).chain(&plan.children) {
            if header.status.is_terminal() {
                self.outputs.lock().unwrap().remove(&header.id);
            }
        }
        if plan.cancel_run {
            self.cancel_rest(&plan.header).await;
        }
    }

    /// Cancel the steps a failed or terminated workflow leaves. A root's whole run
    /// (its sub-workflows' steps with it).
    pub async fn cancel_rest(&self, header: &Header) {
        if header.parent.is_some() {
            return;
        }
        let reason = format!(
            "workflow {} {}",
            header.id,
            header.status.as_str().to_lowercase()
        );
        if let Err(e) = self
            .client
            .cancel(CancelTarget::Run(header.run()), &reason)
            .await
        {
            tracing::warn!(workflow = %header.id, error = %e, "could not cancel the steps of an ended workflow");
        }
    }

    /// The state a decision of `header`'s workflow reads: the workflow, the step that
    /// ended, and the steps its definition's mappings read.
    async fn context(
        &self,
        header: &Header,
        prepared: &Prepared,
        ended: Option<&StepEnd>,
    ) -> Result<Context, WorkflowError> {
        let mut context = Self::start_context(header);
        // A step's end needs what the steps it reaches read; a start (or a step a
        // dynamic fork made) everything any mapping reads.
        let reads = match ended {
            Some(end) if end.args.fork.is_none() => prepared.wanted_after(&end.args.reference),
            _ => &prepared.mentioned,
        };
        let wanted: Vec<String> = reads
            .iter()
            .filter(|r| ended.is_none_or(|e| e.args.reference != **r))
            .cloned()
            .collect();
        self.add_steps(&mut context, header, prepared, &wanted)
            .await?;
        if let Some(end) = ended {
            let (output, status) = match &end.outcome {
                Ok(output) => (output.clone(), "COMPLETED"),
                Err(_) => (Value::Null, "FAILED"),
            };
            context.insert(
                end.args.reference.clone(),
                step_view(&end.args.input, &output, status),
            );
        }
        Ok(context)
    }

    /// The state a workflow starts on: its input and variables, no step's output.
    fn start_context(header: &Header) -> Context {
        let mut context = Context::new();
        context.insert("workflow".into(), header.mapping_view());
        context
    }

    /// Put the steps `references` (those that ran) into `context`: from what this
    /// process saw end, else read from the backend.
    async fn add_steps(
        &self,
        context: &mut Context,
        header: &Header,
        prepared: &Prepared,
        references: &[String],
    ) -> Result<(), WorkflowError> {
        let mut missing = Vec::new();
        {
            let outputs = self.outputs.lock().unwrap();
            let known = outputs.get(&header.id);
            // A step already there (the one whose end is decided) is the newest word.
            let absent: Vec<&String> = references
                .iter()
                .filter(|r| !context.contains_key(*r))
                .collect();
            for reference in absent {
                match known.and_then(|k| k.get(reference)) {
                    Some(view) => {
                        context.insert(reference.clone(), view.clone());
                    }
                    None => missing.push(reference.clone()),
                }
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = missing
            .iter()
            .map(|r| prepared.step_key(header, r))
            .collect();
        let ids = self.client.unique_jobs(&header.run(), &keys).await?;
        for (reference, id) in missing.iter().zip(ids) {
            let Some(id) = id else { continue };
            if let Some(job) = self.client.job(id).await? {
                let input = serde_json::from_str::<StepArgs>(&job.args)
                    .map(|a| a.input)
                    .unwrap_or(Value::Null);
                let output = job
                    .result
                    .as_deref()
                    .and_then(|r| serde_json::from_str(r).ok())
                    .unwrap_or(Value::Null);
                context.insert(
                    reference.clone(),
                    step_view(&input, &output, conductor_status(job.state)),
                );
            }
        }
        Ok(())
    }

    /// Turn a decision's actions into the plan's writes.
    async fn plan(
        &self,
        plan: &mut Plan,
        prepared: &Prepared,
        graph: &Graph<'_>,
        context: &Context,
        actions: Vec<Action>,
    ) -> Result<(), WorkflowError> {
        // A workflow's own steps are planned with its header; a sub-workflow started
        // here plans its first steps with its own (`plan_child`).
        for action in actions {
            match action {
                Action::Schedule(step) => {
                    let header = plan.header.clone();
                    self.schedule(plan, &header, prepared, graph, step).await?;
                }
                Action::AwaitJoin { join, arrivals } => {
                    let header = plan.header.clone();
                    let key = prepared.step_key(&header, &join);
                    let spec = self.system_step(
                        key.clone(),
                        &header,
                        StepArgs {
                            wf: header.id.clone(),
                            wf_type: header.name.clone(),
                            reference: join.clone(),
                            kind: "JOIN".into(),
                            name: graph.task(&join).map_or(join.clone(), |t| t.name.clone()),
                            input: Value::Object(Map::new()),
                            fork: None,
                            optional: false,
                            child: None,
                        },
                    );
                    plan.gates.insert(key, (plan.items.len(), arrivals as u32));
                    plan.items.push(EnqueueItem::Gate {
                        awaits: arrivals as u32,
                        job: spec,
                    });
                }
                Action::Arrive { join } => {
                    let key = prepared.step_key(&plan.header, &join);
                    self.arrive(plan, key).await?;
                }
                Action::SetVariables(set) => {
                    plan.header.variables.extend(set);
                    plan.header_changed = true;
                }
                Action::EvaluateLoop { loop_ref } => {
                    // The condition reads the body's outputs of this iteration.
                    let mut context = context.clone();
                    let body = prepared.body_of(&loop_ref);
                    self.add_steps(&mut context, &plan.header, prepared, &body)
                        .await?;
                    let actions = match loop_goes_again(graph, &context, &loop_ref) {
                        Ok(again) => {
                            if again {
                                *plan.header.iterations.entry(loop_ref.clone()).or_insert(1) += 1;
                                plan.header_changed = true;
                            }
                            decide_loop(graph, &context, &loop_ref, again)
                        }
                        Err(e) => vec![Action::Fail {
                            step: loop_ref.clone(),
                            reason: format!("loopCondition: {e}"),
                            ending: Ending::Failed,
                        }],
                    };
                    Box::pin(self.plan(plan, prepared, graph, &context, actions)).await?;
                }
                Action::Complete { output } => {
                    self.end_workflow(plan, WorkflowStatus::Completed, output, None)
                        .await?;
                }
                Action::Fail {
                    step,
                    reason,
                    ending,
                } => {
                    let status = match ending {
                        Ending::Failed => WorkflowStatus::Failed,
                        Ending::TimedOut => WorkflowStatus::TimedOut,
                        Ending::Terminated => WorkflowStatus::Terminated,
                    };
                    self.end_workflow(plan, status, Value::Null, Some((step, reason)))
                        .await?;
                }
            }
            if plan.header.status.is_terminal() {
                break;
            }
        }
        Ok(())
    }

    /// One arrival at the gate under `key`: taken off its count when this decision
    /// enqueues it, else committed at the stored gate.
    async fn arrive(&self, plan: &mut Plan, key: String) -> Result<(), WorkflowError> {
        if let Some((item, awaits)) = plan.gates.get_mut(&key) {
            *awaits = awaits.saturating_sub(1);
            if let Some(EnqueueItem::Gate { awaits: a, .. }) = plan.items.get_mut(*item) {
                *a = *awaits;
            }
            return Ok(());
        }
        let run = plan.header.run();
        match self
            .client
            .unique_jobs(&run, std::slice::from_ref(&key))
            .await?
            .remove(0)
        {
            Some(gate) => plan.arrive.push(gate),
            None => tracing::warn!(gate = %key, "an arrival at a gate that was never enqueued"),
        }
        Ok(())
    }

    async fn end_workflow(
        &self,
        plan: &mut Plan,
        status: WorkflowStatus,
        output: Value,
        failure: Option<(String, String)>,
    ) -> Result<(), WorkflowError> {
        let now = self.now_ms();
        let header = &mut plan.header;
        header.status = status;
        header.output = output;
        header.end_time = Some(now);
        if let Some((step, reason)) = failure {
            header.failed_step = Some(step);
            header.reason = Some(reason);
        }
        plan.header_changed = true;
        plan.cancel_run = status != WorkflowStatus::Completed;
        if let Some(parent) = header.parent.clone() {
            self.arrive(plan, parent.gate.clone()).await?;
        }
        Ok(())
    }

    /// A step scheduled: a job for a worker's step or a script, a gate for what waits
    /// (a sub-workflow, a wait from outside).
    async fn schedule(
        &self,
        plan: &mut Plan,
        header: &Header,
        prepared: &Prepared,
        graph: &Graph<'_>,
        step: Schedule,
    ) -> Result<(), WorkflowError> {
        let key = prepared.step_key(header, &step.reference);
        let mut args = StepArgs {
            wf: header.id.clone(),
            wf_type: header.name.clone(),
            reference: step.reference.clone(),
            kind: type_name(step.kind).into(),
            name: step.name.clone(),
            input: step.input,
            fork: step.fork,
            optional: step.optional,
            child: None,
        };
        match step.kind {
            TaskType::Simple => {
                let def = self.defs.task(&step.name).await?;
                let attempts = def.as_ref().map_or(4, |d| d.retry_count.saturating_add(1));
                if let Some(def) = &def {
                    plan.items
                        .extend(timeouts::poll_watch(def, &args, &key, self.now_ms()));
                }
                let spec = JobSpec::new(step.name.clone(), to_text(&args))
                    .queue(step.name.clone())
                    .max_attempts(attempts)
                    .priority(header.priority)
                    .unique_key(key);
                plan.items.push(EnqueueItem::Job(spec));
            }
            TaskType::SubWorkflow => {
                let task = graph.task(&step.reference);
                let params = task.and_then(|t| t.sub_workflow_param.clone());
                let Some(params) = params else {
                    return self
                        .end_workflow(
                            plan,
                            WorkflowStatus::Failed,
                            Value::Null,
                            Some((
                                step.reference,
                                "a SUB_WORKFLOW without subWorkflowParam".into(),
                            )),
                        )
                        .await;
                };
                let child_def = self.defs.workflow(&params.name, params.version).await?;
                let child = Header {
                    root: header.root.clone(),
                    parent: Some(Parent {
                        workflow: header.id.clone(),
                        step: step.reference.clone(),
                        gate: key.clone(),
                    }),
                    correlation_id: header.correlation_id.clone(),
                    priority: header.priority,
                    ..Header::running(new_id(), &child_def.def, args.input.clone(), self.now_ms())
                };
                args.child = Some(child.id.clone());
                let spec = self.system_step(key.clone(), header, args);
                plan.gates.insert(key, (plan.items.len(), 1));
                plan.items.push(EnqueueItem::Gate {
                    awaits: 1,
                    job: spec,
                });
                Box::pin(self.plan_child(plan, child_def, child)).await?;
            }
            TaskType::Wait => {
                let until = wait_until(&args.input, self.now_ms());
                let spec = self.system_step(key, header, args);
                match until {
                    Some(at_ms) => plan.items.push(EnqueueItem::Job(
                        spec.not_before(Timestamp(at_ms.saturating_mul(1_000))),
                    )),
                    None => plan.items.push(EnqueueItem::Gate {
                        awaits: 1,
                        job: spec,
                    }),
                }
            }
            _ => {
                let spec = self.system_step(key, header, args);
                plan.items.push(EnqueueItem::Job(spec));
            }
        }
        Ok(())
    }

    /// A sub-workflow started within its parent's decision: its header and its first
    /// steps join the same commit (its steps live in its root's run).
    async fn plan_child(
        &self,
        plan: &mut Plan,
        prepared: Arc<Prepared>,
        child: Header,
    ) -> Result<(), WorkflowError> {
        let graph = Graph::of(&prepared.def);
        let context = Self::start_context(&child);
        let actions = decide_start(&graph, &context);
        // Planned on a plan of its own (its header), then merged into the parent's.
        let mut sub = Plan::new(child);
        sub.items.extend(timeouts::workflow_watch(
            &prepared.def,
            &sub.header,
            sub.header.start_time,
        ));
        sub.gates = std::mem::take(&mut plan.gates);
        self.plan(&mut sub, &prepared, &graph, &context, actions)
            .await?;
        plan.gates = std::mem::take(&mut sub.gates);
        plan.items.append(&mut sub.items);
        plan.arrive.append(&mut sub.arrive);
        plan.children.push(sub.header);
        plan.children.append(&mut sub.children);
        Ok(())
    }

    /// A step the engine runs itself, on the system queue, under `key`.
    fn system_step(&self, key: String, header: &Header, args: StepArgs) -> JobSpec {
        JobSpec::new(args.kind.clone(), to_text(&args))
            .queue(SYSTEM_QUEUE)
            .max_attempts(3)
            .priority(header.priority)
            .unique_key(key)
    }
}

impl Plan {
    fn new(header: Header) -> Self {
        Plan {
            header,
            header_changed: false,
            children: Vec::new(),
            items: Vec::new(),
            arrive: Vec::new(),
            gates: HashMap::new(),
            cancel_run: false,
        }
    }

    /// The commit: `completion`, the header when it changed (against `version`), the
    /// sub-workflows' headers, the steps and the arrivals.
    fn commit(&self, completion: Option<Completion>, version: u64) -> Commit {
        let mut records = Vec::new();
        if self.header_changed {
            records.push(header_write(&self.header, version));
        }
        for child in &self.children {
            records.push(header_write(child, 0));
        }
        let enqueue = (!self.items.is_empty()).then(|| EnqueueRequest {
            run: self.header.run(),
            items: self.items.clone(),
            on_done: None,
        });
        Commit {
            completion,
            records,
            enqueue,
            arrive: self.arrive.clone(),
        }
    }
}

/// `header` written over `version`: an ended workflow's is forgotten after the
/// backend's retention, as its steps' run is.
fn header_write(header: &Header, version: u64) -> RecordWrite {
    RecordWrite::new(
        Header::key(&header.id),
        version,
        serde_json::to_string(header).expect("a header serialises"),
    )
    .ended(header.status.is_terminal())
}

/// The decider's answer for a step's end.
fn decided(
    graph: &Graph<'_>,
    context: &Context,
    args: &StepArgs,
    failed: Option<String>,
    timed_out: bool,
) -> Vec<Action> {
    let ended = match failed {
        Some(reason) if timed_out => Ended::TimedOut(reason),
        Some(reason) => Ended::Failed(reason),
        None => Ended::Completed,
    };
    match &args.fork {
        Some(fork) => decide_end_forked(graph, fork, &args.reference, args.optional, &ended),
        None => decide_end(graph, context, &args.reference, &ended),
    }
}

/// A step as mappings see it.
fn step_view(input: &Value, output: &Value, status: &str) -> Value {
    let mut view = Map::new();
    view.insert("input".into(), input.clone());
    view.insert("output".into(), output.clone());
    view.insert("status".into(), status.into());
    Value::Object(view)
}

/// Conductor's name of a step's state.
pub fn conductor_status(state: JobState) -> &'static str {
    match state {
        JobState::Pending | JobState::Available => "SCHEDULED",
        JobState::Running => "IN_PROGRESS",
        JobState::Succeeded => "COMPLETED",
        JobState::Failed => "FAILED",
        JobState::Cancelled => "CANCELED",
    }
}

/// Conductor's spelling of a step type.
pub fn type_name(kind: TaskType) -> &'static str {
    TaskType::ALL
        .iter()
        .find(|(t, _)| *t == kind)
        .map_or("SIMPLE", |(_, n)| n)
}

fn to_text(args: &StepArgs) -> String {
    serde_json::to_string(args).expect("step arguments serialise")
}

/// A workflow id: 128 random bits in the UUID layout Conductor's ids have.
pub fn new_id() -> String {
    let n = fastrand::u128(..);
    let h = format!("{n:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// When a `WAIT` with a `duration` (`"30s"`, `"5 minutes"`, `"1h"`) or an `until`
/// (`"2026-12-08 09:00 UTC"`, RFC 3339) ends, ms since the epoch; `None` for a wait
/// completed from outside.
fn wait_until(input: &Value, now_ms: i64) -> Option<i64> {
    if let Some(d) = input.get("duration").and_then(Value::as_str) {
        return parse_duration(d).map(|d| now_ms + d.as_millis() as i64);
    }
    let until = input.get("until").and_then(Value::as_str)?;
    chrono_like_parse(until)
}

/// A `WAIT`'s duration as Conductor writes them (`30s`, `5 minutes`, `1h 2m`).
fn parse_duration(text: &str) -> Option<Duration> {
    humantime::parse_duration(text.trim()).ok()
}

/// `until` as RFC 3339, or `YYYY-MM-DD HH:MM[:SS]` read as UTC (Conductor's
/// spelling, with an optional trailing ` UTC`).
fn chrono_like_parse(text: &str) -> Option<i64> {
    use chrono::{DateTime, NaiveDateTime};
    let text = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(at.timestamp_millis());
    }
    let text = text.trim_end_matches("UTC").trim();
    ["%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
        .map(|at| at.and_utc().timestamp_millis())
}

/// A completion of `lease` with `output`.
pub fn succeeded(lease: LeaseRef, output: &Value) -> Completion {
    Completion {
        lease,
        resolution: Resolution::Succeeded {
            result: output.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_durations_read_as_conductor_writes_them() {
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("5 minutes"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h 2m"), Some(Duration::from_secs(3_720)));
        assert_eq!(parse_duration("2 days"), Some(Duration::from_secs(172_800)));
        assert_eq!(parse_duration("soon"), None);
    }

    #[test]
    fn wait_times_read_as_utc() {
        assert_eq!(chrono_like_parse("1970-01-02 00:00 UTC"), Some(86_400_000));
        assert_eq!(
            chrono_like_parse("2026-12-08T09:00:00Z"),
            Some(1_796_720_400_000)
        );
        assert_eq!(chrono_like_parse("tomorrow"), None);
    }

    #[test]
    fn ids_look_like_conductors() {
        let id = new_id();
        assert_eq!(id.len(), 36);
        assert_eq!(id.matches('-').count(), 4);
        assert_ne!(id, new_id());
    }
}
