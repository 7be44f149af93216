//! The workflow decider (issue 33; see `docs/workflows.md`): what the end of a step
//! makes ready, as a pure function of the definition and the step that ended.
//!
//! Conductor's `DeciderService` re-reads a workflow's whole state at every step's end
//! and walks the definition to find what is ready. Here the definition is indexed once
//! ([`Graph::of`]) so that the question asked at every step's end, "what comes after
//! this step?" ([`Graph::after`]), is one lookup, whatever the workflow's size: the
//! answer is the next step of its sequence, an arrival at a join (counted by the
//! engine, O(1) a branch), the end of a loop's iteration, or the workflow's end. What
//! ends a sequence is known when the definition is read: the last step of a switch's
//! case goes on after the switch, the last step of a fork's branch arrives at the fork's
//! join. On the index, [`decide_start`] and [`decide_end`] say what a workflow's start
//! and a step's end do ([`Action`]s), each step type by its own rule (a mapper per
//! type, as Conductor's `TaskMapper`s).

#![deny(missing_docs)]

mod decide;

use std::collections::{HashMap, HashSet};

pub use decide::{
    decide_end, decide_end_forked, decide_loop, decide_loop_end, decide_rerun, decide_start,
    loop_condition_input, loop_goes_again, Action, Ended, Ending, Schedule,
};

use tranche_workflow_def::{TaskType, WorkflowDef, WorkflowTask};
use tranche_workflow_expr::Limits;

/// What follows the end of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum After {
    /// The step with this reference name is reached next.
    Reach(String),
    /// The step was the last of a fork's branch: one arrival at this join.
    Arrive {
        /// The join's reference name.
        join: String,
    },
    /// The step was the last of a loop's body: the loop decides whether to go again.
    LoopEnd {
        /// The `DO_WHILE` step's reference name.
        loop_ref: String,
    },
    /// The step was the workflow's last: it completes.
    WorkflowEnd,
}

/// A definition indexed by reference name: every step, what follows it, and what its
/// forks, switches and loops hold.
#[derive(Debug)]
pub struct Graph<'d> {
    def: &'d WorkflowDef,
    first: Option<&'d str>,
    steps: HashMap<&'d str, Node<'d>>,
    /// The bounds of the scripts the decider evaluates (`javascript` switches, loop
    /// conditions).
    limits: Limits,
}

#[derive(Debug)]
struct Node<'d> {
    task: &'d WorkflowTask,
    /// What follows its end. For a fork: an arrival at its join (what the steps a
    /// dynamic fork makes do at their end; a static fork's branches end in their own
    /// arrivals). For a switch or a loop: what follows once it is done (an empty case,
    /// the last iteration).
    after: After,
    /// A fork's join, and the first step of each branch.
    join: Option<&'d str>,
    branches: Vec<&'d str>,
    /// A switch's first step of each case, and of the default case.
    cases: Vec<(&'d str, Option<&'d str>)>,
    default_case: Option<&'d str>,
    /// A loop's first step.
    body: Option<&'d str>,
}

impl<'d> Graph<'d> {
    /// The index of `def`, which should have passed [`WorkflowDef::problems`] (on a
    /// definition that did not, a reference name given twice keeps its first step).
    pub fn of(def: &'d WorkflowDef) -> Graph<'d> {
        let mut graph = Graph {
            def,
            first: def.tasks.first().map(|t| t.task_reference_name.as_str()),
            steps: HashMap::new(),
            limits: Limits::default(),
        };
        graph.sequence(&def.tasks, &After::WorkflowEnd);
        graph
    }

    /// The same index, its scripts evaluated within `limits` (else
    /// [`Limits::default`]).
    pub fn with_limits(mut self, limits: Limits) -> Graph<'d> {
        self.limits = limits;
        self
    }

