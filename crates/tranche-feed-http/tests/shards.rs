//! A feed of several shards, and a read replica's, over real HTTP on loopback.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tranche_feed::{Cursor, FeedOptions, Filter, FirmId, ReplicaLag, Shards, Store, VectorCursor};
use tranche_feed_http::wire::{OrdersPage, StatusBody};
use tranche_feed_service::{FeedService, FeedTokens, ReplicaOf};

struct Server {
    base: String,
    shards: Shards,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

async fn serve(feed: FeedService, tokens: FeedTokens, dir: tempfile::TempDir) -> Server {
    let shards = feed.shards.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(tranche_feed_http::serve(
        listener,
        feed,
        tokens,
        tranche_feed_http::Limits::default(),
        CancellationToken::new(),
    ));
    Server {
        base,
        shards,
        client: reqwest::Client::new(),
        _dir: dir,
    }
}

/// A primary of `shards` shards.
async fn start(shards: usize, tokens: FeedTokens) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let (feed, writers) = Shards::open(dir.path(), shards, FeedOptions::default()).unwrap();
    let (ingest, _tasks) = tranche_feed_service::spawn_writers(writers, None);
    serve(FeedService::primary(feed, ingest), tokens, dir).await
}

/// An insert for shard `shard`: each shard numbers its own seq and rec, and the
/// shard is in the id's top digits so that tests can tell them apart.
fn insert(shard: u64, seq: u64, firm: u32) -> Value {
    json!({"type": "insert", "seq": seq, "rec": seq, "id": shard * 1_000_000 + seq,
           "firm": firm, "broker": firm * 10, "instrument": 1, "side": "buy",
           "price": 10_125, "quantity": 500,
           "created_at": 1_700_000_000_000_000_000u64 + seq * 10 + shard})
}

impl Server {
    async fn post(
        &self,
        shard: Option<&str>,
        events: Vec<Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        let url = match shard {
            Some(shard) => format!("{}/v1/feed/events?shard={shard}", self.base),
            None => format!("{}/v1/feed/events", self.base),
        };
        let mut request = self.client.post(url).json(&json!({ "events": events }));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }

    async fn get_raw(&self, path_and_query: &str, token: Option<&str>) -> (u16, String) {
        let mut request = self.client.get(format!("{}{path_and_query}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    async fn orders(&self, query: &str, token: Option<&str>) -> OrdersPage {
        let (status, body) = self
            .get_raw(&format!("/v1/feed/orders?{query}"), token)
            .await;
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    async fn error(&self, query: &str) -> (u16, Value) {
        let (status, body) = self
            .get_raw(&format!("/v1/feed/orders?{query}"), None)
            .await;
        (status, serde_json::from_str(&body).unwrap())
    }
}

fn ids(page: &OrdersPage) -> Vec<u64> {
    page.orders.iter().map(|o| o.id).collect()
}

#[tokio::test]
async fn two_shards_take_events_by_shard_and_read_as_one_feed() {
    let server = start(2, FeedTokens::default()).await;
    // The same seq and rec in both shards: each core numbers its own.
    let (status, body) = server
        .post(None, vec![insert(0, 1, 1), insert(0, 2, 2)], None)
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.post(Some("1"), vec![insert(1, 1, 1)], None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["position"], Cursor::new(1, 1).to_string());

    let page = server.orders("wait_ms=0", None).await;
    let mut got = ids(&page);
    got.sort_unstable();
    assert_eq!(got, [1, 2, 1_000_001]);
    // Oldest change first across the shards.
    assert_eq!(ids(&page), [1, 1_000_001, 2]);
    assert_eq!(page.next_cursor.len(), 51);
    let cursor: VectorCursor = page.next_cursor.parse().unwrap();
    assert_eq!(cursor.position(0), Cursor::new(2, 2));
    assert_eq!(cursor.position(1), Cursor::new(1, 1));

    // From the cursor: only what changed since, in whichever shard.
    server.post(Some("1"), vec![insert(1, 2, 2)], None).await;
    let page = server
        .orders(&format!("cursor={}&wait_ms=0", page.next_cursor), None)
        .await;
    assert_eq!(ids(&page), [1_000_002]);

    // A one-shard cursor (a store's, from before the second shard) reads shard 1
    // from its start.
    let old = Cursor::new(1, 1).to_string();
    let page = server
        .orders(&format!("cursor={old}&wait_ms=0"), None)
        .await;
    assert_eq!(ids(&page), [1_000_001, 2, 1_000_002]);

    // A page cut short moves each shard only past what it returned.
    let first = server.orders("wait_ms=0&limit=2", None).await;
    let rest = server
        .orders(&format!("cursor={}&wait_ms=0", first.next_cursor), None)
        .await;
    let mut all = ids(&first);
    all.extend(ids(&rest));
    all.sort_unstable();
    assert_eq!(all, [1, 2, 1_000_001, 1_000_002]);

    let (status, body) = server.post(Some("2"), vec![insert(2, 1, 1)], None).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "shard");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expected a shard from 0 to 1, got 2"),
        "{body}"
    );
    let (status, _) = server.post(Some("x"), vec![insert(0, 9, 1)], None).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn vector_cursors_altered_cut_or_of_another_feed_are_refused_saying_why() {
    let server = start(2, FeedTokens::default()).await;
    server.post(Some("1"), vec![insert(1, 1, 1)], None).await;
    let good = server.orders("wait_ms=0", None).await.next_cursor;

    let mut altered: Vec<char> = good.chars().collect();
    altered[20] = if altered[20] == 'A' { 'B' } else { 'A' };
    let altered: String = altered.into_iter().collect();
    let (status, body) = server.error(&format!("cursor={altered}")).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_cursor");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("checksum mismatch"),
        "{body}"
    );

    let (status, body) = server.error(&format!("cursor={}", &good[..40])).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expected 51 characters, got 40"),
        "{body}"
    );

