//! Workflows run by the engine (issue 33; see `docs/workflows.md`).
//!
//! A workflow is data (a Conductor definition, stored as a backend record) and its
//! steps are ordinary jobs: a worker's step (`SIMPLE`) is a job on the queue named
//! after its task, which workers poll; the steps the engine runs itself (joins,
//! sub-workflows, waits, scripts) are jobs on [`SYSTEM_QUEUE`], run by
//! [`Workflows::run_system_steps`]. Leases, retries, limits, pause and metrics apply to
//! them as they are.
//!
//! What is kept: a workflow's header (`wf/<id>`: its input, status, variables,
//! output), rewritten only when its status or variables change; its steps' jobs, all in
//! the run `wf/<root id>` (a sub-workflow's steps in its root's run), each under the
//! unique key `<workflow>:<generation>:<reference name>`, so a decision made twice
//! enqueues a step once, and the output a mapping reads is one lookup away. A JOIN is a
//! gate enqueued when its fork starts and opened by the last of its branches'
//! arrivals, each O(1); a sub-workflow's step is a gate its child's end opens.
//!
//! Every step's end is decided by the pure decider (`tranche-workflow`) on the header
//! and the outputs the definition's mappings read, and committed with the step's
//! completion in one transaction ([`Commit`](tranche_types::Commit)). A header that
//! moved since it was read (two branches setting variables, a terminate racing a
//! step) fails the commit, and the decision is made again on what is there.

#![deny(missing_docs)]

mod defs;
mod engine;
mod rerun;
mod state;
mod system;
mod tasks;
mod timeouts;
mod views;

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tranche_core::Client;
use tranche_types::{BackendError, JobFilter, JobId, RecordWrite};
use tranche_workflow_def::{TaskDef, WorkflowDef};

pub use defs::{Prepared, CACHE_FOR};
pub use engine::{conductor_status, new_id, SYSTEM_QUEUE};
pub use rerun::RerunRequest;
pub use state::{parse_task_id, task_id, Header, HeldEnd, Parent, StepArgs, WorkflowStatus};
pub use tasks::{PolledTask, TaskStatus, TaskUpdate};
pub use views::{StepView, WorkflowView};

use engine::Engine;

/// Why a workflow call failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// What was named does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// The request is not valid (a definition's problems, a bad argument).
    #[error("{0}")]
    Invalid(String),
    /// The workflow is not in a state that allows it.
    #[error("{0}")]
    Conflict(String),
    /// A record kept changing under concurrent writers: the call may be repeated.
    #[error("{0} kept changing under concurrent writers; try again")]
    Busy(&'static str),
}

/// Most log lines kept per step.
pub const MAX_LOG_LINES: usize = 100;
/// Longest log line kept, in bytes.
pub const MAX_LOG_LINE: usize = 4_096;

/// A workflow to start.
#[derive(Clone, Debug, Default)]
pub struct StartRequest {
    /// The definition's name.
    pub name: String,
    /// Its version; the latest when absent.
    pub version: Option<u32>,
    /// The workflow's input.
    pub input: Map<String, Value>,
    /// The caller's correlation id.
    pub correlation_id: Option<String>,
    /// Its steps' priority (lower runs first).
    pub priority: i16,
    /// Starting twice with one key starts one workflow: the second start answers the
    /// first's id.
    pub idempotency_key: Option<String>,
}

/// Workflows over a [`Client`]'s backend. Cheap to clone.
#[derive(Clone)]
pub struct Workflows {
    engine: Arc<Engine>,
}

impl Workflows {
    /// Workflows kept in `client`'s backend.
    pub fn new(client: Client) -> Self {
        Workflows {
            engine: Arc::new(Engine::new(client)),
        }
    }

    /// The client the workflows run on.
    pub fn client(&self) -> &Client {
        &self.engine.client
    }

    /// Store workflow definitions (checked first; every problem said at once).
    pub async fn put_workflow_defs(&self, defs: Vec<WorkflowDef>) -> Result<(), WorkflowError> {
        let problems: Vec<String> = defs
            .iter()
            .flat_map(|d| {
                d.problems()
                    .into_iter()
                    .chain(tranche_workflow_expr::script_problems(d))
                    .map(move |p| format!("{} v{}: {p}", d.name, d.version))
            })
            .collect();
        if !problems.is_empty() {
            return Err(WorkflowError::Invalid(problems.join("\n")));
        }
        self.engine.defs.put_workflows(defs).await
    }

