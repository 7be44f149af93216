//! Workflows end to end on the embedded backend: definitions stored, workflows
//! started, steps polled and updated as a Conductor worker does, system steps run by
//! the engine, and each workflow's end, output and steps checked.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;
use tranche_core::Client;
use tranche_redis::{RedisBackend, RedisOptions};
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_test_support::poll_until_async;
use tranche_workflow_def::{task_defs_from_json, workflows_from_json};
use tranche_workflow_engine::{
    StartRequest, TaskStatus, TaskUpdate, WorkflowError, WorkflowStatus, Workflows,
};

const WITHIN: Duration = Duration::from_secs(30);

/// The backends every test runs on.
#[derive(Clone, Copy)]
enum On {
    Sqlite,
    Redis,
}

struct Harness {
    on: On,
    workflows: Workflows,
    /// Stops the workers the test runs.
    stop: CancellationToken,
    /// The engine's system steps, as a server runs them, and how to stop them.
    engine: Option<(CancellationToken, tokio::task::JoinHandle<()>)>,
    /// Its own redis-server, on Redis (killed when the test ends).
    _redis: Option<tranche_test_support::Server>,
    _dir: tempfile::TempDir,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some((stop, _)) = &self.engine {
            stop.cancel();
        }
    }
}

/// A fresh backend `on`, with the engine's system steps running; `None` when Redis is
/// not installed here (and tools are not required).
async fn harness(on: On) -> Option<Harness> {
    let dir = tempfile::tempdir().unwrap();
    let mut redis = None;
    let client = match on {
        On::Sqlite => {
            Client::new(SqliteBackend::open(dir.path(), SqliteOptions::default()).unwrap())
        }
        On::Redis => {
            if !tranche_test_support::redis_available() {
                tranche_test_support::missing_tool("redis-server");
                return None;
            }
            let (server, port) = tranche_test_support::redis(dir.path());
            redis = Some(server);
            let options = RedisOptions {
                url: format!("redis://127.0.0.1:{port}"),
                poll_interval: Duration::from_millis(50),
                ..RedisOptions::default()
            };
            Client::new(RedisBackend::connect(options).await.unwrap())
        }
    };
    let mut h = Harness {
        on,
        workflows: Workflows::new(client),
        stop: CancellationToken::new(),
        engine: None,
        _redis: redis,
        _dir: dir,
    };
    h.start_engine();
    Some(h)
}

/// Each test, on each backend.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(super::harness(super::On::Sqlite).await.unwrap()).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redis() {
                if let Some(h) = super::harness(super::On::Redis).await {
                    super::$name(h).await
                }
            }
        }
    )*};
}

impl Harness {
    /// Run the engine's system steps, as a server starting does.
    fn start_engine(&mut self) {
        let stop = CancellationToken::new();
        let w = self.workflows.clone();
        let token = stop.clone();
        let running = tokio::spawn(async move { w.run_system_steps(token).await });
        self.engine = Some((stop, running));
    }

    /// Stop them, as a server stopping does, and wait until they have.
    async fn stop_engine(&mut self) {
        if let Some((stop, running)) = self.engine.take() {
            stop.cancel();
            running.await.unwrap();
        }
    }

    async fn define(&self, tasks: &[&str], workflows: Value) {
        let defs: Vec<Value> = tasks
            .iter()
            .map(|t| json!({"name": t, "retryCount": 0, "responseTimeoutSeconds": 30, "timeoutSeconds": 60}))
            .collect();
        let defs = task_defs_from_json(&Value::Array(defs).to_string(), "tasks").unwrap();
        self.workflows.put_task_defs(defs).await.unwrap();
        let defs = workflows_from_json(&workflows.to_string(), "workflows").unwrap();
        self.workflows.put_workflow_defs(defs).await.unwrap();
    }

    async fn start(&self, name: &str, input: Value) -> String {
        self.workflows
            .start(StartRequest {
                name: name.into(),
                input: input.as_object().cloned().unwrap_or_default(),
                ..StartRequest::default()
            })
            .await
            .unwrap()
    }

    /// A worker of `task_types` answering each step with `answer(reference, input)`,
    /// until the harness stops.
    fn work(
        &self,
        task_types: &[&str],
        answer: impl Fn(&str, &Value) -> (TaskStatus, Value) + Send + Sync + 'static,
    ) {
        let answer = Arc::new(answer);
        for t in task_types {
            let (workflows, stop, t, answer) = (
                self.workflows.clone(),
                self.stop.clone(),
                t.to_string(),
                answer.clone(),
            );
            tokio::spawn(async move {
                while !stop.is_cancelled() {
                    let polled = workflows
                        .poll(&t, 10, Duration::from_millis(100), Some("test"))
                        .await
                        .unwrap();
                    for task in polled {
                        let args = task.args.clone().unwrap();
                        let (status, output) = answer(&args.reference, &args.input);
                        let output = output.as_object().cloned().unwrap_or_default();
                        let reason = output
                            .get("reason")
                            .and_then(Value::as_str)
                            .map(String::from);
                        workflows
                            .update_task(TaskUpdate {
                                task_id: task.to_conductor()["taskId"].as_str().unwrap().into(),
                                status,
                                output,
                                reason,
                                callback_after_seconds: 0,
                            })
                            .await
                            .unwrap();
                    }
                }
            });
        }
    }

