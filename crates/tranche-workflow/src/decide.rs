//! What a workflow's start and a step's end do, each step type by its own rule.
//!
//! Steps a worker (or the engine, for a sub-workflow, a wait, an `INLINE` script or a
//! jq transform) runs are scheduled. Steps that only route are decided on the spot, as
//! Conductor decides them within one decide: a fork schedules its branches' first steps
//! and tells the engine how many arrivals its join waits for; a switch picks its case
//! from its input (`value-param`: an input key's value; `javascript`: its expression
//! evaluated with `$` its input, in the sandbox of `tranche-workflow-expr`, within the
//! graph's [`Limits`](tranche_workflow_expr::Limits)); `SET_VARIABLE` sets; `TERMINATE`
//! ends the workflow. A loop's condition is evaluated when the engine has recorded the
//! end of an iteration ([`decide_loop_end`]). A step's input is resolved from the
//! workflow's state ([`Context`]) when it is scheduled.
//!
//! Still pure: a script sees only the input it is given, and is bounded in time and
//! memory; only JavaScript's `Date` and `Math.random` can make it answer differently
//! on the same input.

use serde_json::{Map, Value};
use tranche_workflow_def::{TaskType, WorkflowTask};
use tranche_workflow_expr::{
    case_label, condition_holds, eval_javascript, resolve, Context, ScriptError,
};

use crate::{After, Graph};

/// A step to run, with its input resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// Its reference name.
    pub reference: String,
    /// Its task name (the queue a worker polls, for `SIMPLE`).
    pub name: String,
    /// Its type.
    pub kind: TaskType,
    /// Its input: the definition's `inputParameters`, resolved.
    pub input: Value,
    /// For a step a dynamic fork made (in no definition): that fork's reference name,
    /// which places its end ([`decide_end_forked`]).
    pub fork: Option<String>,
    /// A failure of it does not fail the workflow.
    pub optional: bool,
}

/// One thing the engine does, in order, in the transaction of the start or end decided.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Run a step.
    Schedule(Schedule),
    /// A fork started: its join waits for this many arrivals.
    AwaitJoin {
        /// The join's reference name.
        join: String,
        /// How many branches must arrive.
        arrivals: usize,
    },
    /// A branch ended: one arrival at this join (the engine counts them; at the last
    /// it ends the join, and its end is decided in turn).
    Arrive {
        /// The join's reference name.
        join: String,
    },
    /// Set these workflow variables.
    SetVariables(Map<String, Value>),
    /// A loop's iteration ended: the engine records it (the loop's output keeps its
    /// `iteration`, as Conductor's does), then [`decide_loop_end`] evaluates the loop's
    /// condition and says what follows.
    EvaluateLoop {
        /// The `DO_WHILE` step's reference name.
        loop_ref: String,
    },
    /// The workflow completed with this output.
    Complete {
        /// The definition's `outputParameters`, resolved.
        output: Value,
    },
    /// The workflow failed.
    Fail {
        /// The step that failed it.
        step: String,
        /// Why.
        reason: String,
        /// The status it ends with: said by whoever made the failure, never read from
        /// its reason (a worker's reason is its own text).
        ending: Ending,
    },
}

/// The status a failed workflow ends with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ending {
    /// `FAILED`: a step failed for good, or a `TERMINATE` step said so.
    #[default]
    Failed,
    /// `TIMED_OUT`: a step ran past its timeout under `TIME_OUT_WF`.
    TimedOut,
    /// `TERMINATED`: a `TERMINATE` step with `terminationStatus` `TERMINATED`.
    Terminated,
}

/// How a step ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It completed (its output is in the context given with it).
    Completed,
    /// It failed for good (its retries spent), for this reason.
    Failed(String),
    /// It ran past its timeout under `TIME_OUT_WF`, for this reason: its workflow
    /// ends `TIMED_OUT` (unless the step is optional).
    TimedOut(String),
}

impl Ended {
    /// Why it failed and the status its workflow ends with, if it failed.
    fn failure(&self) -> Option<(&String, Ending)> {
        match self {
            Ended::Completed => None,
            Ended::Failed(reason) => Some((reason, Ending::Failed)),
            Ended::TimedOut(reason) => Some((reason, Ending::TimedOut)),
        }
    }
}

