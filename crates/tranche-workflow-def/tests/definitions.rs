//! Definitions as Conductor users write them load and pass; each kind of mistake is
//! refused naming the step's path, the field, what was expected and what was found.

use serde_json::{json, Value};
use tranche_workflow_def::{
    task_defs_from_json, workflows_from_json, workflows_from_json_with, DefinitionError, Problem,
    TaskType, WorkflowDef,
};

/// A payroll day as a workflow: every step type this engine runs, nested as users nest
/// them (a fork of sequences, a switch inside a loop, a sub-workflow in a branch).
fn every_type() -> Value {
    json!({
        "name": "payroll_day",
        "version": 3,
        "ownerEmail": "ops@example.com",
        "restartable": true,
        "inputParameters": ["date", "banks"],
        "tasks": [
            {"name": "import", "taskReferenceName": "import", "type": "SIMPLE",
             "inputParameters": {"date": "${workflow.input.date}"}},
            {"name": "fork", "taskReferenceName": "per_bank", "type": "FORK_JOIN",
             "forkTasks": [
                [{"name": "package", "taskReferenceName": "package_first",
                  "inputParameters": {"rows": "${import.output.rows}"}},
                 {"name": "submit_file", "taskReferenceName": "submit_first", "type": "SUB_WORKFLOW",
                  "subWorkflowParam": {"name": "submit", "version": 2}}],
                [{"name": "package", "taskReferenceName": "package_second"}]
             ]},
            {"name": "join", "taskReferenceName": "banks_done", "type": "JOIN",
             "joinOn": ["submit_first", "package_second"]},
            {"name": "files", "taskReferenceName": "files", "type": "FORK_JOIN_DYNAMIC",
             "dynamicForkTasksParam": "tasks", "dynamicForkTasksInputParamName": "inputs",
             "inputParameters": {"tasks": "${import.output.files}", "inputs": "${import.output.inputs}"}},
            {"name": "files_join", "taskReferenceName": "files_done", "type": "JOIN"},
            {"name": "retry_loop", "taskReferenceName": "retry_loop", "type": "DO_WHILE",
             "loopCondition": "if ($.retry_loop['iteration'] < 3) { true; } else { false; }",
             "loopOver": [
                {"name": "route", "taskReferenceName": "route", "type": "SWITCH",
                 "evaluatorType": "value-param", "expression": "kind",
                 "inputParameters": {"kind": "${workflow.variables.kind}"},
                 "decisionCases": {
                    "late": [{"name": "wait", "taskReferenceName": "wait_window", "type": "WAIT",
                              "inputParameters": {"duration": "10 minutes"}}]
                 },
                 "defaultCase": [{"name": "note", "taskReferenceName": "note", "type": "SET_VARIABLE",
                                  "inputParameters": {"kind": "done"}}]}
             ]},
            {"name": "old_decision", "taskReferenceName": "old_decision", "type": "DECISION",
             "caseValueParam": "status", "inputParameters": {"status": "${import.output.status}"},
             "decisionCases": {"FAILED": [{"name": "stop", "taskReferenceName": "stop",
                                            "type": "TERMINATE",
                                            "inputParameters": {"terminationStatus": "FAILED"}}]}},
            {"name": "sum", "taskReferenceName": "sum", "type": "INLINE",
             "inputParameters": {"evaluatorType": "javascript", "expression": "$.a + $.b",
                                 "a": 1, "b": "${import.output.count}"}},
            {"name": "shape", "taskReferenceName": "shape", "type": "JSON_JQ_TRANSFORM",
             "inputParameters": {"queryExpression": ".rows | length", "rows": "${import.output.rows}"}}
        ],
        "outputParameters": {"files": "${files_done.output}", "total": "${sum.output.result}"},
        "schemaVersion": 2
    })
}

fn load(def: &Value) -> Result<Vec<WorkflowDef>, DefinitionError> {
    workflows_from_json(&def.to_string(), "payroll.json")
}

