//! A definition is checked whole before it is stored, and every problem is said with
//! the step's path (`tasks[3].forkTasks[1][0]`), the field, what was expected and what
//! was found: a workflow that would fail at its tenth step fails when it is applied.

use std::collections::HashMap;
use std::fmt;

use serde_json::Value;

use crate::model::{TaskDef, TaskType, WorkflowDef, WorkflowTask};

/// One thing wrong with a definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where: `tasks[3].forkTasks[1][0]`, or empty for the workflow itself.
    pub path: String,
    /// The field, as Conductor names it.
    pub field: &'static str,
    /// What a valid definition has there.
    pub expected: String,
    /// What this one has.
    pub got: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.field)?;
        } else {
            write!(f, "{}.{}", self.path, self.field)?;
        }
        write!(f, ": expected {}, got {}", self.expected, self.got)
    }
}

impl WorkflowDef {
    /// Every problem of the definition, in the order of the file; empty when it is
    /// valid. Sub-workflows and task definitions are named, not looked up: whether they
    /// exist is the store's to check when the definition is applied.
    pub fn problems(&self) -> Vec<Problem> {
        let mut check = Check::default();
        if self.name.trim().is_empty() {
            check.say("", "name", "a workflow name", quoted(&self.name));
        }
        if self.tasks.is_empty() {
            check.say("", "tasks", "at least one step", "none".into());
        }
        let mut refs = HashMap::new();
        collect_refs(&self.tasks, "tasks", &mut refs, &mut check);
        check.sequence(&self.tasks, "tasks", &refs);
        for (key, value) in &self.output_parameters {
            check.mappings(value, "", "outputParameters", key, &refs);
        }
        check.problems
    }
}

impl WorkflowDef {
    /// Every step with its path (`tasks[3].forkTasks[1][0]`, as a [`Problem`] names
    /// it), in the order of the file: a step before the steps it holds (its branches,
    /// its cases in their order, its default case, its loop's body).
    pub fn steps(&self) -> Vec<(String, &WorkflowTask)> {
        fn walk<'d>(
            tasks: &'d [WorkflowTask],
            path: &str,
            out: &mut Vec<(String, &'d WorkflowTask)>,
        ) {
            for (i, task) in tasks.iter().enumerate() {
                let here = format!("{path}[{i}]");
                out.push((here.clone(), task));
                for (b, branch) in task.fork_tasks.iter().enumerate() {
                    walk(branch, &format!("{here}.forkTasks[{b}]"), out);
                }
                for (case, steps) in &task.decision_cases {
                    walk(steps, &format!("{here}.decisionCases[{case:?}]"), out);
                }
                walk(&task.default_case, &format!("{here}.defaultCase"), out);
                walk(&task.loop_over, &format!("{here}.loopOver"), out);
            }
        }
        let mut out = Vec::new();
        walk(&self.tasks, "tasks", &mut out);
        out
    }
}

impl TaskDef {
    /// Every problem of the task definition; empty when it is valid. As Conductor
    /// checks them: known retry logic and timeout policy, and a response timeout within
    /// the step's whole timeout (a worker could otherwise hold a step past it).
    pub fn problems(&self) -> Vec<Problem> {
        let mut check = Check::default();
        if self.name.trim().is_empty() {
            check.say("", "name", "a task name", quoted(&self.name));
        }
        const RETRY_LOGIC: [&str; 3] = ["FIXED", "EXPONENTIAL_BACKOFF", "LINEAR_BACKOFF"];
        if !RETRY_LOGIC.contains(&self.retry_logic.as_str()) {
            check.say(
                "",
                "retryLogic",
                &format!("one of {}", RETRY_LOGIC.join(", ")),
                quoted(&self.retry_logic),
            );
        }
        const POLICIES: [&str; 3] = ["RETRY", "TIME_OUT_WF", "ALERT_ONLY"];
        if !POLICIES.contains(&self.timeout_policy.as_str()) {
            check.say(
                "",
                "timeoutPolicy",
                &format!("one of {}", POLICIES.join(", ")),
                quoted(&self.timeout_policy),
            );
        }
        if self.timeout_seconds > 0 && self.response_timeout_seconds > self.timeout_seconds {
            check.say(
                "",
                "responseTimeoutSeconds",
                &format!("at most timeoutSeconds ({})", self.timeout_seconds),
                self.response_timeout_seconds.to_string(),
            );
        }
        if self.rate_limit_per_frequency > 0 && self.rate_limit_frequency_in_seconds == 0 {
            check.say(
                "",
                "rateLimitFrequencyInSeconds",
                "at least 1 with rateLimitPerFrequency",
                "0".into(),
            );
        }
        check.problems
    }
}

/// The evaluators an `INLINE` step may name: `javascript` and `graaljs` (Conductor's
/// later name for the same language) run the script, `value-param` takes the input key
/// `expression` names.
const INLINE_EVALUATORS: [&str; 3] = ["javascript", "graaljs", "value-param"];

#[derive(Default)]
struct Check {
    problems: Vec<Problem>,
}

