//! jq in jaq (`jaq-core`, `jaq-std`, `jaq-json`), the language of Conductor's
//! `JSON_JQ_TRANSFORM`.
//!
//! jaq has no I/O of its own beyond a few natives of its standard library, which are
//! left out here:
//! - `env` (and so `$ENV`, which the library never defines): the server's environment,
//!   its secrets with it;
//! - `now`, `localtime`, `strflocaltime`: the clock, and the machine's time zone (read
//!   from `/etc/localtime` or `TZ`). `gmtime`, `mktime`, `strftime`, `strptime`,
//!   `todate` and `fromdate` stay: they are pure;
//! - `input`, `inputs` (not in the library's set either): there is one input;
//! - `debug` and `stderr` stay, as the identity: jaq's write the value to the log,
//!   which would put a step's data (personal data among it) in the server's log;
//! - `halt` and `halt_error` are errors, not an exit: jaq's own runner ends the
//!   process on them, this one never calls it.
//!
//! Bounds: jaq cannot be interrupted from outside, so time is checked where the work
//! is: after every result, and at every step of the generators that can run for ever
//! (`repeat`, `recurse`, `while`, `until`, `range/1` and `range/2`, redefined with a
//! check between their steps). A query that loops within one result by recursion of
//! its own (`def f: f; f`) or builds one huge value in one step (`"x" * 1e12`) is not
//! stopped; queries come from definitions, which only operators apply, so the bounds
//! are against mistakes (an unbounded `repeat`), not against a hostile author. The
//! number of results is capped ([`Limits::max_results`]).

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use jaq_core::box_iter::box_once;
use jaq_core::data::HasLut;
use jaq_core::load::{lex, parse, Arena, File, Loader};
use jaq_core::native::{run as native_run, v, Fun};
use jaq_core::{Compiler, Ctx, DataT, Error as JqError, Exn, Lut, ValT, Vars};
use jaq_json::{Num, Val};
use serde_json::{Map, Number, Value};

use super::{shortened, Language, Limits, Position, ScriptError};

/// jaq's data for a run: the compiled program and the run's deadline, which the
/// generators' check reads.
pub(crate) struct Guarded;

impl DataT for Guarded {
    type V<'a> = Val;
    type Data<'a> = &'a Run<'a>;
}

pub(crate) struct Run<'a> {
    lut: &'a Lut<Guarded>,
    deadline: Instant,
    timed_out: Cell<bool>,
}

impl<'a> HasLut<'a, Guarded> for &'a Run<'a> {
    fn lut(&self) -> &'a Lut<Guarded> {
        self.lut
    }
}

/// A compiled query.
pub(crate) struct Compiled(jaq_core::Filter<Guarded>);

/// The natives left out, with why (see the module's documentation).
const LEFT_OUT: [(&str, &str); 4] = [
    ("env", "it would read the server's environment"),
    ("now", "it would read the clock"),
    ("localtime", "it would read the machine's time zone"),
    ("strflocaltime", "it would read the machine's time zone"),
];

/// The check the generators make at each step.
const TICK: &str = "_tranche_tick";

/// The generators that can run for ever, with a check at each step; otherwise as
/// jaq-core defines them (jaq's `repeat(f)` is `f, f, …`, not jq's `., f, f|f, …`).
const CHECKED_GENERATORS: &str = "
def repeat(f): def rec: f, (_tranche_tick | rec); rec;
def recurse(f): def rec: ., (f | _tranche_tick | rec); rec;
def recurse: recurse(.[]?);
def recurse(f; cond): recurse(f | select(cond));
def while(cond; update): def rec: if cond then ., (update | _tranche_tick | rec) else empty end; rec;
def until(cond; update): def rec: if cond then . else update | _tranche_tick | rec end; rec;
def range(from; to): range(from; to; 1) | _tranche_tick;
def range(to): range(0; to);
";

fn natives() -> impl Iterator<Item = Fun<Guarded>> {
    let left_out = |(name, _, _): &Fun<Guarded>| {
        LEFT_OUT.iter().any(|(n, _)| n == name) || ["debug_empty", "stderr_empty"].contains(name)
    };
    let ours: [jaq_core::native::Filter<jaq_core::RunPtr<Guarded>>; 3] = [
        (TICK, v(0), |cv| {
            let run = *cv.0.data();
            if Instant::now() >= run.deadline {
                run.timed_out.set(true);
                box_once(Err(Exn::from(JqError::str("time limit"))))
            } else {
                box_once(Ok(cv.1))
            }
        }),
        // `debug` and `stderr` are the identity: nothing of the data is logged.
        ("debug_empty", v(0), |_| Box::new(std::iter::empty())),
        ("stderr_empty", v(0), |_| Box::new(std::iter::empty())),
    ];
    jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs())
        .filter(move |f| !left_out(f))
        .chain(ours.into_iter().map(native_run::<Guarded>))
}

