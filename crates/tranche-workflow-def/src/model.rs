//! Conductor's definition JSON as types. Field names are Conductor's (camelCase), every
//! field Conductor gives a default has the same default here, and fields this crate
//! does not read are kept (`extra`), so a definition read and written again loses
//! nothing a Conductor server would have kept.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A workflow definition: its steps, in order, and how its input and output are named.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowDef {
    /// The workflow's name; with `version`, its identity.
    pub name: String,
    /// The definition's version (Conductor's default: 1).
    #[serde(default = "first_version")]
    pub version: u32,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its steps, run in order (forks, switches and loops nest more).
    pub tasks: Vec<WorkflowTask>,
    /// The input's keys, for documentation (Conductor does not enforce them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_parameters: Vec<String>,
    /// The workflow's output, as mappings of its steps' outputs.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub output_parameters: Map<String, Value>,
    /// Conductor's schema version (2 for every definition of the last years).
    #[serde(default = "schema_two")]
    pub schema_version: u32,
    /// Seconds the whole workflow may take; 0 for no limit.
    #[serde(default)]
    pub timeout_seconds: u64,
    /// `TIME_OUT_WF` or `ALERT_ONLY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_policy: Option<String>,
    /// A workflow started when this one fails, with its id as input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_workflow: Option<String>,
    /// Fields this crate does not read (`ownerEmail`, `restartable`, …), kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One step of a workflow, of any type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowTask {
    /// For `SIMPLE`, the task definition (and the queue workers poll); for system
    /// tasks, a label.
    pub name: String,
    /// Unique in the workflow: how mappings and joins name this step.
    pub task_reference_name: String,
    /// The step's type, as Conductor spells it (default `SIMPLE`); see [`TaskType`].
    #[serde(rename = "type", default = "simple")]
    pub kind: String,
    /// The step's input, as mappings (`${workflow.input.x}`, `${ref.output.y}`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub input_parameters: Map<String, Value>,
    /// `SWITCH`: the steps of each case.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub decision_cases: BTreeMap<String, Vec<WorkflowTask>>,
    /// `SWITCH`: the steps when no case matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_case: Vec<WorkflowTask>,
    /// `FORK_JOIN`: the branches, each a sequence of steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fork_tasks: Vec<Vec<WorkflowTask>>,
    /// `JOIN`: the reference names it waits for (the last step of each branch).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub join_on: Vec<String>,
    /// `DO_WHILE`: the JavaScript condition to loop again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_condition: Option<String>,
    /// `DO_WHILE`: the steps of one iteration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loop_over: Vec<WorkflowTask>,
    /// `SUB_WORKFLOW`: which workflow to start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_workflow_param: Option<SubWorkflowParams>,
    /// `FORK_JOIN_DYNAMIC`: the input key holding the list of steps to fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_fork_tasks_param: Option<String>,
    /// `FORK_JOIN_DYNAMIC`: the input key holding each forked step's input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_fork_tasks_input_param_name: Option<String>,
    /// `SWITCH`: `value-param` or `javascript`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator_type: Option<String>,
    /// `SWITCH`: the input key (`value-param`) or the script (`javascript`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    /// `DECISION` (the older `SWITCH`): the input key whose value picks the case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_value_param: Option<String>,
    /// A failure of this step does not fail the workflow.
    #[serde(default)]
    pub optional: bool,
    /// Fields this crate does not read, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Which workflow a `SUB_WORKFLOW` step starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubWorkflowParams {
    /// The workflow's name.
    pub name: String,
    /// Its version; the latest when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    /// Fields this crate does not read, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A task definition: how a `SIMPLE` step of that name is retried, timed and limited.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskDef {
    /// The task's name, as steps and workers name it.
    pub name: String,
    /// Attempts after the first (Conductor's default: 3).
    #[serde(default = "three")]
    pub retry_count: u32,
    /// `FIXED`, `EXPONENTIAL_BACKOFF` or `LINEAR_BACKOFF`.
    #[serde(default = "fixed")]
    pub retry_logic: String,
    /// The delay before a retry, in seconds (Conductor's default: 60).
    #[serde(default = "sixty")]
    pub retry_delay_seconds: u64,
    /// Seconds a step may take from its first poll to its end; 0 for no limit.
    #[serde(default)]
    pub timeout_seconds: u64,
    /// `RETRY`, `TIME_OUT_WF` or `ALERT_ONLY`.
    #[serde(default = "time_out_wf")]
    pub timeout_policy: String,
    /// Seconds a worker may hold a polled step without an update (Conductor's
    /// default: 3,600).
    #[serde(default = "an_hour")]
    pub response_timeout_seconds: u64,
    /// Seconds a step may wait to be polled; 0 for no limit.
    #[serde(default)]
    pub poll_timeout_seconds: u64,
    /// Most steps of this task running at once; 0 for no limit.
    #[serde(default)]
    pub concurrent_exec_limit: u32,
    /// Most steps started per `rate_limit_frequency_in_seconds`; 0 for no limit.
    #[serde(default)]
    pub rate_limit_per_frequency: u32,
    /// The window of `rate_limit_per_frequency`, in seconds.
    #[serde(default = "one")]
    pub rate_limit_frequency_in_seconds: u32,
    /// Fields this crate does not read (`ownerEmail`, `inputKeys`, …), kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The step types a definition may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskType {
    /// Run by a worker that polls the task's name.
    Simple,
    /// Start another workflow and wait for it.
    SubWorkflow,
    /// Run branches side by side; a `JOIN` follows.
    ForkJoin,
    /// Wait for the named steps of a fork.
    Join,
    /// Fork as many steps as an input lists; a `JOIN` follows.
    ForkJoinDynamic,
    /// Pick a case by a value or a script.
    Switch,
    /// `SWITCH` as Conductor first spelled it (by `caseValueParam`).
    Decision,
    /// Run steps again while a condition holds.
    DoWhile,
    /// Wait for a duration, a time, or a completion from outside.
    Wait,
    /// End the workflow with a status.
    Terminate,
    /// Set workflow variables.
    SetVariable,
    /// Evaluate a script.
    Inline,
    /// Transform JSON with jq.
    JsonJqTransform,
}

