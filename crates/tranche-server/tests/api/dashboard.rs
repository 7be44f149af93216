//! The dashboard in a real headless browser (Debian's chromium driven by
//! playwright-core, see tests/browser): progress, queue depth and queue throughput
//! change live during a run, a failed job shows its attempts and timings and a
//! finished one its artifact link (and its client's PAN and e-mail masked), "retry"
//! re-queues a failed run, "cancel" ends the rest of a run and "pause"/"resume" hold a
//! queue back and release it (with a badge while paused). Leaves a screenshot in the
//! target dir.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::live::start;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_progress_and_retries_a_failed_run() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if browser_tools(&dir).is_none() {
        return;
    }
    let s = start().await;
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

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    let out = tokio::process::Command::new("node")
        .arg(dir.join("dashboard.mjs"))
        .arg(&s.base)
        .arg(&shot)
        .output()
        .await
        .expect("run node");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "browser test failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("dashboard ok"), "{stdout}");
    assert!(shot.exists());
    eprintln!("dashboard screenshot: {}", shot.display());
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
}