/// Compiled queries by their text: compiling loads jaq's standard library each time
/// (~0.3 ms), a run of a small query takes ~1 µs.
fn cache() -> &'static Mutex<HashMap<String, Arc<Compiled>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Compiled>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Most queries kept compiled; the cache starts again when full.
const CACHED: usize = 512;

pub(crate) fn compile(query: &str) -> Result<Arc<Compiled>, ScriptError> {
    if let Some(hit) = cache().lock().unwrap_or_else(|e| e.into_inner()).get(query) {
        return Ok(hit.clone());
    }
    let compiled = Arc::new(compile_anew(query)?);
    let mut cache = cache().lock().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= CACHED {
        cache.clear();
    }
    cache.insert(query.to_string(), compiled.clone());
    Ok(compiled)
}

fn compile_anew(query: &str) -> Result<Compiled, ScriptError> {
    let checked = parse(CHECKED_GENERATORS, |p| p.defs()).unwrap_or_default();
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs())
        .chain(checked);
    let loader = Loader::new(defs);
    let arena = Arena::default();
    let syntax = |message: String, part: &str| ScriptError::Syntax {
        language: Language::Jq,
        message: shortened(&message, 200),
        at: position(query, part),
    };
    let modules = loader
        .load(
            &arena,
            File {
                code: query,
                path: (),
            },
        )
        .map_err(|errors| {
            let first = errors.into_iter().next().map(|(_, e)| e);
            match first {
                Some(jaq_core::load::Error::Lex(errors)) => match errors.first() {
                    Some((expected, part)) => syntax(lexed(expected, part), part),
                    None => syntax("does not parse".into(), ""),
                },
                Some(jaq_core::load::Error::Parse(errors)) => match errors.first() {
                    Some((expected, part)) => syntax(parsed(expected, part), part),
                    None => syntax("does not parse".into(), ""),
                },
                Some(jaq_core::load::Error::Io(errors)) => syntax(
                    "imports no module (a workflow's jq reads no file)".into(),
                    errors.first().map_or("", |(part, _)| *part),
                ),
                None => syntax("does not parse".into(), ""),
            }
        })?;
    let filter = Compiler::default()
        .with_funs(natives())
        .compile(modules)
        .map_err(|errors| {
            let first = errors
                .into_iter()
                .flat_map(|(_, errors)| errors.into_iter())
                .next();
            match first {
                Some((name, undefined)) => {
                    let message = match LEFT_OUT
                        .iter()
                        .find(|(n, _)| *n == name.trim_start_matches('$'))
                    {
                        Some((n, why)) => {
                            format!("{n} is not available in a workflow's jq: {why}")
                        }
                        None if name == "$ENV" => {
                            "$ENV is not available in a workflow's jq: it would read the \
                             server's environment"
                                .to_string()
                        }
                        None => format!("{} {name} is not defined", undefined.as_str()),
                    };
                    syntax(message, name)
                }
                None => syntax("does not compile".into(), ""),
            }
        })?;
    Ok(Compiled(filter))
}

fn lexed(expected: &lex::Expect<&str>, part: &str) -> String {
    let found = part
        .chars()
        .next()
        .map_or("the end".to_string(), |c| format!("{c:?}"));
    format!("expected {}, found {found}", expected.as_str())
}

fn parsed(expected: &parse::Expect<&str>, part: &str) -> String {
    let found = if part.is_empty() {
        "the end".to_string()
    } else {
        format!("{:?}", shortened(part, 40))
    };
    format!("expected {}, found {found}", expected.as_str())
}

/// Where `part` (a slice of `query`, when it is one) starts in `query`.
fn position(query: &str, part: &str) -> Option<Position> {
    let start = (part.as_ptr() as usize).checked_sub(query.as_ptr() as usize)?;
    if start + part.len() > query.len() || !query.is_char_boundary(start) {
        return None;
    }
    let before = &query[..start];
    let line = before.matches('\n').count() + 1;
    let column = start - before.rfind('\n').map_or(0, |n| n + 1) + 1;
    Some(Position {
        line: u32::try_from(line).ok()?,
        column: u32::try_from(column).ok()?,
    })
}

