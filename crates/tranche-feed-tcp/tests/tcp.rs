//! The TCP protocol over real sockets on loopback: ingest and delivery, errors and
//! tokens.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tranche_feed::*;
use tranche_feed_service::{FeedTokens, Ingest};
use tranche_feed_tcp::frame::{self, Frame, Kind, LEN_BYTES};
use tranche_feed_tcp::{
    Access, Ack, ClientError, CoreConnection, ErrorCode, FeedClient, ReadRequest, ServerError,
    MAX_FRAME_LEN,
};
use tranche_test_support::poll_until;

/// How long a test waits for what it polls.
const WAIT: Duration = Duration::from_secs(10);

struct Feed {
    addr: SocketAddr,
    store: Store,
    ingest: Ingest,
    shutdown: CancellationToken,
    served: JoinHandle<()>,
    dir: tempfile::TempDir,
}

async fn start() -> Feed {
    start_full(FeedTokens::default(), |_| {}).await
}

/// A server over a store `prepare` wrote to first (with the writer the task gets).
async fn start_full(tokens: FeedTokens, prepare: impl FnOnce(&mut Writer)) -> Feed {
    let dir = tempfile::tempdir().unwrap();
    start_in(dir, tokens, prepare).await
}

async fn start_in(
    dir: tempfile::TempDir,
    tokens: FeedTokens,
    prepare: impl FnOnce(&mut Writer),
) -> Feed {
    let (store, mut writer) = Store::open(dir.path(), FeedOptions::default()).unwrap();
    prepare(&mut writer);
    let (ingest, _task) = tranche_feed_service::spawn_writer(writer, None);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let served = tokio::spawn(tranche_feed_tcp::serve(
        listener,
        store.clone(),
        ingest.clone(),
        tokens,
        shutdown.clone(),
    ));
    Feed {
        addr,
        store,
        ingest,
        shutdown,
        served,
        dir,
    }
}

fn tokens() -> FeedTokens {
    FeedTokens::parse("core-1 core\nfirm-1 firm=1\nread-1 reader\n", "test").unwrap()
}

fn insert(seq: u64, id: u64, firm: u32) -> Event {
    Event::Insert(NewOrder {
        seq,
        rec: seq,
        id: OrderId(id),
        firm: FirmId(firm),
        broker: BrokerId(firm * 10),
        instrument: InstrumentId(1),
        side: Side::Buy,
        price: 10_125,
        quantity: 500,
        created_at: 1_700_000_000_000_000_000 + seq,
    })
}

