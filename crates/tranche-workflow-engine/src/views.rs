//! Workflows and their steps as Conductor shows them (`GET /api/workflow/{id}`), built
//! from the header and the steps' jobs.

use std::collections::HashMap;

use serde_json::{json, Map, Value};
use tranche_types::{JobId, JobRecord};
use tranche_workflow_def::{TaskType, WorkflowDef, WorkflowTask};

use crate::engine::conductor_status;
use crate::state::{task_id, Header, StepArgs};

/// One step of a workflow.
#[derive(Clone, Debug)]
pub struct StepView {
    /// Its job; `None` for a step decided on the spot (a fork, a switch, a
    /// `SET_VARIABLE`, a `TERMINATE`, a loop), which has none.
    pub job: Option<JobId>,
    /// Conductor's name of its state.
    pub status: &'static str,
    /// Its arguments (workflow, reference name, type, input).
    pub args: Option<StepArgs>,
    /// The job as stored (`None` for a step decided on the spot).
    pub record: Option<JobRecord>,
}

impl StepView {
    /// The step of `job`.
    pub fn of(job: &JobRecord) -> StepView {
        let args: Option<StepArgs> = serde_json::from_str(&job.args).ok();
        // A step the engine runs (a join, a sub-workflow, a wait) is under way from
        // the moment it is made, as Conductor shows it: its job only waits for its
        // gate to open.
        let system = args.as_ref().is_some_and(|a| a.kind != "SIMPLE");
        let timed_out = job
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with(crate::engine::TIMED_OUT));
        let status = if system && !job.state.is_terminal() {
            "IN_PROGRESS"
        } else if timed_out && job.state == tranche_types::JobState::Failed {
            "TIMED_OUT"
        } else {
            conductor_status(job.state)
        };
        StepView {
            job: Some(job.id),
            status,
            args,
            record: Some(job.clone()),
        }
    }

    /// A step decided on the spot, shown completed as Conductor shows it.
    fn routed(header: &Header, task: &WorkflowTask) -> StepView {
        StepView {
            job: None,
            status: "COMPLETED",
            args: Some(StepArgs {
                wf: header.id.clone(),
                wf_type: header.name.clone(),
                reference: task.task_reference_name.clone(),
                kind: task.kind.clone(),
                name: task.name.clone(),
                input: Value::Object(Map::new()),
                fork: None,
                optional: task.optional,
                child: None,
            }),
            record: None,
        }
    }

    /// Conductor's `Task` JSON.
    pub fn to_conductor(&self) -> Value {
        let args = self.args.as_ref();
        let Some(job) = &self.record else {
            let a = args.expect("a routed step has its arguments");
            return json!({
                "taskId": format!("{}-{}", a.wf, a.reference),
                "taskType": a.kind,
                "taskDefName": a.name,
                "referenceTaskName": a.reference,
                "workflowInstanceId": a.wf,
                "workflowType": a.wf_type,
                "status": self.status,
                "inputData": {},
                "outputData": {},
                "retryCount": 0,
            });
        };
        let ms = |t: Option<tranche_types::Timestamp>| t.map_or(0, |t| t.0 / 1_000);
        let output: Value = job
            .result
            .as_deref()
            .and_then(|r| serde_json::from_str(r).ok())
            .unwrap_or_else(|| Value::Object(Map::new()));
        let kind = args.map_or("SIMPLE", |a| a.kind.as_str());
        json!({
            "taskId": task_id(job.id, job.attempt.max(1)),
            "taskType": if kind == "SIMPLE" { args.map_or(job.kind.as_str(), |a| a.name.as_str()) } else { kind },
            "taskDefName": args.map_or(job.kind.as_str(), |a| a.name.as_str()),
            "referenceTaskName": args.map_or("", |a| a.reference.as_str()),
            "workflowInstanceId": args.map_or("", |a| a.wf.as_str()),
            "workflowType": args.map_or("", |a| a.wf_type.as_str()),
            "status": self.status,
            "inputData": args.map_or(Value::Null, |a| a.input.clone()),
            "outputData": output,
            "retryCount": job.attempt.saturating_sub(1),
            "pollCount": job.attempt,
            "seq": job.id.0,
            "scheduledTime": ms(Some(job.created_at)),
            "startTime": ms(job.started_at),
            "endTime": ms(job.finished_at),
            "updateTime": ms(job.finished_at.or(job.started_at).or(Some(job.created_at))),
            "reasonForIncompletion": job.error,
            "subWorkflowId": args.and_then(|a| a.child.clone()),
            "dynamicFork": args.and_then(|a| a.fork.clone()),
            "attempts": job.errors.iter().map(|e| json!({"attempt": e.attempt, "at": e.at.0 / 1_000, "error": e.error})).collect::<Vec<_>>(),
        })
    }
}