    let three = VectorCursor::from_positions(&[Cursor::START; 3]).unwrap();
    let (status, body) = server.error(&format!("cursor={three}")).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_cursor");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("names 3 shards, this feed has 2"),
        "{body}"
    );

    let ahead = VectorCursor::from_positions(&[Cursor::START, Cursor::new(5, 5)]).unwrap();
    let (status, body) = server.error(&format!("cursor={ahead}&wait_ms=0")).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "cursor_ahead");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("shard 1"),
        "{body}"
    );
}

#[tokio::test]
async fn a_long_poll_is_woken_by_a_write_to_its_firm_in_either_shard() {
    let server = start(2, FeedTokens::default()).await;
    server.post(None, vec![insert(0, 1, 1)], None).await;
    server.post(Some("1"), vec![insert(1, 1, 1)], None).await;
    let mut cursor = server.orders("wait_ms=0", None).await.next_cursor;
    for (shard, seq) in [("1", 2), ("0", 2)] {
        let poll = {
            let client = server.client.clone();
            let url = format!(
                "{}/v1/feed/orders?firm=1&cursor={cursor}&wait_ms=20000",
                server.base
            );
            tokio::spawn(async move {
                let started = Instant::now();
                let page: OrdersPage = client.get(url).send().await.unwrap().json().await.unwrap();
                (page, started.elapsed())
            })
        };
        tranche_test_support::poll_until("the poll waits", Duration::from_secs(10), || {
            server.shards.waiting(Filter::Firm(FirmId(1))) > 0
        })
        .await;
        let shard_n: u64 = shard.parse().unwrap();
        let (status, body) = server
            .post(Some(shard), vec![insert(shard_n, seq, 1)], None)
            .await;
        assert_eq!(status, 200, "{body}");
        let (page, took) = poll.await.unwrap();
        assert_eq!(ids(&page), [shard_n * 1_000_000 + seq]);
        assert!(took < Duration::from_secs(10), "{took:?}: not woken");
        cursor = page.next_cursor;
    }
}