fn cancel(seq: u64, id: u64) -> Event {
    Event::Change(OrderChange {
        seq,
        id: OrderId(id),
        price: 10_125,
        quantity: 500,
        filled: 0,
        status: Status::Cancelled,
        updated_at: 1_700_000_000_000_000_000 + seq,
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
async fn a_batch_is_acknowledged_once_logged_and_a_reconnecting_core_resumes_after_it() {
    let feed = start().await;
    let mut core = CoreConnection::connect(feed.addr, None).await.unwrap();
    assert_eq!(core.welcome().access, Access::Open);
    assert_eq!(core.welcome().marks, (0, 0));
    let ack = core
        .apply(&[insert(1, 100, 1), insert(2, 101, 2), cancel(3, 100)])
        .await
        .unwrap();
    // Before anything else: a copy of the store's files taken now holds the batch,
    // so it was in the log before the ACK left.
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(feed.dir.path()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
    }
    assert_eq!(
        ack,
        Ack {
            batch: 1,
            events: 3,
            position: Cursor::new(3, 1),
        }
    );
    let (copied, _writer) = Store::open(copy.path(), FeedOptions::default()).unwrap();
    assert_eq!(copied.len(), 2);
    assert_eq!(copied.get(OrderId(100)).unwrap().status, Status::Cancelled);
    assert_eq!(feed.store.newest(), ack.position);

    drop(core);
    let mut core = CoreConnection::connect(feed.addr, None).await.unwrap();
    assert_eq!(core.welcome().marks, (3, 2), "resume after seq 3, rec 2");
    let ack = core.apply(&[insert(4, 102, 1)]).await.unwrap();
    assert_eq!((ack.batch, ack.position), (1, Cursor::new(4, 4)));

    let mut client = FeedClient::connect(feed.addr, None).await.unwrap();
    let mut orders = Vec::new();
    let header = client
        .read(&ReadRequest::new(Cursor::START, Filter::All), &mut orders)
        .await
        .unwrap();
    assert_eq!(ids(&orders), [101, 100, 102]);
    assert_eq!(header.count, 3);
    assert_eq!(header.next, Cursor::new(4, 4));
    assert_eq!(
        header.oldest_created_at,
        Some(1_700_000_000_000_000_001),
        "order 100 was created first (seq 1)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_batches_are_acknowledged_in_order_a_refused_one_alone() {
    let feed = start().await;
    let mut core = CoreConnection::connect(feed.addr, None).await.unwrap();
    // 200 batches of 10 in flight at once; batch 50 repeats seq 1 (refused alone).
    let mut seq = 0;
    for batch in 1..=200u64 {
        let events: Vec<Event> = (0..10)
            .map(|_| {
                seq += 1;
                let at = if batch == 50 { 1 } else { seq };
                insert(at, seq, (seq % 3) as u32)
            })
            .collect();
        assert_eq!(core.send(&events).await.unwrap(), batch);
    }
    assert_eq!(core.in_flight(), 200);
    let mut last = Cursor::START;
    for batch in 1..=200u64 {
        let answer = core.recv_ack().await;
        if batch == 50 {
            let (closes, error) = server_error(answer);
            assert!(!closes);
            assert_eq!(error.code, ErrorCode::Refused);
            assert_eq!((error.id, error.index), (50, Some(0)));
            assert_eq!(error.field, "events[0].seq");
            assert_eq!(error.frame, 51, "HELLO was frame 1");
            continue;
        }
        let ack = answer.unwrap();
        assert_eq!((ack.batch, ack.events), (batch, 10));
        assert!(ack.position > last, "acks in order");
        last = ack.position;
    }
    assert_eq!(core.in_flight(), 0);
    assert_eq!(feed.store.len(), 1_990);
    assert!((491..=500).all(|id| feed.store.get(OrderId(id)).is_none()));
    assert_eq!(feed.store.newest(), last);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_batch_applies_nothing_and_the_connection_goes_on() {
    let feed = start().await;
    let (mut sender, mut acks) = CoreConnection::connect(feed.addr, None)
        .await
        .unwrap()
        .split();
    // Its third event changes an order nobody inserted.
    sender
        .send(&[insert(1, 100, 1), insert(2, 101, 1), cancel(3, 999)])
        .await
        .unwrap();
    let (closes, error) = server_error(acks.recv().await);
    assert!(!closes);
    assert_eq!(
        (error.code, error.id, error.index),
        (ErrorCode::Refused, 1, Some(2))
    );
    assert_eq!(error.field, "events[2].id");
    assert!(error.message.contains("expected a known order"), "{error}");
    assert!(feed.store.is_empty());
    sender.send(&[insert(1, 100, 1)]).await.unwrap();
    assert_eq!(acks.recv().await.unwrap().batch, 2);
    assert_eq!(feed.store.len(), 1);
    // Too many events never leave the client.
    let many = vec![insert(5, 5, 1); 65_537];
    assert!(matches!(
        sender.send(&many).await,
        Err(ClientError::TooLarge { got: 65_537, .. })
    ));
    assert_eq!(acks.in_flight(), 0);
}

/// A raw connection: sends `bytes`, closes its sending side if `finish`, and returns
/// every frame the server sends until it closes.
async fn raw_session(addr: SocketAddr, bytes: &[u8], finish: bool) -> Vec<(u8, Vec<u8>)> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    if finish {
        stream.shutdown().await.unwrap();
    }
    let mut frames = Vec::new();
    let read_all = async {
        loop {
            let mut len = [0u8; LEN_BYTES];
            match stream.read_exact(&mut len).await {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return,
                Err(e) => panic!("reading the server: {e}"),
            }
            let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
            stream.read_exact(&mut body).await.unwrap();
            frames.push((body[0], body[1..].to_vec()));
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read_all)
        .await
        .expect("the server closes the connection");
    frames
}

fn decoded(frame: &(u8, Vec<u8>)) -> Frame<'_> {
    frame::decode(0, frame.0, &frame.1).unwrap()
}

fn hello(token: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode_hello(token, &mut out);
    out
}

fn batch(number: u64, events: &[Event]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode_batch(number, events, &mut out);
    out
}

fn raw(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = ((body.len() + 1) as u32).to_le_bytes().to_vec();
    out.push(kind);
    out.extend_from_slice(body);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_frame_is_answered_naming_frame_and_field_then_the_connection_closes() {
    let good = batch(1, &[insert(1, 100, 1), insert(2, 101, 2)]);
    let mut bad_side = batch(2, &[insert(3, 102, 1), insert(4, 103, 1)]);
    bad_side[LEN_BYTES + 1 + 16 + 64 + 1] = 9;
    let mut count_mismatch = batch(2, &[insert(3, 102, 1)]);
    count_mismatch[LEN_BYTES + 1 + 8] = 2;
    let mut truncated = batch(2, &[insert(3, 102, 1), insert(4, 103, 1)]);
    truncated.truncate(60);
    let mut bad_filter = Vec::new();
    frame::encode_read(
        1,
        &ReadRequest::new(Cursor::START, Filter::All),
        &mut bad_filter,
    );
    bad_filter[LEN_BYTES + 1 + 29] = 7;
    let mut ack = Vec::new();
    frame::encode_ack(
        &Ack {
            batch: 1,
            events: 1,
            position: Cursor::new(1, 1),
        },
        &mut ack,
    );
    // (what, frame 3, whether the client then closes its side, field named)
    let cases: Vec<(&str, Vec<u8>, bool, &str)> = vec![
        ("a bad side", bad_side, false, "events[1].side"),
        ("an unknown kind", raw(0x7e, &[0; 16]), false, "kind"),
        (
            "a zero length",
            0u32.to_le_bytes().to_vec(),
            false,
            "length",
        ),
        (
            "a length over the limit",
            (MAX_FRAME_LEN + 1).to_le_bytes().to_vec(),
            false,
            "length",
        ),
        ("a count the length belies", count_mismatch, false, "length"),
        (
            "a batch number not above the last",
            batch(1, &[insert(3, 102, 1)]),
            false,
            "batch",
        ),
        ("a second HELLO", hello(b""), false, "kind"),
        ("a server's frame", ack, false, "kind"),
        ("a frame cut short", truncated, true, "body"),
        ("a bad filter", bad_filter, false, "filter"),
    ];
    for (what, bytes, finish, field) in cases {
        let feed = start().await;
        let mut session = hello(b"");
        session.extend_from_slice(&good);
        session.extend_from_slice(&bytes);
        if !finish {
            // Sent after the bad frame: never read, never applied.
            session.extend_from_slice(&batch(3, &[insert(10, 110, 1)]));
        }
        let frames = raw_session(feed.addr, &session, finish).await;
        let kinds: Vec<Kind> = frames.iter().map(|f| decoded(f).kind()).collect();
        assert_eq!(kinds, [Kind::Welcome, Kind::Ack, Kind::Error], "{what}");
        let Frame::Error(error) = decoded(&frames[2]) else {
            unreachable!()
        };
        assert_eq!(error.code, ErrorCode::Malformed, "{what}: {error}");
        assert_eq!(
            (error.frame, error.field.as_str()),
            (3, field),
            "{what}: {error}"
        );
        assert!(error.message.starts_with("frame 3"), "{what}: {error}");
        assert_eq!(
            ids(&feed
                .store
                .read(Cursor::START, Filter::All, 10)
                .unwrap()
                .orders),
            [100, 101],
            "{what}"
        );
    }

    // Before the HELLO: told why, closed.
    let feed = start().await;
    let mut bad_magic = hello(b"");
    bad_magic[LEN_BYTES + 1..LEN_BYTES + 5].copy_from_slice(b"HTTP");
    let http = b"GET /v1/feed/orders HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    for (what, bytes, field) in [
        ("a bad magic", bad_magic, "magic"),
        ("a batch first", good.clone(), "kind"),
        ("an HTTP request", http, "length"),
    ] {
        let frames = raw_session(feed.addr, &bytes, false).await;
        assert_eq!(frames.len(), 1, "{what}");
        let Frame::Error(error) = decoded(&frames[0]) else {
            panic!("{what}: not an error")
        };
        assert_eq!(
            (error.code, error.frame, error.field.as_str()),
            (ErrorCode::Malformed, 1, field),
            "{what}: {error}"
        );
    }
    assert!(feed.store.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_read_is_woken_by_a_write_to_its_firm() {
    let feed = start().await;
    feed.ingest.apply(vec![insert(1, 100, 1)]).await.unwrap();
    let mut client = FeedClient::connect(feed.addr, None).await.unwrap();
    let mut read = ReadRequest::new(Cursor::new(1, 1), Filter::Firm(FirmId(1)));
    read.wait_ms = 25_000;
    client.send_read(&read).await.unwrap();
    poll_until("the read waits on firm 1", WAIT, || {
        feed.store.waiting(Filter::Firm(FirmId(1))) == 1
    })
    .await;
    let written = Instant::now();
    feed.ingest.apply(vec![insert(2, 101, 1)]).await.unwrap();
    let header = client.recv_header().await.unwrap();
    assert!(
        written.elapsed() < Duration::from_secs(10),
        "woken, not timed out"
    );
    assert_eq!(header.count, 1);
    assert!(header.server_wait_us > 0);
    let mut orders = Vec::new();
    client.recv_orders(&mut orders).await.unwrap();
    assert_eq!(ids(&orders), [101]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_waits_for_min_batch_orders_of_its_filter() {
    let feed = start().await;
    let mut client = FeedClient::connect(feed.addr, None).await.unwrap();
    let mut read = ReadRequest::new(Cursor::START, Filter::Firm(FirmId(1)));
    read.min_batch = 2;
    read.wait_ms = 25_000;
    let poll = tokio::spawn(async move {
        let mut orders = Vec::new();
        let header = client.read(&read, &mut orders).await.unwrap();
        (header, orders)
    });
    let firm1 = Filter::Firm(FirmId(1));
    poll_until("the read waits", WAIT, || feed.store.waiting(firm1) == 1).await;
    feed.ingest.apply(vec![insert(1, 100, 1)]).await.unwrap();
    // Another firm's order does not count.
    feed.ingest.apply(vec![insert(2, 200, 2)]).await.unwrap();
    poll_until("the read was woken", WAIT, || {
        feed.store.signals_sent(firm1) >= 1
    })
    .await;
    assert!(!poll.is_finished(), "one order of two must not answer");
    assert_eq!(feed.store.waiting(firm1), 1, "back to waiting");
    feed.ingest.apply(vec![insert(3, 101, 1)]).await.unwrap();
    let (header, orders) = poll.await.unwrap();
    assert_eq!(header.count, 2);
    assert_eq!(ids(&orders), [100, 101]);
    assert_eq!(header.next, Cursor::new(3, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_linger_a_read_waits_for_the_first_order_then_answers_short_of_min_batch() {
    let feed = start().await;
    let mut client = FeedClient::connect(feed.addr, None).await.unwrap();
    let mut read = ReadRequest::new(Cursor::START, Filter::Firm(FirmId(1)));
    read.min_batch = 5;
    read.wait_ms = 25_000;
    read.linger_us = 50_000;
    let poll = tokio::spawn(async move {
        let mut orders = Vec::new();
        let header = client.read(&read, &mut orders).await.unwrap();
        (Instant::now(), header, orders)
    });
    // Nothing ready: a long poll, not an answer after the linger.
    let firm1 = Filter::Firm(FirmId(1));
    poll_until("the read waits", WAIT, || feed.store.waiting(firm1) == 1).await;
    let applied = Instant::now();
    feed.ingest.apply(vec![insert(1, 100, 1)]).await.unwrap();
    let (answered, header, orders) = poll.await.unwrap();
    // One order of five, answered once the linger passed, well before wait_ms.
    assert_eq!(header.count, 1);
    assert_eq!(ids(&orders), [100]);
    let took = answered - applied;
    assert!(took >= Duration::from_millis(50), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_wait_ms_a_read_answers_what_is_ready() {
    let feed = start().await;
    feed.ingest
        .apply(vec![insert(1, 100, 1), insert(2, 101, 1)])
        .await
        .unwrap();
    let mut client = FeedClient::connect(feed.addr, None).await.unwrap();
    let mut read = ReadRequest::new(Cursor::START, Filter::All);
    read.min_batch = 5;
    read.wait_ms = 300;
    let began = Instant::now();
    let mut orders = Vec::new();
    let header = client.read(&read, &mut orders).await.unwrap();
    let took = began.elapsed();
    assert_eq!(header.count, 2);
    assert_eq!(ids(&orders), [100, 101]);
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(header.server_wait_us >= 300_000, "{header:?}");
    // Nothing at all: an empty answer, the cursor unchanged.
    read.cursor = header.next.to_bytes();
    read.wait_ms = 0;
    orders.clear();
    let empty = client.read(&read, &mut orders).await.unwrap();
    assert_eq!((empty.count, empty.next), (0, header.next));
    assert_eq!(empty.oldest_created_at, None);
    assert!(orders.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_comes_first_so_the_next_request_goes_before_the_body() {
    let feed = start().await;
    let events: Vec<Event> = (1..=3_000).map(|i| insert(i, i, 1)).collect();
    feed.ingest.apply(events).await.unwrap();

    // On the wire: the first frame of the answer is the 64-byte HEADER alone.
    let mut stream = TcpStream::connect(feed.addr).await.unwrap();
    let mut read = ReadRequest::new(Cursor::START, Filter::All);
    read.limit = 2_000;
    let mut out = hello(b"");
    frame::encode_read(1, &read, &mut out);
    stream.write_all(&out).await.unwrap();
    let mut welcome = [0u8; LEN_BYTES + 1 + 28];
    stream.read_exact(&mut welcome).await.unwrap();
    let mut header = [0u8; LEN_BYTES + 1 + 64];
    stream.read_exact(&mut header).await.unwrap();
    let Frame::Header(header) = frame::decode(1, header[4], &header[5..]).unwrap() else {
        panic!("the answer does not start with a HEADER")
    };
    assert_eq!(
        (header.count, header.next),
        (2_000, Cursor::new(2_000, 2_000))
    );

    // With the client: the next request is sent between the header and the orders.
    let mut client = FeedClient::connect(feed.addr, None).await.unwrap();
    let mut orders = Vec::new();
    client.send_read(&read).await.unwrap();
    let first = client.recv_header().await.unwrap();
    assert!(matches!(
        client.recv_header().await,
        Err(ClientError::OutOfTurn(_))
    ));
    read.cursor = first.next.to_bytes();
    assert_eq!(client.send_read(&read).await.unwrap(), 2);
    client.recv_orders(&mut orders).await.unwrap();
    assert_eq!(orders.len(), 2_000);
    let second = client.recv_header().await.unwrap();
    assert_eq!((second.request, second.count), (2, 1_000));
    client.recv_orders(&mut orders).await.unwrap();
    assert_eq!(ids(&orders), (1..=3_000).collect::<Vec<_>>());

    // Split: the orders are read by a task of their own while the next request goes.
    let (mut sender, mut answers) = FeedClient::connect(feed.addr, None).await.unwrap().split();
    read.cursor = Cursor::START.to_bytes();
    sender.send_read(&read).await.unwrap();
    let first = answers.recv_header().await.unwrap();
    let body = tokio::spawn(async move {
        let mut orders = Vec::new();
        answers.recv_orders(&mut orders).await.unwrap();
        (answers, orders)
    });
    read.cursor = first.next.to_bytes();
    sender.send_read(&read).await.unwrap();
    let (mut answers, mut orders) = body.await.unwrap();
    assert_eq!(answers.recv_header().await.unwrap().count, 1_000);
    answers.recv_orders(&mut orders).await.unwrap();
    assert_eq!(ids(&orders), (1..=3_000).collect::<Vec<_>>());
    assert_eq!(answers.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursors_too_old_malformed_or_ahead_are_answered_and_the_connection_goes_on() {
    let feed = start_full(FeedTokens::default(), |writer| {
        writer.apply(&[insert(1, 7, 1)]).unwrap();
        writer.apply(&[cancel(2, 7)]).unwrap();
        writer.apply(&[insert(3, 8, 1)]).unwrap();
        writer.evict_terminal_through(Cursor::new(2, 1)).unwrap();
    })
    .await;
    let mut client = FeedClient::connect(feed.addr, None).await.unwrap();
    let mut orders = Vec::new();
    let ask = |cursor: [u8; 21]| {
        let mut read = ReadRequest::new(Cursor::START, Filter::All);
        read.cursor = cursor;
        read
    };

    let (closes, error) = server_error(
        client
            .read(&ask(Cursor::new(1, 1).to_bytes()), &mut orders)
            .await,
    );
    assert!(!closes);
    assert_eq!(error.code, ErrorCode::CursorTooOld);
    assert_eq!(error.oldest, Some(Cursor::new(2, 1).into()));
    assert_eq!(
        (error.field.as_str(), error.id, error.frame),
        ("cursor", 1, 2)
    );

    let mut forged = Cursor::new(3, 3).to_bytes();
    forged[10] ^= 1;
    let (closes, error) = server_error(client.read(&ask(forged), &mut orders).await);
    assert!(!closes);
    assert_eq!(error.code, ErrorCode::BadCursor);
    assert_eq!(
        error.message,
        "malformed cursor: checksum mismatch (altered or mistyped)"
    );
    let mut other_version = Cursor::new(3, 3).to_bytes();
    other_version[0] = 9;
    let (_, error) = server_error(client.read(&ask(other_version), &mut orders).await);
    assert_eq!(error.code, ErrorCode::BadCursor);
    assert!(
        error.message.contains("expected version 1, got 9"),
        "{error}"
    );

    let (closes, error) = server_error(
        client
            .read(&ask(Cursor::new(99, 99).to_bytes()), &mut orders)
            .await,
    );
    assert!(!closes);
    assert_eq!(error.code, ErrorCode::CursorAhead);

    // Resuming from the oldest cursor served, on the same connection.
    let header = client
        .read(&ask(Cursor::new(2, 1).to_bytes()), &mut orders)
        .await
        .unwrap();
    assert_eq!((header.request, header.count), (5, 1));
    assert_eq!(ids(&orders), [8]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_firms_token_reads_only_its_firm_and_may_not_write() {
    let feed = start_full(tokens(), |_| {}).await;
    let mut core = CoreConnection::connect(feed.addr, Some("core-1"))
        .await
        .unwrap();
    assert_eq!(core.welcome().access, Access::Core);
    let events: Vec<Event> = (1..=30).map(|i| insert(i, i, (i % 3) as u32)).collect();
    core.apply(&events).await.unwrap();

    let mut firm = FeedClient::connect(feed.addr, Some("firm-1"))
        .await
        .unwrap();
    assert_eq!(firm.welcome().access, Access::Firm(FirmId(1)));
    assert_eq!(
        firm.welcome().marks,
        (0, 0),
        "a reader learns nothing of writes"
    );
    let mut orders = Vec::new();
    // Asking for every order, it gets its firm's.
    firm.read(&ReadRequest::new(Cursor::START, Filter::All), &mut orders)
        .await
        .unwrap();
    assert_eq!(orders.len(), 10);
    assert!(orders.iter().all(|o| o.firm == FirmId(1)), "{orders:?}");
    orders.clear();
    firm.read(
        &ReadRequest::new(Cursor::START, Filter::Firm(FirmId(1))),
        &mut orders,
    )
    .await
    .unwrap();
    assert_eq!(orders.len(), 10);

    for other in [
        Filter::Firm(FirmId(2)),
        Filter::Broker(BrokerId(20)),
        Filter::Instrument(InstrumentId(1)),
    ] {
        let mut firm = FeedClient::connect(feed.addr, Some("firm-1"))
            .await
            .unwrap();
        let mut orders = Vec::new();
        let (closes, error) = server_error(
            firm.read(&ReadRequest::new(Cursor::START, other), &mut orders)
                .await,
        );
        assert!(closes);
        assert_eq!(error.code, ErrorCode::Forbidden, "{other:?}");
        assert!(error.message.contains("firm 1's orders only"), "{error}");
        assert!(orders.is_empty());
        assert!(matches!(firm.recv_header().await, Err(ClientError::Closed)));
    }

    let mut writer = CoreConnection::connect(feed.addr, Some("firm-1"))
        .await
        .unwrap();
    let (closes, error) = server_error(writer.apply(&[insert(31, 31, 1)]).await);
    assert!(closes);
    assert_eq!(error.code, ErrorCode::Forbidden);
    assert_eq!(feed.store.len(), 30, "nothing of it applied");

    // A reader's frames are small: a large one is refused before it is buffered.
    let mut session = hello(b"firm-1");
    let events: Vec<Event> = (31..=130).map(|i| insert(i, i, 1)).collect();
    session.extend_from_slice(&batch(1, &events));
    let frames = raw_session(feed.addr, &session, false).await;
    let Frame::Error(error) = decoded(&frames[1]) else {
        panic!("not an error: {frames:?}")
    };
    assert_eq!(
        (error.code, error.frame, error.field.as_str()),
        (ErrorCode::Malformed, 2, "length"),
        "{error}"
    );
    assert_eq!(feed.store.len(), 30);

    let mut reader = FeedClient::connect(feed.addr, Some("read-1"))
        .await
        .unwrap();
    let mut orders = Vec::new();
    reader
        .read(&ReadRequest::new(Cursor::START, Filter::All), &mut orders)
        .await
        .unwrap();
    assert_eq!(orders.len(), 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cores_token_may_not_read_and_unknown_tokens_are_refused() {
    let feed = start_full(tokens(), |_| {}).await;
    let mut core = FeedClient::connect(feed.addr, Some("core-1"))
        .await
        .unwrap();
    let mut orders = Vec::new();
    let (closes, error) = server_error(
        core.read(&ReadRequest::new(Cursor::START, Filter::All), &mut orders)
            .await,
    );
    assert!(closes);
    assert_eq!(error.code, ErrorCode::Forbidden);
    assert_eq!(error.message, "a core's token may not read");

    for token in [None, Some("core-2"), Some("")] {
        let (closes, error) = server_error(CoreConnection::connect(feed.addr, token).await);
        assert!(closes);
        assert_eq!(
            (error.code, error.field.as_str(), error.frame),
            (ErrorCode::Unauthorized, "token", 1),
            "{token:?}"
        );
        assert!(!error.message.contains("core-"), "no token in errors");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutting_down_answers_waiting_reads_then_closes_every_connection() {
    let feed = start().await;
    let mut client = FeedClient::connect(feed.addr, None).await.unwrap();
    let mut read = ReadRequest::new(Cursor::START, Filter::All);
    read.wait_ms = 25_000;
    client.send_read(&read).await.unwrap();
    poll_until("the read waits", WAIT, || {
        feed.store.waiting(Filter::All) == 1
    })
    .await;
    let mut core = CoreConnection::connect(feed.addr, None).await.unwrap();
    core.apply(&[insert(1, 1, 1)]).await.unwrap();
    // The read was answered by that write; wait on an empty filter instead.
    let header = client.recv_header().await.unwrap();
    let mut orders = Vec::new();
    client.recv_orders(&mut orders).await.unwrap();
    read.cursor = header.next.to_bytes();
    read.filter = Filter::Instrument(InstrumentId(9));
    client.send_read(&read).await.unwrap();
    poll_until("the read waits on instrument 9", WAIT, || {
        feed.store.waiting(Filter::Instrument(InstrumentId(9))) == 1
    })
    .await;

    let began = Instant::now();
    feed.shutdown.cancel();
    let header = client.recv_header().await.unwrap();
    assert_eq!(header.count, 0);
    assert!(began.elapsed() < Duration::from_secs(10));
    client.recv_orders(&mut orders).await.unwrap();
    let (closes, error) = server_error(client.recv_header().await);
    assert!(closes);
    assert_eq!(error.code, ErrorCode::ShuttingDown);
    let (_, error) = server_error(core.recv_ack().await);
    assert_eq!(error.code, ErrorCode::ShuttingDown);
    tokio::time::timeout(Duration::from_secs(10), feed.served)
        .await
        .expect("serve returns once every connection is closed")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_store_cannot_write_is_not_acknowledged() {
    let Some(disk) = tranche_test_support::SmallDisk::mount("2m") else {
        return;
    };
    let dir = tempfile::tempdir_in(disk.path()).unwrap();
    let feed = start_in(dir, FeedTokens::default(), |_| {}).await;
    let mut core = CoreConnection::connect(feed.addr, None).await.unwrap();
    core.apply(&[insert(1, 1, 1)]).await.unwrap();
    let filler = disk.fill_but("filler", 1_024);
    let events: Vec<Event> = (2..=200).map(|i| insert(i, i, 1)).collect();
    let (closes, error) = server_error(core.apply(&events).await);
    assert!(closes);
    assert_eq!((error.code, error.id), (ErrorCode::StoreFailed, 2));
    assert_eq!(feed.store.len(), 1, "nothing of it visible");
    std::fs::remove_file(filler).unwrap();
    let mut core = CoreConnection::connect(feed.addr, None).await.unwrap();
    assert_eq!(core.welcome().marks, (1, 1));
    assert_eq!(core.apply(&events).await.unwrap().events, 199);
}
