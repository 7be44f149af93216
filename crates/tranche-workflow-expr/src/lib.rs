//! Workflow expressions, the second stage of Tranche's workflows (see
//! `docs/workflows.md`): how a step's input is built from the workflow's state.
//!
//! A step's `inputParameters` (and a workflow's `outputParameters`) are a JSON template
//! whose strings may hold Conductor's mappings, resolved by [`resolve`] against the
//! workflow's state, given as one JSON document ([`Context`]):
//!
//! - a string that is one mapping and nothing else, `"${t01.output.rows}"`, becomes the
//!   value it names, of whatever type (an object, a list, a number);
//! - mappings inside a longer string, `"file ${workflow.input.date}.ach"`, are replaced
//!   by their text (a string as it is, any other value as JSON), as Conductor does;
//! - `$${` is a literal `${`;
//! - a path is dotted names with list indexes and quoted keys (`a.b[0]['c d']`); a
//!   path that leads nowhere is `null`, never an error, as in Conductor, since a
//!   step's optional input is commonly mapped from a step that may not have run.
//!
//! Scripts ([`Script`]): JavaScript in QuickJS (`javascript` switches, loop conditions,
//! `INLINE` steps) and jq in jaq (`JSON_JQ_TRANSFORM`), checked when a definition is
//! applied ([`script_problems`]) and evaluated in a sandbox with [`Limits`]: no I/O, a
//! time limit, a memory limit (JavaScript) and a result cap (jq). What each engine
//! leaves out, and why, is in the `script` module's `js` and `jq` submodules; the step
//! types' rules (Conductor's) are [`case_label`], [`condition_holds`], [`inline`] and
//! [`json_jq_transform`].
//!
//! Pure: no I/O. The mappings have no clock; a script has one only through
//! JavaScript's `Date` and `Math.random`, which Conductor's scripts use.

#![deny(missing_docs)]

mod script;
mod steps;

pub use script::{eval_javascript, Language, Limits, Position, Script, ScriptError};
pub use steps::{case_label, condition_holds, inline, json_jq_transform, script_problems};

use serde_json::{Map, Value};

/// A workflow's state as mappings see it: `{"workflow": {"input": …, "variables": …,
/// "workflowId": …, …}, "<reference name>": {"input": …, "output": …, "status": …}}`.
pub type Context = Map<String, Value>;

