//! The feed's dashboard in a real headless browser (Debian's chromium driven by the
//! playwright-core that tranche-server's browser test installs): it asks for a
//! reader's token, then shows the shard's seq, rates, shares, percentiles and a
//! replica's lag while traffic flows (tests/browser/feed_dashboard.mjs). Leaves a
//! screenshot in the target dir.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tranche_feed::{FeedOptions, ReplicaLag, Store};
use tranche_feed_service::FeedTokens;

/// The playwright-core to drive Chromium with, or None (skip) when node, chromium or
/// it is missing. Missing ones fail the test instead when tools are required
/// (`.ci/run`, `CI`) or `TRANCHE_REQUIRE_BROWSER=1`.
fn browser_tools() -> Option<PathBuf> {
    let browser_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tranche-server/tests/browser");
    let playwright = browser_dir.join("node_modules/playwright-core");
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let chromium = Path::new("/usr/bin/chromium").exists();
    let installed = playwright.join("index.mjs").exists();
    if node && chromium && installed {
        return Some(playwright);
    }
    let why = format!(
        "needs node ({node}), /usr/bin/chromium ({chromium}) and `npm install` in {} ({installed})",
        browser_dir.display()
    );
    let required = tranche_test_support::tools_required()
        || std::env::var("TRANCHE_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
    assert!(!required, "the feed dashboard test {why}");
    eprintln!("SKIPPED: the feed dashboard test {why}");
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_the_feeds_figures_as_traffic_flows() {
    let Some(playwright) = browser_tools() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(dir.path(), FeedOptions::default()).unwrap();
    let (ingest, _task) = tranche_feed_service::spawn_writer(writer, None);
    // A replica's figures, for the page's replica panel: 42 events behind, after
    // starting over once.
    let replica = ReplicaLag::new();
    replica.resynced(0);
    replica.set_connected(0, true);
    replica.heard(0, 50, Instant::now() - Duration::from_millis(300));
    replica.applied(0, 8);
    ingest.metrics().watch_replica(replica);
    let tokens = FeedTokens::parse("core-1 core\nread-1 reader\n", "test").unwrap();
    let app = tranche_feed_http::router(store, ingest, CancellationToken::new(), tokens);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("feed-dashboard.png");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/feed_dashboard.mjs");
    let args = [
        script.into_os_string(),
        base.into(),
        shot.clone().into(),
        playwright.into(),
    ];
    let out = tokio::task::spawn_blocking(move || Command::new("node").args(args).output())
        .await
        .unwrap()
        .expect("run node");
    tranche_test_support::assert_script_passed(&out, "browser test", "dashboard ok");
    assert!(shot.exists());
    eprintln!("feed dashboard screenshot: {}", shot.display());
}