#[tokio::test]
async fn a_firms_token_reads_only_its_firm_across_shards() {
    let tokens = FeedTokens::parse("core-1 core\nfirm-1 firm=1\nread-1 reader\n", "test").unwrap();
    let server = start(2, tokens).await;
    for shard in [0u64, 1] {
        let (status, body) = server
            .post(
                Some(&shard.to_string()),
                vec![insert(shard, 1, 1), insert(shard, 2, 2)],
                Some("core-1"),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let page = server.orders("wait_ms=0", Some("firm-1")).await;
    let mut got = ids(&page);
    got.sort_unstable();
    assert_eq!(got, [1, 1_000_001]);
    assert!(page.orders.iter().all(|o| o.firm == 1));
    let (status, _) = server
        .get_raw("/v1/feed/orders?firm=2&wait_ms=0", Some("firm-1"))
        .await;
    assert_eq!(status, 403);
    let all = server.orders("wait_ms=0", Some("read-1")).await;
    assert_eq!(all.count, 4);

    let (status, _) = server.get_raw("/v1/feed/status", None).await;
    assert_eq!(status, 401);
}

/// `/v1/feed/status` shows a member firm its own view only — its orders held and its
/// own cursor, no shard marks, order counts or feed-wide cursor — while a reader's
/// (the operator's) and a core's tokens see every shard's counters.
#[tokio::test]
async fn status_shows_a_firm_only_its_own_view_and_a_reader_everything() {
    let tokens = FeedTokens::parse(
        "core-1 core\nfirm-1 firm=1\nfirm-3 firm=3\nread-1 reader\n",
        "test",
    )
    .unwrap();
    let server = start(2, tokens).await;
    let posted = [
        (
            0u64,
            vec![insert(0, 1, 1), insert(0, 2, 2), insert(0, 3, 2)],
        ),
        (1, vec![insert(1, 1, 2), insert(1, 2, 1), insert(1, 3, 2)]),
    ];
    for (shard, events) in posted {
        let (status, body) = server
            .post(Some(&shard.to_string()), events, Some("core-1"))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let status_for = |token: &'static str| {
        let server = &server;
        async move {
            let (status, body) = server.get_raw("/v1/feed/status", Some(token)).await;
            assert_eq!(status, 200, "{token}: {body}");
            (serde_json::from_str::<StatusBody>(&body).unwrap(), body)
        }
    };

    // The operator's token: every shard's marks and the feed's newest cursor.
    let (everything, _) = status_for("read-1").await;
    assert_eq!(everything.role, "primary");
    let marks: Vec<_> = everything
        .shards
        .iter()
        .map(|s| (s.shard, s.seq, s.orders))
        .collect();
    assert_eq!(marks, [(0, 3, 3), (1, 3, 3)]);
    let all = server.orders("wait_ms=0", Some("read-1")).await;
    assert_eq!(everything.newest_cursor, all.next_cursor);
    assert!(everything.firm.is_none());
    let (core, _) = status_for("core-1").await;
    assert_eq!(
        core.shards.len(),
        2,
        "a core resumes after its shard's marks"
    );

    // Firm 1: its own two orders and its own cursor; none of the feed's counters.
    let (mine, text) = status_for("firm-1").await;
    assert_eq!(mine.role, "primary");
    assert!(mine.shards.is_empty(), "{text}");
    assert!(mine.replica.is_none());
    let firm = mine.firm.as_ref().expect("the firm's own view");
    assert_eq!((firm.firm, firm.orders), (1, 2));
    assert!(!text.contains("\"seq\""), "{text}");
    assert_ne!(mine.newest_cursor, everything.newest_cursor);
    // Its cursor is the one its own reads end at, and reads on from there.
    let page = server.orders("wait_ms=0", Some("firm-1")).await;
    assert_eq!(page.count, 2);
    assert_eq!(mine.newest_cursor, page.next_cursor);
    let (status, body) = server
        .post(
            Some("0"),
            vec![insert(0, 4, 1), insert(0, 5, 2)],
            Some("core-1"),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let next = server
        .orders(
            &format!("wait_ms=0&cursor={}", mine.newest_cursor),
            Some("firm-1"),
        )
        .await;
    assert_eq!(ids(&next), [4]);

    // A firm with no order yet: nothing, from the start.
    let (none, _) = status_for("firm-3").await;
    assert_eq!(none.firm.as_ref().map(|f| (f.firm, f.orders)), Some((3, 0)));
    assert!(none.shards.is_empty());
}

#[tokio::test]
async fn a_replica_serves_unfiltered_reads_only_takes_no_events_and_reports_its_lag() {
    // A primary's store, copied into the replica's as its follower would.
    let primary_dir = tempfile::tempdir().unwrap();
    let (primary, mut writer) = Store::open(primary_dir.path(), FeedOptions::default()).unwrap();
    let event = |seq: u64, firm: u32| {
        tranche_feed::Event::Insert(tranche_feed::NewOrder {
            seq,
            rec: seq,
            id: tranche_feed::OrderId(seq),
            firm: FirmId(firm),
            broker: tranche_feed::BrokerId(1),
            instrument: tranche_feed::InstrumentId(1),
            side: tranche_feed::Side::Sell,
            price: 1,
            quantity: 1,
            created_at: seq,
        })
    };
    writer.apply(&[event(1, 1), event(2, 2)]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (shards, mut writers) = Shards::open_replica(dir.path(), FeedOptions::default()).unwrap();
    let page = primary.read(Cursor::START, Filter::All, 10).unwrap();
    writers[0].apply(&page.orders, primary.oldest()).unwrap();
    let lag = ReplicaLag::new();
    lag.set_connected(0, true);
    lag.heard(0, 7, std::time::Instant::now() - Duration::from_secs(2));
    lag.applied(0, 2);
    let feed = FeedService::replica(
        shards,
        ReplicaOf {
            primary: "127.0.0.1:9".into(),
            lag,
        },
    );
    let server = serve(feed, FeedTokens::default(), dir).await;

    let page = server.orders("wait_ms=0", None).await;
    assert_eq!(ids(&page), [1, 2]);
    assert_eq!(page.next_cursor, primary.newest().to_string());

    let (status, body) = server.error("firm=1&wait_ms=0").await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "unfiltered_only");
    assert_eq!(body["error"]["field"], "firm");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("read replica without per-key indexes"),
        "{body}"
    );

    let (status, body) = server.post(None, vec![insert(0, 3, 1)], None).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "replica_read_only");

    let (status, body) = server.get_raw("/v1/feed/status", None).await;
    assert_eq!(status, 200, "{body}");
    let status: StatusBody = serde_json::from_str(&body).unwrap();
    assert_eq!(status.role, "replica");
    let replica = status.replica.unwrap();
    assert_eq!(replica.primary, "127.0.0.1:9");
    assert!(replica.connected);
    assert_eq!(replica.seqs_behind, 5);
    assert!(replica.seconds_behind >= 2.0, "{}", replica.seconds_behind);
    assert_eq!(replica.shards[0].primary_seq, 7);
}
