//! `tranche feed serve` as a process: batches in, orders out, a waiting long poll
//! answered by SIGTERM, the store kept across a restart, non-loopback refused.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

// A `tranche feed serve` process, killed if its test fails before stopping it.
use support::Killed as Feed;

fn spawn_feed(dir: &Path, durability: &str) -> (Feed, String) {
    let (feed, base, _) = serve(dir, &["--durability", durability]);
    (feed, base)
}

/// `tranche feed serve --listen 127.0.0.1:0 --dir DIR ARGS…`, with no tokens from the
/// environment: the process, its base URL and the first line it printed.
fn serve(dir: &Path, args: &[&str]) -> (Feed, String, String) {
    serve_with(dir, args, |_| {})
}

/// [`serve`], `more` adding to the command (its environment).
fn serve_with(
    dir: &Path,
    args: &[&str],
    more: impl FnOnce(&mut Command),
) -> (Feed, String, String) {
    let mut command = support::tranche();
    command
        .args(["feed", "serve", "--listen", "127.0.0.1:0", "--dir"])
        .arg(dir)
        .args(args)
        .env_remove("TRANCHE_FEED_TOKENS")
        .stdout(Stdio::piped());
    more(&mut command);
    let mut feed = Feed(command.spawn().expect("start tranche feed serve"));
    let (base, line) = support::server_address(&mut feed.0);
    (feed, base, line)
}

fn insert(seq: u64, id: u64, firm: u32) -> Value {
    json!({"type": "insert", "seq": seq, "rec": seq, "id": id, "firm": firm, "broker": 1,
           "instrument": 1, "side": "sell", "price": -5, "quantity": 10,
           "created_at": 1_700_000_000_000_000_000u64})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_serve_serves_stops_on_sigterm_and_keeps_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("feed");
    let (mut feed, base) = spawn_feed(&store, "every-write");
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{base}/v1/feed/events"))
        .json(&json!({"events": [insert(1, 10, 1), insert(2, 11, 2)]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let page: Value =
        support::json_of(client.get(format!("{base}/v1/feed/orders?firm=2&wait_ms=0"))).await;
    assert_eq!(page["count"], 1);
    assert_eq!(page["orders"][0]["id"], 11);

    // A poll that would wait 25 s; SIGTERM answers it and the process exits 0.
    let cursor = page["next_cursor"].as_str().unwrap().to_string();
    let poll = tokio::spawn({
        let client = client.clone();
        let url = format!("{base}/v1/feed/orders?firm=2&wait_ms=25000&cursor={cursor}");
        async move { client.get(url).send().await.unwrap().json::<Value>().await }
    });
    // Give the poll time to reach the server (the process's store is not visible
    // from here): other reads for 200 ms, checking the poll is still waiting.
    let began = Instant::now();
    loop {
        let probe: Value =
            support::json_of(client.get(format!("{base}/v1/feed/orders?wait_ms=0"))).await;
        assert_eq!(probe["count"], 2);
        assert!(!poll.is_finished(), "the poll answered before SIGTERM");
        if began.elapsed() > Duration::from_millis(200) {
            break;
        }
        tokio::task::yield_now().await;
    }
    let pid = feed.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let answered = poll.await.unwrap().unwrap();
    assert_eq!(answered["count"], 0);
    let status =
        tranche_test_support::exited(&mut feed.0, "feed did not stop", Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    assert!(began.elapsed() < Duration::from_secs(20));

    // Restarted with another durability: the orders are still there.
    let (_feed, base) = spawn_feed(&store, "interval:5ms");
    let page: Value =
        support::json_of(client.get(format!("{base}/v1/feed/orders?wait_ms=0"))).await;
    assert_eq!(page["count"], 2, "{page}");
}

/// The command line reaches the feed's listener: with `--header-timeout 1` a client
/// trickling its headers is cut off, with `--idle-timeout 1` a connection that sends
/// nothing is closed, and a long poll longer than both still answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_serve_flags_cut_off_slow_and_idle_clients() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let (_feed, base, _) = serve(
        &dir.path().join("feed"),
        &[
            "--durability",
            "never",
            "--header-timeout",
            "1",
            "--idle-timeout",
            "1",
            "--body-timeout",
            "1",
            "--max-connections",
            "8",
        ],
    );
    let addr = base.trim_start_matches("http://").to_string();
    // How long until the server closes a connection that sent `first` and then, a
    // byte at a time every 200 ms, more of the same header line.
    let closed_after = |first: &'static [u8], trickle: bool| {
        let addr = addr.clone();
        tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr).unwrap();
            stream.write_all(first).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let started = Instant::now();
            let mut buf = [0u8; 256];
            loop {
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "the connection was never closed"
                );
                match stream.read(&mut buf) {
                    Ok(0) => return started.elapsed(),
                    Ok(n) => panic!("answered: {:?}", String::from_utf8_lossy(&buf[..n])),
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                        return started.elapsed()
                    }
                    Err(_) if trickle => {
                        if stream.write_all(b"x").is_err() {
                            return started.elapsed();
                        }
                    }
                    Err(_) => {}
                }
            }
        })
    };
    let slow = closed_after(b"GET /v1/feed/status HTTP/1.1\r\nX-Slow: ", true)
        .await
        .unwrap();
    assert!(slow >= Duration::from_millis(900), "{slow:?}");
    let idle = closed_after(b"", false).await.unwrap();
    assert!(idle >= Duration::from_millis(900), "{idle:?}");

    let started = Instant::now();
    let page: Value = reqwest::get(format!("{base}/v1/feed/orders?wait_ms=2500"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["count"], 0);
    assert!(started.elapsed() >= Duration::from_millis(2500));
}