    /// The bounds of the scripts the decider evaluates.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The definition indexed.
    pub fn def(&self) -> &'d WorkflowDef {
        self.def
    }

    /// The step a workflow starts with; `None` for a workflow of no steps.
    pub fn first(&self) -> Option<&'d str> {
        self.first
    }

    /// The step `reference` names.
    pub fn task(&self, reference: &str) -> Option<&'d WorkflowTask> {
        self.steps.get(reference).map(|n| n.task)
    }

    /// What follows the end of `reference`; `None` for a name the definition lacks.
    pub fn after(&self, reference: &str) -> Option<&After> {
        self.steps.get(reference).map(|n| &n.after)
    }

    /// A fork's join, for its branches' arrivals (a dynamic fork's too).
    pub fn join_of(&self, fork: &str) -> Option<&'d str> {
        self.steps.get(fork).and_then(|n| n.join)
    }

    /// The first step of each of a fork's branches.
    pub fn branches(&self, fork: &str) -> &[&'d str] {
        self.steps.get(fork).map_or(&[], |n| &n.branches)
    }

    /// The first step of a switch's case `case` (the default case when no case has
    /// that value); `None` when that case has no steps (the switch is then done).
    pub fn case_first(&self, switch: &str, case: &str) -> Option<&'d str> {
        let node = self.steps.get(switch)?;
        match node.cases.iter().find(|(c, _)| *c == case) {
            Some((_, first)) => *first,
            None => node.default_case,
        }
    }

    /// The first step of a loop's body.
    pub fn body_first(&self, loop_ref: &str) -> Option<&'d str> {
        self.steps.get(loop_ref).and_then(|n| n.body)
    }

    /// The steps a rerun from `reference` runs again: that step, the steps it holds,
    /// and every step after it in the definition (steps of the switch cases not taken
    /// among them, which are harmless: they have nothing to undo). Refused, saying why,
    /// for a step in a fork's branch or a loop's body (their join or loop would have to
    /// be re-armed for one branch or one iteration: rerun from the fork or the loop),
    /// for a `JOIN` (rerun from its fork), and for a name the definition lacks.
    pub fn rerun_scope(&self, reference: &str) -> Result<HashSet<&'d str>, String> {
        let mut order: Vec<(&'d WorkflowTask, Option<&'d str>)> = Vec::new();
        flatten(&self.def.tasks, None, &mut order);
        let Some(at) = order
            .iter()
            .position(|(t, _)| t.task_reference_name == reference)
        else {
            return Err(format!(
                "the workflow's definition has no step {reference:?}"
            ));
        };
        let (task, enclosing) = order[at];
        if let Some(container) = enclosing {
            return Err(format!(
                "step {reference:?} is inside {container:?} (a fork's branch or a loop's body): \
                 rerun from {container:?}"
            ));
        }
        if task.task_type() == Some(TaskType::Join) {
            return Err(format!(
                "step {reference:?} is a JOIN: rerun from the fork before it"
            ));
        }
        Ok(order[at..]
            .iter()
            .map(|(t, _)| t.task_reference_name.as_str())
            .collect())
    }

    /// Index the steps of one sequence; `tail` follows its last step.
    fn sequence(&mut self, tasks: &'d [WorkflowTask], tail: &After) {
        for (i, task) in tasks.iter().enumerate() {
            let next = tasks.get(i + 1);
            let after = next.map_or_else(
                || tail.clone(),
                |n| After::Reach(n.task_reference_name.clone()),
            );
            let reference = task.task_reference_name.as_str();
            let mut node = Node {
                task,
                after: after.clone(),
                join: None,
                branches: Vec::new(),
                cases: Vec::new(),
                default_case: None,
                body: None,
            };
            match task.task_type() {
                Some(TaskType::ForkJoin | TaskType::ForkJoinDynamic) => {
                    // The join right after the fork is reached by arrivals only.
                    let join = next.map(|n| n.task_reference_name.as_str());
                    node.join = join;
                    let arrive = After::Arrive {
                        join: join.unwrap_or_default().to_string(),
                    };
                    node.after = arrive.clone();
                    for branch in &task.fork_tasks {
                        node.branches
                            .extend(branch.first().map(|t| t.task_reference_name.as_str()));
                        self.sequence(branch, &arrive);
                    }
                }
                Some(TaskType::Switch | TaskType::Decision) => {
                    for (case, steps) in &task.decision_cases {
                        node.cases.push((
                            case.as_str(),
                            steps.first().map(|t| t.task_reference_name.as_str()),
                        ));
                        self.sequence(steps, &after);
                    }
                    node.default_case = task
                        .default_case
                        .first()
                        .map(|t| t.task_reference_name.as_str());
                    self.sequence(&task.default_case, &after);
                }
                Some(TaskType::DoWhile) => {
                    node.body = task
                        .loop_over
                        .first()
                        .map(|t| t.task_reference_name.as_str());
                    self.sequence(
                        &task.loop_over,
                        &After::LoopEnd {
                            loop_ref: reference.to_string(),
                        },
                    );
                }
                _ => {}
            }
            self.steps.entry(reference).or_insert(node);
        }
    }
}

