//! Scripts evaluated for real: JavaScript in QuickJS, jq in jaq, their sandbox and
//! their limits. No test sleeps; the two that run into a time limit set it to 50 ms.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tranche_workflow_expr::{eval_javascript, Language, Limits, Position, Script, ScriptError};

fn js(source: &str, input: Value) -> Result<Value, ScriptError> {
    Script::javascript(source)?.eval(&input, &Limits::default())
}

fn short() -> Limits {
    Limits {
        time: Duration::from_millis(50),
        ..Limits::default()
    }
}

#[test]
fn switch_expressions_see_the_input_as_dollar() {
    let input = json!({"value": 3, "kind": "late", "flags": [true, false]});
    assert_eq!(
        js("$.value > 1 ? 'big' : 'small'", input.clone()).unwrap(),
        json!("big")
    );
    assert_eq!(js("$.kind", input.clone()).unwrap(), json!("late"));
    assert_eq!(js("$.flags[1]", input.clone()).unwrap(), json!(false));
    assert_eq!(js("$.value * 2", input.clone()).unwrap(), json!(6));
    assert_eq!(js("$.value / 2", input.clone()).unwrap(), json!(1.5));
    assert_eq!(
        js("$.missing", input).unwrap(),
        Value::Null,
        "undefined is null"
    );
}

#[test]
fn function_style_scripts_and_statements_give_their_value() {
    let input = json!({"a": 2, "b": 5, "rows": [{"cents": 100}, {"cents": 250}]});
    let source = "(function () {\n  var total = 0;\n  for (var i = 0; i < $.rows.length; i++) {\n    total += $.rows[i].cents;\n  }\n  return {total: total, sum: $.a + $.b};\n})()";
    assert_eq!(
        js(source, input.clone()).unwrap(),
        json!({"total": 350, "sum": 7})
    );
    // A script of statements has its last expression's value (Conductor's eval).
    assert_eq!(
        js(
            "var x = $.a; function twice(n) { return 2 * n; } twice(x) + $.b",
            input.clone()
        )
        .unwrap(),
        json!(9)
    );
    // Sloppy mode, as Conductor's: an undeclared assignment makes a global.
    assert_eq!(js("y = $.a; y + 1", input.clone()).unwrap(), json!(3));
    // A function or undefined has no JSON: null.
    assert_eq!(js("(function(){})", input.clone()).unwrap(), Value::Null);
    assert_eq!(js("undefined", input).unwrap(), Value::Null);
}

#[test]
fn nested_values_go_through_and_back() {
    let input = json!({
        "s": "é ü \u{0} \"quoted\" \n",
        "n": [0, -1, 1.25, 9007199254740991i64, 1e300],
        "o": {"deep": {"deeper": [[], {}, [null, true, {"x": "y"}]]}},
        "empty": {}
    });
    assert_eq!(js("$", input.clone()).unwrap(), input);
    assert_eq!(
        js(
            "({copy: $.o, list: [1, 'two', null, undefined, NaN, Infinity, -0]})",
            input.clone()
        )
        .unwrap(),
        json!({"copy": input["o"], "list": [1, "two", null, null, null, null, 0]})
    );
    // Dates are JSON as JavaScript writes them; a BigInt has no JSON at all.
    assert_eq!(
        js("new Date(0)", json!({})).unwrap(),
        json!("1970-01-01T00:00:00.000Z")
    );
    let err = js("1n", json!({})).unwrap_err();
    assert!(matches!(err, ScriptError::Failed { .. }), "{err}");
    assert!(err.to_string().contains("BigInt"), "{err}");
}

#[test]
fn one_evaluation_leaves_nothing_for_the_next() {
    let script = Script::javascript(
        "let seen = typeof leaked; var leaked = 1; Object.prototype.polluted = 1; \
         globalThis.kept = 1; seen + ' ' + typeof ({}).polluted + ' ' + typeof kept",
    )
    .unwrap();
    // Twice the same answer: no global, declaration or prototype change survives
    // (a reused context would also refuse the second `let seen` outright).
    for _ in 0..2 {
        assert_eq!(
            script.eval(&json!({}), &Limits::default()).unwrap(),
            json!("undefined number number")
        );
    }
    assert_eq!(
        js("typeof polluted + typeof kept", json!({})).unwrap(),
        json!("undefinedundefined")
    );
}

