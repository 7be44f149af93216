//! The dashboard in a real headless browser (Debian's chromium driven by
//! playwright-core, see tests/browser): progress, queue depth and queue throughput
//! change live during a run, a failed job shows its attempts and timings and a
//! finished one its artifact link (and its client's PAN and e-mail masked), "retry"
//! re-queues a failed run, "cancel" ends the rest of a run and "pause"/"resume" hold a
//! queue back and release it (with a badge while paused). The job list filters and
//! pages jobs, a failed job's page shows its (masked) error and retries it, an
//! available one's cancels it and then deletes it, the schedules panel shows
//! declared schedules with their next due time, and the ACH panel a day's entries and
//! files per bank and window (and, on a server without a ledger, that it has none).
//! Leaves a screenshot in the target dir.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use tranche_server::ServerConfig;

use crate::live::{expect, ids, start, start_with_ledger, Live};

/// node, chromium and playwright-core, or None (skip). Missing ones fail the test
/// instead when it must run: `TRANCHE_REQUIRE_TOOLS=1` (set by `.ci/run`), `CI` or
/// `TRANCHE_REQUIRE_BROWSER=1`.
fn browser_tools(dir: &Path) -> Option<()> {
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let chromium = Path::new("/usr/bin/chromium").exists();
    let playwright = dir.join("node_modules/playwright-core").exists();
    if node && chromium && playwright {
        return Some(());
    }
    let why = format!(
        "needs node ({node}), /usr/bin/chromium ({chromium}) and `npm install` in {} ({playwright})",
        dir.display()
    );
    let required = std::env::var("TRANCHE_REQUIRE_BROWSER").is_ok_and(|v| v == "1")
        || std::env::var("TRANCHE_REQUIRE_TOOLS").is_ok_and(|v| v == "1")
        || std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    if required {
        panic!("the dashboard test {why}");
    }
    eprintln!("skipped: the dashboard test {why}");
    None
}

/// Run browser script `script` of `dir` as `node SCRIPT BASE SHOT REST…` (`args[0]` is
/// the base URL, the screenshot's path goes second), fail with what it printed unless
/// it succeeds saying `ok`; the screenshot's path.
async fn run_script(
    dir: &Path,
    script: &str,
    screenshot: &str,
    args: &[&str],
    ok: &str,
) -> std::path::PathBuf {
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join(screenshot);
    let out = tokio::process::Command::new("node")
        .arg(dir.join(script))
        .arg(args[0])
        .arg(&shot)
        .args(&args[1..])
        .output()
        .await
        .expect("run node");
    tranche_test_support::assert_script_passed(&out, &format!("browser test {script}"), ok);
    eprintln!("{script} screenshot: {}", shot.display());
    shot
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_progress_and_retries_a_failed_run() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if browser_tools(&dir).is_none() {
        return;
    }
    let s = start_with_ledger(ServerConfig {
        ach_rules: Some(crate::ach_status::rules()),
        ..ServerConfig::default()
    })
    .await;
    crate::ach_status::set_up_the_day(&s).await;
    let no_ledger = start().await;
    let items: Vec<_> = (0..200)
        .map(|_| json!({"job": {"kind": "x", "queue": "dq"}}))
        .collect();
    s.post_ok(
        "/v1/batches",
        &json!({"run": "dash/progress", "items": items}),
        201,
    )
    .await;
    let items: Vec<_> = (0..3)
        .map(|_| {
            json!({"job": {"kind": "note", "queue": "df", "max_attempts": 1,
            "args": {"client": {"pan": "ABCDE1234F", "email": "r.sharma@example.com"}}}})
        })
        .collect();
    s.post_ok(
        "/v1/batches",
        &json!({"run": "dash/failing", "items": items}),
        201,
    )
    .await;
    let jobs = s.poll("df", 3, 0).await;
    let failures: Vec<_> = jobs
        .iter()
        .map(|j| json!({"job": j["id"], "attempt": j["attempt"], "error": "bad PAN on line 7", "discard": true}))
        .collect();
    s.post_ok("/v1/workers/fail", &json!({"failures": failures}), 200)
        .await;

    let (failed, available) = jobs_for_the_job_pages(&s).await;
    for (name, body) in [
        (
            "dash-eod",
            json!({"cron": "0 18 * * MON-FRI", "zone": "Asia/Kolkata", "kind": "report", "queue": "reports"}),
        ),
        (
            "dash-once",
            json!({"at": "2099-01-01T09:00:00Z", "kind": "ping"}),
        ),
    ] {
        expect(s.put(&format!("/v1/schedules/{name}"), &body).await, 200).await;
    }

    let shot = run_script(
        &dir,
        "dashboard.mjs",
        "dashboard.png",
        &[&s.base, &no_ledger.base, crate::ach_status::DAY],
        "dashboard ok",
    )
    .await;
    assert!(shot.exists());
    let p = s.get_ok("/v1/runs/dash%2Ffailing").await;
    assert_eq!(
        (p["failed"].as_u64(), p["available"].as_u64()),
        (Some(0), Some(3))
    );
    let p = s.get_ok("/v1/runs/dash%2Fprogress").await;
    assert_eq!(
        (p["succeeded"].as_u64(), p["cancelled"].as_u64()),
        (Some(120), Some(80))
    );
    // What the job pages did, as the API sees it: the failed job revived, the first
    // available one cancelled then deleted, the other untouched.
    let job = s.get_ok(&format!("/v1/jobs/{failed}")).await;
    assert_eq!(job["state"], "available", "{job}");
    expect(s.get(&format!("/v1/jobs/{}", available[0])).await, 404).await;
    let job = s.get_ok(&format!("/v1/jobs/{}", available[1])).await;
    assert_eq!(job["state"], "available", "{job}");
}