/// The steps of `tasks` and all they hold, in the definition's order, each with the
/// outermost fork or loop it is inside (`enclosing` for the top of `tasks`).
fn flatten<'d>(
    tasks: &'d [WorkflowTask],
    enclosing: Option<&'d str>,
    out: &mut Vec<(&'d WorkflowTask, Option<&'d str>)>,
) {
    for task in tasks {
        out.push((task, enclosing));
        let reference = task.task_reference_name.as_str();
        let inner = match task.task_type() {
            Some(TaskType::ForkJoin | TaskType::ForkJoinDynamic | TaskType::DoWhile) => {
                Some(enclosing.unwrap_or(reference))
            }
            _ => enclosing,
        };
        for branch in &task.fork_tasks {
            flatten(branch, inner, out);
        }
        for steps in task.decision_cases.values() {
            flatten(steps, inner, out);
        }
        flatten(&task.default_case, inner, out);
        flatten(&task.loop_over, inner, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def() -> WorkflowDef {
        serde_json::from_value(json!({
            "name": "payroll_day",
            "tasks": [
                {"name": "import", "taskReferenceName": "import",
                 "inputParameters": {"date": "${workflow.input.date}"}},
                {"name": "fork", "taskReferenceName": "per_bank", "type": "FORK_JOIN",
                 "forkTasks": [
                    [{"name": "p", "taskReferenceName": "package_first"},
                     {"name": "s", "taskReferenceName": "submit_first", "type": "SUB_WORKFLOW",
                      "subWorkflowParam": {"name": "submit"}}],
                    [{"name": "p", "taskReferenceName": "package_second"}]
                 ]},
                {"name": "join", "taskReferenceName": "banks_done", "type": "JOIN",
                 "joinOn": ["submit_first", "package_second"]},
                {"name": "files", "taskReferenceName": "files", "type": "FORK_JOIN_DYNAMIC",
                 "dynamicForkTasksParam": "tasks", "dynamicForkTasksInputParamName": "inputs",
                 "inputParameters": {"tasks": "${import.output.files}",
                                     "inputs": "${import.output.inputs}"}},
                {"name": "files_join", "taskReferenceName": "files_done", "type": "JOIN"},
                {"name": "loop", "taskReferenceName": "retry_loop", "type": "DO_WHILE",
                 "loopCondition": "false",
                 "loopOver": [
                    {"name": "route", "taskReferenceName": "route", "type": "SWITCH",
                     "evaluatorType": "value-param", "expression": "kind",
                     "inputParameters": {"kind": "${workflow.variables.kind}"},
                     "decisionCases": {
                        "late": [{"name": "w", "taskReferenceName": "wait_window", "type": "WAIT"},
                                 {"name": "r", "taskReferenceName": "resend"}],
                        "none": []
                     },
                     "defaultCase": [{"name": "n", "taskReferenceName": "note",
                                      "type": "SET_VARIABLE",
                                      "inputParameters": {"noted": "${import.output.rows}"}}]},
                    {"name": "check", "taskReferenceName": "check",
                     "inputParameters": {"noted": "${workflow.variables.noted}"}}
                 ]},
                {"name": "last", "taskReferenceName": "report"}
            ],
            "outputParameters": {"rows": "${import.output.rows}", "date": "${workflow.input.date}"}
        }))
        .unwrap()
    }

    fn reach(r: &str) -> After {
        After::Reach(r.into())
    }

    #[test]
    fn a_rerun_runs_its_step_and_all_after_it_and_is_refused_inside_a_fork_or_loop() {
        let d = def();
        let g = Graph::of(&d);
        let mut scope: Vec<&str> = g.rerun_scope("files").unwrap().into_iter().collect();
        scope.sort_unstable();
        assert_eq!(
            scope,
            [
                "check",
                "files",
                "files_done",
                "note",
                "report",
                "resend",
                "retry_loop",
                "route",
                "wait_window"
            ]
        );
        // A fork reruns whole: its branches and its join.
        let fork = g.rerun_scope("per_bank").unwrap();
        for r in [
            "package_first",
            "submit_first",
            "package_second",
            "banks_done",
            "report",
        ] {
            assert!(fork.contains(r), "{r}");
        }
        assert!(!fork.contains("import"));
        let refused = |r: &str| g.rerun_scope(r).unwrap_err();
        assert!(refused("submit_first").contains("inside \"per_bank\""));
        // A switch inside a loop: the loop is what encloses it.
        assert!(refused("resend").contains("rerun from \"retry_loop\""));
        assert!(refused("banks_done").contains("JOIN"));
        assert!(refused("nope").contains("no step \"nope\""));
    }

    #[test]
    fn what_follows_each_step_is_one_lookup() {
        let d = def();
        assert!(d.problems().is_empty(), "{:?}", d.problems());
        let g = Graph::of(&d);
        assert_eq!(g.first(), Some("import"));
        let arrive = |j: &str| After::Arrive { join: j.into() };
        let cases = [
            ("import", reach("per_bank")),
            // A branch's steps run in order; its last step arrives at the join.
            ("package_first", reach("submit_first")),
            ("submit_first", arrive("banks_done")),
            ("package_second", arrive("banks_done")),
            ("banks_done", reach("files")),
            // What a dynamic fork makes arrives at the join after it.
            ("files", arrive("files_done")),
            ("files_done", reach("retry_loop")),
            // A case's last step goes on after the switch; the body's last ends the
            // iteration; the loop, once done, goes on after it.
            ("wait_window", reach("resend")),
            ("resend", reach("check")),
            ("note", reach("check")),
            ("route", reach("check")),
            (
                "check",
                After::LoopEnd {
                    loop_ref: "retry_loop".into(),
                },
            ),
            ("retry_loop", reach("report")),
            ("report", After::WorkflowEnd),
        ];
        for (step, want) in cases {
            assert_eq!(g.after(step), Some(&want), "after {step}");
        }
        assert_eq!(g.after("nope"), None);
    }

    #[test]
    fn forks_switches_and_loops_say_what_they_start() {
        let d = def();
        let g = Graph::of(&d);
        assert_eq!(g.branches("per_bank"), ["package_first", "package_second"]);
        assert_eq!(g.join_of("per_bank"), Some("banks_done"));
        assert_eq!(g.join_of("files"), Some("files_done"));
        assert_eq!(g.case_first("route", "late"), Some("wait_window"));
        assert_eq!(g.case_first("route", "none"), None, "an empty case");
        assert_eq!(
            g.case_first("route", "other"),
            Some("note"),
            "the default case"
        );
        assert_eq!(g.body_first("retry_loop"), Some("route"));
        assert_eq!(
            g.task("submit_first").map(|t| t.kind.as_str()),
            Some("SUB_WORKFLOW")
        );
    }

    fn context(kind: &str) -> tranche_workflow_expr::Context {
        let serde_json::Value::Object(map) = json!({
            "workflow": {"input": {"date": "2026-03-03"}, "variables": {"kind": kind}},
            "import": {"output": {"rows": 12,
                "files": [{"name": "write", "taskReferenceName": "file_a"},
                          {"name": "write", "taskReferenceName": "file_b"}],
                "inputs": {"file_a": {"bank": "first"}, "file_b": {"bank": "second"}}}}
        }) else {
            unreachable!()
        };
        map
    }

    fn scheduled(actions: &[Action]) -> Vec<&str> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Schedule(s) => Some(s.reference.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_workflow_is_decided_step_by_step() {
        let d = def();
        let g = Graph::of(&d);
        let c = context("late");
        let start = decide_start(&g, &c);
        assert_eq!(
            start,
            [Action::Schedule(Schedule {
                reference: "import".into(),
                name: "import".into(),
                kind: TaskType::Simple,
                input: json!({"date": "2026-03-03"}),
                fork: None,
                optional: false,
            })]
        );
        // A fork: its join told how many arrivals, each branch's first step scheduled.
        let forked = decide_end(&g, &c, "import", &Ended::Completed);
        assert_eq!(
            forked[0],
            Action::AwaitJoin {
                join: "banks_done".into(),
                arrivals: 2
            }
        );
        assert_eq!(scheduled(&forked), ["package_first", "package_second"]);
        assert_eq!(
            decide_end(&g, &c, "submit_first", &Ended::Completed),
            [Action::Arrive {
                join: "banks_done".into()
            }]
        );
        // A dynamic fork: the steps its input lists, each with its own input.
        let dynamic = decide_end(&g, &c, "banks_done", &Ended::Completed);
        assert_eq!(
            dynamic[0],
            Action::AwaitJoin {
                join: "files_done".into(),
                arrivals: 2
            }
        );
        assert_eq!(scheduled(&dynamic), ["file_a", "file_b"]);
        match &dynamic[2] {
            Action::Schedule(s) => assert_eq!(s.input, json!({"bank": "second"})),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            decide_end_forked(&g, "files", "file_a", false, &Ended::Completed),
            [Action::Arrive {
                join: "files_done".into()
            }]
        );
        assert!(matches!(
            decide_end_forked(&g, "files", "file_a", false, &Ended::Failed("x".into()))[..],
            [Action::Fail { .. }]
        ));
        let mut bad = c.clone();
        bad["import"]["output"]["files"] = json!([{"nope": 1}]);
        assert!(matches!(
            &decide_end(&g, &bad, "banks_done", &Ended::Completed)[..],
            [Action::Fail { reason, .. }] if reason.contains("expected a list of steps")
        ));
        // Into the loop: the switch picks its case from its input on the spot.
        assert_eq!(
            scheduled(&decide_end(&g, &c, "files_done", &Ended::Completed)),
            ["wait_window"]
        );
        let empty_case = decide_end(&g, &context("none"), "files_done", &Ended::Completed);
        assert_eq!(scheduled(&empty_case), ["check"]);
        // The default case sets a variable, which the step after it already sees.
        let default = decide_end(&g, &context("other"), "files_done", &Ended::Completed);
        assert_eq!(
            default[0],
            Action::SetVariables(json!({"noted": 12}).as_object().unwrap().clone())
        );
        match &default[1] {
            Action::Schedule(s) => assert_eq!(
                (s.reference.as_str(), &s.input),
                ("check", &json!({"noted": 12}))
            ),
            other => panic!("expected check scheduled, got {other:?}"),
        }
        assert_eq!(
            decide_end(&g, &c, "check", &Ended::Completed),
            [Action::EvaluateLoop {
                loop_ref: "retry_loop".into()
            }]
        );
        // The condition says again: the body from its first step; else on after it.
        assert_eq!(
            scheduled(&decide_loop(&g, &c, "retry_loop", true)),
            ["wait_window"]
        );
        assert_eq!(
            scheduled(&decide_loop(&g, &c, "retry_loop", false)),
            ["report"]
        );
        assert_eq!(
            decide_end(&g, &c, "report", &Ended::Completed),
            [Action::Complete {
                output: json!({"rows": 12, "date": "2026-03-03"})
            }]
        );
    }

    #[test]
    fn a_failed_step_fails_the_workflow_unless_optional() {
        let mut d = def();
        let g = Graph::of(&d);
        let c = context("late");
        let failed = Ended::Failed("worker said no".into());
        assert_eq!(
            decide_end(&g, &c, "import", &failed),
            [Action::Fail {
                step: "import".into(),
                reason: "worker said no".into(),
                ending: Ending::Failed,
            }]
        );
        let timed_out = Ended::TimedOut("TIMED_OUT: no answer".into());
        assert_eq!(
            decide_end(&g, &c, "import", &timed_out),
            [Action::Fail {
                step: "import".into(),
                reason: "TIMED_OUT: no answer".into(),
                ending: Ending::TimedOut,
            }],
            "the ending is said by how the step ended, not read from its reason"
        );
        d.tasks[0].optional = true;
        let g = Graph::of(&d);
        assert_eq!(
            scheduled(&decide_end(&g, &c, "import", &failed)),
            ["package_first", "package_second"]
        );
    }

    /// A definition whose switch and loop run JavaScript.
    fn scripted() -> WorkflowDef {
        serde_json::from_value(json!({
            "name": "scripted",
            "tasks": [
                {"name": "route", "taskReferenceName": "route", "type": "SWITCH",
                 "evaluatorType": "javascript",
                 "expression": "$.rows > 100 ? 'big' : ($.rows > 0 ? 'small' : 'none')",
                 "inputParameters": {"rows": "${workflow.input.rows}"},
                 "decisionCases": {
                    "big": [{"name": "split", "taskReferenceName": "split"}],
                    "none": []
                 },
                 "defaultCase": [{"name": "send", "taskReferenceName": "send"}]},
                {"name": "poll", "taskReferenceName": "poll", "type": "DO_WHILE",
                 "inputParameters": {"most": "${workflow.input.most}"},
                 "loopCondition": "(function () { if ($.check.done) return false; return $.poll['iteration'] < $.most; })()",
                 "loopOver": [{"name": "check", "taskReferenceName": "check"}]},
                {"name": "report", "taskReferenceName": "report"}
            ]
        }))
        .unwrap()
    }

    fn state(value: serde_json::Value) -> tranche_workflow_expr::Context {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_javascript_switch_is_decided_on_the_spot() {
        let d = scripted();
        assert!(d.problems().is_empty(), "{:?}", d.problems());
        assert_eq!(tranche_workflow_expr::script_problems(&d), []);
        let g = Graph::of(&d);
        let rows = |n: i64| state(json!({"workflow": {"input": {"rows": n, "most": 3}}}));
        assert_eq!(scheduled(&decide_start(&g, &rows(500))), ["split"]);
        // No case of that name: the default case.
        assert_eq!(scheduled(&decide_start(&g, &rows(5))), ["send"]);
        // An empty case: on after the switch, into the loop's body.
        assert_eq!(scheduled(&decide_start(&g, &rows(0))), ["check"]);
        // A mapping to nothing is null, and `null > 0` is false: the "none" case.
        let none = state(json!({"workflow": {"input": {}}}));
        assert_eq!(scheduled(&decide_start(&g, &none)), ["check"]);
    }

    #[test]
    fn a_switch_whose_script_fails_fails_the_workflow() {
        let mut d = scripted();
        d.tasks[0].expression = Some("$.rows.toFixed(1) + $.nope.x".into());
        let g = Graph::of(&d);
        let c = state(json!({"workflow": {"input": {"rows": 5}}}));
        match &decide_start(&g, &c)[..] {
            [Action::Fail { step, reason, .. }] => {
                assert_eq!(step, "route");
                assert!(
                    reason.starts_with("expression: JavaScript failed at line 1"),
                    "{reason}"
                );
                assert!(reason.contains("TypeError"), "{reason}");
            }
            other => panic!("expected the workflow failed, got {other:?}"),
        }
        // The graph's limits bound the script.
        d.tasks[0].expression = Some("while (true) {}".into());
        let limits = tranche_workflow_expr::Limits {
            time: std::time::Duration::from_millis(20),
            ..Default::default()
        };
        let g = Graph::of(&d).with_limits(limits);
        assert_eq!(
            decide_start(&g, &c),
            [Action::Fail {
                step: "route".into(),
                reason: "expression: JavaScript ran past its time limit of 20 ms".into(),
                ending: Ending::Failed,
            }]
        );
    }

    #[test]
    fn a_loop_condition_sees_the_loop_and_its_body_and_decides() {
        let d = scripted();
        let g = Graph::of(&d);
        let at = |iteration: u32, done: bool| {
            state(json!({
                "workflow": {"input": {"rows": 0, "most": 3}},
                "poll": {"output": {"iteration": iteration}, "status": "IN_PROGRESS"},
                "check": {"output": {"done": done}, "status": "COMPLETED"}
            }))
        };
        assert_eq!(
            decide_end(&g, &at(1, false), "check", &Ended::Completed),
            [Action::EvaluateLoop {
                loop_ref: "poll".into()
            }]
        );
        // As Conductor gives it: the loop's input, and each step's output by its name.
        assert_eq!(
            loop_condition_input(&g, &at(1, false), "poll"),
            json!({"most": 3, "poll": {"iteration": 1}, "check": {"done": false}})
        );
        assert_eq!(loop_goes_again(&g, &at(1, false), "poll"), Ok(true));
        assert_eq!(
            scheduled(&decide_loop_end(&g, &at(1, false), "poll")),
            ["check"]
        );
        assert_eq!(
            scheduled(&decide_loop_end(&g, &at(3, false), "poll")),
            ["report"]
        );
        assert_eq!(
            scheduled(&decide_loop_end(&g, &at(1, true), "poll")),
            ["report"]
        );
        // A condition that fails fails the workflow, naming the loop.
        let mut broken = scripted();
        broken.tasks[1].loop_condition = Some("$.check.done.x.y".into());
        let g = Graph::of(&broken);
        match &decide_loop_end(&g, &at(1, false), "poll")[..] {
            [Action::Fail { step, reason, .. }] => {
                assert_eq!(step, "poll");
                assert!(
                    reason.starts_with("loopCondition: JavaScript failed"),
                    "{reason}"
                );
            }
            other => panic!("expected the workflow failed, got {other:?}"),
        }
        assert!(loop_goes_again(&g, &at(1, false), "route").is_err());
    }
}
