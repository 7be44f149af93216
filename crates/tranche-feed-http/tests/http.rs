//! The feed's HTTP layer over real HTTP on loopback.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tranche_feed::{FeedOptions, Filter, Store};
use tranche_feed_http::wire::OrdersPage;
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

async fn start() -> Server {
    start_with(|_| {}).await
}

async fn start_with(prepare: impl FnOnce(&mut tranche_feed::Writer)) -> Server {
    start_full(prepare, FeedTokens::default()).await
}

/// A server over a store `prepare` wrote to first (with the writer the task gets).
async fn start_full(prepare: impl FnOnce(&mut tranche_feed::Writer), tokens: FeedTokens) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut writer) = Store::open(dir.path(), FeedOptions::default()).unwrap();
    prepare(&mut writer);
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

fn insert(seq: u64, rec: u64, id: u64, firm: u32, instrument: u32) -> Value {
    json!({"type": "insert", "seq": seq, "rec": rec, "id": id, "firm": firm,
           "broker": firm * 10, "instrument": instrument, "side": "buy", "price": 10_125,
           "quantity": 500, "created_at": 1_700_000_000_000_000_000u64 + seq})
}

fn fill(seq: u64, id: u64, filled: u64) -> Value {
    json!({"type": "change", "seq": seq, "id": id, "price": 10_125, "quantity": 500,
           "filled": filled, "status": "partially_filled",
           "updated_at": 1_700_000_000_000_000_000u64 + seq})
}

impl Server {
    async fn post(&self, events: Vec<Value>) -> (u16, Value) {
        let response = self
            .client
            .post(format!("{}/v1/feed/events", self.base))
            .json(&json!({ "events": events }))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }

    async fn get_raw(&self, query: &str) -> (u16, String) {
        let response = self
            .client
            .get(format!("{}/v1/feed/orders?{query}", self.base))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    async fn orders(&self, query: &str) -> OrdersPage {
        let (status, body) = self.get_raw(query).await;
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }
}

#[tokio::test]
async fn a_batch_reads_back_by_cursor_with_and_without_filters() {
    let server = start().await;
    let (status, body) = server
        .post(vec![
            insert(1, 1, 100, 1, 7),
            insert(2, 2, 101, 2, 7),
            insert(3, 3, 102, 1, 8),
        ])
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["applied"], 3);

    let all = server.orders("wait_ms=0").await;
    assert_eq!(all.count, 3);
    let ids: Vec<u64> = all.orders.iter().map(|o| o.id).collect();
    assert_eq!(ids, [100, 101, 102]);
    assert_eq!(all.oldest_created_at, Some(1_700_000_000_000_000_001));
    assert_eq!(body["position"], all.next_cursor);

    let firm1 = server.orders("firm=1&wait_ms=0").await;
    assert_eq!(
        firm1.orders.iter().map(|o| o.id).collect::<Vec<_>>(),
        [100, 102]
    );
    let broker20 = server.orders("broker=20&wait_ms=0").await;
    assert_eq!(
        broker20.orders.iter().map(|o| o.id).collect::<Vec<_>>(),
        [101]
    );
    let instrument7 = server.orders("instrument=7&limit=1&wait_ms=0").await;
    assert_eq!(instrument7.orders[0].id, 100);
    let rest = server
        .orders(&format!(
            "instrument=7&wait_ms=0&cursor={}",
            instrument7.next_cursor
        ))
        .await;
    assert_eq!(rest.orders.iter().map(|o| o.id).collect::<Vec<_>>(), [101]);

    // Nothing after the end: an empty page keeps the cursor.
    let none = server
        .orders(&format!("wait_ms=0&cursor={}", all.next_cursor))
        .await;
    assert_eq!(none.count, 0);
    assert_eq!(none.next_cursor, all.next_cursor);
    assert_eq!(none.oldest_created_at, None);

    // The header fields come first in the object, in this order.
    let (_, text) = server.get_raw("wait_ms=0").await;
    let at = |key: &str| text.find(&format!("\"{key}\"")).unwrap();
    assert!(at("next_cursor") < at("count"));
    assert!(at("count") < at("oldest_created_at"));
    assert!(at("oldest_created_at") < at("server_wait_us"));
    assert!(at("server_wait_us") < at("server_read_us"));
    assert!(at("server_read_us") < at("orders"));

