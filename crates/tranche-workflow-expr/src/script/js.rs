//! JavaScript in QuickJS (quickjs-ng, through `rquickjs`).
//!
//! Every evaluation gets a fresh runtime and context, dropped when it returns: nothing
//! one script does (a global it sets, a prototype it changes, memory it holds) can be
//! seen by the next. That costs ~55 µs an evaluation on this machine, almost all of it
//! the context's built-in objects (docs/workflows.md, "Scripts"); a reused context
//! would be ~3 µs, but top-level `let`s, implicit globals and changed built-ins would
//! then outlive the script that made them (measured: a script that ran out of memory
//! left its array in a reused context, and every later script there failed too).
//!
//! The sandbox:
//! - the context has the language's built-ins only (QuickJS's full set: `Object`,
//!   `Array`, `JSON`, `Math`, `Date`, `RegExp`, `Map`, `Promise`, typed arrays, …), and
//!   no std or os module and no module loader: no `require`, `import`, `fetch`, `load`,
//!   `print`, `console`, `setTimeout`, no file, network or process of any kind. A
//!   dynamic `import()` is a promise that never settles (no job runs after the script).
//!   Removed from it as well: `performance` (a clock), `WeakRef` and
//!   `FinalizationRegistry` (they observe the collector), `queueMicrotask`. `Date` and
//!   `Math.random` stay: Conductor's scripts use them, and they are the only things
//!   that make a script's value differ between two runs on the same input.
//!   (The full set, not a smaller custom one: with `Promise` left out, an `async`
//!   function's promise made QuickJS abort when its runtime was freed, measured with
//!   rquickjs 0.14.0; a `SharedArrayBuffer` cannot block, `Atomics.wait` refuses to
//!   on this thread);
//! - memory: the runtime's heap is capped ([`Limits::memory_bytes`]); an allocation past
//!   it fails inside the engine, as a JavaScript exception;
//! - stack: 256 KiB of native stack for the engine, so deep recursion is a
//!   `RangeError`, not a crash, on any thread;
//! - time: the engine calls an interrupt handler as it runs (every few thousand
//!   operations, in loops and regular expressions too), which stops it past
//!   [`Limits::time`] with an exception no `catch` in the script can hold.

use std::time::Instant;

use rquickjs::context::EvalOptions;
use rquickjs::{CatchResultExt, CaughtError, Context, Ctx, Runtime, Type};
use serde_json::Value;

use super::{shortened, Language, Limits, Position, ScriptError};

/// Globals removed from a script's context (see the module's documentation).
const REMOVED: [&str; 4] = [
    "performance",
    "WeakRef",
    "FinalizationRegistry",
    "queueMicrotask",
];

/// The name a script's positions are given under (`script:1:4`).
const FILE: &str = "script";
const STACK_BYTES: usize = 256 * 1024;
/// Thrown before a checked script's first statement, so that it parses but never runs.
const PARSED: &str = "tranche: parsed, not run";
/// The longest message kept from the engine.
const MESSAGE_CHARS: usize = 200;

/// A context (which holds its runtime) and when its time is up.
struct Sandbox {
    context: Context,
    deadline: Instant,
}

fn sandbox(limits: &Limits) -> Result<Sandbox, ScriptError> {
    let memory = |_| ScriptError::Memory {
        limit_bytes: limits.memory_bytes,
    };
    let runtime = Runtime::new().map_err(memory)?;
    runtime.set_memory_limit(limits.memory_bytes);
    runtime.set_max_stack_size(STACK_BYTES);
    let deadline = Instant::now() + limits.time;
    runtime.set_interrupt_handler(Some(Box::new(move || Instant::now() >= deadline)));
    let context = Context::full(&runtime).map_err(memory)?;
    let removed = context.with(|ctx| {
        let globals = ctx.globals();
        REMOVED.iter().try_for_each(|name| globals.remove(*name))
    });
    removed.map_err(memory)?;
    Ok(Sandbox { context, deadline })
}

fn options() -> EvalOptions {
    let mut options = EvalOptions::default();
    // Conductor's scripts are sloppy-mode scripts (`x = 1` makes a global).
    options.strict = false;
    options.global = true;
    options.filename = Some(FILE.to_string());
    options
}

/// What a script threw, read inside its context.
enum Thrown {
    /// An `Error`: its name, message and stack.
    Error {
        name: String,
        message: String,
        stack: String,
    },
    /// Any other value, described (never the value itself when it is data).
    Value { description: String, null: bool },
    /// rquickjs' own error (an allocation, a string that is not UTF-8).
    Engine(rquickjs::Error),
}

fn thrown<'js>(ctx: &Ctx<'js>, caught: CaughtError<'js>) -> Thrown {
    match caught {
        CaughtError::Exception(e) => Thrown::Error {
            name: e
                .as_object()
                .get::<_, String>("name")
                .unwrap_or_else(|_| "Error".into()),
            message: e.message().unwrap_or_default(),
            stack: e.stack().unwrap_or_default(),
        },
        CaughtError::Value(v) => {
            let description = match v.type_of() {
                Type::String => match v.as_string().map(|s| s.to_string()) {
                    Some(Ok(s)) => format!("{:?}", shortened(&s, MESSAGE_CHARS)),
                    _ => "a string".into(),
                },
                Type::Int | Type::Float | Type::Bool => ctx
                    .json_stringify(v.clone())
                    .ok()
                    .flatten()
                    .and_then(|s| s.to_string().ok())
                    .unwrap_or_else(|| "a number".into()),
                Type::Array => "an array".into(),
                Type::Null => "null".into(),
                Type::Undefined | Type::Uninitialized => "undefined".into(),
                Type::Object => "an object".into(),
                other => format!("a {}", other.as_str()),
            };
            Thrown::Value {
                null: v.is_null(),
                description,
            }
        }
        CaughtError::Error(e) => Thrown::Engine(e),
    }
}