/// `steps` (the jobs, in order) with the steps decided on the spot put in: each
/// before the first job that came after it (inside it, or after it in its sequence),
/// or at the end when it ended the workflow. Such a step is shown when it ran: some
/// step after or inside it has a job, or it is the step that ended the workflow.
pub fn with_routing_steps(
    steps: Vec<StepView>,
    def: &WorkflowDef,
    header: &Header,
) -> Vec<StepView> {
    let position: HashMap<&str, usize> = steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.args.as_ref().map(|a| (a.reference.as_str(), i)))
        .rev()
        .collect();
    let mut inserts: Vec<(usize, usize, StepView)> = Vec::new();
    place(&def.tasks, &position, header, steps.len(), 0, &mut inserts);
    let mut out = Vec::with_capacity(steps.len() + inserts.len());
    // At one place, what encloses comes before what it holds.
    inserts.sort_by_key(|(at, depth, _)| (*at, *depth));
    let mut inserts = inserts.into_iter().peekable();
    for (i, step) in steps.into_iter().enumerate() {
        while inserts.peek().is_some_and(|(at, _, _)| *at <= i) {
            out.push(inserts.next().expect("peeked").2);
        }
        out.push(step);
    }
    out.extend(inserts.map(|(_, _, s)| s));
    out
}

/// The earliest job position within `tasks` (nested too), placing the routing steps
/// of `tasks` on the way; `None` when no step of them has a job.
fn place(
    tasks: &[WorkflowTask],
    position: &HashMap<&str, usize>,
    header: &Header,
    end: usize,
    depth: usize,
    inserts: &mut Vec<(usize, usize, StepView)>,
) -> Option<usize> {
    // Backwards, so each step knows the earliest job after it in its sequence.
    let mut after: Option<usize> = None;
    for task in tasks.iter().rev() {
        let mut inside: Option<usize> = None;
        let sequences = task
            .fork_tasks
            .iter()
            .chain(task.decision_cases.values())
            .chain([&task.default_case, &task.loop_over]);
        for sequence in sequences {
            let first = place(sequence, position, header, end, depth + 1, inserts);
            inside = [inside, first].into_iter().flatten().min();
        }
        let own = position.get(task.task_reference_name.as_str()).copied();
        let routing = task.task_type().is_some_and(TaskType::is_routing);
        let mut first = [own, inside].into_iter().flatten().min();
        if routing && own.is_none() {
            let ended_here = header.failed_step.as_deref() == Some(&task.task_reference_name);
            let at = [inside, after].into_iter().flatten().min();
            if let Some(at) = at.or(ended_here.then_some(end)) {
                inserts.push((at, depth, StepView::routed(header, task)));
                // It ran: what encloses it ran too.
                first = first.or(Some(at));
            }
        }
        after = [first, after].into_iter().flatten().min();
    }
    after
}

/// A workflow with its steps.
#[derive(Clone, Debug)]
pub struct WorkflowView {
    /// Its header.
    pub header: Header,
    /// Its steps (empty unless asked for).
    pub steps: Vec<StepView>,
}

impl WorkflowView {
    /// Conductor's `Workflow` JSON.
    pub fn to_conductor(&self) -> Value {
        let h = &self.header;
        json!({
            "workflowId": h.id,
            "workflowName": h.name,
            "workflowType": h.name,
            "workflowVersion": h.version,
            "version": h.version,
            "status": h.status.as_str(),
            "input": h.input,
            "output": if h.output.is_null() { Value::Object(Map::new()) } else { h.output.clone() },
            "variables": h.variables,
            "correlationId": h.correlation_id,
            "priority": h.priority,
            "reasonForIncompletion": h.reason,
            "failedReferenceTaskNames": h.failed_step.iter().collect::<Vec<_>>(),
            "parentWorkflowId": h.parent.as_ref().map(|p| p.workflow.clone()),
            "createTime": h.start_time,
            "startTime": h.start_time,
            "endTime": h.end_time.unwrap_or(0),
            "updateTime": h.end_time.unwrap_or(h.start_time),
            "tasks": self.steps.iter().map(StepView::to_conductor).collect::<Vec<_>>(),
        })
    }

    /// Conductor's `WorkflowSummary` JSON (search results).
    pub fn summary(h: &Header) -> Value {
        json!({
            "workflowId": h.id,
            "workflowType": h.name,
            "version": h.version,
            "status": h.status.as_str(),
            "correlationId": h.correlation_id,
            "priority": h.priority,
            "startTime": h.start_time,
            "endTime": h.end_time.unwrap_or(0),
            "reasonForIncompletion": h.reason,
            "input": h.input.to_string(),
            "output": h.output.to_string(),
        })
    }
}