impl Check {
    fn say(&mut self, path: &str, field: &'static str, expected: &str, got: String) {
        self.problems.push(Problem {
            path: path.to_string(),
            field,
            expected: expected.to_string(),
            got,
        });
    }

    /// The steps of one sequence (a workflow's, a branch's, a case's, a loop's).
    fn sequence(&mut self, tasks: &[WorkflowTask], path: &str, refs: &HashMap<String, String>) {
        for (i, task) in tasks.iter().enumerate() {
            let here = format!("{path}[{i}]");
            self.task(task, &here, refs);
            let next = tasks.get(i + 1);
            if matches!(
                task.task_type(),
                Some(TaskType::ForkJoin | TaskType::ForkJoinDynamic)
            ) && next.and_then(WorkflowTask::task_type) != Some(TaskType::Join)
            {
                let got = next.map_or("the end of the steps".to_string(), |n| {
                    format!("a {} step", quoted(&n.kind))
                });
                self.say(&here, "type", "a JOIN step right after the fork", got);
            }
            if task.task_type() == Some(TaskType::Join) {
                self.join(task, &here, i.checked_sub(1).map(|p| &tasks[p]));
            }
        }
    }

    fn task(&mut self, task: &WorkflowTask, here: &str, refs: &HashMap<String, String>) {
        if task.name.trim().is_empty() {
            self.say(here, "name", "a step name", quoted(&task.name));
        }
        for (key, value) in &task.input_parameters {
            self.mappings(value, here, "inputParameters", key, refs);
        }
        let Some(kind) = task.task_type() else {
            let known: Vec<&str> = TaskType::ALL.iter().map(|(_, n)| *n).collect();
            self.say(
                here,
                "type",
                &format!("one of {}", known.join(", ")),
                quoted(&task.kind),
            );
            return;
        };
        match kind {
            TaskType::SubWorkflow => {
                if task
                    .sub_workflow_param
                    .as_ref()
                    .is_none_or(|p| p.name.trim().is_empty())
                {
                    self.say(
                        here,
                        "subWorkflowParam",
                        "the name of the workflow to start",
                        "none".into(),
                    );
                }
            }
            TaskType::ForkJoin => {
                if task.fork_tasks.is_empty() {
                    self.say(here, "forkTasks", "at least one branch", "none".into());
                }
                for (b, branch) in task.fork_tasks.iter().enumerate() {
                    let path = format!("{here}.forkTasks[{b}]");
                    if branch.is_empty() {
                        self.say(
                            &path,
                            "tasks",
                            "at least one step",
                            "an empty branch".into(),
                        );
                    }
                    self.sequence(branch, &path, refs);
                }
            }
            TaskType::ForkJoinDynamic => {
                for (field, value) in [
                    ("dynamicForkTasksParam", &task.dynamic_fork_tasks_param),
                    (
                        "dynamicForkTasksInputParamName",
                        &task.dynamic_fork_tasks_input_param_name,
                    ),
                ] {
                    if value.as_deref().is_none_or(|v| v.trim().is_empty()) {
                        self.say(here, field, "the input key it names", "none".into());
                    }
                }
            }
            TaskType::Switch => {
                match task.evaluator_type.as_deref() {
                    Some("value-param" | "javascript") => {}
                    other => self.say(
                        here,
                        "evaluatorType",
                        "\"value-param\" or \"javascript\"",
                        other.map_or("none".into(), quoted),
                    ),
                }
                if task
                    .expression
                    .as_deref()
                    .is_none_or(|e| e.trim().is_empty())
                {
                    self.say(
                        here,
                        "expression",
                        "the value or script to switch on",
                        "none".into(),
                    );
                }
                self.cases(task, here, refs);
            }
            TaskType::Decision => {
                if task
                    .case_value_param
                    .as_deref()
                    .is_none_or(|e| e.trim().is_empty())
                {
                    self.say(
                        here,
                        "caseValueParam",
                        "the input key to switch on",
                        "none".into(),
                    );
                }
                self.cases(task, here, refs);
            }
            TaskType::DoWhile => {
                if task
                    .loop_condition
                    .as_deref()
                    .is_none_or(|c| c.trim().is_empty())
                {
                    self.say(
                        here,
                        "loopCondition",
                        "a JavaScript condition",
                        "none".into(),
                    );
                }
                if task.loop_over.is_empty() {
                    self.say(here, "loopOver", "at least one step", "none".into());
                }
                self.sequence(&task.loop_over, &format!("{here}.loopOver"), refs);
            }
            TaskType::Inline => {
                for key in ["evaluatorType", "expression"] {
                    if !task.input_parameters.contains_key(key) {
                        self.say(
                            here,
                            "inputParameters",
                            &format!("an {key:?} (INLINE takes its script there)"),
                            "none".into(),
                        );
                    }
                }
                // Checked when written out; a mapping is the run's to resolve.
                match task.input_parameters.get("evaluatorType") {
                    Some(Value::String(e))
                        if e.contains("${") || INLINE_EVALUATORS.contains(&e.as_str()) => {}
                    None => {}
                    Some(other) => self.say(
                        here,
                        "inputParameters",
                        &format!(
                            "an \"evaluatorType\" of {}",
                            INLINE_EVALUATORS.map(quoted).join(", ")
                        ),
                        other.to_string(),
                    ),
                }
            }
            TaskType::JsonJqTransform => {
                if !task.input_parameters.contains_key("queryExpression") {
                    self.say(
                        here,
                        "inputParameters",
                        "a \"queryExpression\" (the jq program)",
                        "none".into(),
                    );
                }
            }
            TaskType::Simple
            | TaskType::Join
            | TaskType::Wait
            | TaskType::Terminate
            | TaskType::SetVariable => {}
        }
    }

