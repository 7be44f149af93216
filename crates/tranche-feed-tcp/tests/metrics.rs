//! The TCP path records into the same figures as HTTP (`GET /metrics` renders them),
//! by exactly what it wrote and answered.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tranche_feed::*;
use tranche_feed_service::metrics::*;
use tranche_feed_service::FeedTokens;
use tranche_feed_tcp::{CoreConnection, FeedClient, ReadRequest};
use tranche_test_support::poll_until;

/// How long a test waits for what it polls.
const WAIT: Duration = Duration::from_secs(10);

fn insert(seq: u64, id: u64, created_at: u64) -> Event {
    Event::Insert(NewOrder {
        seq,
        rec: seq,
        id: OrderId(id),
        firm: FirmId(1),
        broker: BrokerId(10),
        instrument: InstrumentId(1),
        side: Side::Buy,
        price: 10_125,
        quantity: 500,
        created_at,
    })
}

fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_and_batches_over_tcp_are_counted_under_their_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(dir.path(), FeedOptions::default()).unwrap();
    let (ingest, _task) = tranche_feed_service::spawn_writer(writer, None);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    tokio::spawn(tranche_feed_tcp::serve(
        listener,
        store.clone(),
        ingest.clone(),
        FeedTokens::default(),
        shutdown.clone(),
    ));
    let scrape = || Scrape::parse(&ingest.metrics().render(&[&store])).unwrap();

    let mut core = CoreConnection::connect(addr, None).await.unwrap();
    let now = now_nanos();
    core.apply(&[insert(1, 100, now), insert(2, 101, now)])
        .await
        .unwrap();
    core.apply(&[insert(3, 102, now)]).await.unwrap();

    let mut client = FeedClient::connect(addr, None).await.unwrap();
    let mut orders = Vec::new();
    let mut read = ReadRequest::new(Cursor::START, Filter::All);
    read.wait_ms = 0;
    let header = client.read(&read, &mut orders).await.unwrap();
    assert_eq!(header.count, 3);
    // Empty, after waiting 30 ms for an order.
    let mut empty = ReadRequest::new(header.next, Filter::All);
    empty.wait_ms = 30;
    assert_eq!(client.read(&empty, &mut orders).await.unwrap().count, 0);
    // Woken by a write to its firm.
    let mut woken = ReadRequest::new(header.next, Filter::Firm(FirmId(1)));
    woken.wait_ms = 20_000;
    client.send_read(&woken).await.unwrap();
    poll_until("the read waits", WAIT, || {
        store.waiting(Filter::Firm(FirmId(1))) == 1
    })
    .await;
    core.apply(&[insert(4, 103, now_nanos())]).await.unwrap();
    assert_eq!(client.recv_header().await.unwrap().count, 1);
    client.recv_orders(&mut orders).await.unwrap();

    let figures = scrape();
    let tcp = [("protocol", "tcp")];
    let shard = [("shard", "0")];
    assert_eq!(figures.get(SEQ, &shard), Some(4.0));
    assert_eq!(figures.get(EVENTS_WRITTEN, &shard), Some(4.0));
    assert_eq!(figures.get(BATCHES_WRITTEN, &shard), Some(3.0));
    assert_eq!(figures.get(READS, &tcp), Some(3.0));
    assert_eq!(figures.get(READS_EMPTY, &tcp), Some(1.0));
    assert_eq!(figures.get(TIMEOUTS, &tcp), Some(1.0));
    assert_eq!(figures.get(WAKEUPS, &tcp), Some(1.0));
    assert_eq!(figures.get(&format!("{READ_ROWS}_sum"), &tcp), Some(4.0));
    assert_eq!(figures.get(&format!("{READ_LAG}_count"), &tcp), Some(2.0));
    assert_eq!(figures.get(READS, &[("protocol", "http")]), Some(0.0));
    shutdown.cancel();
}
