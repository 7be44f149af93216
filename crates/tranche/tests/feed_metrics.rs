//! `tranche feed serve` as a process: `GET /metrics` counts what came in and went
//! out over both listeners, takes a reader's token, and the dashboard is served.

use crate::support;

use std::process::Stdio;

use serde_json::json;
use tranche_feed::{Cursor, Event, Filter};
use tranche_feed_service::metrics::{
    Scrape, BATCHES_WRITTEN, EVENTS_WRITTEN, READS, READS_EMPTY, READ_ROWS, SEQ, TIMEOUTS,
};
use tranche_feed_tcp::{CoreConnection, FeedClient, ReadRequest};

// A `tranche feed serve` process, killed if its test fails before stopping it.
use support::Killed as Feed;

fn wire(seq: u64, id: u64) -> serde_json::Value {
    json!({"type": "insert", "seq": seq, "rec": seq, "id": id, "firm": 1, "broker": 1,
           "instrument": 1, "side": "sell", "price": 5, "quantity": 10,
           "created_at": 1_700_000_000_000_000_000u64})
}

/// [`wire`] as a core sends it on the fast path.
fn insert(seq: u64, id: u64) -> Event {
    serde_json::from_value::<tranche_feed_http::wire::WireEvent>(wire(seq, id))
        .unwrap()
        .to_event()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_serve_counts_both_listeners_in_its_metrics_for_a_reader() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    tranche_test_support::write_secret(&tokens, "core-1 core\nread-1 reader\nfirm-1 firm=1\n");
    let mut feed = Feed(
        support::tranche()
            .args(["feed", "serve", "--listen", "127.0.0.1:0"])
            .args(["--tcp", "127.0.0.1:0", "--dir"])
            .arg(dir.path().join("feed"))
            .arg("--tokens")
            .arg(&tokens)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start tranche feed serve"),
    );
    let (base, line) = support::server_address(&mut feed.0);
    let tcp = support::tcp_address(&line);
    let http = reqwest::Client::new();
    let metrics = |token: Option<&str>| {
        let mut request = http.get(format!("{base}/metrics"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    assert_eq!(metrics(None).await.unwrap().status(), 401);
    assert_eq!(metrics(Some("firm-1")).await.unwrap().status(), 403);
    let page = http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("Tranche feed"));

    // Two events over TCP, one over HTTP.
    let mut core = CoreConnection::connect(tcp.as_str(), Some("core-1"))
        .await
        .unwrap();
    core.apply(&[insert(1, 10), insert(2, 11)]).await.unwrap();
    let posted = http
        .post(format!("{base}/v1/feed/events"))
        .bearer_auth("core-1")
        .json(&json!({"events": [wire(3, 12)]}))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 200);

    // Read over TCP: all three, then nothing after waiting 20 ms; once over HTTP.
    let mut client = FeedClient::connect(tcp.as_str(), Some("read-1"))
        .await
        .unwrap();
    let mut orders = Vec::new();
    let mut read = ReadRequest::new(Cursor::START, Filter::All);
    read.wait_ms = 0;
    let header = client.read(&read, &mut orders).await.unwrap();
    assert_eq!(header.count, 3);
    let mut empty = ReadRequest::new(header.next, Filter::All);
    empty.wait_ms = 20;
    assert_eq!(client.read(&empty, &mut orders).await.unwrap().count, 0);
    let page = http
        .get(format!("{base}/v1/feed/orders?wait_ms=0"))
        .bearer_auth("read-1")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);

    let response = metrics(Some("read-1")).await.unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let scrape = Scrape::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let shard = [("shard", "0")];
    let (by_tcp, by_http) = ([("protocol", "tcp")], [("protocol", "http")]);
    assert_eq!(scrape.get(SEQ, &shard), Some(3.0));
    assert_eq!(scrape.get(EVENTS_WRITTEN, &shard), Some(3.0));
    assert_eq!(scrape.get(BATCHES_WRITTEN, &shard), Some(2.0));
    assert_eq!(scrape.get(READS, &by_tcp), Some(2.0));
    assert_eq!(scrape.get(READS_EMPTY, &by_tcp), Some(1.0));
    assert_eq!(scrape.get(TIMEOUTS, &by_tcp), Some(1.0));
    assert_eq!(scrape.get(&format!("{READ_ROWS}_sum"), &by_tcp), Some(3.0));
    assert_eq!(scrape.get(READS, &by_http), Some(1.0));
    assert_eq!(scrape.get(&format!("{READ_ROWS}_sum"), &by_http), Some(3.0));
}