/// What starting a workflow does: its first step reached.
pub fn decide_start(graph: &Graph<'_>, context: &Context) -> Vec<Action> {
    let mut decider = Decider::new(graph, context);
    match graph.first() {
        Some(first) => decider.reach(first),
        None => decider.go_on(&After::WorkflowEnd),
    }
    decider.actions
}

/// What a rerun from step `reference` does: that step reached again, on the workflow's
/// state as it is now (the steps before it keep their outputs; the engine has removed
/// those of [`Graph::rerun_scope`]).
pub fn decide_rerun(graph: &Graph<'_>, context: &Context, reference: &str) -> Vec<Action> {
    let mut decider = Decider::new(graph, context);
    decider.reach(reference);
    decider.actions
}

/// What the end of step `reference` does. `context` holds the workflow's state with
/// that step's output in it.
pub fn decide_end(
    graph: &Graph<'_>,
    context: &Context,
    reference: &str,
    ended: &Ended,
) -> Vec<Action> {
    let mut decider = Decider::new(graph, context);
    let Some(task) = graph.task(reference) else {
        decider.actions.push(Action::Fail {
            step: reference.to_string(),
            reason: "no step of the workflow's definition has this reference name".into(),
            ending: Ending::Failed,
        });
        return decider.actions;
    };
    if let Some((reason, ending)) = ended.failure() {
        if !task.optional {
            decider.actions.push(Action::Fail {
                step: reference.to_string(),
                reason: reason.clone(),
                ending,
            });
            return decider.actions;
        }
    }
    if let Some(after) = graph.after(reference) {
        decider.go_on(after);
    }
    decider.actions
}

/// What a loop's condition decided at the end of an iteration ([`Action::EvaluateLoop`]):
/// `again`, its body from its first step; else what follows the loop.
pub fn decide_loop(
    graph: &Graph<'_>,
    context: &Context,
    loop_ref: &str,
    again: bool,
) -> Vec<Action> {
    let mut decider = Decider::new(graph, context);
    match (again, graph.body_first(loop_ref)) {
        (true, Some(first)) => decider.reach(first),
        _ => {
            if let Some(after) = graph.after(loop_ref) {
                decider.go_on(after);
            }
        }
    }
    decider.actions
}

/// What the end of a loop's iteration does ([`Action::EvaluateLoop`]), once the engine
/// has recorded it: the loop's `loopCondition` evaluated ([`loop_goes_again`]), then
/// [`decide_loop`]. A condition that fails (it throws, it does not parse, it runs out
/// of time) fails the workflow, naming the loop, as Conductor fails the loop.
pub fn decide_loop_end(graph: &Graph<'_>, context: &Context, loop_ref: &str) -> Vec<Action> {
    match loop_goes_again(graph, context, loop_ref) {
        Ok(again) => decide_loop(graph, context, loop_ref, again),
        Err(e) => vec![Action::Fail {
            step: loop_ref.to_string(),
            reason: format!("loopCondition: {e}"),
            ending: Ending::Failed,
        }],
    }
}

/// Whether loop `loop_ref` goes again: its `loopCondition` evaluated on
/// [`loop_condition_input`], within the graph's limits, read as Conductor's `evalBool`
/// reads it (`true`, or a number above 0).
pub fn loop_goes_again(
    graph: &Graph<'_>,
    context: &Context,
    loop_ref: &str,
) -> Result<bool, ScriptError> {
    let condition = graph
        .task(loop_ref)
        .filter(|t| t.task_type() == Some(TaskType::DoWhile))
        .and_then(|t| t.loop_condition.as_deref())
        .ok_or_else(|| ScriptError::Input {
            message: format!("no DO_WHILE step {loop_ref:?} with a loopCondition"),
        })?;
    let input = loop_condition_input(graph, context, loop_ref);
    let value = eval_javascript(condition, &input, graph.limits())?;
    Ok(condition_holds(&value))
}

