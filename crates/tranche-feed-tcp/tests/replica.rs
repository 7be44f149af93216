//! Read replicas over real sockets on loopback: catching up, following, surviving
//! the primary's restart and its own, starting over, refusing filtered reads, lag.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tranche_feed::*;
use tranche_feed_service::{FeedService, FeedTokens, Ingest};
use tranche_feed_tcp::{
    ClientError, CoreConnection, ErrorCode, FeedClient, Replica, ReplicaConfig, VectorRead,
};
use tranche_test_support::poll_until;

/// How long a test waits for what it polls.
const WAIT: Duration = Duration::from_secs(20);

/// A primary of several shards serving TCP, stoppable and restartable on its
/// directory.
struct Primary {
    addr: SocketAddr,
    shards: Shards,
    ingest: Vec<Ingest>,
    shutdown: CancellationToken,
    served: JoinHandle<()>,
    writers: Vec<JoinHandle<Result<(), StoreError>>>,
}

fn tokens() -> FeedTokens {
    FeedTokens::parse("core-1 core\nfirm-1 firm=1\nread-1 reader\n", "test").unwrap()
}

impl Primary {
    /// Opens `count` shards in `dir`, lets `prepare` write to them directly (as a
    /// retention task would evict), then serves them.
    async fn start(dir: &Path, count: usize, prepare: impl FnOnce(&mut [Writer])) -> Primary {
        let (shards, mut writers) = Shards::open(dir, count, FeedOptions::default()).unwrap();
        prepare(&mut writers);
        let (ingest, writers) = tranche_feed_service::spawn_writers(writers, None);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let served = tokio::spawn(tranche_feed_tcp::serve_feed(
            listener,
            FeedService::primary(shards.clone(), ingest.clone()),
            tokens(),
            shutdown.clone(),
        ));
        Primary {
            addr,
            shards,
            ingest,
            shutdown,
            served,
            writers,
        }
    }

    /// Stops serving and closes its stores (their writers synced).
    async fn stop(self) {
        self.shutdown.cancel();
        self.served.await.unwrap();
        drop(self.ingest);
        for writer in self.writers {
            writer.await.unwrap().unwrap();
        }
    }

    async fn write(&self, shard: usize, events: Vec<Event>) {
        self.ingest[shard].apply(events).await.unwrap();
    }

    /// Every order of every shard, by shard.
    fn state(&self) -> Vec<Vec<Order>> {
        state_of(&self.shards)
    }
}

fn state_of(shards: &Shards) -> Vec<Vec<Order>> {
    (0..shards.len())
        .map(|k| {
            shards
                .shard(k)
                .unwrap()
                .read(Cursor::START, Filter::All, MAX_READ_LIMIT)
                .unwrap()
                .orders
        })
        .collect()
}

/// A TCP forwarder with a fixed address in front of whichever primary runs now, so
/// that a restarted primary (on a new port) is reached at the replica's one address.
struct Proxy {
    addr: SocketAddr,
    backend: Arc<Mutex<SocketAddr>>,
}

