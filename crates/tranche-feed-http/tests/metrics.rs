//! `GET /metrics` over real HTTP on loopback: the figures move by exactly what was
//! written and read, and the token rules.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tranche_feed::{FeedOptions, Filter, Store};
use tranche_feed_http::wire::OrdersPage;
use tranche_feed_service::metrics::*;
use tranche_feed_service::FeedTokens;
use tranche_test_support::poll_until;

/// How long a test waits for what it polls.
const WAIT: Duration = Duration::from_secs(10);

struct Server {
    base: String,
    store: Store,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

async fn start(tokens: FeedTokens) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(dir.path(), FeedOptions::default()).unwrap();
    let (ingest, _task) = tranche_feed_service::spawn_writer(writer, None);
    let app = tranche_feed_http::router(store.clone(), ingest, CancellationToken::new(), tokens);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Server {
        base,
        store,
        client: reqwest::Client::new(),
        _dir: dir,
    }
}

fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn insert(seq: u64, rec: u64, id: u64, created_at: u64) -> Value {
    json!({"type": "insert", "seq": seq, "rec": rec, "id": id, "firm": 1, "broker": 10,
           "instrument": 7, "side": "buy", "price": 10_125, "quantity": 500,
           "created_at": created_at})
}

fn fill(seq: u64, id: u64, updated_at: u64) -> Value {
    json!({"type": "change", "seq": seq, "id": id, "price": 10_125, "quantity": 500,
           "filled": 100, "status": "partially_filled", "updated_at": updated_at})
}