    // At most one filter key.
    let (status, body) = server.get_raw("firm=1&broker=10&wait_ms=0").await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn a_changed_order_is_delivered_once_at_its_latest_version() {
    let server = start().await;
    server
        .post(vec![insert(1, 1, 100, 1, 7), insert(2, 2, 101, 1, 7)])
        .await;
    let first = server.orders("wait_ms=0").await;
    assert_eq!(first.count, 2);
    let (status, body) = server
        .post(vec![fill(3, 100, 100), fill(4, 100, 300)])
        .await;
    assert_eq!(status, 200, "{body}");

    let from_start = server.orders("wait_ms=0").await;
    let ids: Vec<u64> = from_start.orders.iter().map(|o| o.id).collect();
    assert_eq!(ids, [101, 100], "moved to the end, once");
    assert_eq!(from_start.orders[1].filled, 300);

    let after = server
        .orders(&format!("wait_ms=0&cursor={}", first.next_cursor))
        .await;
    assert_eq!(after.count, 1);
    assert_eq!(after.orders[0].id, 100);
    assert_eq!(after.orders[0].filled, 300);
    assert_eq!(after.orders[0].seq, 4);
}

#[tokio::test]
async fn a_bad_batch_is_refused_whole_naming_index_and_field() {
    let server = start().await;
    // The store's check: event 2 fills more than its quantity.
    let (status, body) = server
        .post(vec![
            insert(1, 1, 100, 1, 7),
            fill(2, 100, 100),
            fill(3, 100, 501),
        ])
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_batch");
    assert_eq!(body["error"]["index"], 2);
    assert_eq!(body["error"]["field"], "filled");
    assert!(server.store.is_empty());

    // The wire's checks: a missing field, a wrong type, a misplaced field.
    let mut missing = insert(1, 1, 100, 1, 7);
    missing.as_object_mut().unwrap().remove("price");
    let (status, body) = server.post(vec![insert(1, 1, 99, 1, 7), missing]).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["index"], 1);
    assert_eq!(body["error"]["field"], "price");

    let mut typed = insert(1, 1, 100, 1, 7);
    typed["quantity"] = json!("five");
    let (status, body) = server.post(vec![typed]).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["index"], 0);
    assert_eq!(body["error"]["field"], "quantity");

    let mut misplaced = fill(2, 100, 1);
    misplaced["firm"] = json!(1);
    let (status, body) = server.post(vec![insert(1, 1, 100, 1, 7), misplaced]).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["index"], 1);
    assert_eq!(body["error"]["field"], "firm");
    assert!(server.store.is_empty());
    assert_eq!(server.store.marks(), (0, 0));

    // Not a batch at all.
    let response = server
        .client
        .post(format!("{}/v1/feed/events", server.base))
        .body("[1, 2")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_request");
}

/// Starts a long poll for `query` from the store's current end: when it was answered,
/// and the page.
async fn spawn_poll(
    server: &Server,
    query: &str,
) -> tokio::task::JoinHandle<(Instant, OrdersPage)> {
    let start = server.orders("wait_ms=0").await;
    let url = format!(
        "{}/v1/feed/orders?{query}&cursor={}",
        server.base, start.next_cursor
    );
    let client = server.client.clone();
    tokio::spawn(async move {
        let response = client.get(url).send().await.unwrap();
        let answered = Instant::now();
        (answered, response.json::<OrdersPage>().await.unwrap())
    })
}

#[tokio::test]
async fn a_long_poll_answers_once_min_batch_orders_arrive() {
    let server = start().await;
    let poll = spawn_poll(&server, "firm=1&min_batch=2&wait_ms=20000").await;
    poll_until("the long poll waits on firm 1", WAIT, || {
        server.store.waiting(Filter::Firm(tranche_feed::FirmId(1))) == 1
    })
    .await;

    server.post(vec![insert(1, 1, 100, 1, 7)]).await;
    // Another firm's order does not count.
    server.post(vec![insert(2, 2, 200, 2, 7)]).await;
    poll_until("the long poll was woken", WAIT, || {
        server
            .store
            .signals_sent(Filter::Firm(tranche_feed::FirmId(1)))
            >= 1
    })
    .await;
    assert!(!poll.is_finished(), "one order of two must not answer");

    let second_posted = Instant::now();
    let (status, body) = server.post(vec![insert(3, 3, 101, 1, 8)]).await;
    assert_eq!(status, 200, "{body}");
    let (answered, page) = poll.await.unwrap();
    assert!(answered > second_posted);
    assert!(
        answered - second_posted < Duration::from_secs(10),
        "well before wait_ms"
    );
    assert_eq!(page.count, 2);
    assert_eq!(
        page.orders.iter().map(|o| o.id).collect::<Vec<_>>(),
        [100, 101]
    );
    assert!(page.server_wait_us > 0);
}