    /// Workflow `id` once it has ended, which must be completed.
    async fn completed(&self, id: &str) -> tranche_workflow_engine::WorkflowView {
        let w = self.ended(id).await;
        assert_eq!(
            w.header.status,
            WorkflowStatus::Completed,
            "{:?}",
            w.header.reason
        );
        w
    }

    async fn ended(&self, id: &str) -> tranche_workflow_engine::WorkflowView {
        let mut view = None;
        poll_until_async(&format!("workflow {id} to end"), WITHIN, async || {
            let w = self.workflows.workflow(id, true).await.unwrap();
            let done = w.header.status.is_terminal();
            view = Some(w);
            done
        })
        .await;
        view.unwrap()
    }
}

fn ok(reference: &str, _: &Value) -> (TaskStatus, Value) {
    (
        TaskStatus::Completed,
        json!({"v": format!("{reference}-ok")}),
    )
}

fn simple(name: &str, reference: &str, input: Value) -> Value {
    json!({"name": name, "taskReferenceName": reference, "type": "SIMPLE", "inputParameters": input})
}

/// The shape of Conductor's benchmark: steps passing outputs on, a sub-workflow in the
/// middle, the workflow's output mapped from its last step.
async fn a_sequence_with_a_sub_workflow_completes_with_its_outputs(h: Harness) {
    let mut tasks = vec![simple("a", "t1", json!({"seq": "${workflow.input.seq}"}))];
    tasks.push(simple("a", "t2", json!({"prev": "${t1.output.v}"})));
    tasks.push(json!({"name": "child", "taskReferenceName": "sub", "type": "SUB_WORKFLOW",
        "inputParameters": {"from": "${t2.output.v}"}, "subWorkflowParam": {"name": "child", "version": 1}}));
    tasks.push(simple("a", "t3", json!({"prev": "${sub.output.out}"})));
    h.define(
        &["a", "c"],
        json!([
            {"name": "child", "version": 1, "tasks": [simple("c", "c1", json!({"from": "${workflow.input.from}"}))],
             "outputParameters": {"out": "${c1.output.v}", "got": "${workflow.input.from}"}},
            {"name": "parent", "version": 1, "tasks": tasks,
             "outputParameters": {"last": "${t3.output.v}", "sub": "${sub.output}"}}
        ]),
    )
    .await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let inputs = seen.clone();
    h.work(&["a", "c"], move |r, input| {
        inputs.lock().unwrap().push((r.to_string(), input.clone()));
        ok(r, input)
    });
    let id = h.start("parent", json!({"seq": 7})).await;
    let w = h.completed(&id).await;
    assert_eq!(
        w.header.output,
        json!({"last": "t3-ok", "sub": {"out": "c1-ok", "got": "t2-ok"}})
    );
    let refs: Vec<_> = w
        .steps
        .iter()
        .map(|s| s.args.as_ref().unwrap().reference.clone())
        .collect();
    assert_eq!(
        refs,
        ["t1", "t2", "sub", "t3"],
        "the parent's own steps, in order"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            ("t1".into(), json!({"seq": 7})),
            ("t2".into(), json!({"prev": "t1-ok"})),
            ("c1".into(), json!({"from": "t2-ok"})),
            ("t3".into(), json!({"prev": "c1-ok"})),
        ]
    );

    // Ended, its header goes with the retention, as its steps' run does: a prune
    // past it leaves no trace of it, and its definitions are kept. (On Redis the
    // header expires by itself instead: tranche-redis's own tests show the expiry.)
    if matches!(h.on, On::Redis) {
        return;
    }
    let far = tranche_types::Timestamp(i64::MAX / 2);
    let pruned = h.workflows.client().prune(far, 1_000).await.unwrap();
    assert!(
        pruned.records >= 2,
        "the parent's and the child's headers: {pruned:?}"
    );
    assert!(matches!(
        h.workflows.workflow(&id, false).await,
        Err(WorkflowError::NotFound(_))
    ));
    h.start("parent", json!({"seq": 8})).await;
}

async fn a_fork_joins_when_every_branch_has_arrived(h: Harness) {
    h.define(
        &["w"],
        json!({"name": "fork", "version": 1, "tasks": [
            {"name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN", "forkTasks": [
                [simple("w", "a1", json!({})), simple("w", "a2", json!({"p": "${a1.output.v}"}))],
                [simple("w", "b1", json!({}))],
                [{"name": "set", "taskReferenceName": "set", "type": "SET_VARIABLE", "inputParameters": {"x": 1}}]
            ]},
            {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["a2", "b1"]},
            simple("w", "after", json!({"joined": "${join.output}", "x": "${workflow.variables.x}"}))
        ], "outputParameters": {"after": "${after.input}"}}),
    )
    .await;
    h.work(&["w"], ok);
    let id = h.start("fork", json!({})).await;
    let w = h.completed(&id).await;
    assert_eq!(
        w.header.output,
        json!({"after": {"joined": {"a2": {"v": "a2-ok"}, "b1": {"v": "b1-ok"}}, "x": 1}})
    );
}