/// What a loop's condition sees as `$`, as Conductor gives it: the loop's
/// `inputParameters`, resolved, and under each reference name of the loop and of the
/// steps in its body (at any depth) that step's output, for those the context holds.
/// The loop's own output is where Conductor keeps its `iteration`
/// (`$.loop_ref['iteration']`): the engine is to keep it there.
pub fn loop_condition_input(graph: &Graph<'_>, context: &Context, loop_ref: &str) -> Value {
    let Some(task) = graph.task(loop_ref) else {
        return Value::Object(Map::new());
    };
    let mut input = match resolve(&Value::Object(task.input_parameters.clone()), context) {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    fn refs<'t>(task: &'t WorkflowTask, out: &mut Vec<&'t str>) {
        out.push(&task.task_reference_name);
        let held = task
            .fork_tasks
            .iter()
            .flatten()
            .chain(task.decision_cases.values().flatten())
            .chain(&task.default_case)
            .chain(&task.loop_over);
        for t in held {
            refs(t, out);
        }
    }
    let mut names = Vec::new();
    refs(task, &mut names);
    for name in names {
        if let Some(output) = context.get(name).and_then(|step| step.get("output")) {
            input.insert(name.to_string(), output.clone());
        }
    }
    Value::Object(input)
}

/// What the end of a step a dynamic fork made does: one arrival at the fork's join
/// (such a step is in no definition, so [`decide_end`] cannot place it). A failed one
/// fails the workflow unless it was made optional.
pub fn decide_end_forked(
    graph: &Graph<'_>,
    fork: &str,
    reference: &str,
    optional: bool,
    ended: &Ended,
) -> Vec<Action> {
    match (ended.failure(), graph.join_of(fork)) {
        (Some((reason, ending)), _) if !optional => vec![Action::Fail {
            step: reference.to_string(),
            reason: reason.clone(),
            ending,
        }],
        (_, Some(join)) => vec![Action::Arrive {
            join: join.to_string(),
        }],
        (_, None) => vec![Action::Fail {
            step: reference.to_string(),
            reason: format!("{fork:?} is no fork of the workflow's definition"),
            ending: Ending::Failed,
        }],
    }
}

struct Decider<'g, 'd> {
    graph: &'g Graph<'d>,
    /// The state as this decide changes it (a `SET_VARIABLE` is seen by the steps
    /// after it).
    context: Context,
    actions: Vec<Action>,
}

impl<'g, 'd> Decider<'g, 'd> {
    fn new(graph: &'g Graph<'d>, context: &Context) -> Self {
        Decider {
            graph,
            context: context.clone(),
            actions: Vec::new(),
        }
    }

    fn go_on(&mut self, after: &After) {
        match after {
            After::Reach(next) => self.reach(next),
            After::Arrive { join } => self.actions.push(Action::Arrive { join: join.clone() }),
            After::LoopEnd { loop_ref } => self.actions.push(Action::EvaluateLoop {
                loop_ref: loop_ref.clone(),
            }),
            After::WorkflowEnd => {
                let output = resolve(
                    &Value::Object(self.graph.def().output_parameters.clone()),
                    &self.context,
                );
                self.actions.push(Action::Complete { output });
            }
        }
    }