#[tokio::test]
async fn with_a_linger_a_long_poll_waits_for_the_first_order_then_answers_short_of_min_batch() {
    let server = start().await;
    let poll = spawn_poll(&server, "firm=1&min_batch=5&wait_ms=20000&linger_us=50000").await;
    // Nothing ready: a long poll, not an answer after the linger.
    poll_until("the long poll waits on firm 1", WAIT, || {
        server.store.waiting(Filter::Firm(tranche_feed::FirmId(1))) == 1
    })
    .await;
    let posted = Instant::now();
    server.post(vec![insert(1, 1, 100, 1, 7)]).await;
    let (answered, page) = poll.await.unwrap();
    // One order of five, answered once the linger passed, well before wait_ms.
    assert_eq!(page.count, 1, "{page:?}");
    assert_eq!(page.orders[0].id, 100);
    assert!(
        answered - posted >= Duration::from_millis(50),
        "{:?}",
        answered - posted
    );
    assert!(
        answered - posted < Duration::from_secs(10),
        "{:?}",
        answered - posted
    );
}

#[tokio::test]
async fn a_long_poll_without_data_times_out_empty_after_wait_ms() {
    let server = start().await;
    let began = Instant::now();
    let page = server.orders("instrument=3&wait_ms=300").await;
    let took = began.elapsed();
    assert_eq!(page.count, 0);
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_millis(3_000), "{took:?}");
    assert!(page.server_wait_us >= 300_000);
}

#[tokio::test]
async fn cursor_errors_say_why() {
    let server = start().await;
    server.post(vec![insert(1, 1, 100, 1, 7)]).await;
    let good = server.orders("wait_ms=0").await.next_cursor;

    let (status, body) = server.get_raw("cursor=abc&wait_ms=0").await;
    assert_eq!(status, 400, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], "bad_cursor");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("expected 28 characters"));

    // One character changed: the checksum catches it.
    let mut forged: Vec<char> = good.chars().collect();
    forged[10] = if forged[10] == 'A' { 'B' } else { 'A' };
    let forged: String = forged.into_iter().collect();
    let (status, body) = server.get_raw(&format!("cursor={forged}&wait_ms=0")).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("bad_cursor"), "{body}");

    // A well-formed cursor past everything held.
    let ahead = tranche_feed::Cursor::new(99, 99).to_string();
    let (status, body) = server.get_raw(&format!("cursor={ahead}&wait_ms=0")).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("cursor_ahead"), "{body}");

    let (status, body) = server.get_raw("cursor_typo=1").await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn a_cursor_older_than_retention_is_gone_with_the_oldest_cursor() {
    use tranche_feed::*;
    let server = start_with(|writer| {
        let new = NewOrder {
            seq: 1,
            rec: 1,
            id: OrderId(7),
            firm: FirmId(1),
            broker: BrokerId(10),
            instrument: InstrumentId(100),
            side: Side::Buy,
            price: 1,
            quantity: 5,
            created_at: 1,
        };
        let cancel = OrderChange {
            seq: 2,
            id: OrderId(7),
            price: 1,
            quantity: 5,
            filled: 0,
            status: Status::Cancelled,
            updated_at: 2,
        };
        writer.apply(&[Event::Insert(new)]).unwrap();
        writer.apply(&[Event::Change(cancel)]).unwrap();
        writer.evict_terminal_through(Cursor::new(2, 1)).unwrap();
    })
    .await;
    let old = Cursor::new(1, 1).to_string();
    let (status, body) = server.get_raw(&format!("cursor={old}&wait_ms=0")).await;
    assert_eq!(status, 410, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], "cursor_too_old");
    assert_eq!(body["error"]["oldest"], Cursor::new(2, 1).to_string());
    let resumed = server
        .orders(&format!("wait_ms=0&cursor={}", Cursor::new(2, 1)))
        .await;
    assert_eq!(resumed.count, 0);
}

