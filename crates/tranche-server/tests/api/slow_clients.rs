//! Slow and greedy clients, on raw TCP sockets: headers or a body that never finish
//! are cut off after their timeouts, long-polls still wait their whole wait, and
//! connections over the cap wait until one closes while those open keep working.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tranche_server::{Limits, ServerConfig};
use tranche_test_support::raw_http::{read_response, read_until_closed};

use crate::live::{start_with, Live};

/// Long enough for any answer on a loaded 2-core machine; a hung connection fails here.
const PATIENCE: Duration = Duration::from_secs(10);

async fn connect(s: &Live) -> TcpStream {
    let addr = s.base.trim_start_matches("http://");
    TcpStream::connect(addr).await.expect("connect")
}

/// Writes a byte every 50 ms until the server closes the connection.
async fn drip(w: &mut (impl AsyncWriteExt + Unpin)) -> std::io::Error {
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    loop {
        tick.tick().await;
        if let Err(e) = w.write_all(b" ").await {
            return e;
        }
    }
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: tranche\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_that_never_finish_are_cut_off() {
    let timeout = Duration::from_millis(400);
    let s = start_with(ServerConfig {
        door: Limits {
            header_timeout: timeout,
            ..Limits::default()
        },
        ..ServerConfig::default()
    })
    .await;

    // Half the headers, then nothing.
    let mut half = connect(&s).await;
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: tran")
        .await
        .unwrap();
    let (_, after) = read_until_closed(&mut half, PATIENCE).await;
    assert!(after >= timeout - Duration::from_millis(50), "{after:?}");

    // A byte at a time, never stopping (slowloris): the timeout is a deadline, not an
    // idle time.
    let mut trickle = connect(&s).await;
    trickle
        .write_all(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
        .await
        .unwrap();
    let started = Instant::now();
    tokio::time::timeout(PATIENCE, drip(&mut trickle))
        .await
        .expect("the trickling headers were never cut off");
    assert!(started.elapsed() >= timeout - Duration::from_millis(50));

    // Complete requests on a fresh connection are answered as ever.
    let mut ok = connect(&s).await;
    ok.write_all(HEALTHZ).await.unwrap();
    let (status, body) = read_response(&mut ok).await;
    assert_eq!(
        (status.as_str(), body.as_str()),
        ("HTTP/1.1 200 OK", "ok\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_finishes_is_answered_408() {
    let timeout = Duration::from_millis(400);
    let s = start_with(ServerConfig {
        door: Limits {
            body_timeout: timeout,
            ..Limits::default()
        },
        ..ServerConfig::default()
    })
    .await;
    let head = "POST /v1/jobs HTTP/1.1\r\nHost: tranche\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n";

    // Part of the body, then nothing.
    let mut stalled = connect(&s).await;
    stalled.write_all(head.as_bytes()).await.unwrap();
    stalled.write_all(br#"{"run": "slow/1", "#).await.unwrap();
    let (answer, after) = read_until_closed(&mut stalled, PATIENCE).await;
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    assert!(answer.contains(r#""code":"body_timeout""#), "{answer}");
    assert!(after >= timeout - Duration::from_millis(50), "{after:?}");

    // A byte at a time: the whole body has one deadline, however steadily it drips.
    let mut trickle = connect(&s).await;
    trickle.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let (mut r, mut w) = trickle.split();
    let mut answer = Vec::new();
    let read_head = async {
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&answer).contains("\r\n\r\n") {
            match r.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(PATIENCE, async {
        tokio::select! {
            _ = drip(&mut w) => {},
            () = read_head => {},
        }
    })
    .await
    .expect("the dripping body was never cut off");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    assert!(started.elapsed() >= timeout - Duration::from_millis(50));

    // Nothing was submitted.
    assert_eq!(
        s.get_ok("/v1/runs").await["runs"],
        json!([]),
        "no job from a timed-out body"
    );
}

/// The timeouts are for reading requests: answers that take longer, as long-polls do,
/// still come, and a connection waiting on one is not idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polls_outlast_the_request_timeouts() {
    let timeout = Duration::from_millis(200);
    let s = start_with(ServerConfig {
        door: Limits {
            header_timeout: timeout,
            idle_timeout: timeout,
            body_timeout: timeout,
            ..Limits::default()
        },
        ..ServerConfig::default()
    })
    .await;
    let wait = Duration::from_millis(1500);

    let started = Instant::now();
    let events = s
        .get_ok(&format!(
            "/v1/events?after=latest&wait={}",
            wait.as_millis()
        ))
        .await;
    assert_eq!(events["events"], json!([]));
    assert!(started.elapsed() >= wait, "{:?}", started.elapsed());

    let started = Instant::now();
    let jobs = s.poll("nothing-here", 1, wait.as_millis() as u64).await;
    assert!(jobs.is_empty());
    assert!(started.elapsed() >= wait, "{:?}", started.elapsed());
}

/// At the cap, a new connection is not refused: it waits, unanswered, until an open one
/// closes, while the open ones go on working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_wait_for_a_free_slot() {
    let s = start_with(ServerConfig {
        door: Limits {
            max_connections: 2,
            ..Limits::default()
        },
        ..ServerConfig::default()
    })
    .await;
    let mut first = connect(&s).await;
    first.write_all(HEALTHZ).await.unwrap();
    assert_eq!(read_response(&mut first).await.0, "HTTP/1.1 200 OK");
    let mut second = connect(&s).await;
    second.write_all(HEALTHZ).await.unwrap();
    assert_eq!(read_response(&mut second).await.0, "HTTP/1.1 200 OK");

    // The third connects (the kernel's backlog holds it) but is not served yet.
    let mut third = connect(&s).await;
    third.write_all(HEALTHZ).await.unwrap();
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(500), third.read(&mut buf)).await;
    assert!(early.is_err(), "served over the cap: {early:?}");

    // The open connections still work.
    first.write_all(HEALTHZ).await.unwrap();
    assert_eq!(read_response(&mut first).await.0, "HTTP/1.1 200 OK");

    // One closes: the waiting one is served.
    drop(second);
    let answer = tokio::time::timeout(PATIENCE, read_response(&mut third))
        .await
        .expect("the waiting connection was served once a slot freed");
    assert_eq!(answer.0, "HTTP/1.1 200 OK");
}

/// A kept-alive connection with no request in flight is closed after the idle timeout,
/// and so is one that never sends a byte; the header timeout does not start before a
/// request's first byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    let idle = Duration::from_millis(400);
    let s = start_with(ServerConfig {
        door: Limits {
            idle_timeout: idle,
            header_timeout: PATIENCE * 3,
            ..Limits::default()
        },
        ..ServerConfig::default()
    })
    .await;
    let mut kept = connect(&s).await;
    kept.write_all(HEALTHZ).await.unwrap();
    assert_eq!(read_response(&mut kept).await.0, "HTTP/1.1 200 OK");
    let (rest, after) = read_until_closed(&mut kept, PATIENCE).await;
    assert_eq!(rest, "", "nothing more after the answer");
    assert!(after >= idle - Duration::from_millis(50), "{after:?}");

    let mut silent = connect(&s).await;
    let (_, after) = read_until_closed(&mut silent, PATIENCE).await;
    assert!(after >= idle - Duration::from_millis(50), "{after:?}");
}

/// A client that asks for answers and never reads them (a slow-read attack, or a
/// reader gone silent) is cut off once an answer has made no progress for the body
/// timeout: it does not keep its connection, and its slot under the cap, for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_left_unread_are_cut_off_after_the_body_timeout() {
    let stall = Duration::from_secs(1);
    let s = start_with(ServerConfig {
        door: Limits {
            body_timeout: stall,
            idle_timeout: PATIENCE * 6,
            ..Limits::default()
        },
        ..ServerConfig::default()
    })
    .await;
    // A small receive window, and many answers asked for at once (HTTP/1.1
    // pipelining): far more than the kernel's buffers hold.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let addr = s.base.trim_start_matches("http://").parse().unwrap();
    let mut greedy = socket.connect(addr).await.unwrap();
    let asks = 200;
    let request = b"GET /v1/openapi.json HTTP/1.1\r\nHost: tranche\r\n\r\n".repeat(asks);
    greedy.write_all(&request).await.unwrap();
    let one = s.get_ok("/v1/openapi.json").await.to_string().len();

    // The client's behaviour under test, not a wait: it reads nothing for twice the
    // stall, and the server gives up on the connection.
    tokio::time::sleep(stall * 2).await;
    let (got, _) = read_until_closed(&mut greedy, PATIENCE).await;
    assert!(
        got.len() < asks * one / 2,
        "{} bytes of {} came: the server went on writing to a client that read nothing",
        got.len(),
        asks * one
    );
}