/// The results of `compiled` on `input`, within `limits`.
pub(crate) fn run(
    compiled: &Compiled,
    input: &Value,
    limits: &Limits,
) -> Result<Vec<Value>, ScriptError> {
    let filter = &compiled.0;
    let run = Run {
        lut: &filter.lut,
        deadline: Instant::now() + limits.time,
        timed_out: Cell::new(false),
    };
    let timeout = || ScriptError::Timeout {
        language: Language::Jq,
        limit: limits.time,
    };
    let ctx = Ctx::<Guarded>::new(&run, Vars::new([]));
    let mut results = Vec::new();
    for item in filter.id.run((ctx, to_val(input))) {
        if run.timed_out.get() || Instant::now() >= run.deadline {
            return Err(timeout());
        }
        match item {
            Ok(v) if results.len() < limits.max_results => results.push(from_val(&v)),
            Ok(_) => {
                return Err(ScriptError::TooManyResults {
                    limit: limits.max_results,
                })
            }
            Err(exn) => {
                let message = match exn.get_err() {
                    Ok(e) => without_values(&e.to_string()),
                    Err(exn) => match exn.get_halt() {
                        Ok(code) => format!("halt({code}): a workflow's jq cannot end the process"),
                        Err(_) => "an internal control flow escaped the query".into(),
                    },
                };
                return Err(ScriptError::Failed {
                    language: Language::Jq,
                    message: shortened(&message, 200),
                    at: None,
                });
            }
        }
    }
    Ok(results)
}

/// jaq's message with the values it quotes (`cannot use {…} as number`: the whole
/// input, maybe) replaced by their type. A message that is one string (`error("…")`,
/// or a native's `cannot parse "…" as JSON`) is kept, with the strings, objects and
/// arrays quoted in it replaced the same way.
fn without_values(message: &str) -> String {
    match serde_json::from_str::<Value>(message) {
        Ok(Value::String(own)) => replace_values(&own, false),
        _ => replace_values(message, true),
    }
}

/// `text` with each JSON object, array and string in it said by its type. What is not
/// JSON from a `{`, `[` or `"` on is dropped when `strict` (jaq writes NaN and byte
/// strings its own way: better lose the rest than quote data), else kept as text.
fn replace_values(text: &str, strict: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['{', '[', '"']) {
        out.push_str(&rest[..at]);
        let mut values = serde_json::Deserializer::from_str(&rest[at..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(value)) => {
                out.push_str(match value {
                    Value::Object(_) => "an object",
                    Value::Array(_) => "an array",
                    _ => "a string",
                });
                rest = &rest[at + values.byte_offset()..];
            }
            _ if strict => {
                out.push_str("a value");
                rest = "";
            }
            _ => {
                out.push_str(&rest[at..at + 1]);
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn to_val(value: &Value) -> Val {
    match value {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(*b),
        Value::Number(n) => match n.as_i64().and_then(|i| isize::try_from(i).ok()) {
            Some(i) => Val::from(i),
            None => Val::from_num(&n.to_string())
                .unwrap_or_else(|_| Val::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => Val::from(s.clone()),
        Value::Array(items) => items.iter().map(to_val).collect(),
        Value::Object(map) => {
            Val::from_map(map.iter().map(|(k, v)| (Val::from(k.clone()), to_val(v))))
                .unwrap_or(Val::Null)
        }
    }
}

fn from_val(value: &Val) -> Value {
    match value {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Num(n) => number(n),
        Val::TStr(b) | Val::BStr(b) => Value::String(String::from_utf8_lossy(b).into_owned()),
        Val::Arr(items) => Value::Array(items.iter().map(from_val).collect()),
        Val::Obj(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Val::TStr(b) | Val::BStr(b) => String::from_utf8_lossy(b).into_owned(),
                        other => other.to_string(),
                    };
                    (key, from_val(v))
                })
                .collect::<Map<_, _>>(),
        ),
    }
}

/// A jaq number as JSON, as jq prints it: NaN is `null`, infinities the largest
/// finite numbers, big integers and long decimals the nearest double.
fn number(n: &Num) -> Value {
    let float = |f: f64| {
        if f.is_nan() {
            Value::Null
        } else {
            let f = f.clamp(f64::MIN, f64::MAX);
            Number::from_f64(f).map_or(Value::Null, Value::Number)
        }
    };
    match n {
        Num::Int(i) => Value::Number(Number::from(i64::try_from(*i).unwrap_or(i64::MAX))),
        Num::Float(f) => float(*f),
        other => {
            let text = other.to_string();
            match serde_json::from_str::<Number>(&text) {
                Ok(n) => Value::Number(n),
                Err(_) => float(text.parse::<f64>().unwrap_or(f64::NAN)),
            }
        }
    }
}
