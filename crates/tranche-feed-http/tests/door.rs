//! The feed's listener (`tranche_feed_http::serve`, the door member firms use) against
//! slow, idle and greedy clients on raw TCP sockets: headers trickled a byte a second
//! are cut off at the header timeout, idle connections at the idle timeout, a late body
//! is answered 408, connections past the cap wait for a free slot, and a long poll
//! longer than every timeout still answers on its connection.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tranche_feed::{FeedOptions, Store};
use tranche_feed_http::wire::OrdersPage;
use tranche_feed_http::Limits;
use tranche_feed_service::{FeedService, FeedTokens};
use tranche_test_support::raw_http::{read_response, read_until_closed};

/// Long enough for any answer on a loaded 2-core machine; a connection still open
/// after it fails the test.
const PATIENCE: Duration = Duration::from_secs(10);

/// A timeout set shorter than any test's patience, and a clock that must not matter.
const SHORT: Duration = Duration::from_secs(1);
const LONG: Duration = Duration::from_secs(60);

struct Feed {
    addr: String,
    store: Store,
    _dir: tempfile::TempDir,
}

/// One store behind the real listener, within `limits`, without tokens.
async fn start(limits: Limits) -> Feed {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(dir.path(), FeedOptions::default()).unwrap();
    let (ingest, _task) = tranche_feed_service::spawn_writer(writer, None);
    let feed = FeedService::single(store.clone(), ingest);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(tranche_feed_http::serve(
        listener,
        feed,
        FeedTokens::default(),
        limits,
        CancellationToken::new(),
    ));
    Feed {
        addr,
        store,
        _dir: dir,
    }
}

impl Feed {
    async fn connect(&self) -> TcpStream {
        TcpStream::connect(&self.addr).await.expect("connect")
    }
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: feed\r\n\r\n").into_bytes()
}

/// Sends `bytes` one a second (the first at once), then a byte a second for ever, until
/// the server closes the connection; returns how long after the first byte it did and
/// what it sent.
async fn trickle(stream: TcpStream, bytes: &[u8]) -> (Duration, String) {
    let (mut r, mut w) = stream.into_split();
    let started = Instant::now();
    let send = async {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        for byte in bytes.iter().chain(std::iter::repeat(&b'x')) {
            tick.tick().await;
            if w.write_all(&[*byte]).await.is_err() {
                // The server is gone; the read below sees it.
                std::future::pending::<()>().await;
            }
        }
    };
    let closed = async {
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            match r.read(&mut buf).await {
                Ok(0) | Err(_) => return String::from_utf8_lossy(&got).into_owned(),
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    let got = tokio::time::timeout(PATIENCE, async {
        tokio::select! {
            () = send => unreachable!("sends for ever"),
            got = closed => got,
        }
    })
    .await
    .expect("the trickling client was never cut off");
    (started.elapsed(), got)
}

/// Slowloris at a byte a second: cut off at the header timeout (1 s here; 25 s and more
/// before the feed had one), however steadily it sends, while whole requests are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_trickled_a_byte_a_second_are_cut_off_at_the_header_timeout() {
    let feed = start(Limits {
        header_timeout: SHORT,
        idle_timeout: LONG,
        ..Limits::default()
    })
    .await;
    let (after, got) = trickle(feed.connect().await, b"GET /v1/feed/status HTTP/1.1\r\n").await;
    assert_eq!(got, "", "no answer to headers that never finished");
    assert!(after >= SHORT - Duration::from_millis(50), "{after:?}");
    assert!(after < SHORT + Duration::from_secs(2), "{after:?}");

    // Half the headers at once, then nothing: the same.
    let mut half = feed.connect().await;
    half.write_all(b"GET /v1/feed/status HTTP/1.1\r\nHost: fe")
        .await
        .unwrap();
    let (_, after) = read_until_closed(&mut half, PATIENCE).await;
    assert!(after >= SHORT - Duration::from_millis(50), "{after:?}");

    let mut whole = feed.connect().await;
    whole.write_all(&get("/v1/feed/status")).await.unwrap();
    assert_eq!(read_response(&mut whole).await.0, "HTTP/1.1 200 OK");
}

/// Connections with no request in flight are closed at the idle timeout: many that
/// never send a byte, and one kept alive after its answer. The header timeout, longer
/// here, does not start before a request's first byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_at_the_idle_timeout() {
    let feed = start(Limits {
        idle_timeout: SHORT,
        header_timeout: LONG,
        ..Limits::default()
    })
    .await;
    let mut silent = Vec::new();
    for _ in 0..200 {
        silent.push(feed.connect().await);
    }
    let started = Instant::now();
    let closed =
        futures::future::join_all(silent.iter_mut().map(|s| read_until_closed(s, PATIENCE))).await;
    assert!(closed.iter().all(|(got, _)| got.is_empty()));
    let last = started.elapsed();
    assert!(last >= SHORT - Duration::from_millis(50), "{last:?}");
    assert!(last < SHORT + Duration::from_secs(3), "{last:?}");

    let mut kept = feed.connect().await;
    kept.write_all(&get("/v1/feed/status")).await.unwrap();
    assert_eq!(read_response(&mut kept).await.0, "HTTP/1.1 200 OK");
    let (rest, after) = read_until_closed(&mut kept, PATIENCE).await;
    assert_eq!(rest, "", "nothing more after the answer");
    assert!(after >= SHORT - Duration::from_millis(50), "{after:?}");
}