#[test]
fn a_script_that_does_not_parse_is_refused_with_its_place() {
    let err = Script::javascript("$.a > 1 ?\n  'x' :").unwrap_err();
    match &err {
        ScriptError::Syntax { language, at, .. } => {
            assert_eq!(*language, Language::JavaScript);
            assert_eq!(at.map(|p| p.line), Some(2), "{err}");
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
    let err = Script::javascript("  foo(").unwrap_err();
    assert!(
        matches!(
            err,
            ScriptError::Syntax {
                at: Some(Position { line: 1, column: 7 }),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("JavaScript syntax error at line 1, column 7"),
        "{err}"
    );
    // Checking runs nothing: a script that would loop for ever passes its check (run,
    // it would have met the time limit, an error).
    Script::javascript("while (true) {}").unwrap();
    // Early errors are syntax errors too.
    assert!(matches!(
        Script::javascript("let a = 1; let a = 2;"),
        Err(ScriptError::Syntax { .. })
    ));
    // Unchecked, the same error comes from the evaluation.
    assert!(matches!(
        eval_javascript("1 +", &json!({}), &Limits::default()),
        Err(ScriptError::Syntax {
            at: Some(Position { line: 1, .. }),
            ..
        })
    ));
}

#[test]
fn a_failure_says_what_and_where_without_the_input() {
    let input = json!({"name": "Jane Q. Customer", "ssn": "123-45-6789"});
    let err = js("var x = 1;\nnull.boom", input.clone()).unwrap_err();
    match &err {
        ScriptError::Failed { message, at, .. } => {
            assert!(message.starts_with("TypeError"), "{message}");
            assert_eq!(at.map(|p| p.line), Some(2));
        }
        other => panic!("{other:?}"),
    }
    let err = js(
        "if ($.name) {\n  throw new Error('no rows for ' + $.name.length + ' chars');\n}",
        input.clone(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("JavaScript failed at line 2, column "),
        "{err}"
    );
    assert!(
        err.to_string().ends_with(": Error: no rows for 16 chars"),
        "{err}"
    );
    let err = js("throw $", input.clone()).unwrap_err();
    assert_eq!(err.to_string(), "JavaScript failed: threw an object");
    let err = js("nope.x", input).unwrap_err();
    assert!(err.to_string().contains("ReferenceError"), "{err}");
    assert!(!err.to_string().contains("123-45"));
}

#[test]
fn an_infinite_loop_ends_at_the_time_limit() {
    let started = Instant::now();
    let err = js_limited("while (true) {}", &short());
    assert_eq!(
        err,
        ScriptError::Timeout {
            language: Language::JavaScript,
            limit: Duration::from_millis(50)
        }
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        err.to_string(),
        "JavaScript ran past its time limit of 50 ms"
    );
    // A catch in the script cannot hold the interruption.
    let started = Instant::now();
    let err = js_limited(
        "for (;;) { try { while (true) {} } catch (e) {} }",
        &short(),
    );
    assert!(matches!(err, ScriptError::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

fn js_limited(source: &str, limits: &Limits) -> ScriptError {
    eval_javascript(source, &json!({}), limits).unwrap_err()
}

#[test]
fn memory_past_the_limit_is_an_error_not_a_crash() {
    let limits = Limits {
        memory_bytes: 4 << 20,
        ..Limits::default()
    };
    for source in [
        "new Array(1e9).fill(1)",
        "let a = []; while (true) a.push('row ' + a.length)",
        "(function () { var a = []; while (true) a.push({n: a.length}); })()",
        "'x'.repeat(1 << 23)",
    ] {
        let err = js_limited(source, &limits);
        assert_eq!(
            err,
            ScriptError::Memory {
                limit_bytes: 4 << 20
            },
            "{source}"
        );
    }
    // An input larger than the limit is refused the same way.
    let big = json!({"rows": vec!["x".repeat(1000); 10_000]});
    assert!(matches!(
        eval_javascript("$.rows.length", &big, &limits),
        Err(ScriptError::Memory { .. })
    ));
    // Deep recursion is the script's error, not a stack overflow of the process.
    let err = js_limited(
        "function f(n) { return f(n + 1) + 1; } f(0)",
        &Limits::default(),
    );
    assert!(err.to_string().contains("stack"), "{err}");
}

#[test]
fn a_script_has_no_way_out() {
    let names = [
        "require",
        "fetch",
        "load",
        "std",
        "os",
        "print",
        "console",
        "setTimeout",
        "setInterval",
        "XMLHttpRequest",
        "WebAssembly",
        "process",
        "Deno",
        "scriptArgs",
        "queueMicrotask",
        "performance",
        "WeakRef",
        "FinalizationRegistry",
        "gc",
    ];
    for name in names {
        let source = format!("typeof {name}");
        assert_eq!(
            js(&source, json!({})).unwrap(),
            json!("undefined"),
            "{name}"
        );
    }
    // Modules cannot be loaded either, statically or dynamically.
    assert!(matches!(
        Script::javascript("import * as std from 'std'"),
        Err(ScriptError::Syntax { .. })
    ));
    // A dynamic import, or any promise, never settles: no job runs after the script.
    for source in [
        "import('os')",
        "eval(\"import('std')\")",
        "(async () => { await null; return 1; })()",
        "new Promise(function (ok) { ok(1); })",
    ] {
        assert_eq!(js(source, json!({})).unwrap(), json!({}), "{source}");
    }
    // What Conductor's scripts use is there.
    assert_eq!(
        js(
            "[typeof JSON, typeof Math, typeof Date, typeof RegExp, typeof Map]",
            json!({})
        )
        .unwrap(),
        json!(["object", "object", "function", "function", "function"])
    );
}

fn jq(query: &str, input: Value) -> Result<Vec<Value>, ScriptError> {
    Script::jq(query)?.eval_all(&input, &Limits::default())
}

#[test]
fn jq_transforms_as_conductor_documents_them() {
    assert_eq!(jq(".a + .b", json!({"a": 1, "b": 2})).unwrap(), [json!(3)]);
    assert_eq!(
        jq(".a + .b", json!({"a": ["x"], "b": ["y"]})).unwrap(),
        [json!(["x", "y"])]
    );
    assert_eq!(
        jq(
            "{key: .x, both: [.a, .b]}",
            json!({"x": "k1", "a": 1, "b": null})
        )
        .unwrap(),
        [json!({"key": "k1", "both": [1, null]})]
    );
    assert_eq!(
        jq(
            ".rows[] | .id",
            json!({"rows": [{"id": "E1"}, {"id": "E2"}, {"id": "E3"}]})
        )
        .unwrap(),
        [json!("E1"), json!("E2"), json!("E3")]
    );
    assert_eq!(
        jq(
            "[.rows[] | select(.cents > 100) | .id] | length",
            json!({"rows": [{"id": 1, "cents": 50}, {"id": 2, "cents": 150}]})
        )
        .unwrap(),
        [json!(1)]
    );
    assert_eq!(jq("empty", json!({})).unwrap(), Vec::<Value>::new());
    let script = Script::jq(".a").unwrap();
    assert_eq!(
        script.eval(&json!({"a": [1]}), &Limits::default()).unwrap(),
        json!([1])
    );
    assert_eq!(script.language(), Language::Jq);
    // Standard library functions are there.
    assert_eq!(
        jq(
            "[.[] | ascii_downcase] | sort | join(\",\")",
            json!(["B", "a"])
        )
        .unwrap(),
        [json!("a,b")]
    );
    assert_eq!(
        jq("\"2026-03-03T00:00:00Z\" | fromdate", json!(null)).unwrap(),
        [json!(1772496000)]
    );
}

#[test]
fn jq_numbers_and_strings_come_back_as_json() {
    let input = json!({"big": 12345678901234567890u64, "f": 1.5, "s": "é\u{0}"});
    assert_eq!(jq(".", input.clone()).unwrap(), [input]);
    assert_eq!(
        jq("[nan, infinite, -infinite, 1e1000]", json!(null)).unwrap(),
        [json!([null, f64::MAX, f64::MIN, f64::MAX])]
    );
}

#[test]
fn jq_errors_say_what_without_the_input() {
    let err = Script::jq(".a | foo").unwrap_err();
    assert_eq!(
        err,
        ScriptError::Syntax {
            language: Language::Jq,
            message: "filter foo is not defined".into(),
            at: Some(Position { line: 1, column: 6 })
        }
    );
    let err = Script::jq("{a: \n }").unwrap_err();
    assert!(
        matches!(
            err,
            ScriptError::Syntax {
                at: Some(Position { line: 2, column: 2 }),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("jq syntax error at line 2, column 2: expected"),
        "{err}"
    );
    let input = json!({"name": "Jane Q. Customer", "ssn": "123-45-6789"});
    let err = jq(".name + 1", input.clone()).unwrap_err();
    assert_eq!(err.to_string(), "jq failed: cannot calculate a string + 1");
    let err = jq(". as $all | 1 | .[$all]", input.clone()).unwrap_err();
    assert_eq!(err.to_string(), "jq failed: cannot index 1 with an object");
    let err = jq(".ssn | keys", input.clone()).unwrap_err();
    assert!(!err.to_string().contains("123-45"), "{err}");
    let err = jq(".name | tonumber", input.clone()).unwrap_err();
    assert!(!err.to_string().contains("Jane"), "{err}");
    assert!(err.to_string().contains("a string"), "{err}");
    let err = jq("error(\"no rows\")", input.clone()).unwrap_err();
    assert_eq!(err.to_string(), "jq failed: no rows");
    for query in ["halt", "halt_error"] {
        let err = jq(query, input.clone()).unwrap_err();
        assert!(err.to_string().contains("cannot end the process"), "{err}");
    }
}

#[test]
fn jq_has_no_way_out() {
    for (query, says) in [
        ("env", "server's environment"),
        ("$ENV", "server's environment"),
        ("now", "clock"),
        ("localtime", "time zone"),
        ("0 | strflocaltime(\"%H\")", "time zone"),
        ("input", "filter input is not defined"),
        ("inputs", "filter inputs is not defined"),
        ("$__loc__", "variable $__loc__ is not defined"),
        ("import \"a\" as a; .", "reads no file"),
        ("include \"a\"; .", "reads no file"),
    ] {
        let err = Script::jq(query).unwrap_err();
        assert!(
            matches!(err, ScriptError::Syntax { .. }),
            "{query}: {err:?}"
        );
        assert!(err.to_string().contains(says), "{query}: {err}");
    }
    // debug and stderr are the identity: nothing of the data is logged.
    assert_eq!(
        jq("debug | stderr | .a", json!({"a": 1})).unwrap(),
        [json!(1)]
    );
}

#[test]
fn jq_that_runs_for_ever_stops() {
    for query in [
        "repeat(1)",
        "last(repeat(1))",
        "[range(1e15)] | length",
        "last(range(0; infinite))",
        "until(false; .)",
        "[.[] | 1] | last(recurse(. + [1]))",
        "[while(true; .)] | length",
    ] {
        let started = Instant::now();
        let err = Script::jq(query)
            .unwrap()
            .eval_all(
                &json!([1]),
                &Limits {
                    max_results: usize::MAX,
                    ..short()
                },
            )
            .unwrap_err();
        assert_eq!(
            err,
            ScriptError::Timeout {
                language: Language::Jq,
                limit: Duration::from_millis(50)
            },
            "{query}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{query}: {:?}",
            started.elapsed()
        );
    }
    // The result cap ends a long stream before the clock does.
    let err = Script::jq("range(100)").unwrap().eval_all(
        &json!(null),
        &Limits {
            max_results: 10,
            ..Limits::default()
        },
    );
    assert_eq!(err, Err(ScriptError::TooManyResults { limit: 10 }));
}

#[test]
fn compiled_queries_are_shared() {
    let a = Script::jq(".cached + 1").unwrap();
    let b = Script::jq(".cached + 1").unwrap();
    assert_eq!(
        a.eval(&json!({"cached": 1}), &Limits::default()).unwrap(),
        json!(2)
    );
    assert_eq!(
        b.eval(&json!({"cached": 2}), &Limits::default()).unwrap(),
        json!(3)
    );
}

/// Per-call cost, for docs/workflows.md ("Scripts"): `cargo test -p
/// tranche-workflow-expr --release --test integration -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check: run it by name"]
fn per_call_cost() {
    let per_call = |what: &str, n: u32, mut f: Box<dyn FnMut(u32)>| {
        let started = Instant::now();
        for i in 0..n {
            f(i);
        }
        println!("{what}: {:?} a call", started.elapsed() / n);
    };
    let limits = Limits::default();
    let input = json!({"value": 3, "kind": "late", "rows": [{"id": "E1"}, {"id": "E2"}]});
    let switch = Script::javascript("$.value > 1 ? 'big' : 'small'").unwrap();
    per_call(
        "JavaScript switch expression, eval",
        2_000,
        Box::new(|_| assert_eq!(switch.eval(&input, &limits).unwrap(), json!("big"))),
    );
    per_call(
        "JavaScript syntax check (Script::javascript)",
        2_000,
        Box::new(|_| {
            Script::javascript("$.value > 1 ? 'big' : 'small'").unwrap();
        }),
    );
    let query = Script::jq("{key: .kind, ids: [.rows[].id]}").unwrap();
    per_call(
        "jq small filter, eval",
        20_000,
        Box::new(|_| {
            query.eval(&input, &limits).unwrap();
        }),
    );
    per_call(
        "jq compile, not cached",
        200,
        Box::new(|i| {
            Script::jq(&format!(".value + {i}")).unwrap();
        }),
    );
    per_call(
        "jq compile, cached",
        20_000,
        Box::new(|_| {
            Script::jq(".value + 0").unwrap();
        }),
    );
}