async fn a_switch_takes_its_case_and_terminate_ends_the_workflow(h: Harness) {
    h.define(
        &["w"],
        json!({"name": "switch", "version": 1, "tasks": [
            {"name": "sw", "taskReferenceName": "sw", "type": "SWITCH", "evaluatorType": "value-param",
             "expression": "kind", "inputParameters": {"kind": "${workflow.input.kind}"},
             "decisionCases": {
                "stop": [{"name": "t", "taskReferenceName": "stop", "type": "TERMINATE",
                          "inputParameters": {"terminationStatus": "FAILED", "terminationReason": "asked to stop"}}],
                "go": [simple("w", "go", json!({}))]
             },
             "defaultCase": [simple("w", "other", json!({}))]},
            simple("w", "end", json!({}))
        ]}),
    )
    .await;
    h.work(&["w"], ok);
    let go = h.start("switch", json!({"kind": "go"})).await;
    let other = h.start("switch", json!({"kind": "?"})).await;
    let stop = h.start("switch", json!({"kind": "stop"})).await;
    let refs = |w: &tranche_workflow_engine::WorkflowView| -> Vec<String> {
        w.steps
            .iter()
            .map(|s| s.args.as_ref().unwrap().reference.clone())
            .collect()
    };
    let w = h.ended(&go).await;
    assert_eq!(
        (w.header.status, refs(&w)),
        (
            WorkflowStatus::Completed,
            vec!["sw".to_string(), "go".into(), "end".into()]
        )
    );
    let w = h.ended(&other).await;
    assert_eq!(
        (w.header.status, refs(&w)),
        (
            WorkflowStatus::Completed,
            vec!["sw".to_string(), "other".into(), "end".into()]
        )
    );
    let w = h.ended(&stop).await;
    assert_eq!(w.header.status, WorkflowStatus::Failed);
    assert_eq!(w.header.reason.as_deref(), Some("FAILED: asked to stop"));
    assert_eq!(
        refs(&w),
        ["sw", "stop"],
        "the steps decided on the spot are shown"
    );
}

async fn a_failed_step_fails_the_workflow_and_a_retry_runs_it_again(h: Harness) {
    h.define(
        &["w"],
        json!({"name": "fails", "version": 1, "tasks": [
            simple("w", "first", json!({})), simple("w", "flaky", json!({})), simple("w", "last", json!({}))
        ]}),
    )
    .await;
    let healed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let h2 = healed.clone();
    h.work(&["w"], move |r, input| {
        if r == "flaky" && !h2.load(std::sync::atomic::Ordering::SeqCst) {
            (TaskStatus::Failed, json!({"reason": "the bank said no"}))
        } else {
            ok(r, input)
        }
    });
    let id = h.start("fails", json!({})).await;
    let w = h.ended(&id).await;
    assert_eq!(w.header.status, WorkflowStatus::Failed);
    assert_eq!(w.header.failed_step.as_deref(), Some("flaky"));
    assert_eq!(w.header.reason.as_deref(), Some("the bank said no"));
    healed.store(true, std::sync::atomic::Ordering::SeqCst);
    h.workflows.retry(&id).await.unwrap();
    h.completed(&id).await;
    assert!(matches!(
        h.workflows.retry(&id).await,
        Err(WorkflowError::Conflict(_))
    ));
}

/// A workflow's status is said by what ended it, never read from a reason: a worker
/// whose reason reads like one of the engine's still fails its workflow `FAILED`.
async fn a_workers_reason_never_chooses_its_workflows_status(h: Harness) {
    h.define(
        &["w"],
        json!({"name": "mimics", "version": 1, "tasks": [
            simple("w", "only", json!({"say": "${workflow.input.say}"}))
        ]}),
    )
    .await;
    h.work(&["w"], |_, input| {
        (
            TaskStatus::FailedWithTerminalError,
            json!({"reason": input["say"]}),
        )
    });
    for say in ["TERMINATED: by the worker", "TIMED_OUT: says the worker"] {
        let id = h.start("mimics", json!({ "say": say })).await;
        let w = h.ended(&id).await;
        assert_eq!(w.header.status, WorkflowStatus::Failed, "{say}");
        assert_eq!(w.header.reason.as_deref(), Some(say));
    }
}

async fn a_wait_is_completed_from_outside_and_a_paused_workflow_holds_its_steps(h: Harness) {
    h.define(
        &["w"],
        json!({"name": "waits", "version": 1, "tasks": [
            {"name": "approve", "taskReferenceName": "approve", "type": "WAIT"},
            simple("w", "after", json!({"by": "${approve.output.by}"}))
        ], "outputParameters": {"by": "${after.input.by}"}}),
    )
    .await;
    let id = h.start("waits", json!({})).await;
    h.workflows.pause(&id).await.unwrap();
    h.workflows
        .complete_waiting(
            &id,
            "approve",
            TaskStatus::Completed,
            Map::from_iter([("by".to_string(), json!("ops"))]),
        )
        .await
        .unwrap();
    poll_until_async("the wait to be ended and held", WITHIN, async || {
        !h.workflows
            .workflow(&id, false)
            .await
            .unwrap()
            .header
            .held
            .is_empty()
    })
    .await;
    assert_eq!(
        h.workflows.workflow(&id, true).await.unwrap().steps.len(),
        1,
        "nothing made ready while paused"
    );
    h.workflows.resume(&id).await.unwrap();
    h.work(&["w"], ok);
    let w = h.completed(&id).await;
    assert_eq!(w.header.output, json!({"by": "ops"}));
}

