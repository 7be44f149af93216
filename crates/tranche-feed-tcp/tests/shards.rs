//! A feed of several shards over the TCP protocol on loopback: cores by shard, reads
//! by vector cursor.

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tranche_feed::*;
use tranche_feed_service::{FeedService, FeedTokens};
use tranche_feed_tcp::{
    ClientError, CoreConnection, ErrorCode, FeedClient, ReadRequest, ServerError, VectorRead,
};

struct Feed {
    addr: SocketAddr,
    shards: Shards,
    _dir: tempfile::TempDir,
}

async fn start(count: usize, tokens: FeedTokens) -> Feed {
    start_with(count, tokens, |_| {}).await
}

/// A server over shards `prepare` wrote to first (with the writers the tasks get).
async fn start_with(count: usize, tokens: FeedTokens, prepare: impl FnOnce(&mut [Writer])) -> Feed {
    let dir = tempfile::tempdir().unwrap();
    let (shards, mut writers) = Shards::open(dir.path(), count, FeedOptions::default()).unwrap();
    prepare(&mut writers);
    let (ingest, _tasks) = tranche_feed_service::spawn_writers(writers, None);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(tranche_feed_tcp::serve_feed(
        listener,
        FeedService::primary(shards.clone(), ingest),
        tokens,
        CancellationToken::new(),
    ));
    Feed {
        addr,
        shards,
        _dir: dir,
    }
}

/// An insert of shard `shard` (its id's top digits), created in seq order across
/// shards.
fn insert(shard: u64, seq: u64, firm: u32) -> Event {
    Event::Insert(NewOrder {
        seq,
        rec: seq,
        id: OrderId(shard * 1_000_000 + seq),
        firm: FirmId(firm),
        broker: BrokerId(firm * 10),
        instrument: InstrumentId(1),
        side: Side::Buy,
        price: 10_125,
        quantity: 500,
        created_at: 1_700_000_000_000_000_000 + seq * 10 + shard,
    })
}

fn ids(orders: &[Order]) -> Vec<u64> {
    orders.iter().map(|o| o.id.0).collect()
}