#[test]
fn feed_serve_refuses_non_loopback_and_bad_durability() {
    let dir = tempfile::tempdir().unwrap();
    let stderr = refused(
        serve_in(dir.path())
            .args(["--listen", "0.0.0.0:0"])
            .env_remove("TRANCHE_FEED_TOKENS"),
    );
    assert!(stderr.contains("loopback"), "{stderr}");
    let stderr = refused(
        serve_in(dir.path())
            .args(["--durability", "interval:5m"])
            .env_remove("TRANCHE_FEED_TOKENS"),
    );
    assert!(stderr.contains("interval:<n>"), "{stderr}");
}

/// `tranche feed serve --dir DIR`, for more arguments.
fn serve_in(dir: &std::path::Path) -> std::process::Command {
    let mut command = support::tranche();
    command.args(["feed", "serve", "--dir"]).arg(dir);
    command
}

/// Runs `command`, which must fail, and answers its stderr.
fn refused(command: &mut std::process::Command) -> String {
    let out = command.output().unwrap();
    assert!(!out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn feed_commands_refuse_engine_options_given_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    // An engine option means nothing to the feed: said, not ignored (an operator
    // who passes `--broker` expects the feed to be on it).
    let out = serve_in(dir.path())
        .arg("--data")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--data is an engine option"), "{stderr}");
    assert!(stderr.contains("--dir"), "{stderr}");
    // Before or after the subcommand alike.
    let out = support::tranche()
        .args(["--reconnect-for", "5", "feed", "serve", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--reconnect-for is an engine option"),
        "{out:?}"
    );
    // From the environment they pass: one shell serves every command. (The bad
    // durability then stops the server before it listens.)
    let stderr = refused(
        serve_in(dir.path())
            .args(["--durability", "interval:5m"])
            .env("TRANCHE_DATA", dir.path())
            .env_remove("TRANCHE_FEED_TOKENS"),
    );
    assert!(!stderr.contains("engine option"), "{stderr}");
    assert!(stderr.contains("interval:<n>"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_serve_with_tokens_checks_them() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    tranche_test_support::write_secret(&tokens, "core-1 core\nfirm-2 firm=2\n");
    let (_feed, base, line) = serve(
        &dir.path().join("feed"),
        &["--tokens", tokens.to_str().unwrap()],
    );
    assert!(line.contains("2 token(s)"), "{line}");
    let client = reqwest::Client::new();
    let events = json!({"events": [insert(1, 10, 1), insert(2, 11, 2)]});
    let post = |token: &str| {
        client
            .post(format!("{base}/v1/feed/events"))
            .bearer_auth(token)
            .json(&events)
            .send()
    };
    assert_eq!(post("firm-2").await.unwrap().status(), 403);
    assert_eq!(post("core-1").await.unwrap().status(), 200);
    let page: Value = support::json_of(
        client
            .get(format!("{base}/v1/feed/orders?wait_ms=0"))
            .bearer_auth("firm-2"),
    )
    .await;
    assert_eq!(page["count"], 1, "{page}");
    assert_eq!(page["orders"][0]["firm"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_serve_with_tcp_takes_batches_and_serves_reads_on_both_listeners() {
    use tranche_feed::{Cursor, Event, Filter, FirmId};
    use tranche_feed_tcp::{CoreConnection, ErrorCode, FeedClient, ReadRequest};

    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    tranche_test_support::write_secret(&tokens, "core-1 core\nfirm-2 firm=2\n");
    let (mut feed, base, line) = serve(
        &dir.path().join("feed"),
        &["--tcp", "127.0.0.1:0", "--tokens", tokens.to_str().unwrap()],
    );
    let tcp = support::tcp_address(&line);

    let mut core = CoreConnection::connect(tcp.as_str(), Some("core-1"))
        .await
        .unwrap();
    // The JSON events the HTTP tests post, as a core sends them on the fast path.
    let events: Vec<Event> = [insert(1, 10, 1), insert(2, 11, 2)]
        .into_iter()
        .map(|e| {
            serde_json::from_value::<tranche_feed_http::wire::WireEvent>(e)
                .unwrap()
                .to_event()
                .unwrap()
        })
        .collect();
    let ack = core.apply(&events).await.unwrap();
    assert_eq!(ack.position, Cursor::new(2, 2));

    // Read over TCP with the firm's token: its firm only.
    let mut client = FeedClient::connect(tcp.as_str(), Some("firm-2"))
        .await
        .unwrap();
    let mut orders = Vec::new();
    client
        .read(&ReadRequest::new(Cursor::START, Filter::All), &mut orders)
        .await
        .unwrap();
    assert_eq!(orders.len(), 1);
    assert_eq!(orders[0].firm, FirmId(2));
    // And over HTTP: the same store.
    let page: Value = reqwest::Client::new()
        .get(format!("{base}/v1/feed/orders?wait_ms=0"))
        .bearer_auth("firm-2")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["count"], 1, "{page}");

    // SIGTERM: the idle TCP connection is told, and the process exits 0.
    let pid = feed.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let error = core.recv_ack().await.unwrap_err();
    assert_eq!(
        error.server_error().map(|e| e.code),
        Some(ErrorCode::ShuttingDown),
        "{error}"
    );
    let status =
        tranche_test_support::exited(&mut feed.0, "feed did not stop", Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
}

#[test]
fn feed_serve_refuses_a_non_loopback_tcp_address_without_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let out = support::tranche()
        .args([
            "feed",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--tcp",
            "0.0.0.0:0",
        ])
        .arg("--dir")
        .arg(dir.path())
        .env_remove("TRANCHE_FEED_TOKENS")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("loopback") && stderr.contains("0.0.0.0:0"),
        "{stderr}"
    );
}

/// Waits (polling, at most 20 s) until `check` passes on the JSON at `url`.
async fn until_json(url: &str, token: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let client = reqwest::Client::new();
    tranche_test_support::poll_until_async(what, Duration::from_secs(20), async || {
        let body: Option<Value> = match client.get(url).bearer_auth(token).send().await {
            Ok(response) => response.json().await.ok(),
            Err(_) => None,
        };
        body.filter(|b| check(b))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_serve_with_shards_and_a_replica_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    tranche_test_support::write_secret(&tokens, "core-1 core\nread-1 reader\nfirm-2 firm=2\n");
    let tokens_file = tokens.to_str().unwrap();
    let (primary, base, line) = serve(
        &dir.path().join("primary"),
        &[
            "--tcp",
            "127.0.0.1:0",
            "--shards",
            "2",
            "--tokens",
            tokens_file,
        ],
    );
    assert!(line.contains("2 shard(s)"), "{line}");
    let tcp = support::tcp_address(&line);
    let client = reqwest::Client::new();
    for (shard, id) in [("0", 10), ("1", 20)] {
        let response = client
            .post(format!("{base}/v1/feed/events?shard={shard}"))
            .bearer_auth("core-1")
            .json(&json!({"events": [insert(1, id, 1), insert(2, id + 1, 2)]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "shard {shard}");
    }

    let (replica, replica_base, line) = serve_with(
        &dir.path().join("replica"),
        &["--replica-of", &tcp, "--tokens", tokens_file],
        |c| {
            c.env("TRANCHE_FEED_REPLICA_TOKEN", "read-1");
        },
    );
    assert!(line.contains(&format!("replica of {tcp}")), "{line}");
    let status = until_json(
        &format!("{replica_base}/v1/feed/status"),
        "read-1",
        "the replica caught up with both shards",
        |s| {
            s["replica"]["connected"] == true
                && s["replica"]["seqs_behind"] == 0
                && s["shards"].as_array().is_some_and(|a| a.len() == 2)
        },
    )
    .await;
    assert_eq!(status["role"], "replica");
    let page: Value = support::json_of(
        client
            .get(format!("{replica_base}/v1/feed/orders?wait_ms=0"))
            .bearer_auth("read-1"),
    )
    .await;
    assert_eq!(page["count"], 4, "{page}");
    let primary_page: Value = support::json_of(
        client
            .get(format!("{base}/v1/feed/orders?wait_ms=0"))
            .bearer_auth("read-1"),
    )
    .await;
    assert_eq!(
        page["next_cursor"], primary_page["next_cursor"],
        "the same cursors"
    );
    let refused = client
        .get(format!("{replica_base}/v1/feed/orders?wait_ms=0"))
        .bearer_auth("firm-2")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);

    for mut feed in [replica, primary] {
        let pid = feed.0.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let status =
            tranche_test_support::exited(&mut feed.0, "feed did not stop", Duration::from_secs(20));
        assert!(status.success(), "{status:?}");
    }
}

#[test]
fn feed_serve_refuses_fewer_shards_than_its_store_has() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("shard-2")).unwrap();
    let out = support::tranche()
        .args([
            "feed",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--shards",
            "2",
            "--dir",
        ])
        .arg(dir.path())
        .env_remove("TRANCHE_FEED_TOKENS")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("open at least 3 shards"), "{stderr}");
    let help = support::tranche()
        .args(["feed", "serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--shards <K>",
        "--replica-of <ADDR>",
        "--replica-token-file <FILE>",
    ] {
        assert!(help.contains(flag), "{flag} in {help}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_serve_evicts_finished_orders_older_than_its_retention() {
    let dir = tempfile::tempdir().unwrap();
    let (_feed, base, _) = serve(&dir.path().join("feed"), &["--retain", "1s"]);
    let client = reqwest::Client::new();
    // Order 10 is filled (finished); order 11 stays open.
    let fill = json!({"type": "change", "seq": 3, "id": 10, "price": -5, "quantity": 10,
                      "filled": 10, "status": "filled",
                      "updated_at": 1_700_000_000_000_000_100u64});
    let response = client
        .post(format!("{base}/v1/feed/events"))
        .json(&json!({"events": [insert(1, 10, 1), insert(2, 11, 1), fill]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let first: Value =
        support::json_of(client.get(format!("{base}/v1/feed/orders?wait_ms=0&limit=1"))).await;
    assert_eq!(first["orders"][0]["id"], 11, "{first}");
    let old_cursor = first["next_cursor"].as_str().unwrap().to_string();

    // Once the writes are more than a second old, the filled order goes; the open one
    // stays, and a cursor from before the eviction is too old.
    tranche_test_support::poll_until_async(
        "the filled order evicted",
        Duration::from_secs(20),
        async || {
            let page: Value =
                support::json_of(client.get(format!("{base}/v1/feed/orders?wait_ms=0"))).await;
            if page["count"] == 1 {
                assert_eq!(page["orders"][0]["id"], 11, "{page}");
                return true;
            }
            assert_eq!(page["count"], 2, "{page}");
            false
        },
    )
    .await;
    let too_old = client
        .get(format!(
            "{base}/v1/feed/orders?wait_ms=0&cursor={old_cursor}"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(too_old.status(), 410);
    let body: Value = too_old.json().await.unwrap();
    assert!(body["error"]["oldest"].is_string(), "{body}");
}
