//! What the engine keeps of a workflow: its header record, and the arguments of each
//! step's job. Both are JSON, written by this crate only.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tranche_types::{JobId, RunName};

/// A workflow's status, as Conductor names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WorkflowStatus {
    /// Steps are running or ready.
    Running,
    /// Its steps are held: none is made ready until it is resumed.
    Paused,
    /// It reached its end.
    Completed,
    /// A step failed it (its retries spent), or a `TERMINATE` with status `FAILED`.
    Failed,
    /// Its time ran out.
    TimedOut,
    /// Ended from outside.
    Terminated,
}

impl WorkflowStatus {
    /// Every status, with its spelling.
    pub const ALL: [(WorkflowStatus, &'static str); 6] = [
        (WorkflowStatus::Running, "RUNNING"),
        (WorkflowStatus::Paused, "PAUSED"),
        (WorkflowStatus::Completed, "COMPLETED"),
        (WorkflowStatus::Failed, "FAILED"),
        (WorkflowStatus::TimedOut, "TIMED_OUT"),
        (WorkflowStatus::Terminated, "TERMINATED"),
    ];

    /// Conductor's spelling.
    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(s, _)| *s == self)
            .map_or("RUNNING", |(_, n)| n)
    }

    /// The status Conductor spells `name`.
    pub fn parse(name: &str) -> Option<WorkflowStatus> {
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(s, _)| *s)
    }

    /// It has ended and nothing more of it runs.
    pub fn is_terminal(self) -> bool {
        !matches!(self, WorkflowStatus::Running | WorkflowStatus::Paused)
    }
}

/// Where a sub-workflow reports its end: the parent's `SUB_WORKFLOW` step, a gate that
/// the child's end opens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Parent {
    /// The parent workflow.
    pub workflow: String,
    /// The parent's step's reference name.
    pub step: String,
    /// The unique key of the parent's gate (its generation and loop iterations in it).
    pub gate: String,
}

/// A workflow's header: everything about it but its steps (which are jobs). The record
/// `wf/<id>`, rewritten only when the workflow's variables or status change, never by
/// an ordinary step's end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The workflow's id.
    pub id: String,
    /// The workflow whose run holds its steps: its own id, or its topmost parent's.
    pub root: String,
    /// Set for a sub-workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Parent>,
    /// The definition's name.
    pub name: String,
    /// The definition's version.
    pub version: u32,
    /// The input it was started with.
    pub input: Value,
    /// The caller's correlation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// Its steps' priority (Conductor's 0–99; lower runs first here as there).
    #[serde(default)]
    pub priority: i16,
    /// Where it stands.
    pub status: WorkflowStatus,
    /// Its variables (`SET_VARIABLE`).
    #[serde(default)]
    pub variables: Map<String, Value>,
    /// Its output, once completed.
    #[serde(default)]
    pub output: Value,
    /// Why it did not complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The step that failed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_step: Option<String>,
    /// How many times it was restarted: its steps' keys carry it, so a restart's
    /// steps are new jobs beside the old ones.
    #[serde(default)]
    pub generation: u32,
    /// The iteration each of its loops is at (from 1), by the loop's reference name:
    /// the steps of an iteration are keyed with it, so each iteration's are new jobs.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub iterations: std::collections::BTreeMap<String, u32>,
    /// Step ends that came while it was paused, decided when it is resumed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldEnd>,
    /// When it started, ms since the epoch.
    pub start_time: i64,
    /// When its `timeoutSeconds` counts from, when not its start: its latest retry or
    /// rerun (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_from: Option<i64>,
    /// When it ended, ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<i64>,
}

impl Header {
    /// A workflow of `def` just started with `input`: running, no variables, no
    /// output, its own root (a sub-workflow's caller sets `root` and `parent`).
    pub fn running(
        id: String,
        def: &tranche_workflow_def::WorkflowDef,
        input: Value,
        start_time: i64,
    ) -> Header {
        Header {
            root: id.clone(),
            id,
            parent: None,
            name: def.name.clone(),
            version: def.version,
            input,
            correlation_id: None,
            priority: 0,
            status: WorkflowStatus::Running,
            variables: Map::new(),
            output: Value::Null,
            reason: None,
            failed_step: None,
            generation: 0,
            iterations: Default::default(),
            held: Vec::new(),
            start_time,
            timed_from: None,
            end_time: None,
        }
    }

