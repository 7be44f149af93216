//! What the step types that run scripts do with them, as Conductor does: a
//! `javascript` switch's case, a loop's condition, an `INLINE` step's result, a
//! `JSON_JQ_TRANSFORM`'s result; and the check that refuses a definition whose scripts
//! do not parse.

use serde_json::{json, Value};
use tranche_workflow_def::{Problem, TaskType, WorkflowDef};

use crate::script::{eval_javascript, Limits, Script, ScriptError};

/// The case a switch's value picks, as Conductor names it (Java's `String.valueOf`): a
/// string is itself, `null` is `"null"`, a number or a boolean its JSON text, and an
/// object or a list its JSON.
pub fn case_label(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether a loop's condition's value says go again, as Conductor's `evalBool`: `true`,
/// or a number above 0; anything else stops the loop.
pub fn condition_holds(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n > 0.0),
        _ => false,
    }
}

/// An `INLINE` step run on its resolved `input`: `{"result": …}`. The input names its
/// evaluator (`evaluatorType`) and its `expression`: `javascript` (or `graaljs`, the
/// same language) evaluates the script with `$` the whole input; `value-param` is the
/// value of the input key `expression` names.
pub fn inline(input: &Value, limits: &Limits) -> Result<Value, ScriptError> {
    let text = |key: &str| -> Result<&str, ScriptError> {
        input
            .get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| ScriptError::Input {
                message: format!("an INLINE step's input has no {key:?} string"),
            })
    };
    let evaluator = text("evaluatorType")?;
    let expression = text("expression")?;
    let result = match evaluator {
        "javascript" | "graaljs" => eval_javascript(expression, input, limits)?,
        "value-param" => input.get(expression).cloned().unwrap_or(Value::Null),
        other => {
            return Err(ScriptError::Input {
                message: format!(
                    "an INLINE step's evaluatorType is javascript, graaljs or value-param, \
                     not {:?}",
                    crate::script::shortened(other, 40)
                ),
            })
        }
    };
    Ok(json!({ "result": result }))
}

/// A `JSON_JQ_TRANSFORM` step run on its resolved `input`: its `queryExpression` run on
/// the whole input, `{"result": <first result or null>, "resultList": [every result]}`.
pub fn json_jq_transform(input: &Value, limits: &Limits) -> Result<Value, ScriptError> {
    let query = input
        .get("queryExpression")
        .and_then(Value::as_str)
        .ok_or_else(|| ScriptError::Input {
            message: "a JSON_JQ_TRANSFORM step's input has no \"queryExpression\" string".into(),
        })?;
    let results = Script::jq(query)?.eval_all(input, limits)?;
    Ok(json!({
        "result": results.first().cloned().unwrap_or(Value::Null),
        "resultList": results,
    }))
}

/// The scripts of `def` that do not parse, each named by its step's path: a
/// `javascript` switch's `expression`, a loop's `loopCondition`, an `INLINE` step's
/// JavaScript `expression` and a `JSON_JQ_TRANSFORM`'s `queryExpression`. A script
/// given as a mapping (`${…}`) is the run's to check. For
/// `tranche_workflow_def::workflows_from_json_with`, so that such a definition is
/// refused when it is applied, with its other problems.
pub fn script_problems(def: &WorkflowDef) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut say = |path: &str, field: &'static str, expected: &str, err: ScriptError| {
        problems.push(Problem {
            path: path.to_string(),
            field,
            expected: expected.to_string(),
            got: err.to_string(),
        })
    };
    let input_text = |task: &tranche_workflow_def::WorkflowTask, key: &str| {
        task.input_parameters
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.contains("${"))
            .map(str::to_string)
    };
    for (path, task) in def.steps() {
        match task.task_type() {
            Some(TaskType::Switch) if task.evaluator_type.as_deref() == Some("javascript") => {
                if let Some(Err(e)) = task.expression.as_deref().map(Script::javascript) {
                    say(&path, "expression", "JavaScript that parses", e);
                }
            }
            Some(TaskType::DoWhile) => {
                if let Some(Err(e)) = task.loop_condition.as_deref().map(Script::javascript) {
                    say(&path, "loopCondition", "JavaScript that parses", e);
                }
            }
            Some(TaskType::Inline) => {
                let javascript = matches!(
                    input_text(task, "evaluatorType").as_deref(),
                    Some("javascript" | "graaljs")
                );
                if let (true, Some(source)) = (javascript, input_text(task, "expression")) {
                    if let Err(e) = Script::javascript(&source) {
                        say(
                            &path,
                            "inputParameters",
                            "\"expression\": JavaScript that parses",
                            e,
                        );
                    }
                }
            }
            Some(TaskType::JsonJqTransform) => {
                if let Some(Err(e)) = input_text(task, "queryExpression").map(|q| Script::jq(&q)) {
                    say(
                        &path,
                        "inputParameters",
                        "\"queryExpression\": a jq query that compiles",
                        e,
                    );
                }
            }
            _ => {}
        }
    }
    problems
}