/// The problems of `def`, one line each.
fn problems(def: &Value) -> Vec<String> {
    match load(def) {
        Err(DefinitionError::Invalid { problems }) => problems,
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn a_definition_of_every_type_loads_and_keeps_what_it_does_not_read() {
    let defs = load(&every_type()).unwrap();
    let def = &defs[0];
    assert_eq!((def.name.as_str(), def.version), ("payroll_day", 3));
    let kinds: Vec<Option<TaskType>> = def.tasks.iter().map(|t| t.task_type()).collect();
    assert!(kinds.iter().all(Option::is_some), "{kinds:?}");
    // Written back, nothing a Conductor server would have kept is lost.
    let again: Value = serde_json::to_value(def).unwrap();
    assert_eq!(again["ownerEmail"], "ops@example.com");
    assert_eq!(again["restartable"], true);
    assert_eq!(
        again["tasks"][1]["forkTasks"][0][1]["subWorkflowParam"]["version"],
        2
    );
    // An array of definitions, as Conductor's bulk update takes, loads too; a task
    // without a type is SIMPLE, a workflow without a version is version 1.
    let two = json!([every_type(), {"name": "child", "tasks": [
        {"name": "c", "taskReferenceName": "c"}]}]);
    let defs = load(&two).unwrap();
    assert_eq!(defs[1].version, 1);
    assert_eq!(defs[1].tasks[0].task_type(), Some(TaskType::Simple));
}

#[test]
fn each_mistake_is_named_by_path_field_expected_and_got() {
    let cases: Vec<(&str, Box<dyn Fn(&mut Value)>, &str)> = vec![
        (
            "an unknown type",
            Box::new(|d| d["tasks"][0]["type"] = json!("HTTP_LAMBDA")),
            "payroll.json: payroll_day v3: tasks[0].type: expected one of SIMPLE, SUB_WORKFLOW",
        ),
        (
            "a reference name twice",
            Box::new(|d| d["tasks"][7]["taskReferenceName"] = json!("package_second")),
            "tasks[7].taskReferenceName: expected a reference name no other step has (tasks[1].forkTasks[1][0] has it), got \"package_second\"",
        ),
        (
            "a fork without its join",
            Box::new(|d| {
                d["tasks"].as_array_mut().unwrap().remove(2);
            }),
            "tasks[1].type: expected a JOIN step right after the fork, got a \"FORK_JOIN_DYNAMIC\" step",
        ),
        (
            "a join on a step not of the fork",
            Box::new(|d| d["tasks"][2]["joinOn"] = json!(["submit_first", "import"])),
            "tasks[2].joinOn[1].taskReferenceName: expected a step of the fork's branches, got \"import\"",
        ),
        (
            "a sub-workflow without its name",
            Box::new(|d| d["tasks"][1]["forkTasks"][0][1]["subWorkflowParam"] = json!({"name": ""})),
            "tasks[1].forkTasks[0][1].subWorkflowParam: expected the name of the workflow to start, got none",
        ),
        (
            "a switch on an unknown evaluator",
            Box::new(|d| d["tasks"][5]["loopOver"][0]["evaluatorType"] = json!("graaljs")),
            "tasks[5].loopOver[0].evaluatorType: expected \"value-param\" or \"javascript\", got \"graaljs\"",
        ),
        (
            "a loop without its condition",
            Box::new(|d| {
                d["tasks"][5].as_object_mut().unwrap().remove("loopCondition");
            }),
            "tasks[5].loopCondition: expected a JavaScript condition, got none",
        ),
        (
            "a mapping of a step that does not exist",
            Box::new(|d| d["tasks"][0]["inputParameters"]["date"] = json!("${imprt.output.date}")),
            "tasks[0].inputParameters: expected \"date\": a mapping of workflow.… or of a step's reference name, got ${imprt.output.date} (no step is \"imprt\")",
        ),
        (
            "a mapping never closed",
            Box::new(|d| d["outputParameters"]["total"] = json!("${sum.output.result")),
            "outputParameters: expected \"total\": a mapping closed by '}', got \"${sum.output.result\"",
        ),
        (
            "a jq step without its program",
            Box::new(|d| {
                d["tasks"][8]["inputParameters"].as_object_mut().unwrap().remove("queryExpression");
            }),
            "tasks[8].inputParameters: expected a \"queryExpression\" (the jq program), got none",
        ),
        (
            "an inline step on an evaluator that does not exist",
            Box::new(|d| d["tasks"][7]["inputParameters"]["evaluatorType"] = json!("python")),
            "tasks[7].inputParameters: expected an \"evaluatorType\" of \"javascript\", \"graaljs\", \"value-param\", got \"python\"",
        ),
        (
            "a case inside a switch inside a loop",
            Box::new(|d| {
                d["tasks"][5]["loopOver"][0]["decisionCases"]["late"][0]["type"] = json!("SLEEP")
            }),
            "tasks[5].loopOver[0].decisionCases[\"late\"][0].type: expected one of",
        ),
    ];
    for (what, break_it, want) in cases {
        let mut def = every_type();
        break_it(&mut def);
        let got = problems(&def);
        assert!(
            got.iter().any(|p| p.contains(want)),
            "{what}: expected a problem containing {want:?}, got {got:#?}"
        );
    }
}

#[test]
fn every_problem_is_said_at_once_and_bad_json_by_line() {
    let mut def = every_type();
    def["tasks"][0]["type"] = json!("NOPE");
    def["tasks"][3]["dynamicForkTasksParam"] = json!("");
    assert_eq!(problems(&def).len(), 2, "{:#?}", problems(&def));

    let text = "{\n  \"name\": \"x\",\n  \"tasks\": [ {\"name\": 5} ]\n}";
    match workflows_from_json(text, "bad.json") {
        Err(e @ DefinitionError::Json { line: 3, .. }) => {
            assert!(e.to_string().starts_with("bad.json:3:"), "{e}");
        }
        other => panic!("expected a JSON error at line 3, got {other:?}"),
    }
}

#[test]
fn task_definitions_load_with_conductors_defaults_and_bad_ones_are_named() {
    let defs = task_defs_from_json(
        r#"[{"name": "package", "retryCount": 5, "retryLogic": "EXPONENTIAL_BACKOFF",
             "timeoutSeconds": 600, "responseTimeoutSeconds": 300, "ownerEmail": "o@x"},
            {"name": "write"}]"#,
        "tasks.json",
    )
    .unwrap();
    assert_eq!(defs[0].retry_count, 5);
    assert_eq!(defs[0].extra["ownerEmail"], "o@x");
    // Conductor's defaults: 3 retries, fixed, 60 s apart, an hour to respond.
    let d = &defs[1];
    assert_eq!(
        (d.retry_count, d.retry_logic.as_str(), d.retry_delay_seconds),
        (3, "FIXED", 60)
    );
    assert_eq!(
        (d.response_timeout_seconds, d.timeout_policy.as_str()),
        (3_600, "TIME_OUT_WF")
    );

    let bad = r#"{"name": "package", "retryLogic": "SOMETIMES", "timeoutPolicy": "PANIC",
                  "timeoutSeconds": 60, "responseTimeoutSeconds": 120}"#;
    match task_defs_from_json(bad, "tasks.json") {
        Err(DefinitionError::Invalid { problems }) => {
            assert_eq!(problems.len(), 3, "{problems:#?}");
            for want in [
                "tasks.json: task package: retryLogic: expected one of FIXED, EXPONENTIAL_BACKOFF, LINEAR_BACKOFF, got \"SOMETIMES\"",
                "tasks.json: task package: timeoutPolicy: expected one of RETRY, TIME_OUT_WF, ALERT_ONLY, got \"PANIC\"",
                "tasks.json: task package: responseTimeoutSeconds: expected at most timeoutSeconds (60), got 120",
            ] {
                assert!(problems.iter().any(|p| p == want), "{want} in {problems:#?}");
            }
        }
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn every_step_is_listed_with_its_path() {
    let def = &load(&every_type()).unwrap()[0];
    let steps: Vec<(String, &str)> = def
        .steps()
        .into_iter()
        .map(|(path, t)| (path, t.task_reference_name.as_str()))
        .collect();
    let want = [
        ("tasks[0]", "import"),
        ("tasks[1]", "per_bank"),
        ("tasks[1].forkTasks[0][0]", "package_first"),
        ("tasks[1].forkTasks[0][1]", "submit_first"),
        ("tasks[1].forkTasks[1][0]", "package_second"),
        ("tasks[2]", "banks_done"),
        ("tasks[3]", "files"),
        ("tasks[4]", "files_done"),
        ("tasks[5]", "retry_loop"),
        ("tasks[5].loopOver[0]", "route"),
        (
            "tasks[5].loopOver[0].decisionCases[\"late\"][0]",
            "wait_window",
        ),
        ("tasks[5].loopOver[0].defaultCase[0]", "note"),
        ("tasks[6]", "old_decision"),
        ("tasks[6].decisionCases[\"FAILED\"][0]", "stop"),
        ("tasks[7]", "sum"),
        ("tasks[8]", "shape"),
    ];
    let want: Vec<(String, &str)> = want.iter().map(|(p, r)| (p.to_string(), *r)).collect();
    assert_eq!(steps, want);
}

#[test]
fn a_later_stage_adds_its_checks_to_the_load() {
    let more = |d: &WorkflowDef| {
        d.steps()
            .into_iter()
            .filter(|(_, t)| t.task_reference_name == "sum")
            .map(|(path, _)| Problem {
                path,
                field: "inputParameters",
                expected: "a script that parses".into(),
                got: "one that does not".into(),
            })
            .collect()
    };
    match workflows_from_json_with(&every_type().to_string(), "payroll.json", more) {
        Err(DefinitionError::Invalid { problems }) => assert_eq!(
            problems,
            ["payroll.json: payroll_day v3: tasks[7].inputParameters: expected a script that parses, got one that does not"]
        ),
        other => panic!("expected the added problem, got {other:?}"),
    }
    assert!(workflows_from_json_with(&every_type().to_string(), "p.json", |_| Vec::new()).is_ok());
}