    /// A dynamic fork reached: the steps its input lists (`dynamicForkTasksParam`, a
    /// list of steps as a definition writes them), each with its input from the map
    /// `dynamicForkTasksInputParamName` names (by reference name), and its join told
    /// how many. A list that is not steps fails the workflow, naming the fork and the
    /// first step that is not one; an empty list makes the join ready at once.
    fn fork_dynamic(&mut self, reference: &str, task: &WorkflowTask, input: &Value) {
        let key = |k: &Option<String>| k.clone().unwrap_or_default();
        let listed = input
            .get(key(&task.dynamic_fork_tasks_param))
            .cloned()
            .unwrap_or(Value::Null);
        let inputs = input
            .get(key(&task.dynamic_fork_tasks_input_param_name))
            .cloned()
            .unwrap_or(Value::Null);
        let steps: Vec<WorkflowTask> = match serde_json::from_value(listed) {
            Ok(steps) => steps,
            Err(e) => {
                self.actions.push(Action::Fail {
                    step: reference.to_string(),
                    reason: format!(
                        "input {:?}: expected a list of steps, got one that is not: {e}",
                        key(&task.dynamic_fork_tasks_param)
                    ),
                    ending: Ending::Failed,
                });
                return;
            }
        };
        let Some(join) = self.graph.join_of(reference) else {
            return;
        };
        self.actions.push(Action::AwaitJoin {
            join: join.to_string(),
            arrivals: steps.len(),
        });
        for step in steps {
            let kind = step.task_type().unwrap_or(TaskType::Simple);
            let input = inputs
                .get(&step.task_reference_name)
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new()));
            self.actions.push(Action::Schedule(Schedule {
                reference: step.task_reference_name,
                name: step.name,
                kind,
                input,
                fork: Some(reference.to_string()),
                optional: step.optional,
            }));
        }
    }

    /// Switch `reference` picked `case`: its first step, or (an empty case) what
    /// follows the switch.
    fn case(&mut self, reference: &str, case: &str, after: Option<After>) {
        match self.graph.case_first(reference, case) {
            Some(first) => self.reach(first),
            None => {
                if let Some(after) = after {
                    self.go_on(&after);
                }
            }
        }
    }

    /// Control reaches step `reference`.
    fn reach(&mut self, reference: &str) {
        let Some(task) = self.graph.task(reference) else {
            return;
        };
        let input = resolve(&Value::Object(task.input_parameters.clone()), &self.context);
        let after = self.graph.after(reference).cloned();
        let Some(kind) = task.task_type() else {
            self.actions.push(Action::Fail {
                step: reference.to_string(),
                reason: format!("a step of type {:?} cannot run", task.kind),
                ending: Ending::Failed,
            });
            return;
        };
        match kind {
            TaskType::ForkJoin => {
                let branches = self.graph.branches(reference).to_vec();
                if let Some(join) = self.graph.join_of(reference) {
                    self.actions.push(Action::AwaitJoin {
                        join: join.to_string(),
                        arrivals: branches.len(),
                    });
                }
                for first in branches {
                    self.reach(first);
                }
            }
            TaskType::Switch if task.evaluator_type.as_deref() == Some("javascript") => {
                // The case is the expression's value, `$` the switch's input.
                let expression = task.expression.as_deref().unwrap_or_default();
                match eval_javascript(expression, &input, self.graph.limits()) {
                    Ok(value) => self.case(reference, &case_label(&value), after),
                    Err(e) => self.actions.push(Action::Fail {
                        step: reference.to_string(),
                        reason: format!("expression: {e}"),
                        ending: Ending::Failed,
                    }),
                }
            }
            TaskType::Switch | TaskType::Decision => {
                // `value-param` (and DECISION's `caseValueParam`): the case is the
                // value of that input key.
                let key = match kind {
                    TaskType::Decision => task.case_value_param.as_deref(),
                    _ => task.expression.as_deref(),
                }
                .unwrap_or_default();
                let case = match input.get(key) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                self.case(reference, &case, after);
            }
            TaskType::SetVariable => {
                let Value::Object(set) = input else {
                    return;
                };
                let workflow = self
                    .context
                    .entry("workflow")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(w) = workflow {
                    let vars = w
                        .entry("variables")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Value::Object(vars) = vars {
                        vars.extend(set.clone());
                    }
                }
                self.actions.push(Action::SetVariables(set));
                if let Some(after) = after {
                    self.go_on(&after);
                }
            }
            TaskType::Terminate => {
                let status = input
                    .get("terminationStatus")
                    .and_then(Value::as_str)
                    .unwrap_or("COMPLETED");
                if status == "COMPLETED" {
                    let output = input.get("workflowOutput").cloned().unwrap_or(Value::Null);
                    self.actions.push(Action::Complete { output });
                } else {
                    let reason = input
                        .get("terminationReason")
                        .and_then(Value::as_str)
                        .unwrap_or("terminated")
                        .to_string();
                    let ending = if status == "TERMINATED" {
                        Ending::Terminated
                    } else {
                        Ending::Failed
                    };
                    self.actions.push(Action::Fail {
                        step: reference.to_string(),
                        reason: format!("{status}: {reason}"),
                        ending,
                    });
                }
            }
            TaskType::DoWhile => match self.graph.body_first(reference) {
                Some(first) => self.reach(first),
                None => {
                    if let Some(after) = after {
                        self.go_on(&after);
                    }
                }
            },
            TaskType::ForkJoinDynamic => self.fork_dynamic(reference, task, &input),
            // A worker's step, or one the engine runs (a sub-workflow, a wait, a
            // script): scheduled, and decided at its end.
            _ => self.actions.push(Action::Schedule(Schedule {
                reference: reference.to_string(),
                name: task.name.clone(),
                kind,
                input,
                fork: None,
                optional: task.optional,
            })),
        }
    }
}