/// `template` with every mapping in it resolved against `context`.
pub fn resolve(template: &Value, context: &Context) -> Value {
    match template {
        Value::String(text) => resolve_text(text, context),
        Value::Array(items) => Value::Array(items.iter().map(|v| resolve(v, context)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), resolve(v, context)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn resolve_text(text: &str, context: &Context) -> Value {
    // One mapping and nothing else: the value itself, of any type.
    if let Some(path) = text
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .filter(|p| !p.contains('}') && !p.contains("${"))
    {
        return lookup(path, context);
    }
    if !text.contains("${") {
        return Value::String(text.to_string());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        if rest[..at].ends_with('$') {
            // `$${`: a literal `${`.
            out.push_str(&rest[..at - 1]);
            out.push_str("${");
            rest = &rest[at + 2..];
            continue;
        }
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            // Never closed: kept as written (a definition's check refuses it first).
            out.push_str(&rest[at..]);
            rest = "";
            break;
        };
        match lookup(&after[..end], context) {
            Value::String(s) => out.push_str(&s),
            Value::Null => out.push_str("null"),
            v => out.push_str(&v.to_string()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Value::String(out)
}

/// The value at `path` in `context`, `null` when there is none.
pub fn lookup(path: &str, context: &Context) -> Value {
    let mut steps = Steps::of(path.trim());
    let Some(Step::Key(head)) = steps.next() else {
        return Value::Null;
    };
    let mut at = match context.get(&head) {
        Some(v) => v,
        None => return Value::Null,
    };
    for step in steps {
        let next = match (&step, at) {
            (Step::Key(k), Value::Object(map)) => map.get(k),
            (Step::Index(i), Value::Array(items)) => items.get(*i),
            _ => None,
        };
        match next {
            Some(v) => at = v,
            None => return Value::Null,
        }
    }
    at.clone()
}

enum Step {
    Key(String),
    Index(usize),
}

/// The steps of a path: `a.b[0]['c d']` is `a`, `b`, `0`, `c d`. A malformed part
/// ends the walk at nothing (so the path is `null`).
struct Steps<'a> {
    rest: &'a str,
    broken: bool,
}

impl<'a> Steps<'a> {
    fn of(path: &'a str) -> Steps<'a> {
        Steps {
            rest: path,
            broken: false,
        }
    }
}

impl Iterator for Steps<'_> {
    type Item = Step;

    fn next(&mut self) -> Option<Step> {
        if self.broken || self.rest.is_empty() {
            return None;
        }
        if let Some(inner) = self.rest.strip_prefix('[') {
            let Some(end) = inner.find(']') else {
                self.broken = true;
                return Some(Step::Key(String::new()));
            };
            let part = &inner[..end];
            self.rest = inner[end + 1..]
                .strip_prefix('.')
                .unwrap_or(&inner[end + 1..]);
            let quoted = part
                .strip_prefix('\'')
                .and_then(|p| p.strip_suffix('\''))
                .or_else(|| part.strip_prefix('"').and_then(|p| p.strip_suffix('"')));
            return Some(match (quoted, part.parse::<usize>()) {
                (Some(key), _) => Step::Key(key.to_string()),
                (None, Ok(i)) => Step::Index(i),
                (None, Err(_)) => {
                    self.broken = true;
                    Step::Key(String::new())
                }
            });
        }
        let end = self.rest.find(['.', '[']).unwrap_or(self.rest.len());
        let key = &self.rest[..end];
        self.rest = &self.rest[end..];
        self.rest = self.rest.strip_prefix('.').unwrap_or(self.rest);
        Some(Step::Key(key.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn context() -> Context {
        let Value::Object(map) = json!({
            "workflow": {
                "input": {"date": "2026-03-03", "banks": ["first", "second"]},
                "variables": {"kind": "late", "count": 3},
                "workflowId": "wf-1"
            },
            "t01": {
                "output": {"rows": [{"id": "E1", "cents": 100}, {"id": "E2"}], "ok": true,
                           "odd key": {"x": 1}},
                "status": "COMPLETED"
            }
        }) else {
            unreachable!()
        };
        map
    }

    #[test]
    fn a_whole_mapping_keeps_its_type() {
        let c = context();
        assert_eq!(
            resolve(&json!("${workflow.input.banks}"), &c),
            json!(["first", "second"])
        );
        assert_eq!(resolve(&json!("${t01.output.ok}"), &c), json!(true));
        assert_eq!(
            resolve(&json!("${t01.output.rows[0].cents}"), &c),
            json!(100)
        );
        assert_eq!(resolve(&json!("${t01.output['odd key'].x}"), &c), json!(1));
        assert_eq!(resolve(&json!("${workflow.variables.count}"), &c), json!(3));
    }

    #[test]
    fn mappings_inside_text_are_replaced_by_their_text() {
        let c = context();
        assert_eq!(
            resolve(&json!("file ${workflow.input.date}-${t01.status}.ach"), &c),
            json!("file 2026-03-03-COMPLETED.ach")
        );
        assert_eq!(
            resolve(&json!("rows: ${t01.output.rows[1]}"), &c),
            json!("rows: {\"id\":\"E2\"}")
        );
        assert_eq!(
            resolve(&json!("cost $${price}"), &c),
            json!("cost ${price}")
        );
        assert_eq!(resolve(&json!("plain"), &c), json!("plain"));
    }

    #[test]
    fn a_path_that_leads_nowhere_is_null() {
        let c = context();
        for path in [
            "${nope.output.x}",
            "${t01.output.rows[9]}",
            "${t01.output.rows.id}",
            "${t01.output.rows[x]}",
            "${t01.output.rows[0}",
            "${}",
        ] {
            assert_eq!(resolve(&json!(path), &c), Value::Null, "{path}");
        }
        assert_eq!(resolve(&json!("a ${nope.x} b"), &c), json!("a null b"));
    }

    #[test]
    fn a_template_is_resolved_all_through() {
        let c = context();
        let template = json!({
            "date": "${workflow.input.date}",
            "first": {"id": "${t01.output.rows[0].id}", "fixed": 7},
            "all": ["${workflow.workflowId}", null, "${t01.output.ok}"]
        });
        assert_eq!(
            resolve(&template, &c),
            json!({
                "date": "2026-03-03",
                "first": {"id": "E1", "fixed": 7},
                "all": ["wf-1", null, true]
            })
        );
    }
}