    /// The record key of workflow `id`'s header.
    pub fn key(id: &str) -> String {
        format!("wf/{id}")
    }

    /// The run holding the steps of the workflows rooted at `root`.
    pub fn run_of(root: &str) -> RunName {
        RunName::new(format!("wf/{root}")).expect("a workflow id is a valid run name")
    }

    /// The run holding this workflow's steps.
    pub fn run(&self) -> RunName {
        Self::run_of(&self.root)
    }

    /// The unique key of its step `reference` in its run, within the loops `loops`
    /// (outermost first; see `Prepared::step_key`).
    pub fn step_key_in(&self, reference: &str, loops: &[String]) -> String {
        let mut key = step_key(&self.id, self.generation, reference);
        for l in loops {
            let n = self.iterations.get(l).copied().unwrap_or(1);
            key.push_str(&format!("__{n}"));
        }
        key
    }

    /// The prefix of the keys of this generation's steps.
    pub fn generation_prefix(&self) -> String {
        format!("{}:{}:", self.id, self.generation)
    }

    /// The state mappings see as `workflow`.
    pub fn mapping_view(&self) -> Value {
        let mut w = Map::new();
        w.insert("input".into(), self.input.clone());
        w.insert("variables".into(), Value::Object(self.variables.clone()));
        w.insert("workflowId".into(), Value::String(self.id.clone()));
        w.insert("workflowType".into(), Value::String(self.name.clone()));
        w.insert("version".into(), self.version.into());
        w.insert(
            "correlationId".into(),
            self.correlation_id
                .clone()
                .map_or(Value::Null, Value::String),
        );
        w.insert("status".into(), self.status.as_str().into());
        Value::Object(w)
    }
}

/// The unique key of a workflow's step in its run: the workflow and the reference
/// name, so sub-workflows sharing their root's run never collide, and a step decided
/// twice (a retried decision) is enqueued once.
pub fn step_key(workflow: &str, generation: u32, reference: &str) -> String {
    format!("{workflow}:{generation}:{reference}")
}

/// A step's end that came while its workflow was paused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeldEnd {
    /// The step's reference name.
    #[serde(rename = "ref")]
    pub reference: String,
    /// Why it failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// Its failure was a timeout under `TIME_OUT_WF`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// For a step a dynamic fork made: the fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<String>,
    /// A failure of it does not fail the workflow.
    #[serde(default)]
    pub optional: bool,
}

/// A step's job arguments: whose step it is and its resolved input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepArgs {
    /// The workflow.
    pub wf: String,
    /// The workflow's definition name (Conductor's `workflowType`).
    pub wf_type: String,
    /// The step's reference name.
    #[serde(rename = "ref")]
    pub reference: String,
    /// Its type, as Conductor spells it.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its task name.
    pub name: String,
    /// Its resolved input.
    pub input: Value,
    /// For a step a dynamic fork made: the fork's reference name (its end arrives at
    /// the fork's join).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<String>,
    /// A failure of it does not fail the workflow.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
    /// `SUB_WORKFLOW`: the child workflow's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<String>,
}

/// A Conductor task id: the job and the attempt, so an update names the attempt it
/// answers for (a late worker's update of an attempt since retried is refused).
pub fn task_id(job: JobId, attempt: u32) -> String {
    format!("{}-{attempt}", job.0)
}

/// The job and attempt of a task id made by [`task_id`].
pub fn parse_task_id(id: &str) -> Option<(JobId, u32)> {
    let (job, attempt) = id.split_once('-')?;
    Some((JobId(job.parse().ok()?), attempt.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_round_trip() {
        assert_eq!(parse_task_id(&task_id(JobId(42), 3)), Some((JobId(42), 3)));
        assert_eq!(parse_task_id("42"), None);
        assert_eq!(parse_task_id("x-1"), None);
    }

    #[test]
    fn statuses_are_spelled_as_conductor_does() {
        for (status, name) in WorkflowStatus::ALL {
            assert_eq!(WorkflowStatus::parse(name), Some(status));
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                Value::String(name.into())
            );
        }
    }
}