/// A run for the job pages: one job failed for good on the queue `jf` (its error names
/// a PAN, which the pages must show masked) and two available on `ja`; their ids.
async fn jobs_for_the_job_pages(s: &Live) -> (i64, [i64; 2]) {
    let job = |queue: &str| json!({"job": {"kind": "note", "queue": queue, "max_attempts": 1}});
    let out = s
        .post_ok(
            "/v1/batches",
            &json!({"run": "dash/jobs", "items": [job("jf"), job("ja"), job("ja")]}),
            201,
        )
        .await;
    let ids: Vec<i64> = out["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| ids(item)[0])
        .collect();
    let polled = s.poll("jf", 1, 0).await;
    assert_eq!(polled[0]["id"], ids[0]);
    let failure = json!({"job": ids[0], "attempt": polled[0]["attempt"],
        "error": "no contract note for ABCDE1234F", "discard": true});
    s.post_ok("/v1/workers/fail", &json!({"failures": [failure]}), 200)
        .await;
    (ids[0], [ids[1], ids[2]])
}

/// The workflows panel: the newest workflows listed, one opened drawn as its
/// definition (a fork's branches, a switch's cases), each step coloured by its state,
/// a step's input and output on a click, and a failed workflow's failed step and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_draws_a_workflow_with_its_steps_states() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if browser_tools(&dir).is_none() {
        return;
    }
    let s = start().await;
    expect(
        s.post(
            "/api/metadata/taskdefs",
            &json!([{"name": "dash_w", "retryCount": 0}]),
        )
        .await,
        200,
    )
    .await;
    let step = |r: &str| json!({"name": "dash_w", "taskReferenceName": r, "type": "SIMPLE", "inputParameters": {"who": r}});
    let def = json!({"name": "dash_flow", "version": 1, "tasks": [
        step("first"),
        {"name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN", "forkTasks": [[step("left")], [step("right")]]},
        {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["left", "right"]},
        {"name": "pick", "taskReferenceName": "pick", "type": "SWITCH", "evaluatorType": "value-param", "expression": "k",
         "inputParameters": {"k": "${workflow.input.k}"},
         "decisionCases": {"a": [step("case_a")], "b": [step("case_b")]}}
    ]});
    expect(s.put("/api/metadata/workflow", &json!([def])).await, 200).await;
    let start_one = |k: &'static str| {
        let s = &s;
        async move {
            let r = s.post("/api/workflow/dash_flow", &json!({"k": k})).await;
            assert!(r.status().is_success());
            r.text().await.unwrap()
        }
    };
    let good = start_one("a").await;
    let bad = start_one("b").await;
    // Work every step: `case_b` fails, so `bad` fails there.
    let mut ended = 0;
    while ended < 2 {
        let tasks = s
            .get_ok("/api/tasks/poll/batch/dash_w?count=10&timeout=200")
            .await;
        for t in tasks.as_array().unwrap() {
            let r = t["referenceTaskName"].as_str().unwrap();
            let (status, reason) = if r == "case_b" {
                ("FAILED", "the bank refused it")
            } else {
                ("COMPLETED", "")
            };
            let body = json!({"taskId": t["taskId"], "status": status, "reasonForIncompletion": reason,
                              "outputData": {"done": format!("{r} done")}});
            let resp = s.post("/api/tasks", &body).await;
            assert!(resp.status().is_success(), "{}", resp.status());
            if r.starts_with("case_") {
                ended += 1;
            }
        }
    }
    run_script(
        &dir,
        "workflows.mjs",
        "workflow-dashboard.png",
        &[&s.base, &good, &bad],
        "workflows ok",
    )
    .await;
}