    /// Store task definitions (checked first).
    pub async fn put_task_defs(&self, defs: Vec<TaskDef>) -> Result<(), WorkflowError> {
        let problems: Vec<String> = defs
            .iter()
            .flat_map(|d| {
                d.problems()
                    .into_iter()
                    .map(move |p| format!("task {}: {p}", d.name))
            })
            .collect();
        if !problems.is_empty() {
            return Err(WorkflowError::Invalid(problems.join("\n")));
        }
        self.engine.defs.put_tasks(defs).await
    }

    /// Workflow definition `name` at `version`, or its latest.
    pub async fn workflow_def(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<WorkflowDef, WorkflowError> {
        Ok(self.engine.defs.workflow(name, version).await?.def.clone())
    }

    /// Every workflow definition, each version.
    pub async fn workflow_defs(&self) -> Result<Vec<WorkflowDef>, WorkflowError> {
        let mut out = Vec::new();
        for (name, versions) in self.engine.defs.workflow_names().await? {
            for v in versions {
                out.push(self.workflow_def(&name, Some(v)).await?);
            }
        }
        Ok(out)
    }

    /// Task definition `name`.
    pub async fn task_def(&self, name: &str) -> Result<TaskDef, WorkflowError> {
        self.engine
            .defs
            .task(name)
            .await?
            .map(|d| (*d).clone())
            .ok_or_else(|| WorkflowError::NotFound(format!("task definition {name:?}")))
    }

    /// Every task definition.
    pub async fn task_defs(&self) -> Result<Vec<TaskDef>, WorkflowError> {
        let mut out = Vec::new();
        for name in self.engine.defs.task_names().await? {
            if let Some(d) = self.engine.defs.task(&name).await? {
                out.push((*d).clone());
            }
        }
        Ok(out)
    }

    /// Start a workflow; its id. Its header and first steps commit together.
    pub async fn start(&self, req: StartRequest) -> Result<String, WorkflowError> {
        let prepared = self.engine.defs.workflow(&req.name, req.version).await?;
        let id = new_id();
        let mut extra = Vec::new();
        let idem_key = req
            .idempotency_key
            .as_ref()
            .map(|k| format!("wf-idem/{}/{k}", req.name));
        if let Some(key) = &idem_key {
            extra.push(
                // An idempotency key holds as long as its workflow is kept.
                RecordWrite::new(key.clone(), 0, id.clone()).ended(true),
            );
        }
        let header = Header {
            correlation_id: req.correlation_id,
            priority: req.priority,
            ..Header::running(
                id.clone(),
                &prepared.def,
                Value::Object(req.input),
                self.engine.now_ms(),
            )
        };
        match self.engine.start(&prepared, header, extra).await {
            Ok(()) => Ok(id),
            Err(WorkflowError::Backend(BackendError::Conflict { key, .. }))
                if Some(&key) == idem_key.as_ref() =>
            {
                let existing = self.engine.client.records(&[key]).await?.remove(0);
                existing
                    .map(|r| r.value)
                    .ok_or(WorkflowError::Busy("an idempotency key"))
            }
            Err(e) => Err(e),
        }
    }

    /// The workflow started under idempotency key `key` for definition `name`, if any.
    pub async fn idempotent_start(
        &self,
        name: &str,
        key: &str,
    ) -> Result<Option<String>, WorkflowError> {
        let record = self
            .engine
            .client
            .records(&[format!("wf-idem/{name}/{key}")])
            .await?
            .remove(0);
        Ok(record.map(|r| r.value))
    }

    /// One step by the task id a poll or a workflow's view gave.
    pub async fn task(&self, task_id: &str) -> Result<StepView, WorkflowError> {
        Ok(StepView::of(&self.step_job(task_id).await?.1))
    }

    async fn step_job(
        &self,
        task_id: &str,
    ) -> Result<(JobId, tranche_types::JobRecord), WorkflowError> {
        let (job, _) = parse_task_id(task_id).ok_or_else(|| {
            WorkflowError::Invalid(format!(
                "taskId: expected <job>-<attempt>, got {:?}",
                task_id.chars().take(40).collect::<String>()
            ))
        })?;
        let record = self
            .engine
            .client
            .job(job)
            .await?
            .ok_or_else(|| WorkflowError::NotFound(format!("task {task_id}")))?;
        Ok((job, record))
    }

    /// Workflow `id` with its steps when `with_steps`.
    pub async fn workflow(
        &self,
        id: &str,
        with_steps: bool,
    ) -> Result<WorkflowView, WorkflowError> {
        let (header, _) = self.engine.header(id).await?;
        let steps = if with_steps {
            self.steps(&header).await?
        } else {
            Vec::new()
        };
        Ok(WorkflowView { header, steps })
    }

    /// The steps of `header`'s workflow (this generation's), in the order they were
    /// made ready.
    async fn steps(&self, header: &Header) -> Result<Vec<StepView>, WorkflowError> {
        let prefix = header.generation_prefix();
        let out = self
            .run_jobs(header, |key| key.starts_with(&prefix))
            .await?
            .iter()
            .map(StepView::of)
            .filter(|s| !s.args.as_ref().is_some_and(|a| timeouts::is_watch(&a.kind)))
            .collect();
        let prepared = self
            .engine
            .defs
            .workflow(&header.name, Some(header.version))
            .await?;
        Ok(views::with_routing_steps(out, &prepared.def, header))
    }

    /// The jobs of `header`'s run (its root's, with every sub-workflow's steps) whose
    /// unique key `keep` keeps, in the order they were made ready.
    async fn run_jobs(
        &self,
        header: &Header,
        keep: impl Fn(&str) -> bool,
    ) -> Result<Vec<tranche_types::JobRecord>, WorkflowError> {
        let filter = JobFilter {
            run: Some(header.run()),
            ..JobFilter::default()
        };
        let mut after: Option<JobId> = None;
        let mut out = Vec::new();
        loop {
            let page = self.engine.client.list_jobs(&filter, after, 500).await?;
            for summary in &page.jobs {
                let Some(job) = self.engine.client.job(summary.id).await? else {
                    continue;
                };
                if job.unique_key.as_deref().is_some_and(&keep) {
                    out.push(job);
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        Ok(out)
    }

    /// Workflows, newest first, that `keep` keeps; at most `limit` of the newest
    /// `scan` roots looked at.
    pub async fn search(
        &self,
        scan: usize,
        keep: impl Fn(&Header) -> bool,
    ) -> Result<Vec<Header>, WorkflowError> {
        let runs = self.engine.client.list_runs(scan).await?;
        let ids: Vec<String> = runs
            .iter()
            .filter_map(|r| r.run.as_ref())
            .filter_map(|r| r.as_str().strip_prefix("wf/").map(str::to_string))
            .collect();
        let keys: Vec<String> = ids.iter().map(|id| Header::key(id)).collect();
        let mut out = Vec::new();
        for chunk in keys.chunks(500) {
            for record in self
                .engine
                .client
                .records(chunk)
                .await?
                .into_iter()
                .flatten()
            {
                if let Ok(header) = serde_json::from_str::<Header>(&record.value) {
                    if keep(&header) {
                        out.push(header);
                    }
                }
            }
        }
        Ok(out)
    }

    /// End a running or paused workflow from outside: it is `TERMINATED` and the
    /// steps it leaves are cancelled.
    pub async fn terminate(&self, id: &str, reason: &str) -> Result<(), WorkflowError> {
        // As any end: a sub-workflow's parent is told (its step fails).
        self.engine
            .end_from_outside(
                id,
                WorkflowStatus::Terminated,
                None,
                reason.to_string(),
                None,
            )
            .await
            .map(drop)
    }

    /// Hold a running workflow: steps that end are kept, what they make ready waits
    /// for [`resume`](Self::resume).
    pub async fn pause(&self, id: &str) -> Result<(), WorkflowError> {
        self.engine
            .change_header(id, |h| match h.status {
                WorkflowStatus::Running => {
                    h.status = WorkflowStatus::Paused;
                    Ok(())
                }
                other => Err(WorkflowError::Conflict(format!(
                    "workflow {id} is {}, not RUNNING",
                    other.as_str()
                ))),
            })
            .await
            .map(drop)
    }

    /// Resume a paused workflow, deciding the step ends held meanwhile.
    pub async fn resume(&self, id: &str) -> Result<(), WorkflowError> {
        self.engine.resume(id).await
    }

    /// Retry a failed workflow from its failed step: the step runs again with fresh
    /// attempts, and the workflow is running again.
    pub async fn retry(&self, id: &str) -> Result<(), WorkflowError> {
        let (header, _) = self.engine.header(id).await?;
        if !matches!(
            header.status,
            WorkflowStatus::Failed | WorkflowStatus::TimedOut | WorkflowStatus::Terminated
        ) {
            return Err(WorkflowError::Conflict(format!(
                "workflow {id} is {}: only a failed, timed-out or terminated one is retried",
                header.status.as_str()
            )));
        }
        let failed: Vec<JobId> = self
            .steps(&header)
            .await?
            .into_iter()
            .filter(|s| matches!(s.status, "FAILED" | "CANCELED"))
            .filter_map(|s| s.job)
            .collect();
        if failed.is_empty() {
            return Err(WorkflowError::Conflict(format!(
                "workflow {id} has no failed step to retry"
            )));
        }
        let now = self.engine.now_ms();
        let header = self
            .engine
            .change_header(id, |h| {
                h.status = WorkflowStatus::Running;
                h.reason = None;
                h.failed_step = None;
                h.end_time = None;
                h.timed_from = Some(now);
                Ok(())
            })
            .await?;
        self.engine.arm_timeout(&header).await?;
        for job in failed {
            match self.engine.client.retry_job(job).await {
                Ok(_) | Err(BackendError::Invalid { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Run an ended workflow again from its start, under the same id, with the same
    /// input (`input` replaces it when given): a new generation of its steps.
    pub async fn restart(
        &self,
        id: &str,
        input: Option<Map<String, Value>>,
    ) -> Result<(), WorkflowError> {
        self.restart_with(id, input, None).await
    }

    /// [`restart`](Self::restart), the correlation id replaced when given.
    async fn restart_with(
        &self,
        id: &str,
        input: Option<Map<String, Value>>,
        correlation_id: Option<String>,
    ) -> Result<(), WorkflowError> {
        let (header, version) = self.engine.header(id).await?;
        if !header.status.is_terminal() {
            return Err(WorkflowError::Conflict(format!(
                "workflow {id} is {}: only an ended one is restarted",
                header.status.as_str()
            )));
        }
        if header.parent.is_some() {
            return Err(WorkflowError::Invalid(format!(
                "workflow {id} is a sub-workflow: restart its parent"
            )));
        }
        let prepared = self
            .engine
            .defs
            .workflow(&header.name, Some(header.version))
            .await?;
        let mut next = header.clone();
        next.generation += 1;
        next.status = WorkflowStatus::Running;
        next.variables = Map::new();
        next.output = Value::Null;
        next.reason = None;
        next.failed_step = None;
        next.held.clear();
        next.iterations.clear();
        next.end_time = None;
        next.start_time = self.engine.now_ms();
        next.timed_from = None;
        if let Some(input) = input {
            next.input = Value::Object(input);
        }
        if correlation_id.is_some() {
            next.correlation_id = correlation_id;
        }
        // The start writes the header against the version read: a racing restart
        // conflicts instead of starting twice.
        self.engine.start_again(&prepared, next, version).await
    }

    /// Remove an ended workflow: its steps' jobs are deleted and it is found no more. A
    /// sub-workflow is removed with its root (its steps are in the root's run).
    pub async fn remove(&self, id: &str) -> Result<(), WorkflowError> {
        let (header, version) = self.engine.header(id).await?;
        if !header.status.is_terminal() {
            return Err(WorkflowError::Conflict(format!(
                "workflow {id} is {}: terminate it before removing it",
                header.status.as_str()
            )));
        }
        if header.parent.is_none() {
            let filter = JobFilter {
                run: Some(header.run()),
                ..JobFilter::default()
            };
            let mut after = None;
            loop {
                let page = self.engine.client.list_jobs(&filter, after, 500).await?;
                for job in &page.jobs {
                    if !job.state.is_terminal() {
                        self.engine
                            .client
                            .cancel(tranche_types::CancelTarget::Job(job.id), "workflow removed")
                            .await?;
                    }
                    self.engine.client.delete_job(job.id).await?;
                }
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
        self.engine
            .client
            .worker_protocol().commit(tranche_types::Commit {
                records: vec![RecordWrite::new(Header::key(id), version, String::new()).ended(true)],
                ..tranche_types::Commit::default()
            })
            .await?;
        Ok(())
    }

    /// Add a log line to a step (`POST /api/tasks/{taskId}/log`). The newest
    /// [`MAX_LOG_LINES`] lines of at most [`MAX_LOG_LINE`] bytes each are kept.
    pub async fn add_log(&self, task_id: &str, line: &str) -> Result<(), WorkflowError> {
        let (job, _) = self.step_job(task_id).await?;
        let key = format!("tasklog/{}", job.0);
        let mut line = line.to_string();
        if line.len() > MAX_LOG_LINE {
            let mut end = MAX_LOG_LINE;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            line.truncate(end);
        }
        for _ in 0..20 {
            let current = self
                .engine
                .client
                .records(std::slice::from_ref(&key))
                .await?
                .remove(0);
            let (version, mut lines): (u64, Vec<Value>) = match current {
                Some(r) => (
                    r.version,
                    serde_json::from_str(&r.value).unwrap_or_default(),
                ),
                None => (0, Vec::new()),
            };
            lines.push(serde_json::json!({"log": line, "taskId": task_id, "createdTime": self.engine.now_ms()}));
            if lines.len() > MAX_LOG_LINES {
                lines.drain(..lines.len() - MAX_LOG_LINES);
            }
            let write = // Forgotten the retention after its last line.
            RecordWrite::new(key.clone(), version, Value::Array(lines).to_string()).ended(true);
            match self
                .engine
                .client
                .worker_protocol()
                .commit(tranche_types::Commit {
                    records: vec![write],
                    ..tranche_types::Commit::default()
                })
                .await
            {
                Err(BackendError::Conflict { .. }) => continue,
                other => return other.map(drop).map_err(Into::into),
            }
        }
        Err(WorkflowError::Busy("a step's log"))
    }

    /// A step's log lines, oldest first.
    pub async fn logs(&self, task_id: &str) -> Result<Vec<Value>, WorkflowError> {
        let (job, _) = self.step_job(task_id).await?;
        let record = self
            .engine
            .client
            .records(&[format!("tasklog/{}", job.0)])
            .await?
            .remove(0);
        Ok(record
            .and_then(|r| serde_json::from_str(&r.value).ok())
            .unwrap_or_default())
    }

    /// Run the steps the engine runs itself (joins, sub-workflows' ends, waits,
    /// scripts) until `shutdown`.
    pub async fn run_system_steps(&self, shutdown: CancellationToken) {
        system::run(self.engine.clone(), shutdown).await
    }

    /// Lease up to `count` steps of task `task_type` to a worker, waiting up to `wait`
    /// for one.
    pub async fn poll(
        &self,
        task_type: &str,
        count: usize,
        wait: std::time::Duration,
        worker_id: Option<&str>,
    ) -> Result<Vec<PolledTask>, WorkflowError> {
        tasks::poll(&self.engine, task_type, count, wait, worker_id).await
    }

    /// A worker's update of a step it polled.
    pub async fn update_task(&self, update: TaskUpdate) -> Result<(), WorkflowError> {
        tasks::update(&self.engine, update).await
    }

    /// Complete (or fail) a step waiting for the outside (a `WAIT`) by its workflow and
    /// reference name, with `output`.
    pub async fn complete_waiting(
        &self,
        workflow: &str,
        reference: &str,
        status: TaskStatus,
        output: Map<String, Value>,
    ) -> Result<(), WorkflowError> {
        tasks::complete_waiting(&self.engine, workflow, reference, status, output).await
    }

    /// How many steps of each task type wait to be polled.
    pub async fn queue_sizes(
        &self,
        task_types: &[String],
    ) -> Result<Vec<(String, u64)>, WorkflowError> {
        let mut out = Vec::new();
        for t in task_types {
            out.push((
                t.clone(),
                self.engine.client.queue_depth(t, 1_000_000).await?,
            ));
        }
        Ok(out)
    }
}