/// A long poll in flight is not idle: it outlasts the header and idle timeouts (1 s)
/// and answers after its whole `wait_ms`, and its connection serves the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_longer_than_the_header_and_idle_timeouts_still_answers() {
    let feed = start(Limits {
        header_timeout: SHORT,
        idle_timeout: SHORT,
        body_timeout: SHORT,
        ..Limits::default()
    })
    .await;
    let wait = Duration::from_millis(2500);
    let mut poll = feed.connect().await;
    let started = Instant::now();
    poll.write_all(&get(&format!(
        "/v1/feed/orders?wait_ms={}",
        wait.as_millis()
    )))
    .await
    .unwrap();
    let (status, body) = read_response(&mut poll).await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert!(started.elapsed() >= wait, "{:?}", started.elapsed());
    let page: OrdersPage = serde_json::from_str(&body).unwrap();
    assert_eq!(page.count, 0);
    assert!(page.server_wait_us >= wait.as_micros() as u64);

    poll.write_all(&get("/v1/feed/orders?wait_ms=0"))
        .await
        .unwrap();
    assert_eq!(read_response(&mut poll).await.0, "HTTP/1.1 200 OK");
}

/// A batch whose body stops half way is answered 408 `body_timeout` at the body
/// timeout, and nothing of it is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_later_than_the_body_timeout_is_answered_408_and_applies_nothing() {
    let feed = start(Limits {
        body_timeout: SHORT,
        ..Limits::default()
    })
    .await;
    let mut stalled = feed.connect().await;
    stalled
        .write_all(
            b"POST /v1/feed/events HTTP/1.1\r\nHost: feed\r\nContent-Type: application/json\r\n\
              Content-Length: 1000\r\n\r\n{\"events\": [",
        )
        .await
        .unwrap();
    let started = Instant::now();
    let (status, body) = tokio::time::timeout(PATIENCE, read_response(&mut stalled))
        .await
        .expect("the stalled body was never answered");
    assert!(status.starts_with("HTTP/1.1 408 "), "{status} {body}");
    assert!(body.contains(r#""code":"body_timeout""#), "{body}");
    assert!(started.elapsed() >= SHORT - Duration::from_millis(50));
    assert_eq!(feed.store.len(), 0);
}

/// At the cap, a new connection is not refused: it waits, unanswered, until an open one
/// closes, while the open ones go on working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_wait_until_one_closes() {
    let feed = start(Limits {
        max_connections: 2,
        idle_timeout: LONG,
        ..Limits::default()
    })
    .await;
    let status = get("/v1/feed/status");
    let mut first = feed.connect().await;
    first.write_all(&status).await.unwrap();
    assert_eq!(read_response(&mut first).await.0, "HTTP/1.1 200 OK");
    let mut second = feed.connect().await;
    second.write_all(&status).await.unwrap();
    assert_eq!(read_response(&mut second).await.0, "HTTP/1.1 200 OK");

    // The third connects (the kernel's backlog holds it) but is not served yet.
    let mut third = feed.connect().await;
    third.write_all(&status).await.unwrap();
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(500), third.read(&mut buf)).await;
    assert!(early.is_err(), "served past the cap: {early:?}");

    first.write_all(&status).await.unwrap();
    assert_eq!(read_response(&mut first).await.0, "HTTP/1.1 200 OK");

    // One closes: the waiting one is served.
    drop(second);
    let answer = tokio::time::timeout(PATIENCE, read_response(&mut third))
        .await
        .expect("the waiting connection was served once a slot freed");
    assert_eq!(answer.0, "HTTP/1.1 200 OK");
}