async fn a_dynamic_fork_of_many_joins_once(h: Harness) {
    h.define(
        &["w"],
        json!({"name": "fan", "version": 1, "tasks": [
            {"name": "fan", "taskReferenceName": "fan", "type": "FORK_JOIN_DYNAMIC",
             "inputParameters": {"tasks": "${workflow.input.tasks}", "inputs": "${workflow.input.inputs}"},
             "dynamicForkTasksParam": "tasks", "dynamicForkTasksInputParamName": "inputs"},
            {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
            simple("w", "after", json!({}))
        ]}),
    )
    .await;
    let n = 300;
    let tasks: Vec<Value> = (0..n)
        .map(|i| json!({"name": "w", "taskReferenceName": format!("d{i}"), "type": "SIMPLE"}))
        .collect();
    let inputs: Map<String, Value> = (0..n).map(|i| (format!("d{i}"), json!({"i": i}))).collect();
    h.work(&["w"], ok);
    let id = h
        .start("fan", json!({"tasks": tasks, "inputs": inputs}))
        .await;
    let w = h.completed(&id).await;
    let kinds: Vec<&str> = w
        .steps
        .iter()
        .map(|s| s.args.as_ref().unwrap().kind.as_str())
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "SIMPLE").count(), n + 1);
    assert_eq!(kinds.iter().filter(|k| **k == "JOIN").count(), 1);
}

async fn an_idempotency_key_starts_one_workflow(h: Harness) {
    h.define(
        &["w"],
        json!({"name": "once", "version": 1, "tasks": [simple("w", "a", json!({}))]}),
    )
    .await;
    let start = || {
        h.workflows.start(StartRequest {
            name: "once".into(),
            idempotency_key: Some("file-2026-12-07".into()),
            ..StartRequest::default()
        })
    };
    let first = start().await.unwrap();
    assert_eq!(start().await.unwrap(), first);
    let unknown = h
        .workflows
        .start(StartRequest {
            name: "nope".into(),
            ..StartRequest::default()
        })
        .await;
    assert!(
        matches!(unknown, Err(WorkflowError::NotFound(_))),
        "{unknown:?}"
    );
}

async fn a_definition_naming_an_unknown_task_is_refused(h: Harness) {
    let defs = workflows_from_json(
        &json!({"name": "bad", "version": 1, "tasks": [simple("nobody", "a", json!({}))]})
            .to_string(),
        "bad.json",
    )
    .unwrap();
    let err = h
        .workflows
        .put_workflow_defs(defs)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("task \"nobody\"") && err.contains("bad v1"),
        "{err}"
    );

    // A sub-workflow that does not exist, and sub-workflows that lead back to the
    // workflow naming them (here through one stored before), are refused, each
    // naming the step's path; nothing of the batch is stored.
    let sub = |name: &str, reference: &str| {
        json!({"name": name, "taskReferenceName": reference, "type": "SUB_WORKFLOW",
               "subWorkflowParam": {"name": name}})
    };
    let put = async |defs: Value| {
        let defs = workflows_from_json(&defs.to_string(), "defs.json").unwrap();
        h.workflows.put_workflow_defs(defs).await
    };
    let err = put(json!({"name": "lonely", "version": 1, "tasks": [sub("missing", "m")]}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("lonely v1: tasks[0].subWorkflowParam") && err.contains("\"missing\""),
        "{err}"
    );
    let set = json!({"name": "s", "taskReferenceName": "s", "type": "SET_VARIABLE",
                     "inputParameters": {"x": 1}});
    put(json!({"name": "leaf", "version": 1, "tasks": [set]}))
        .await
        .unwrap();
    put(json!({"name": "middle", "version": 1, "tasks": [sub("leaf", "l")]}))
        .await
        .unwrap();
    // `leaf` v2 names `top`, which names `middle`, which names the latest `leaf`.
    let err = put(json!([
        {"name": "top", "version": 1, "tasks": [
            {"name": "f", "taskReferenceName": "f", "type": "FORK_JOIN", "forkTasks": [[sub("middle", "m")]]},
            {"name": "j", "taskReferenceName": "j", "type": "JOIN"}]},
        {"name": "leaf", "version": 2, "tasks": [sub("top", "t")]}
    ]))
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(
            "top v1: tasks[0].forkTasks[0][0].subWorkflowParam: expected a sub-workflow that does not lead back"
        ) && err.contains("top v1 → middle v1 → leaf v2 → top v1"),
        "{err}"
    );
    assert!(
        h.workflows.workflow_def("top", None).await.is_err(),
        "nothing stored"
    );
    // Without the way back, the same workflow is stored.
    put(json!({"name": "top", "version": 1, "tasks": [sub("middle", "m")]}))
        .await
        .unwrap();
}

