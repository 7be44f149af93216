//! Workflows and their steps as Conductor shows them (`GET /api/workflow/{id}`), built
//! from the header and the steps' jobs.

use serde_json::{json, Map, Value};
use tranche_types::{JobId, JobRecord};

use crate::engine::conductor_status;
use crate::state::{task_id, Header, StepArgs};

/// One step of a workflow.
#[derive(Clone, Debug)]
pub struct StepView {
    /// Its job.
    pub job: JobId,
    /// Conductor's name of its state.
    pub status: &'static str,
    /// Its arguments (workflow, reference name, type, input).
    pub args: Option<StepArgs>,
    /// The job as stored.
    pub record: JobRecord,
}

impl StepView {
    /// The step of `job`.
    pub fn of(job: &JobRecord) -> StepView {
        StepView {
            job: job.id,
            status: conductor_status(job.state),
            args: serde_json::from_str(&job.args).ok(),
            record: job.clone(),
        }
    }

    /// Conductor's `Task` JSON.
    pub fn to_conductor(&self) -> Value {
        let job = &self.record;
        let args = self.args.as_ref();
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
            "attempts": job.errors.iter().map(|e| json!({"attempt": e.attempt, "at": e.at.0 / 1_000, "error": e.error})).collect::<Vec<_>>(),
        })
    }
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