/// The error `thrown` is. `line_offset` lines were put before the script's own.
fn classify(thrown: Thrown, deadline: Instant, limits: &Limits, line_offset: u32) -> ScriptError {
    let language = Language::JavaScript;
    match thrown {
        Thrown::Error {
            name,
            message,
            stack,
        } => {
            if message == "interrupted" && Instant::now() >= deadline {
                return ScriptError::Timeout {
                    language,
                    limit: limits.time,
                };
            }
            if message == "out of memory" {
                return ScriptError::Memory {
                    limit_bytes: limits.memory_bytes,
                };
            }
            let at = position(&stack, line_offset);
            let message = shortened(&format!("{name}: {message}"), MESSAGE_CHARS);
            if name == "SyntaxError" {
                ScriptError::Syntax {
                    language,
                    message,
                    at,
                }
            } else {
                ScriptError::Failed {
                    language,
                    message,
                    at,
                }
            }
        }
        // Out of memory with no room left even for its `InternalError`, QuickJS throws
        // `null` (quickjs.c, JS_ThrowError2). A script's own `throw null` reads the
        // same, and is said as running out of memory too: no script has a reason to.
        Thrown::Value { null: true, .. } => ScriptError::Memory {
            limit_bytes: limits.memory_bytes,
        },
        Thrown::Value { description, .. } => ScriptError::Failed {
            language,
            message: format!("threw {description}"),
            at: None,
        },
        Thrown::Engine(rquickjs::Error::Allocation) => ScriptError::Memory {
            limit_bytes: limits.memory_bytes,
        },
        Thrown::Engine(e) => ScriptError::Failed {
            language,
            message: shortened(&e.to_string(), MESSAGE_CHARS),
            at: None,
        },
    }
}

/// The innermost place in the script a stack names (`at f (script:3:7)`, or
/// `at script:1:4` for a syntax error).
fn position(stack: &str, line_offset: u32) -> Option<Position> {
    let marker = format!("{FILE}:");
    stack.lines().find_map(|frame| {
        let start = frame.find(&marker)? + marker.len();
        let mut numbers = frame[start..]
            .split(|c: char| !c.is_ascii_digit())
            .take(2)
            .map(str::parse::<u32>);
        let line = numbers.next()?.ok()?;
        let column = numbers.next()?.ok()?;
        Some(Position {
            line: line.checked_sub(line_offset).filter(|l| *l > 0)?,
            column,
        })
    })
}

/// `source` parses as a script. It is given to the engine behind a `throw`, so that
/// the engine parses all of it (every early error is a parse error) and runs none.
pub(crate) fn check(source: &str, limits: &Limits) -> Result<(), ScriptError> {
    let sandbox = sandbox(limits)?;
    let guarded = format!("throw {PARSED:?};\n{source}");
    let outcome = sandbox.context.with(|ctx| {
        match ctx
            .eval_with_options::<rquickjs::Value, _>(guarded, options())
            .catch(&ctx)
        {
            Err(CaughtError::Value(v))
                if v.as_string().and_then(|s| s.to_string().ok()).as_deref() == Some(PARSED) =>
            {
                Ok(())
            }
            Err(caught) => Err(thrown(&ctx, caught)),
            // Unreachable: the script's first statement throws.
            Ok(_) => Ok(()),
        }
    });
    outcome.map_err(|t| classify(t, sandbox.deadline, limits, 1))
}

/// The value of `source` with `$` bound to `input`, as JSON.
pub(crate) fn eval(source: &str, input: &Value, limits: &Limits) -> Result<Value, ScriptError> {
    let sandbox = sandbox(limits)?;
    let input = input.to_string();
    let outcome = sandbox
        .context
        .with(|ctx| -> Result<Option<String>, Thrown> {
            let fail = |caught| thrown(&ctx, caught);
            let globals = ctx.globals();
            let input = ctx.json_parse(input).catch(&ctx).map_err(fail)?;
            globals.set("$", input).catch(&ctx).map_err(fail)?;
            let value = ctx
                .eval_with_options::<rquickjs::Value, _>(source, options())
                .catch(&ctx)
                .map_err(fail)?;
            // `undefined`, a function or a symbol have no JSON: `None`, so `null`.
            let text = ctx.json_stringify(value).catch(&ctx).map_err(fail)?;
            text.map(|s| s.to_string())
                .transpose()
                .catch(&ctx)
                .map_err(fail)
        });
    match outcome {
        Ok(None) => Ok(Value::Null),
        Ok(Some(text)) => serde_json::from_str(&text).map_err(|e| ScriptError::Failed {
            language: Language::JavaScript,
            message: format!("its value could not be read back as JSON: {e}"),
            at: None,
        }),
        Err(t) => Err(classify(t, sandbox.deadline, limits, 0)),
    }
}
