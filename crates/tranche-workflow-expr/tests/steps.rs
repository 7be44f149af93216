//! The step types that run scripts, as Conductor runs them, and the check that refuses
//! a definition whose scripts do not parse.

use serde_json::{json, Value};
use tranche_workflow_def::{workflows_from_json_with, DefinitionError, WorkflowDef};
use tranche_workflow_expr::{
    case_label, condition_holds, inline, json_jq_transform, script_problems, Limits, ScriptError,
};

#[test]
fn inline_steps_give_their_result() {
    let limits = Limits::default();
    let input = json!({"evaluatorType": "javascript", "value1": 2, "value2": 3,
                       "expression": "(function () { return $.value1 + $.value2; })()"});
    assert_eq!(inline(&input, &limits).unwrap(), json!({"result": 5}));
    let input = json!({"evaluatorType": "graaljs", "expression": "$.evaluatorType"});
    assert_eq!(
        inline(&input, &limits).unwrap(),
        json!({"result": "graaljs"})
    );
    // value-param is the value of the key the expression names, not a script.
    let input = json!({"evaluatorType": "value-param", "expression": "kind", "kind": "late"});
    assert_eq!(inline(&input, &limits).unwrap(), json!({"result": "late"}));
    let input = json!({"evaluatorType": "value-param", "expression": "nope"});
    assert_eq!(inline(&input, &limits).unwrap(), json!({"result": null}));
    for input in [
        json!({"expression": "1"}),
        json!({"evaluatorType": "javascript"}),
        json!({"evaluatorType": "python", "expression": "1"}),
    ] {
        assert!(
            matches!(inline(&input, &limits), Err(ScriptError::Input { .. })),
            "{input}"
        );
    }
    let failing = json!({"evaluatorType": "javascript", "expression": "$.x.y"});
    assert!(matches!(
        inline(&failing, &limits),
        Err(ScriptError::Failed { .. })
    ));
}

#[test]
fn jq_transforms_give_the_first_result_and_all_of_them() {
    let limits = Limits::default();
    // Conductor's documented example.
    let input = json!({
        "key1": {"value1": ["a", "b"]},
        "key2": {"value2": ["c", "d"]},
        "queryExpression": "{ key3: (.key1.value1 + .key2.value2) }"
    });
    assert_eq!(
        json_jq_transform(&input, &limits).unwrap(),
        json!({"result": {"key3": ["a", "b", "c", "d"]},
               "resultList": [{"key3": ["a", "b", "c", "d"]}]})
    );
    let input = json!({"rows": [{"id": 1}, {"id": 2}], "queryExpression": ".rows[] | .id"});
    assert_eq!(
        json_jq_transform(&input, &limits).unwrap(),
        json!({"result": 1, "resultList": [1, 2]})
    );
    let input = json!({"queryExpression": "empty"});
    assert_eq!(
        json_jq_transform(&input, &limits).unwrap(),
        json!({"result": null, "resultList": []})
    );
    assert!(matches!(
        json_jq_transform(&json!({"a": 1}), &limits),
        Err(ScriptError::Input { .. })
    ));
    assert!(matches!(
        json_jq_transform(&json!({"queryExpression": ".a |"}), &limits),
        Err(ScriptError::Syntax { .. })
    ));
}

#[test]
fn cases_and_conditions_read_values_as_conductor_does() {
    for (value, label) in [
        (json!("late"), "late"),
        (json!(null), "null"),
        (json!(2), "2"),
        (json!(2.5), "2.5"),
        (json!(true), "true"),
        (json!(["a"]), "[\"a\"]"),
    ] {
        assert_eq!(case_label(&value), label);
    }
    for (value, holds) in [
        (json!(true), true),
        (json!(false), false),
        (json!(1), true),
        (json!(0.5), true),
        (json!(0), false),
        (json!(-1), false),
        (json!("true"), false),
        (json!(null), false),
        (json!({}), false),
    ] {
        assert_eq!(condition_holds(&value), holds, "{value}");
    }
}

fn def_with(tasks: Value) -> Value {
    json!({"name": "scripts", "tasks": tasks})
}

fn good_tasks() -> Value {
    json!([
        {"name": "route", "taskReferenceName": "route", "type": "SWITCH",
         "evaluatorType": "javascript", "expression": "$.n > 1 ? 'many' : 'one'",
         "inputParameters": {"n": "${workflow.input.n}"},
         "decisionCases": {"many": [{"name": "a", "taskReferenceName": "a"}]}},
        {"name": "loop", "taskReferenceName": "loop", "type": "DO_WHILE",
         "loopCondition": "if ($.loop['iteration'] < 3) { true; } else { false; }",
         "loopOver": [
            {"name": "sum", "taskReferenceName": "sum", "type": "INLINE",
             "inputParameters": {"evaluatorType": "graaljs",
                                 "expression": "(function () { return $.a + 1; })()", "a": 1}},
            {"name": "shape", "taskReferenceName": "shape", "type": "JSON_JQ_TRANSFORM",
             "inputParameters": {"queryExpression": "{total: .a}", "a": "${sum.output.result}"}}
         ]},
        // A script given as a mapping is resolved, and checked, when the step runs.
        {"name": "later", "taskReferenceName": "later", "type": "JSON_JQ_TRANSFORM",
         "inputParameters": {"queryExpression": "${workflow.input.query}"}},
        {"name": "by_key", "taskReferenceName": "by_key", "type": "INLINE",
         "inputParameters": {"evaluatorType": "value-param", "expression": "a b c ("}}
    ])
}

#[test]
fn scripts_that_parse_pass() {
    let def: WorkflowDef = serde_json::from_value(def_with(good_tasks())).unwrap();
    assert_eq!(script_problems(&def), []);
}

#[test]
fn a_script_that_does_not_parse_is_a_problem_of_its_step() {
    let mut tasks = good_tasks();
    tasks[0]["expression"] = json!("$.n > 1 ? 'many' :");
    tasks[1]["loopCondition"] = json!("if ($.loop['iteration'] < 3 { true; }");
    tasks[1]["loopOver"][0]["inputParameters"]["expression"] =
        json!("(function () { return $.a + ; })()");
    tasks[1]["loopOver"][1]["inputParameters"]["queryExpression"] = json!("{total: .a | nope}");
    let text = def_with(tasks).to_string();
    let problems = match workflows_from_json_with(&text, "scripts.json", script_problems) {
        Err(DefinitionError::Invalid { problems }) => problems,
        other => panic!("expected the scripts refused, got {other:?}"),
    };
    let want = [
        "scripts.json: scripts v1: tasks[0].expression: expected JavaScript that parses, got JavaScript syntax error at line 1, column 19: SyntaxError: unexpected token in expression: ''",
        "scripts.json: scripts v1: tasks[1].loopCondition: expected JavaScript that parses, got JavaScript syntax error at line 1, column 29: SyntaxError: Unexpected token '{'",
        "scripts.json: scripts v1: tasks[1].loopOver[0].inputParameters: expected \"expression\": JavaScript that parses, got JavaScript syntax error at line 1, column 29: SyntaxError: unexpected token in expression: ';'",
        "scripts.json: scripts v1: tasks[1].loopOver[1].inputParameters: expected \"queryExpression\": a jq query that compiles, got jq syntax error at line 1, column 14: filter nope is not defined",
    ];
    assert_eq!(problems, want);
}
