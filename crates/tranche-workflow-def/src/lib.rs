//! Workflow definitions as data: Conductor's JSON, loaded as it is, and checked whole
//! before it is stored.
//!
//! The first stage of Tranche's workflows (see `docs/workflows.md`): types for
//! Conductor's `WorkflowDef`, `WorkflowTask` and `TaskDef` ([`model`]), with its field
//! names and defaults and every field this crate does not read kept, and the checks a
//! definition passes before it is stored ([`WorkflowDef::problems`]): unknown step
//! types, reference names given twice, a fork without its join, a join on steps that
//! are not the fork's, a switch or loop missing what it runs on, a mapping of a step
//! that does not exist. Each problem names the step's path, the field, what was
//! expected and what was found. Pure: no I/O, no clock; the later stages (the
//! expressions, the decider, the engine's seam, the API) build on these types.

#![deny(missing_docs)]

pub mod model;
mod validate;

pub use model::{SubWorkflowParams, TaskDef, TaskType, WorkflowDef, WorkflowTask};
pub use validate::Problem;

/// Why a definition could not be had.
#[derive(Debug, thiserror::Error)]
pub enum DefinitionError {
    /// The text is not a definition's JSON.
    #[error(
        "{source_name}:{line}:{column}: expected a workflow definition's JSON, got: {message}"
    )]
    Json {
        /// The file (or the name the text was given under).
        source_name: String,
        /// Where, from 1.
        line: usize,
        /// Where, from 1.
        column: usize,
        /// serde_json's complaint.
        message: String,
    },
    /// The definitions parse but are not valid: every problem, each prefixed with the
    /// workflow it is in.
    #[error("{}", problems.join("\n"))]
    Invalid {
        /// `name v1: tasks[2].type: expected …, got …`, one per problem.
        problems: Vec<String>,
    },
}

/// The workflow definitions in `text`: one definition, or an array of them (as
/// Conductor's `PUT /api/metadata/workflow` takes). Each is checked; every problem of
/// every definition is said at once.
pub fn workflows_from_json(
    text: &str,
    source_name: &str,
) -> Result<Vec<WorkflowDef>, DefinitionError> {
    workflows_from_json_with(text, source_name, |_| Vec::new())
}

/// [`workflows_from_json`] with more checks: `more`'s problems are said with each
/// definition's own. The checks of a later stage go there, this crate not depending
/// on it: `tranche_workflow_expr::script_problems` (scripts that do not parse).
pub fn workflows_from_json_with(
    text: &str,
    source_name: &str,
    more: impl Fn(&WorkflowDef) -> Vec<Problem>,
) -> Result<Vec<WorkflowDef>, DefinitionError> {
    load_checked(text, source_name, |d: &WorkflowDef| {
        let name = format!("{} v{}", d.name, d.version);
        let mut problems = d.problems();
        problems.extend(more(d));
        (name, problems)
    })
}

/// The task definitions in `text`: one, or an array of them (as Conductor's
/// `POST /api/metadata/taskdefs` takes). Each is checked; every problem is said at once.
pub fn task_defs_from_json(text: &str, source_name: &str) -> Result<Vec<TaskDef>, DefinitionError> {
    load_checked(text, source_name, |d: &TaskDef| {
        (format!("task {}", d.name), d.problems())
    })
}

/// One `T` or an array of them from `text`, each checked by `check` (its name for
/// messages, and its problems).
fn load_checked<T: serde::de::DeserializeOwned>(
    text: &str,
    source_name: &str,
    check: impl Fn(&T) -> (String, Vec<Problem>),
) -> Result<Vec<T>, DefinitionError> {
    let json_error = |e: serde_json::Error| DefinitionError::Json {
        source_name: source_name.to_string(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    };
    // Parsed from the text, not through a `Value`, so that an error keeps its line.
    let defs: Vec<T> = if text.trim_start().starts_with('[') {
        serde_json::from_str(text)
    } else {
        serde_json::from_str(text).map(|d| vec![d])
    }
    .map_err(json_error)?;
    let problems: Vec<String> = defs
        .iter()
        .flat_map(|d| {
            let (name, problems) = check(d);
            problems
                .into_iter()
                .map(move |p| format!("{source_name}: {name}: {p}"))
        })
        .collect();
    if problems.is_empty() {
        Ok(defs)
    } else {
        Err(DefinitionError::Invalid { problems })
    }
}
