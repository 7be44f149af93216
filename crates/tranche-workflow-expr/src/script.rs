//! Scripts: JavaScript (QuickJS) and jq (jaq), compiled once and evaluated in a
//! sandbox with limits.
//!
//! A [`Script`] is checked when it is made ([`Script::javascript`], [`Script::jq`]), so
//! that a definition naming a script that does not parse is refused when it is applied
//! ([`crate::script_problems`]). [`Script::eval`] runs it on a step's input (JSON) with
//! [`Limits`]: a time limit, a memory limit (JavaScript) and a result cap (jq). Neither
//! engine can reach a file, the network, the environment or the process: see the
//! modules `script/js.rs` and `script/jq.rs` for what each leaves out and why.
//!
//! A [`ScriptError`] says what went wrong and where (the line and column in the script,
//! when the engine gives them). It never holds the input: messages that would quote a
//! value of the input (jq's `cannot use {…} as number`) say the value's type instead.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub(crate) mod jq;
pub(crate) mod js;

/// The bounds of one evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// How long one evaluation may run (JavaScript: the engine's interrupt handler stops
    /// it; jq: checked between results and in the generators, see `script/jq.rs`).
    pub time: Duration,
    /// The JavaScript runtime's memory (its heap, the input given to it included).
    pub memory_bytes: usize,
    /// Most results a jq query may give.
    pub max_results: usize,
}

impl Default for Limits {
    /// 100 ms, 32 MiB, 10,000 results: a switch's expression takes microseconds, and a
    /// transform of a step's output is far below these.
    fn default() -> Self {
        Limits {
            time: Duration::from_millis(100),
            memory_bytes: 32 << 20,
            max_results: 10_000,
        }
    }
}

/// A script's language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// JavaScript, in QuickJS.
    JavaScript,
    /// jq, in jaq.
    Jq,
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Language::JavaScript => "JavaScript",
            Language::Jq => "jq",
        })
    }
}

/// A place in a script, from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    /// The line, from 1.
    pub line: u32,
    /// The column, from 1 (QuickJS: characters; jaq: bytes).
    pub column: u32,
}

/// Why a script could not be made or evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScriptError {
    /// The script does not parse (or names a jq filter or variable that does not
    /// exist).
    Syntax {
        /// Its language.
        language: Language,
        /// The engine's complaint.
        message: String,
        /// Where, when the engine says.
        at: Option<Position>,
    },
    /// The script failed while it ran: it threw, or raised a jq error, or its value
    /// is not JSON (a JavaScript `BigInt`).
    Failed {
        /// Its language.
        language: Language,
        /// The error's name (`TypeError`) and message, with the values of the input
        /// left out.
        message: String,
        /// Where, when the engine says.
        at: Option<Position>,
    },
    /// It ran past its time limit.
    Timeout {
        /// Its language.
        language: Language,
        /// The limit.
        limit: Duration,
    },
    /// It ran past its memory limit.
    Memory {
        /// The limit, in bytes.
        limit_bytes: usize,
    },
    /// A jq query gave more results than allowed.
    TooManyResults {
        /// The limit.
        limit: usize,
    },
    /// A step's input does not name a script as its type says (`INLINE` without an
    /// `expression`, an evaluator that does not exist).
    Input {
        /// What is missing or wrong.
        message: String,
    },
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = |at: &Option<Position>| match at {
            Some(p) => format!(" at line {}, column {}", p.line, p.column),
            None => String::new(),
        };
        match self {
            ScriptError::Syntax {
                language,
                message,
                at: where_,
            } => write!(f, "{language} syntax error{}: {message}", at(where_)),
            ScriptError::Failed {
                language,
                message,
                at: where_,
            } => write!(f, "{language} failed{}: {message}", at(where_)),
            ScriptError::Timeout { language, limit } => write!(
                f,
                "{language} ran past its time limit of {} ms",
                limit.as_millis()
            ),
            ScriptError::Memory { limit_bytes } => write!(
                f,
                "JavaScript ran past its memory limit of {} KiB",
                limit_bytes / 1024
            ),
            ScriptError::TooManyResults { limit } => {
                write!(f, "jq gave more than its limit of {limit} results")
            }
            ScriptError::Input { message } => f.write_str(message),
        }
    }
}

impl std::error::Error for ScriptError {}

/// A script, checked: JavaScript that parses, or a jq query compiled.
#[derive(Clone)]
pub struct Script {
    source: Arc<str>,
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    JavaScript,
    Jq(Arc<jq::Compiled>),
}

impl fmt::Debug for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Script")
            .field("language", &self.language())
            .field("source", &self.source)
            .finish()
    }
}

impl Script {
    /// JavaScript `source`, checked to parse (nothing of it runs). It is evaluated as
    /// Conductor evaluates it: a script whose value is its last expression statement's
    /// (`$.a > 1 ? 'x' : 'y'`, `(function () { … })()`), sloppy mode, `$` the input.
    pub fn javascript(source: &str) -> Result<Script, ScriptError> {
        js::check(source, &Limits::default())?;
        Ok(Script {
            source: source.into(),
            kind: Kind::JavaScript,
        })
    }

    /// The jq query `query`, compiled (once per text: compiled queries are cached).
    pub fn jq(query: &str) -> Result<Script, ScriptError> {
        let compiled = jq::compile(query)?;
        Ok(Script {
            source: query.into(),
            kind: Kind::Jq(compiled),
        })
    }

    /// Its language.
    pub fn language(&self) -> Language {
        match self.kind {
            Kind::JavaScript => Language::JavaScript,
            Kind::Jq(_) => Language::Jq,
        }
    }

    /// Its text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Its value for `input`: JavaScript's value (`undefined` and functions are
    /// `null`), or jq's first result (`null` when it gives none).
    pub fn eval(&self, input: &Value, limits: &Limits) -> Result<Value, ScriptError> {
        match &self.kind {
            Kind::JavaScript => js::eval(&self.source, input, limits),
            Kind::Jq(compiled) => Ok(jq::run(compiled, input, limits)?
                .into_iter()
                .next()
                .unwrap_or(Value::Null)),
        }
    }

    /// Every value it gives for `input`: jq's results, or JavaScript's one value.
    pub fn eval_all(&self, input: &Value, limits: &Limits) -> Result<Vec<Value>, ScriptError> {
        match &self.kind {
            Kind::JavaScript => js::eval(&self.source, input, limits).map(|v| vec![v]),
            Kind::Jq(compiled) => jq::run(compiled, input, limits),
        }
    }
}

/// JavaScript `source` evaluated on `input` without a separate check first (one parse
/// instead of two, for a script whose definition was checked when it was applied): a
/// syntax error is [`ScriptError::Syntax`] all the same.
pub fn eval_javascript(source: &str, input: &Value, limits: &Limits) -> Result<Value, ScriptError> {
    js::eval(source, input, limits)
}

/// At most `max` characters of `text`, with `…` when cut: an engine's message may quote
/// what a script made of its input.
pub(crate) fn shortened(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}