fn server_error(result: Result<impl std::fmt::Debug, ClientError>) -> (bool, ServerError) {
    match result {
        Err(ClientError::Server(e)) => (true, e),
        Err(ClientError::Refused(e)) => (false, e),
        other => panic!("expected an ERROR from the server, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cores_write_their_own_shard_and_a_readv_reads_every_shard() {
    let feed = start(2, FeedTokens::default()).await;
    let mut core0 = CoreConnection::connect(feed.addr, None).await.unwrap();
    let mut core1 = CoreConnection::connect_shard(feed.addr, None, 1)
        .await
        .unwrap();
    core0
        .apply(&[insert(0, 1, 1), insert(0, 2, 2)])
        .await
        .unwrap();
    let ack = core1.apply(&[insert(1, 1, 1)]).await.unwrap();
    assert_eq!(ack.position, Cursor::new(1, 1));
    // A reconnecting core learns its own shard's marks.
    let again = CoreConnection::connect_shard(feed.addr, None, 1)
        .await
        .unwrap();
    assert_eq!(again.welcome().marks, (1, 1));

    let mut client = FeedClient::connect(feed.addr, None).await.unwrap();
    let mut read = VectorRead::new(&VectorCursor::START, Filter::All);
    read.wait_ms = 0;
    let mut orders = Vec::new();
    let header = client.read_vector(&read, &mut orders).await.unwrap();
    assert_eq!(ids(&orders), [1, 1_000_001, 2]);
    assert_eq!(header.count, 3);
    assert_eq!(header.next.position(0), Cursor::new(2, 2));
    assert_eq!(header.next.position(1), Cursor::new(1, 1));

    // A waiting READV is woken by a write to its firm in shard 1.
    let mut waiting = VectorRead::new(&header.next, Filter::Firm(FirmId(1)));
    waiting.wait_ms = 20_000;
    client.send_read_vector(&waiting).await.unwrap();
    tranche_test_support::poll_until("the read waits", std::time::Duration::from_secs(10), || {
        feed.shards.waiting(Filter::Firm(FirmId(1))) > 0
    })
    .await;
    core0.apply(&[insert(0, 3, 2)]).await.unwrap();
    core1.apply(&[insert(1, 2, 1)]).await.unwrap();
    let header = client.recv_vector_header().await.unwrap();
    orders.clear();
    client.recv_orders(&mut orders).await.unwrap();
    assert_eq!(ids(&orders), [1_000_002]);
    assert!(header.server_wait_us < 10_000_000);

    // A tampered vector cursor is answered and the connection goes on.
    let mut bytes = header.next.to_bytes().to_vec();
    bytes[5] ^= 1;
    let mut bad = read;
    bad.cursor = tranche_feed_tcp::CursorBytes::from_slice(&bytes).unwrap();
    let (closes, error) = server_error(client.read_vector(&bad, &mut orders).await);
    assert!(!closes);
    assert_eq!(error.code, ErrorCode::BadCursor);
    assert!(error.message.contains("checksum mismatch"), "{error}");
    let three = VectorCursor::from_positions(&[Cursor::START; 3]).unwrap();
    let (closes, error) = server_error(
        client
            .read_vector(&VectorRead::new(&three, Filter::All), &mut orders)
            .await,
    );
    assert!(!closes);
    assert_eq!(error.code, ErrorCode::BadCursor);
    assert!(error.message.contains("names 3 shards, this feed has 2"));
    orders.clear();
    client.read_vector(&read, &mut orders).await.unwrap();
    assert_eq!(orders.len(), 5);

    // A store's READ cannot carry the cursor of two shards: refused, naming READV.
    let (closes, error) = server_error(
        client
            .read(&ReadRequest::new(Cursor::START, Filter::All), &mut orders)
            .await,
    );
    assert!(closes);
    assert_eq!(
        (error.code, error.field.as_str()),
        (ErrorCode::Malformed, "kind")
    );
    assert!(error.message.contains("expected a READV (0x04)"), "{error}");

    // A shard the feed does not have.
    let (closes, error) = server_error(CoreConnection::connect_shard(feed.addr, None, 2).await);
    assert!(closes);
    assert_eq!(error.field, "shard");
    assert!(error
        .message
        .contains("expected a shard from 0 to 1, got 2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_firms_token_reads_only_its_firm_across_shards() {
    let tokens = FeedTokens::parse("core-1 core\nfirm-1 firm=1\nread-1 reader\n", "t").unwrap();
    let feed = start(2, tokens).await;
    for shard in [0u16, 1] {
        let mut core = CoreConnection::connect_shard(feed.addr, Some("core-1"), shard)
            .await
            .unwrap();
        let s = u64::from(shard);
        core.apply(&[insert(s, 1, 1), insert(s, 2, 2)])
            .await
            .unwrap();
    }
    let mut firm = FeedClient::connect(feed.addr, Some("firm-1"))
        .await
        .unwrap();
    let mut read = VectorRead::new(&VectorCursor::START, Filter::All);
    read.wait_ms = 0;
    let mut orders = Vec::new();
    firm.read_vector(&read, &mut orders).await.unwrap();
    assert_eq!(ids(&orders), [1, 1_000_001]);
    let (closes, error) = server_error(
        firm.read_vector(
            &VectorRead::new(&VectorCursor::START, Filter::Firm(FirmId(2))),
            &mut orders,
        )
        .await,
    );
    assert!(closes);
    assert_eq!(error.code, ErrorCode::Forbidden);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_too_old_in_one_shard_is_answered_with_the_oldest_served() {
    let cancel = |seq: u64, id: u64| {
        Event::Change(OrderChange {
            seq,
            id: OrderId(id),
            price: 10_125,
            quantity: 500,
            filled: 0,
            status: Status::Cancelled,
            updated_at: 1_700_000_000_000_000_000 + seq * 10,
        })
    };
    let feed = start_with(2, FeedTokens::default(), |writers| {
        writers[0].apply(&[insert(0, 1, 1)]).unwrap();
        writers[1]
            .apply(&[insert(1, 1, 1), insert(1, 2, 1), cancel(3, 1_000_001)])
            .unwrap();
        writers[1]
            .evict_terminal_through(Cursor::new(3, u64::MAX))
            .unwrap();
    })
    .await;
    let mut client = FeedClient::connect(feed.addr, None).await.unwrap();
    let old = VectorCursor::from_positions(&[Cursor::new(1, 1), Cursor::new(1, 1)]).unwrap();
    let mut read = VectorRead::new(&old, Filter::All);
    read.wait_ms = 0;
    let mut orders = Vec::new();
    let (closes, error) = server_error(client.read_vector(&read, &mut orders).await);
    assert!(!closes);
    assert_eq!(error.code, ErrorCode::CursorTooOld);
    let oldest = error.oldest.expect("the oldest cursor served");
    assert_eq!(oldest.position(0), Cursor::new(1, 1));
    assert_eq!(oldest.position(1), Cursor::new(3, u64::MAX));
    assert!(error.message.contains("shard 1"), "{error}");
    // Resuming from it (accepting the gap) works, on the same connection.
    read.cursor = (&oldest).into();
    let header = client.read_vector(&read, &mut orders).await.unwrap();
    assert_eq!(header.count, 0);
}