impl Server {
    async fn post(&self, events: Vec<Value>) -> u16 {
        self.client
            .post(format!("{}/v1/feed/events", self.base))
            .json(&json!({ "events": events }))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    async fn orders(&self, query: &str) -> OrdersPage {
        let response = self
            .client
            .get(format!("{}/v1/feed/orders?{query}", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.json().await.unwrap()
    }

    async fn get(&self, path: &str, token: Option<&str>) -> reqwest::Response {
        let mut request = self.client.get(format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await.unwrap()
    }

    async fn scrape(&self, token: Option<&str>) -> Scrape {
        let response = self.get("/metrics", token).await;
        assert_eq!(response.status(), 200);
        let kind = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
        let text = response.text().await.unwrap();
        Scrape::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }
}

fn bucket(scrape: &Scrape, name: &str, labels: &[(&str, &str)], le: &str) -> f64 {
    let mut labels = labels.to_vec();
    labels.push(("le", le));
    scrape.value(&format!("{name}_bucket"), &labels)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_figures_move_by_exactly_what_was_written_and_read() {
    let server = start(FeedTokens::default()).await;
    let before = server.scrape(None).await;
    let shard = [("shard", "0")];
    let http = [("protocol", "http")];
    let tcp = [("protocol", "tcp")];
    for (name, labels) in [
        (SEQ, &shard[..]),
        (EVENTS_WRITTEN, &shard),
        (READS, &http),
        (READS_EMPTY, &http),
    ] {
        assert_eq!(before.get(name, labels), Some(0.0), "{name}");
    }

    // Order 100 was created 100 s ago and filled now: its version is fresh, so the
    // lag of an answer holding it is not 100 s.
    let now = now_nanos();
    let old = now - 100_000_000_000;
    assert_eq!(
        server
            .post(vec![
                insert(1, 1, 100, old),
                insert(2, 2, 101, now),
                insert(3, 3, 102, now)
            ])
            .await,
        200
    );
    assert_eq!(
        server
            .post(vec![fill(4, 100, now), insert(5, 4, 103, now)])
            .await,
        200
    );
    // Refused whole (an unknown order): no event of it is written.
    assert_eq!(
        server
            .post(vec![insert(6, 5, 104, now), fill(7, 999, now)])
            .await,
        400
    );

    let all = server.orders("wait_ms=0").await;
    assert_eq!(all.count, 4);
    // A long poll at the end that times out, empty.
    let empty = server
        .orders(&format!("cursor={}&wait_ms=50", all.next_cursor))
        .await;
    assert_eq!(empty.count, 0);
    // A long poll woken by a write.
    let waiting = {
        let client = server.client.clone();
        let url = format!(
            "{}/v1/feed/orders?cursor={}&wait_ms=20000",
            server.base, all.next_cursor
        );
        tokio::spawn(async move {
            let page: OrdersPage = client.get(url).send().await.unwrap().json().await.unwrap();
            page
        })
    };
    poll_until("the long poll waits", WAIT, || {
        server.store.waiting(Filter::All) == 1
    })
    .await;
    assert_eq!(server.post(vec![insert(6, 5, 104, now_nanos())]).await, 200);
    assert_eq!(waiting.await.unwrap().count, 1);

    let after = server.scrape(None).await;
    let moved = |name: &str, labels: &[(&str, &str)]| {
        after.value(name, labels) - before.value(name, labels)
    };
    // Writes: batches of 3, 2 and 1 events applied, one refused; one group each (the
    // posts went one after the other).
    assert_eq!(after.get(SEQ, &shard), Some(6.0));
    assert_eq!(after.get(REC, &shard), Some(5.0));
    assert_eq!(after.get(ORDERS, &shard), Some(5.0));
    assert_eq!(moved(EVENTS_WRITTEN, &shard), 6.0);
    assert_eq!(moved(BATCHES_WRITTEN, &shard), 3.0);
    let refused = |reason| moved(BATCHES_REFUSED, &[("shard", "0"), ("reason", reason)]);
    assert_eq!((refused("bad_batch"), refused("store_failed")), (1.0, 0.0));
    assert_eq!(moved(&format!("{BATCH_EVENTS}_count"), &shard), 3.0);
    assert_eq!(moved(&format!("{BATCH_EVENTS}_sum"), &shard), 6.0);
    assert_eq!(bucket(&after, BATCH_EVENTS, &shard, "1"), 1.0);
    assert_eq!(bucket(&after, BATCH_EVENTS, &shard, "2"), 2.0);
    assert_eq!(bucket(&after, BATCH_EVENTS, &shard, "5"), 3.0);
    assert_eq!(moved(&format!("{GROUP_BATCHES}_count"), &shard), 4.0);
    assert_eq!(moved(&format!("{GROUP_BATCHES}_sum"), &shard), 4.0);
    assert_eq!(moved(&format!("{GROUP_SECONDS}_count"), &shard), 4.0);

    // Reads: 4 orders, then none (timed out), then 1 (woken once).
    assert_eq!(moved(READS, &http), 3.0);
    assert_eq!(moved(READS_EMPTY, &http), 1.0);
    assert_eq!(moved(TIMEOUTS, &http), 1.0);
    assert_eq!(moved(WAKEUPS, &http), 1.0);
    assert_eq!(moved(&format!("{READ_ROWS}_count"), &http), 3.0);
    assert_eq!(moved(&format!("{READ_ROWS}_sum"), &http), 5.0);
    assert_eq!(bucket(&after, READ_ROWS, &http, "0"), 1.0);
    assert_eq!(bucket(&after, READ_ROWS, &http, "1"), 2.0);
    assert_eq!(bucket(&after, READ_ROWS, &http, "5"), 3.0);
    assert_eq!(moved(&format!("{READ_LAG}_count"), &http), 2.0);
    let lag = moved(&format!("{READ_LAG}_sum"), &http);
    assert!(
        (0.0..50.0).contains(&lag),
        "the lag is the versions' age, not the orders': {lag} s"
    );
    for name in [READS, READS_EMPTY, TIMEOUTS, WAKEUPS] {
        assert_eq!(moved(name, &tcp), 0.0, "{name}");
    }
    assert!(after.get(REPLICA_LAG_SECONDS, &shard).is_none());
}

#[tokio::test]
async fn the_metrics_need_a_readers_token_when_the_server_has_tokens() {
    let tokens = FeedTokens::parse("core-1 core\nfirm-1 firm=1\nread-1 reader\n", "test").unwrap();
    let server = start(tokens).await;
    let status = |response: reqwest::Response| response.status().as_u16();
    assert_eq!(status(server.get("/metrics", None).await), 401);
    assert_eq!(status(server.get("/metrics", Some("nobody")).await), 401);
    assert_eq!(status(server.get("/metrics", Some("core-1")).await), 403);
    assert_eq!(status(server.get("/metrics", Some("firm-1")).await), 403);
    let scrape = server.scrape(Some("read-1")).await;
    assert_eq!(scrape.get(SEQ, &[("shard", "0")]), Some(0.0));
    // The page holds no data: open to all, it asks for a token itself.
    let page = server.get("/", None).await;
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    assert!(page.text().await.unwrap().contains("/metrics"));
}