#[tokio::test]
async fn tokens_limit_a_core_to_posting_and_a_client_to_its_firm() {
    let tokens = FeedTokens::parse(
        "# feed tokens\ncore-1 core\nfirm-1 firm=1\nread-1 reader\n",
        "test",
    )
    .unwrap();
    let server = start_full(|_| {}, tokens).await;
    let post = |token: Option<&str>| {
        let mut request = server
            .client
            .post(format!("{}/v1/feed/events", server.base))
            .json(&json!({"events": [insert(1, 1, 100, 1, 7), insert(2, 2, 101, 2, 7)]}));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let response = post(None).await.unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    assert_eq!(post(Some("wrong")).await.unwrap().status(), 401);
    assert_eq!(post(Some("firm-1")).await.unwrap().status(), 403);
    assert_eq!(post(Some("read-1")).await.unwrap().status(), 403);
    assert!(server.store.is_empty());
    assert_eq!(post(Some("core-1")).await.unwrap().status(), 200);

    let get = |token: &str, query: &str| {
        server
            .client
            .get(format!("{}/v1/feed/orders?wait_ms=0&{query}", server.base))
            .bearer_auth(token)
            .send()
    };
    assert_eq!(get("core-1", "").await.unwrap().status(), 403);
    let mine: OrdersPage = get("firm-1", "").await.unwrap().json().await.unwrap();
    assert_eq!(mine.orders.iter().map(|o| o.id).collect::<Vec<_>>(), [100]);
    assert_eq!(get("firm-1", "firm=1").await.unwrap().status(), 200);
    assert_eq!(get("firm-1", "firm=2").await.unwrap().status(), 403);
    assert_eq!(get("firm-1", "instrument=7").await.unwrap().status(), 403);
    let all: OrdersPage = get("read-1", "instrument=7")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(all.count, 2);

    let error = FeedTokens::parse("secret-token firm=x", "tokens.txt")
        .unwrap_err()
        .to_string();
    assert!(error.contains("tokens.txt line 1"), "{error}");
    assert!(!error.contains("secret-token"), "{error}");
}

#[tokio::test]
async fn the_openapi_document_names_exactly_the_served_routes() {
    let tokens = FeedTokens::parse("core-1 core", "test").unwrap();
    let server = start_full(|_| {}, tokens).await;
    // Open to all, even with tokens configured.
    let response = server
        .client
        .get(format!("{}/v1/feed/openapi.json", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let document: Value = response.json().await.unwrap();
    let paths = document["paths"].as_object().unwrap();
    let mut documented: Vec<(String, String)> = Vec::new();
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            documented.push((method.clone(), path.clone()));
        }
    }
    documented.sort();
    assert_eq!(
        documented,
        [
            ("get".to_string(), "/".to_string()),
            ("get".to_string(), "/metrics".to_string()),
            ("get".to_string(), "/v1/feed/openapi.json".to_string()),
            ("get".to_string(), "/v1/feed/orders".to_string()),
            ("get".to_string(), "/v1/feed/status".to_string()),
            ("post".to_string(), "/v1/feed/events".to_string()),
        ]
    );
    // Each is served (an answer other than 404/405), and nothing else is.
    for (method, path) in &documented {
        let url = format!("{}{path}", server.base);
        let request = match method.as_str() {
            "get" => server.client.get(url),
            _ => server.client.post(url).json(&json!({"events": []})),
        };
        let status = request.send().await.unwrap().status().as_u16();
        assert!(status != 404 && status != 405, "{method} {path}: {status}");
    }
    let (status, _) = server.get_raw("").await;
    assert_eq!(status, 401);
    let unknown = server
        .client
        .get(format!("{}/v1/feed/other", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);

    // The page schema lists the answer's fields.
    let page = &document["components"]["schemas"]["OrdersPage"]["properties"];
    for key in [
        "next_cursor",
        "count",
        "oldest_created_at",
        "server_wait_us",
        "server_read_us",
        "orders",
    ] {
        assert!(page.get(key).is_some(), "{key} missing from {page}");
    }
}