    fn cases(&mut self, task: &WorkflowTask, here: &str, refs: &HashMap<String, String>) {
        for (case, tasks) in &task.decision_cases {
            self.sequence(tasks, &format!("{here}.decisionCases[{case:?}]"), refs);
        }
        self.sequence(&task.default_case, &format!("{here}.defaultCase"), refs);
    }

    /// A `JOIN` waits for steps of the fork right before it.
    fn join(&mut self, join: &WorkflowTask, here: &str, before: Option<&WorkflowTask>) {
        let Some(fork) = before.filter(|b| {
            matches!(
                b.task_type(),
                Some(TaskType::ForkJoin | TaskType::ForkJoinDynamic)
            )
        }) else {
            let got = before.map_or("nothing".to_string(), |b| {
                format!("a {} step", quoted(&b.kind))
            });
            self.say(here, "type", "a JOIN right after a fork", got);
            return;
        };
        if fork.task_type() == Some(TaskType::ForkJoinDynamic) {
            return;
        }
        let mut forked = HashMap::new();
        let mut quiet = Check::default();
        for branch in &fork.fork_tasks {
            collect_refs(branch, "", &mut forked, &mut quiet);
        }
        for (j, name) in join.join_on.iter().enumerate() {
            if !forked.contains_key(name) {
                self.problems.push(Problem {
                    path: format!("{here}.joinOn[{j}]"),
                    field: "taskReferenceName",
                    expected: "a step of the fork's branches".into(),
                    got: quoted(name),
                });
            }
        }
    }

    /// The `${…}` mappings in `value` (a step's input or the workflow's output).
    fn mappings(
        &mut self,
        value: &Value,
        here: &str,
        field: &'static str,
        key: &str,
        refs: &HashMap<String, String>,
    ) {
        match value {
            Value::String(text) => {
                let mut rest = text.as_str();
                while let Some(start) = rest.find("${") {
                    let after = &rest[start + 2..];
                    let Some(end) = after.find('}') else {
                        self.say(
                            here,
                            field,
                            &format!("{key:?}: a mapping closed by '}}'"),
                            quoted(text),
                        );
                        return;
                    };
                    let expr = &after[..end];
                    let head = expr.split(['.', '[']).next().unwrap_or("");
                    if head != "workflow" && !refs.contains_key(head) {
                        self.say(
                            here,
                            field,
                            &format!(
                                "{key:?}: a mapping of workflow.… or of a step's reference name"
                            ),
                            format!("${{{expr}}} (no step is {})", quoted(head)),
                        );
                    }
                    rest = &after[end + 1..];
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.mappings(item, here, field, key, refs);
                }
            }
            Value::Object(map) => {
                for item in map.values() {
                    self.mappings(item, here, field, key, refs);
                }
            }
            _ => {}
        }
    }
}

/// Every reference name under `tasks`, with its path; a name given twice is a problem.
fn collect_refs(
    tasks: &[WorkflowTask],
    path: &str,
    refs: &mut HashMap<String, String>,
    check: &mut Check,
) {
    for (i, task) in tasks.iter().enumerate() {
        let here = format!("{path}[{i}]");
        if task.task_reference_name.trim().is_empty() {
            check.say(
                &here,
                "taskReferenceName",
                "a reference name",
                quoted(&task.task_reference_name),
            );
        } else if let Some(first) = refs.get(&task.task_reference_name) {
            check.say(
                &here,
                "taskReferenceName",
                &format!("a reference name no other step has ({first} has it)"),
                quoted(&task.task_reference_name),
            );
        } else {
            refs.insert(task.task_reference_name.clone(), here.clone());
        }
        for (b, branch) in task.fork_tasks.iter().enumerate() {
            collect_refs(branch, &format!("{here}.forkTasks[{b}]"), refs, check);
        }
        for (case, branch) in &task.decision_cases {
            collect_refs(
                branch,
                &format!("{here}.decisionCases[{case:?}]"),
                refs,
                check,
            );
        }
        collect_refs(
            &task.default_case,
            &format!("{here}.defaultCase"),
            refs,
            check,
        );
        collect_refs(&task.loop_over, &format!("{here}.loopOver"), refs, check);
    }
}

fn quoted(s: &str) -> String {
    format!("{s:?}")
}