impl TaskType {
    /// A step the decider decides on the spot (it routes, sets or ends, and has no job
    /// of its own): forks, switches, `SET_VARIABLE`, `TERMINATE`, loops.
    pub fn is_routing(self) -> bool {
        matches!(
            self,
            TaskType::ForkJoin
                | TaskType::ForkJoinDynamic
                | TaskType::Switch
                | TaskType::Decision
                | TaskType::SetVariable
                | TaskType::Terminate
                | TaskType::DoWhile
        )
    }

    /// Every type, with its spelling.
    pub const ALL: [(TaskType, &'static str); 13] = [
        (TaskType::Simple, "SIMPLE"),
        (TaskType::SubWorkflow, "SUB_WORKFLOW"),
        (TaskType::ForkJoin, "FORK_JOIN"),
        (TaskType::Join, "JOIN"),
        (TaskType::ForkJoinDynamic, "FORK_JOIN_DYNAMIC"),
        (TaskType::Switch, "SWITCH"),
        (TaskType::Decision, "DECISION"),
        (TaskType::DoWhile, "DO_WHILE"),
        (TaskType::Wait, "WAIT"),
        (TaskType::Terminate, "TERMINATE"),
        (TaskType::SetVariable, "SET_VARIABLE"),
        (TaskType::Inline, "INLINE"),
        (TaskType::JsonJqTransform, "JSON_JQ_TRANSFORM"),
    ];

    /// The type Conductor spells `name`, if it is one of [`TaskType::ALL`].
    pub fn parse(name: &str) -> Option<TaskType> {
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(t, _)| *t)
    }
}

impl WorkflowTask {
    /// The step's type; `None` for a type this engine does not run.
    pub fn task_type(&self) -> Option<TaskType> {
        TaskType::parse(&self.kind)
    }
}

fn first_version() -> u32 {
    1
}
fn schema_two() -> u32 {
    2
}
fn simple() -> String {
    "SIMPLE".into()
}
fn three() -> u32 {
    3
}
fn fixed() -> String {
    "FIXED".into()
}
fn sixty() -> u64 {
    60
}
fn time_out_wf() -> String {
    "TIME_OUT_WF".into()
}
fn an_hour() -> u64 {
    3_600
}
fn one() -> u32 {
    1
}