async fn a_loop_runs_its_body_until_its_condition_fails_and_scripts_run(h: Harness) {
    h.define(
        &["w"],
        json!({"name": "loops", "version": 1, "tasks": [
            {"name": "loop", "taskReferenceName": "loop", "type": "DO_WHILE",
             "inputParameters": {"times": "${workflow.input.times}"},
             "loopCondition": "$.body['n'] < $.times",
             "loopOver": [simple("w", "body", json!({}))]},
            {"name": "js", "taskReferenceName": "js", "type": "INLINE",
             "inputParameters": {"evaluatorType": "javascript", "n": "${body.output.n}",
                                 "expression": "(function(){ return $.n * 10; })()"}},
            {"name": "jq", "taskReferenceName": "jq", "type": "JSON_JQ_TRANSFORM",
             "inputParameters": {"x": "${js.output.result}", "queryExpression": "{doubled: (.x * 2)}"}}
        ], "outputParameters": {"js": "${js.output.result}", "jq": "${jq.output.result}"}}),
    )
    .await;
    let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let c = count.clone();
    h.work(&["w"], move |_, _| {
        let n = c.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        (TaskStatus::Completed, json!({"n": n}))
    });
    let id = h.start("loops", json!({"times": 3})).await;
    let w = h.completed(&id).await;
    assert_eq!(
        count.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "three iterations"
    );
    assert_eq!(w.header.output, json!({"js": 30, "jq": {"doubled": 60}}));
    let bodies = w
        .steps
        .iter()
        .filter(|s| s.args.as_ref().unwrap().reference == "body")
        .count();
    assert_eq!(bodies, 3, "each iteration's step is a job of its own");
}

async fn a_script_that_does_not_parse_is_refused_with_its_path(h: Harness) {
    h.define(
        &["w"],
        json!({"name": "ok", "version": 1, "tasks": [simple("w", "a", json!({}))]}),
    )
    .await;
    let defs = workflows_from_json(
        &json!({"name": "badjs", "version": 1, "tasks": [
            {"name": "js", "taskReferenceName": "js", "type": "INLINE",
             "inputParameters": {"evaluatorType": "javascript", "expression": "return ((("}}
        ]})
        .to_string(),
        "badjs.json",
    )
    .unwrap();
    let err = h
        .workflows
        .put_workflow_defs(defs)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("tasks[0]") && err.contains("expression"),
        "{err}"
    );
}

async fn a_task_definitions_limits_are_the_engines_limits(h: Harness) {
    let defs = task_defs_from_json(
        &json!([{"name": "bank", "concurrentExecLimit": 2, "rateLimitPerFrequency": 10, "rateLimitFrequencyInSeconds": 60}]).to_string(),
        "tasks",
    )
    .unwrap();
    h.workflows.put_task_defs(defs).await.unwrap();
    let limits = h.workflows.client().limits().await.unwrap();
    assert_eq!(limits.len(), 1);
    let limit = &limits[0].limit;
    assert_eq!(limit.scope, tranche_types::LimitScope::Queue("bank".into()));
    assert_eq!(limit.running, Some(2));
    assert_eq!(
        limit.starts.map(|s| (s.count, s.per_ms)),
        Some((10, 60_000))
    );
    // Without them, the limit goes.
    let plain = task_defs_from_json(&json!({"name": "bank"}).to_string(), "tasks").unwrap();
    h.workflows.put_task_defs(plain).await.unwrap();
    assert!(h.workflows.client().limits().await.unwrap().is_empty());
}