impl Proxy {
    async fn start(backend: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let backend = Arc::new(Mutex::new(backend));
        let target = Arc::clone(&backend);
        tokio::spawn(async move {
            loop {
                let (mut inbound, _) = listener.accept().await.unwrap();
                let to = *target.lock();
                tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Proxy { addr, backend }
    }

    fn point_at(&self, backend: SocketAddr) {
        *self.backend.lock() = backend;
    }
}

/// A shard's book: inserts, fills and cancels with ids its own (the shard in the top
/// digits), numbering its own seq and rec.
struct Book {
    shard: u64,
    seq: u64,
    rec: u64,
    open: Vec<u64>,
}

impl Book {
    fn new(shard: u64) -> Book {
        Book {
            shard,
            seq: 0,
            rec: 0,
            open: Vec::new(),
        }
    }

    fn events(&mut self, n: usize, firm: u32) -> Vec<Event> {
        (0..n)
            .map(|i| {
                self.seq += 1;
                let at = 1_700_000_000_000_000_000 + self.seq * 10 + self.shard;
                if i % 3 == 2 && !self.open.is_empty() {
                    let id = self.open.remove(0);
                    Event::Change(OrderChange {
                        seq: self.seq,
                        id: OrderId(id),
                        price: 10,
                        quantity: 5,
                        filled: 0,
                        status: Status::Cancelled,
                        updated_at: at,
                    })
                } else {
                    self.rec += 1;
                    let id = self.shard * 1_000_000 + self.rec;
                    self.open.push(id);
                    Event::Insert(NewOrder {
                        seq: self.seq,
                        rec: self.rec,
                        id: OrderId(id),
                        firm: FirmId(firm),
                        broker: BrokerId(1),
                        instrument: InstrumentId(1),
                        side: Side::Buy,
                        price: 10,
                        quantity: 5,
                        created_at: at,
                    })
                }
            })
            .collect()
    }
}

fn config(primary: SocketAddr, dir: &Path) -> ReplicaConfig {
    let mut config = ReplicaConfig::new(
        primary.to_string(),
        Some("read-1".into()),
        dir.to_path_buf(),
    );
    config.heartbeat = Duration::from_millis(100);
    config.min_backoff = Duration::from_millis(10);
    config.max_backoff = Duration::from_millis(200);
    config
}

async fn caught_up(replica: &Replica, primary: &Primary) {
    let want = primary.state();
    poll_until("the replica holds the primary's state", WAIT, || {
        state_of(replica.shards()) == want && replica.lag().seqs_behind() == 0
    })
    .await;
}

/// A client of the replica following it by vector cursor: checks that per shard it
/// never goes back, and keeps the last version of every order.
struct Follower {
    client: FeedClient,
    cursor: VectorCursor,
    last: HashMap<u64, Cursor>,
    view: HashMap<OrderId, Order>,
}

impl Follower {
    async fn connect(addr: SocketAddr) -> Follower {
        Follower {
            client: FeedClient::connect(addr, Some("read-1")).await.unwrap(),
            cursor: VectorCursor::START,
            last: HashMap::new(),
            view: HashMap::new(),
        }
    }

    /// Reads until nothing more is ready.
    async fn drain(&mut self) {
        loop {
            let mut read = VectorRead::new(&self.cursor, Filter::All);
            read.wait_ms = 0;
            let mut orders = Vec::new();
            let header = self.client.read_vector(&read, &mut orders).await.unwrap();
            for order in &orders {
                let shard = order.id.0 / 1_000_000;
                let last = self.last.entry(shard).or_default();
                assert!(
                    order.position() > *last,
                    "shard {shard} went back: {order:?}"
                );
                *last = order.position();
                self.view.insert(order.id, *order);
            }
            self.cursor = header.next;
            if orders.is_empty() {
                return;
            }
        }
    }

    fn matches(&self, state: &[Vec<Order>]) -> bool {
        let mut want: Vec<Order> = state.iter().flatten().copied().collect();
        let mut got: Vec<Order> = self.view.values().copied().collect();
        want.sort_by_key(|o| o.id);
        got.sort_by_key(|o| o.id);
        got == want
    }
}

/// The replica served over TCP, as `tranche feed serve --replica-of` does.
async fn serve_replica(replica: &Replica) -> (SocketAddr, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(tranche_feed_tcp::serve_feed(
        listener,
        replica.service(),
        tokens(),
        stop.clone(),
    ));
    (addr, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_catches_up_from_empty_follows_live_writes_and_refuses_filtered_reads() {
    let primary_dir = tempfile::tempdir().unwrap();
    let primary = Primary::start(primary_dir.path(), 2, |_| {}).await;
    let mut books = [Book::new(0), Book::new(1)];
    for _ in 0..5 {
        for (shard, book) in books.iter_mut().enumerate() {
            primary
                .write(shard, book.events(40, 1 + shard as u32))
                .await;
        }
    }
    let replica_dir = tempfile::tempdir().unwrap();
    let replica = Replica::start(config(primary.addr, replica_dir.path()))
        .await
        .unwrap();
    caught_up(&replica, &primary).await;
    assert_eq!(
        replica.shards().len(),
        2,
        "it found the primary's second shard"
    );
    assert!(replica_dir.path().join("shard-1").is_dir());
    let lag = replica.lag();
    assert!(lag.connected(), "{lag:?}");
    assert_eq!(lag.seqs_behind(), 0);
    assert_eq!(lag.shards[1].primary_seq, 200);

    // Live writes, through cores of both shards, are followed.
    let (addr, _stop) = serve_replica(&replica).await;
    let mut follower = Follower::connect(addr).await;
    follower.drain().await;
    for shard in [1u16, 0] {
        let mut core = CoreConnection::connect_shard(primary.addr, Some("core-1"), shard)
            .await
            .unwrap();
        for _ in 0..3 {
            core.apply(&books[usize::from(shard)].events(25, 2))
                .await
                .unwrap();
        }
    }
    caught_up(&replica, &primary).await;
    follower.drain().await;
    assert!(follower.matches(&primary.state()));

    // Unfiltered only; no batches.
    let mut client = FeedClient::connect(addr, Some("read-1")).await.unwrap();
    let mut orders = Vec::new();
    let filtered = VectorRead::new(&VectorCursor::START, Filter::Firm(FirmId(1)));
    match client.read_vector(&filtered, &mut orders).await {
        Err(ClientError::Server(error)) => {
            assert_eq!(
                (error.code, error.field.as_str()),
                (ErrorCode::Forbidden, "filter")
            );
            assert!(error.message.contains("unfiltered reads only"), "{error}");
        }
        other => panic!("expected the filtered read refused, got {other:?}"),
    }
    match FeedClient::connect(addr, Some("firm-1")).await {
        Ok(mut firm) => {
            let all = VectorRead::new(&VectorCursor::START, Filter::All);
            assert!(
                firm.read_vector(&all, &mut orders).await.is_err(),
                "a firm's read is filtered"
            );
        }
        Err(error) => panic!("a firm's token connects: {error}"),
    }
    match CoreConnection::connect(addr, Some("core-1")).await {
        Err(ClientError::Server(error)) => {
            assert_eq!(error.code, ErrorCode::Forbidden);
            assert!(error.message.contains("read replica"), "{error}");
        }
        other => panic!("expected a core refused by the replica, got {other:?}"),
    }
    replica.stop().await.unwrap();
    primary.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_survives_the_primarys_restart_and_its_own_and_reports_its_lag() {
    let primary_dir = tempfile::tempdir().unwrap();
    let primary = Primary::start(primary_dir.path(), 1, |_| {}).await;
    let proxy = Proxy::start(primary.addr).await;
    let mut books = [Book::new(0), Book::new(1)];
    primary.write(0, books[0].events(100, 1)).await;
    let replica_dir = tempfile::tempdir().unwrap();
    let replica = Replica::start(config(proxy.addr, replica_dir.path()))
        .await
        .unwrap();
    caught_up(&replica, &primary).await;
    let (addr, stop_serving) = serve_replica(&replica).await;
    let mut follower = Follower::connect(addr).await;
    follower.drain().await;

    // The primary stops: the replica says it is disconnected, and its lag grows.
    primary.stop().await;
    poll_until("the replica notices", WAIT, || !replica.lag().connected()).await;
    let before = replica.lag().seconds_behind();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(replica.lag().seconds_behind() > before);

    // It comes back with a second shard (on another port): the replica reconnects,
    // resumes, and follows the new shard too.
    let primary = Primary::start(primary_dir.path(), 2, |_| {}).await;
    proxy.point_at(primary.addr);
    primary.write(0, books[0].events(30, 1)).await;
    primary.write(1, books[1].events(30, 2)).await;
    caught_up(&replica, &primary).await;
    assert_eq!(replica.shards().len(), 2);
    assert!(replica.lag().connected());
    follower.drain().await;
    assert!(
        follower.matches(&primary.state()),
        "nothing missed across the restart"
    );

    // The replica restarts: it resumes from its own position, not from the start.
    stop_serving.cancel();
    let held = replica.lag();
    replica.stop().await.unwrap();
    primary.write(0, books[0].events(20, 1)).await;
    let replica = Replica::start(config(proxy.addr, replica_dir.path()))
        .await
        .unwrap();
    let resumed = replica.lag();
    assert_eq!(
        resumed
            .shards
            .iter()
            .map(|s| s.applied_seq)
            .collect::<Vec<_>>(),
        held.shards
            .iter()
            .map(|s| s.applied_seq)
            .collect::<Vec<_>>(),
        "it starts from what it had applied"
    );
    caught_up(&replica, &primary).await;
    assert_eq!(
        replica.lag().shards.iter().map(|s| s.resyncs).sum::<u64>(),
        0
    );
    let (addr, _stop) = serve_replica(&replica).await;
    // The client's cursor from before the replica's restart is valid after it.
    follower.client = FeedClient::connect(addr, Some("read-1")).await.unwrap();
    follower.drain().await;
    assert!(follower.matches(&primary.state()));
    replica.stop().await.unwrap();
    primary.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_behind_the_primarys_eviction_starts_over_and_ends_equal() {
    let primary_dir = tempfile::tempdir().unwrap();
    let mut book = Book::new(0);
    let primary = Primary::start(primary_dir.path(), 1, |_| {}).await;
    primary.write(0, book.events(60, 1)).await;
    let replica_dir = tempfile::tempdir().unwrap();
    let replica = Replica::start(config(primary.addr, replica_dir.path()))
        .await
        .unwrap();
    caught_up(&replica, &primary).await;
    replica.stop().await.unwrap();
    primary.stop().await;

    // While the replica is away, orders it holds open end and are evicted.
    let later = book.events(60, 1);
    let primary = Primary::start(primary_dir.path(), 1, |writers| {
        writers[0].apply(&later).unwrap();
        let newest = writers[0].store().newest();
        assert!(writers[0].evict_terminal_through(newest).unwrap() > 0);
    })
    .await;
    let replica = Replica::start(config(primary.addr, replica_dir.path()))
        .await
        .unwrap();
    caught_up(&replica, &primary).await;
    assert_eq!(replica.lag().shards[0].resyncs, 1);
    assert_eq!(
        replica.shards().oldest(),
        primary.shards.oldest(),
        "it adopted the primary's floor"
    );
    replica.stop().await.unwrap();
    primary.stop().await;
}
