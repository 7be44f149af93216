//! Rerunning an ended workflow from one of its steps (Conductor's `rerun`).
//!
//! A rerun keeps what came before the step and runs the step and everything after it
//! again, in the same generation: the jobs of the steps in the step's rerun scope
//! ([`Graph::rerun_scope`]) are removed, with the steps of the sub-workflows they
//! started and the steps dynamic forks among them made, and the step is decided anew
//! on the workflow's state as it is (the outputs of the steps before it), committed
//! with the header running again. Removing first and committing second is safe to
//! repeat: a rerun cut short between the two leaves the workflow ended, and the next
//! rerun finds less to remove.

use std::collections::HashSet;

use serde_json::{Map, Value};
use tranche_types::{BackendError, CancelTarget, JobRecord};
use tranche_workflow::Graph;

use crate::state::{parse_task_id, Header, StepArgs, WorkflowStatus};
use crate::{WorkflowError, Workflows, SYSTEM_QUEUE};

/// A rerun (Conductor's `RerunWorkflowRequest`).
#[derive(Clone, Debug, Default)]
pub struct RerunRequest {
    /// The step to rerun from: a task id a view gave (`<job>-<attempt>`, or
    /// `<workflow>-<reference>` for a step decided on the spot), or a reference name.
    /// `None` reruns the whole workflow from its start.
    pub from: Option<String>,
    /// Replaces the workflow's input.
    pub workflow_input: Option<Map<String, Value>>,
    /// Replaces the input of the step rerun from.
    pub task_input: Option<Value>,
    /// Replaces the workflow's correlation id.
    pub correlation_id: Option<String>,
}

impl Workflows {
    /// Run ended workflow `id` again from a step (see the module's documentation).
    pub async fn rerun(&self, id: &str, request: RerunRequest) -> Result<(), WorkflowError> {
        let Some(from) = request.from else {
            return self
                .restart_with(id, request.workflow_input, request.correlation_id)
                .await;
        };
        let (header, version) = self.engine.header(id).await?;
        if !header.status.is_terminal() {
            return Err(WorkflowError::Conflict(format!(
                "workflow {id} is {}: only an ended one is rerun",
                header.status.as_str()
            )));
        }
        if header.parent.is_some() {
            return Err(WorkflowError::Invalid(format!(
                "workflow {id} is a sub-workflow: rerun its parent from the step that \
                 started it"
            )));
        }
        let prepared = self
            .engine
            .defs
            .workflow(&header.name, Some(header.version))
            .await?;
        let graph = Graph::of(&prepared.def);
        let reference = self.rerun_reference(&header, &from).await?;
        let scope = graph
            .rerun_scope(&reference)
            .map_err(WorkflowError::Invalid)?;

        let jobs = self.run_jobs(&header, |_| true).await?;
        for job in removed(&header, &scope, &jobs) {
            if !job.state.is_terminal() && job.queue == SYSTEM_QUEUE {
                // A timeout watch not yet due: the rerun arms its own.
                self.engine
                    .client
                    .cancel(CancelTarget::Job(job.id), "workflow rerun")
                    .await?;
            }
            match self.engine.client.delete_job(job.id).await {
                Ok(_) => {}
                Err(BackendError::Invalid { .. }) => {
                    return Err(WorkflowError::Conflict(format!(
                        "workflow {id}: a step to rerun (job {}) has not ended yet; try again",
                        job.id.0
                    )))
                }
                Err(e) => return Err(e.into()),
            }
        }

        let mut next = header.clone();
        next.status = WorkflowStatus::Running;
        next.output = Value::Null;
        next.reason = None;
        next.failed_step = None;
        next.end_time = None;
        next.held.clear();
        next.timed_from = Some(self.engine.now_ms());
        next.iterations
            .retain(|loop_ref, _| !scope.contains(loop_ref.as_str()));
        if let Some(input) = request.workflow_input {
            next.input = Value::Object(input);
        }
        if request.correlation_id.is_some() {
            next.correlation_id = request.correlation_id;
        }
        self.engine
            .rerun_from(&prepared, next, version, &reference, request.task_input)
            .await
    }

    /// The reference name `from` names in `header`'s workflow.
    async fn rerun_reference(&self, header: &Header, from: &str) -> Result<String, WorkflowError> {
        if let Some(reference) = from.strip_prefix(&format!("{}-", header.id)) {
            return Ok(reference.to_string());
        }
        if parse_task_id(from).is_none() {
            return Ok(from.to_string());
        }
        let (_, job) = self.step_job(from).await?;
        let args: Option<StepArgs> = serde_json::from_str(&job.args).ok();
        let prefix = header.generation_prefix();
        match args {
            Some(args)
                if args.wf == header.id
                    && job
                        .unique_key
                        .as_deref()
                        .is_some_and(|k| k.starts_with(&prefix)) =>
            {
                Ok(args.reference)
            }
            Some(args) if args.wf != header.id => Err(WorkflowError::Invalid(format!(
                "task {from} is a step of workflow {}, not of {}: rerun {} from the step \
                 that started it",
                args.wf, header.id, header.id
            ))),
            _ => Err(WorkflowError::Invalid(format!(
                "task {from} is not a step of workflow {}'s latest run",
                header.id
            ))),
        }
    }
}

/// The jobs a rerun of `header`'s workflow over `scope` removes: its steps in the
/// scope (and those the dynamic forks in it made), and every step of the
/// sub-workflows they started, theirs in turn too.
fn removed<'j>(
    header: &Header,
    scope: &HashSet<&str>,
    jobs: &'j [JobRecord],
) -> Vec<&'j JobRecord> {
    let args: Vec<Option<StepArgs>> = jobs
        .iter()
        .map(|j| serde_json::from_str(&j.args).ok())
        .collect();
    let prefix = header.generation_prefix();
    let mut out = Vec::new();
    let mut children: HashSet<String> = HashSet::new();
    for (job, args) in jobs.iter().zip(&args) {
        let Some(args) = args else { continue };
        let ours = job
            .unique_key
            .as_deref()
            .is_some_and(|k| k.starts_with(&prefix));
        let in_scope = scope.contains(args.reference.as_str())
            || args.fork.as_deref().is_some_and(|f| scope.contains(f));
        if ours && in_scope {
            out.push(job);
            children.extend(args.child.clone());
        }
    }
    // A child's steps came after the step that started it, and a grandchild's after
    // its parent's step: one pass in the order they were made ready finds them all.
    for (job, args) in jobs.iter().zip(&args) {
        let Some(args) = args else { continue };
        if children.contains(&args.wf) {
            out.push(job);
            children.extend(args.child.clone());
        }
    }
    out
}