/// A rerun keeps what came before its step and runs the step and all after it again:
/// a fork's branches and the sub-workflow in one of them, the join, the steps after.
async fn a_rerun_runs_its_step_and_what_follows_and_keeps_what_came_before(h: Harness) {
    h.define(
        &["w", "nobody"],
        json!([
            {"name": "child", "version": 1, "tasks": [simple("w", "c1", json!({}))],
             "outputParameters": {"c": "${c1.output.v}"}},
            {"name": "rerun", "version": 1, "tasks": [
                simple("w", "first", json!({})),
                {"name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN", "forkTasks": [
                    [simple("w", "b1", json!({"p": "${first.output.v}"}))],
                    [{"name": "child", "taskReferenceName": "sub", "type": "SUB_WORKFLOW",
                      "subWorkflowParam": {"name": "child", "version": 1}}]
                ]},
                {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["b1", "sub"]},
                simple("w", "second", json!({"x": "${workflow.input.x}", "p": "${first.output.v}"})),
                simple("w", "last", json!({}))
            ], "outputParameters": {"second": "${second.input}", "sub": "${sub.output.c}"}},
            {"name": "stuck", "version": 1, "tasks": [simple("nobody", "never", json!({}))]}
        ]),
    )
    .await;
    let runs = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::<
        String,
        u32,
    >::new()));
    let seen = runs.clone();
    h.work(&["w"], move |r, input| {
        *seen.lock().unwrap().entry(r.to_string()).or_default() += 1;
        ok(r, input)
    });
    let count = |r: &str| runs.lock().unwrap().get(r).copied().unwrap_or(0);
    let id = h.start("rerun", json!({"x": 1})).await;
    let w = h.completed(&id).await;
    let refs = |w: &tranche_workflow_engine::WorkflowView| -> Vec<String> {
        let mut r: Vec<String> = w
            .steps
            .iter()
            .map(|s| s.args.as_ref().unwrap().reference.clone())
            .collect();
        r.sort();
        r
    };
    let before = refs(&w);

    // A running workflow, a step inside a fork's branch, a JOIN and a sub-workflow's
    // step are refused, each saying what to do instead; nothing is removed.
    let rerun = |from: &str| tranche_workflow_engine::RerunRequest {
        from: Some(from.into()),
        ..Default::default()
    };
    let e = h.workflows.rerun(&id, rerun("b1")).await.unwrap_err();
    assert!(e.to_string().contains("rerun from \"fork\""), "{e}");
    let e = h.workflows.rerun(&id, rerun("join")).await.unwrap_err();
    assert!(e.to_string().contains("JOIN"), "{e}");
    let child = w.header.output["sub"].clone();
    assert_eq!(child, json!("c1-ok"));
    let sub_step = w
        .steps
        .iter()
        .find(|s| s.args.as_ref().unwrap().reference == "sub")
        .unwrap();
    let child_id = sub_step.args.as_ref().unwrap().child.clone().unwrap();
    let child_view = h.workflows.workflow(&child_id, true).await.unwrap();
    let child_task = child_view.steps[0].to_conductor()["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let e = h
        .workflows
        .rerun(&id, rerun(&child_task))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("the step that started it"), "{e}");
    assert_eq!(
        refs(&h.workflows.workflow(&id, true).await.unwrap()),
        before
    );

    // From the fork, by the task id its view gives: the steps before it stay.
    let fork_task = w
        .steps
        .iter()
        .find(|s| s.args.as_ref().unwrap().reference == "fork")
        .unwrap()
        .to_conductor()["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    h.workflows.rerun(&id, rerun(&fork_task)).await.unwrap();
    let w = h.completed(&id).await;
    assert_eq!(
        refs(&w),
        before,
        "each step once: the old ones were replaced"
    );
    assert_eq!(
        [
            count("first"),
            count("b1"),
            count("c1"),
            count("second"),
            count("last")
        ],
        [1, 2, 2, 2, 2]
    );
    let new_child = w
        .steps
        .iter()
        .find(|s| s.args.as_ref().unwrap().reference == "sub")
        .and_then(|s| s.args.as_ref().unwrap().child.clone())
        .unwrap();
    assert_ne!(new_child, child_id, "the sub-workflow started anew");

    // From a later step, with its input and the workflow's replaced.
    let mut input = Map::new();
    input.insert("x".into(), json!(2));
    h.workflows
        .rerun(
            &id,
            tranche_workflow_engine::RerunRequest {
                from: Some("second".into()),
                workflow_input: Some(input),
                correlation_id: Some("again".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let w = h.ended(&id).await;
    assert_eq!(w.header.status, WorkflowStatus::Completed);
    assert_eq!(w.header.output["second"], json!({"x": 2, "p": "first-ok"}));
    assert_eq!(w.header.correlation_id.as_deref(), Some("again"));
    assert_eq!(
        [count("first"), count("b1"), count("second"), count("last")],
        [1, 2, 3, 3]
    );
    let mut task_input = Map::new();
    task_input.insert("given".into(), json!(true));
    h.workflows
        .rerun(
            &id,
            tranche_workflow_engine::RerunRequest {
                from: Some("second".into()),
                task_input: Some(Value::Object(task_input)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let w = h.ended(&id).await;
    assert_eq!(w.header.output["second"], json!({"given": true}));

    // Not while it runs.
    let running = h.start("stuck", json!({})).await;
    match h.workflows.rerun(&running, rerun("never")).await {
        Err(WorkflowError::Conflict(e)) => assert!(e.contains("only an ended one"), "{e}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
}

/// Timeouts as their definitions set them: a workflow's own `timeoutSeconds`, a
/// step nobody polls (`pollTimeoutSeconds`, retried as `RETRY` says), a step kept past
/// its `timeoutSeconds` by `IN_PROGRESS` updates; each ends the workflow `TIMED_OUT`
/// saying why, and a timed-out sub-workflow fails its parent's step.
async fn timeouts_end_workflows_as_their_policies_say(h: Harness) {
    let defs = task_defs_from_json(
        &json!([
            {"name": "idle", "retryCount": 0},
            {"name": "unpolled", "retryCount": 1, "pollTimeoutSeconds": 1, "timeoutPolicy": "RETRY"},
            {"name": "unpolled_alert", "retryCount": 0, "pollTimeoutSeconds": 1, "timeoutPolicy": "ALERT_ONLY"},
            {"name": "slow", "retryCount": 0, "timeoutSeconds": 1, "responseTimeoutSeconds": 1,
             "timeoutPolicy": "TIME_OUT_WF"},
            {"name": "slow_retry", "retryCount": 1, "retryDelaySeconds": 0, "timeoutSeconds": 1,
             "responseTimeoutSeconds": 1,
             "timeoutPolicy": "RETRY"},
            {"name": "w", "retryCount": 0}
        ])
        .to_string(),
        "tasks",
    )
    .unwrap();
    h.workflows.put_task_defs(defs).await.unwrap();
    let defs = workflows_from_json(
        &json!([
            {"name": "whole", "version": 1, "timeoutSeconds": 1, "timeoutPolicy": "TIME_OUT_WF",
             "tasks": [simple("idle", "idle", json!({}))]},
            {"name": "alerted", "version": 1, "timeoutSeconds": 1,
             "tasks": [simple("idle", "idle", json!({}))]},
            {"name": "parent", "version": 1, "tasks": [
                {"name": "whole", "taskReferenceName": "sub", "type": "SUB_WORKFLOW",
                 "subWorkflowParam": {"name": "whole", "version": 1}}]},
            {"name": "poll", "version": 1, "tasks": [simple("unpolled", "never", json!({}))]},
            {"name": "poll_alert", "version": 1, "tasks": [simple("unpolled_alert", "maybe", json!({}))]},
            {"name": "slow", "version": 1, "tasks": [simple("slow", "slow", json!({}))]},
            {"name": "slow_retry", "version": 1, "tasks": [simple("slow_retry", "slow", json!({}))]}
        ])
        .to_string(),
        "workflows",
    )
    .unwrap();
    h.workflows.put_workflow_defs(defs).await.unwrap();

    let whole = h.start("whole", json!({})).await;
    let alerted = h.start("alerted", json!({})).await;
    let parent = h.start("parent", json!({})).await;
    let poll = h.start("poll", json!({})).await;
    let poll_alert = h.start("poll_alert", json!({})).await;

    let w = h.ended(&whole).await;
    assert_eq!(w.header.status, WorkflowStatus::TimedOut);
    let reason = w.header.reason.clone().unwrap();
    assert!(reason.contains("Workflow timed out after"), "{reason}");
    assert_eq!(w.steps.len(), 1, "the watch is not one of its steps");
    // The rest of an ended workflow is cancelled just after its end commits.
    poll_until_async(
        "the timed-out workflow's step withdrawn",
        WITHIN,
        async || {
            let w = h.workflows.workflow(&whole, true).await.unwrap();
            if w.steps[0].status == "CANCELED" {
                Ok(())
            } else {
                Err(w.steps[0].status.to_string())
            }
        },
    )
    .await;

    let p = h.ended(&parent).await;
    assert_eq!(p.header.status, WorkflowStatus::Failed);
    assert_eq!(p.header.failed_step.as_deref(), Some("sub"));
    assert!(
        p.header.reason.as_deref().unwrap().contains("TIMED_OUT"),
        "{:?}",
        p.header.reason
    );

    // Nobody polls: the RETRY step gets a second window (retryCount 1), then times
    // the workflow out.
    let w = h.ended(&poll).await;
    assert_eq!(
        w.header.status,
        WorkflowStatus::TimedOut,
        "{:?}",
        w.header.reason
    );
    let took = w.header.end_time.unwrap() - w.header.start_time;
    assert!(took >= 2_000, "two poll windows, not one: {took} ms");
    let reason = w.header.reason.clone().unwrap();
    assert!(
        reason.contains("Task poll timed out after 1 seconds"),
        "{reason}"
    );
    assert_eq!(w.header.failed_step.as_deref(), Some("never"));
    // ALERT_ONLY, on a workflow and on a step: they run on, their steps waiting.
    for id in [&alerted, &poll_alert] {
        let w = h.workflows.workflow(id, true).await.unwrap();
        assert_eq!(w.header.status, WorkflowStatus::Running);
        assert_eq!(w.steps[0].status, "SCHEDULED");
    }

    // A worker keeps a step with IN_PROGRESS updates past its timeoutSeconds.
    let slow = h.start("slow", json!({})).await;
    let slow_retry = h.start("slow_retry", json!({})).await;
    for (task, id, attempts) in [("slow", &slow, 1), ("slow_retry", &slow_retry, 2)] {
        for attempt in 1..=attempts {
            let mut polled = Vec::new();
            poll_until_async(
                &format!("{task} attempt {attempt} to be polled"),
                WITHIN,
                async || {
                    polled = h
                        .workflows
                        .poll(task, 1, Duration::from_millis(100), Some("test"))
                        .await
                        .unwrap();
                    !polled.is_empty()
                },
            )
            .await;
            let task_id = polled[0].to_conductor()["taskId"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(task_id.ends_with(&format!("-{attempt}")), "{task_id}");
            let in_progress = || TaskUpdate {
                task_id: task_id.clone(),
                status: TaskStatus::InProgress,
                output: Map::new(),
                reason: None,
                callback_after_seconds: 0,
            };
            let beat = std::time::Instant::now();
            poll_until_async("the attempt to time out", WITHIN, async || {
                h.workflows.update_task(in_progress()).await.unwrap();
                let step = h.workflows.task(&task_id).await.unwrap();
                step.record.as_ref().unwrap().state != tranche_types::JobState::Running
            })
            .await;
            assert!(beat.elapsed() >= Duration::from_millis(500));
        }
        let w = h.ended(id).await;
        assert_eq!(
            w.header.status,
            WorkflowStatus::TimedOut,
            "{task}: {:?}",
            w.header.reason
        );
        assert!(
            w.header
                .reason
                .as_deref()
                .unwrap()
                .contains("Task timed out after"),
            "{:?}",
            w.header.reason
        );
        assert_eq!(w.steps[0].status, "TIMED_OUT");
    }
}

/// A sub-workflow terminated on its own ends as any end does: its parent's step fails
/// with its reason.
async fn a_terminated_sub_workflow_fails_its_parents_step(h: Harness) {
    h.define(
        &["nobody"],
        json!([
            {"name": "child", "version": 1, "tasks": [simple("nobody", "c1", json!({}))]},
            {"name": "parent", "version": 1, "tasks": [
                {"name": "child", "taskReferenceName": "sub", "type": "SUB_WORKFLOW",
                 "subWorkflowParam": {"name": "child", "version": 1}}]}
        ]),
    )
    .await;
    let parent = h.start("parent", json!({})).await;
    let mut child = None;
    poll_until_async("the child to start", WITHIN, async || {
        let w = h.workflows.workflow(&parent, true).await.unwrap();
        child = w.steps.first().and_then(|s| s.args.as_ref()?.child.clone());
        child.is_some()
    })
    .await;
    let child = child.unwrap();
    h.workflows
        .terminate(&child, "ops stopped it")
        .await
        .unwrap();
    let w = h.ended(&parent).await;
    assert_eq!(w.header.status, WorkflowStatus::Failed);
    assert_eq!(w.header.failed_step.as_deref(), Some("sub"));
    let reason = w.header.reason.unwrap();
    assert!(
        reason.contains("TERMINATED") && reason.contains("ops stopped it"),
        "{reason}"
    );
}

/// A worker vanishes with a step whose lease then runs out while no server runs the
/// engine's steps: the next server to start decides it from where the feed was
/// followed to, instead of leaving its workflow running forever.
async fn a_lease_that_expired_while_no_server_ran_is_decided_at_the_next_start(mut h: Harness) {
    let defs = task_defs_from_json(
        &json!([{"name": "gone", "retryCount": 0, "responseTimeoutSeconds": 1}]).to_string(),
        "tasks",
    )
    .unwrap();
    h.workflows.put_task_defs(defs).await.unwrap();
    let defs = workflows_from_json(
        &json!({"name": "gone", "version": 1, "tasks": [simple("gone", "g", json!({}))]})
            .to_string(),
        "workflows",
    )
    .unwrap();
    h.workflows.put_workflow_defs(defs).await.unwrap();
    let workflows = h.workflows.clone();
    let id = h.start("gone", json!({})).await;
    let polled = workflows
        .poll("gone", 1, Duration::from_secs(5), Some("vanishing"))
        .await
        .unwrap();
    assert_eq!(polled.len(), 1);
    h.stop_engine().await;

    // Another worker's poll finds the lease expired: the backend fails the step (its
    // only attempt), with no server to decide it.
    poll_until_async("the lease to expire", WITHIN, async || {
        workflows
            .poll("gone", 1, Duration::from_millis(100), Some("other"))
            .await
            .unwrap();
        let step = workflows
            .task(polled[0].to_conductor()["taskId"].as_str().unwrap())
            .await
            .unwrap();
        step.record.unwrap().state == tranche_types::JobState::Failed
    })
    .await;
    let header = workflows.workflow(&id, false).await.unwrap().header;
    assert_eq!(
        header.status,
        WorkflowStatus::Running,
        "nobody decided it yet"
    );

    h.start_engine();
    let mut status = None;
    poll_until_async("the next server to decide it", WITHIN, async || {
        let h = workflows.workflow(&id, false).await.unwrap().header;
        status = Some(h.status);
        h.status.is_terminal()
    })
    .await;
    assert_eq!(status, Some(WorkflowStatus::TimedOut));
}

on_both_backends!(
    a_sequence_with_a_sub_workflow_completes_with_its_outputs,
    a_fork_joins_when_every_branch_has_arrived,
    a_switch_takes_its_case_and_terminate_ends_the_workflow,
    a_failed_step_fails_the_workflow_and_a_retry_runs_it_again,
    a_workers_reason_never_chooses_its_workflows_status,
    a_wait_is_completed_from_outside_and_a_paused_workflow_holds_its_steps,
    a_dynamic_fork_of_many_joins_once,
    an_idempotency_key_starts_one_workflow,
    a_definition_naming_an_unknown_task_is_refused,
    a_loop_runs_its_body_until_its_condition_fails_and_scripts_run,
    a_script_that_does_not_parse_is_refused_with_its_path,
    a_task_definitions_limits_are_the_engines_limits,
    a_rerun_runs_its_step_and_what_follows_and_keeps_what_came_before,
    timeouts_end_workflows_as_their_policies_say,
    a_terminated_sub_workflow_fails_its_parents_step,
    a_lease_that_expired_while_no_server_ran_is_decided_at_the_next_start,
);
