//! The emulators against real feed servers (`tranche-feed-http` and
//! `tranche-feed-tcp` on loopback ports): two cores into one server of two shards,
//! firms' clients on it and an unfiltered one on its replica, see no omission and no
//! reordering over either protocol (and so do two shards on servers of their own); a
//! link that loses a row and swaps two rows of a shard is caught; a core whose target
//! does not answer stops saying it fell behind.

use std::time::Duration;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tranche_feed::{Durability, Event, Filter};
use tranche_feed_emulate::*;

const SEED: u64 = 5;

fn book() -> BookConfig {
    BookConfig {
        firms: 4,
        resting_orders: 300,
        burst_every: 1_000,
        burst_length: 200,
        ..BookConfig::default()
    }
}

fn core_plan() -> CorePlan {
    CorePlan {
        rate: 3_000.0,
        duration: Duration::from_millis(1_500),
        tick: Duration::from_millis(2),
        seed: SEED,
        book: book(),
        max_batch: 10_000,
        max_backlog: Duration::from_secs(20),
        reconnect: None,
    }
}

fn clients_plan() -> ClientsPlan {
    ClientsPlan {
        filtered: 4,
        unfiltered: 1,
        firms: 4,
        limit: 200,
        min_batch: 10,
        wait_ms: 50,
        // Both transports carry the linger, and the pages it cuts short are checked
        // like the rest.
        linger_us: 2_000,
        pipeline: true,
        drain_timeout: Duration::from_secs(30),
        reconnect: None,
    }
}

/// The servers of a run: one per shard, or one of several shards; replicas, if any.
struct Servers {
    servers: Vec<LoopbackServer>,
    replicas: Vec<LoopbackServer>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Servers {
    async fn stop(self) {
        for server in self.replicas.into_iter().chain(self.servers) {
            server.stop(Duration::from_secs(10)).await.unwrap();
        }
    }
}

/// `n` one-shard servers (a target per shard).
async fn servers(n: usize) -> Servers {
    let mut servers = Vec::new();
    let mut dirs = Vec::new();
    for _ in 0..n {
        let dir = tempfile::tempdir().unwrap();
        servers.push(serve_loopback(dir.path(), Durability::Never).await.unwrap());
        dirs.push(dir);
    }
    Servers {
        servers,
        replicas: Vec::new(),
        _dirs: dirs,
    }
}

/// One server of `shards` shards and a read replica of it.
async fn sharded_with_replica(shards: usize) -> Servers {
    let (primary_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let primary = serve_loopback_shards(primary_dir.path(), shards, Durability::Never)
        .await
        .unwrap();
    let replica = serve_loopback_replica(replica_dir.path(), primary.tcp, Durability::Never)
        .await
        .unwrap();
    assert!(replica.is_replica() && !primary.is_replica());
    Servers {
        servers: vec![primary],
        replicas: vec![replica],
        _dirs: vec![primary_dir, replica_dir],
    }
}

/// Orders a server's readers received, from its `/metrics`.
async fn rows_read(server: &LoopbackServer) -> f64 {
    let text = reqwest::get(server.url.join("metrics").unwrap())
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let scrape = tranche_feed_service::metrics::Scrape::parse(&text).unwrap();
    ["http", "tcp"]
        .iter()
        .map(|p| scrape.value("tranche_feed_read_rows_sum", &[("protocol", p)]))
        .sum()
}

/// Runs the core and the clients together; the clients' final state is replayed from
/// the core's report.
async fn run<C: Connector>(connector: &C) -> (CoreReport, ClientsReport) {
    let stop = CancellationToken::new();
    let (tx, rx) = oneshot::channel();
    let core = async {
        let report = run_core(connector, &core_plan(), stop.clone()).await;
        let _ = tx.send(report.as_ref().ok().map(|r| r.events.clone()));
        report
    };
    let expected = async {
        let events = rx.await.ok().flatten()?;
        Some(Expected::replay(&book(), SEED, &events))
    };
    let plan = clients_plan();
    let both = async { tokio::join!(core, run_clients(connector, &plan, expected, stop.clone())) };
    let (core, clients) = tokio::time::timeout(Duration::from_secs(120), both)
        .await
        .expect("the run ends within two minutes");
    (core.unwrap(), clients.unwrap())
}

/// Two shards, four firms' clients and one unfiltered, over `connector`: the
/// servers hold the replayed final state, and the clients saw all of it in order.
async fn two_shards_and_five_clients<C: Connector>(servers: Servers, connector: C) {
    let (core, clients) = run(&connector).await;

    // Each shard sent its 2,250 events due (one more if it had to end an IOC order).
    assert_eq!(core.shards, 2);
    for &events in &core.events {
        assert!((2_250..=2_251).contains(&events), "{core:?}");
    }
    assert!(core.batches > 10, "{core:?}");
    assert!(!core.stopped_early);
    // The replayed final state is what each shard holds, on one server or two.
    let expected = Expected::replay(&book(), SEED, &core.events);
    let layout = connector.layout();
    for (shard, events) in core.events.iter().enumerate() {
        let (target, on_target) = layout.core(shard);
        let store = servers.servers[target].store(on_target);
        assert_eq!(store.len(), expected.shards[shard].len());
        assert_eq!(store.marks().0, *events);
    }
    let orders: u64 = expected.shards.iter().map(|s| s.len() as u64).sum();
    // A replica holds it all too, and the unfiltered client read it there.
    for replica in &servers.replicas {
        assert_eq!(replica.feed.orders() as u64, orders);
        let lag = replica.replica_lag().unwrap();
        assert_eq!(lag.seqs_behind(), 0, "{lag:?}");
        assert!(rows_read(replica).await >= orders as f64);
    }

    assert!(clients.checked && clients.caught_up, "{clients:?}");
    assert_eq!(clients.clients, 5);
    assert_eq!(
        (
            clients.omissions,
            clients.reorderings,
            clients.mismatches,
            clients.misfiltered
        ),
        (0, 0, 0, 0),
        "{:?}",
        clients.problems
    );
    // The unfiltered client alone expects every order; the firms' clients each theirs.
    assert_eq!(clients.expected, 2 * orders);
    assert!(clients.rows >= 2 * orders, "{clients:?}");
    // Every row is timed but those stamped before their client's first poll.
    assert_eq!(clients.latency.count() + clients.untimed, clients.rows);
    assert!(clients.untimed < clients.rows / 2, "{clients:?}");
    // Split by group: the firms' clients and the unfiltered one.
    let (firms, all) = (
        clients.filtered_latency.count(),
        clients.unfiltered_latency.count(),
    );
    assert!(
        firms > 0 && all + clients.untimed >= orders,
        "{firms} {all}"
    );
    assert_eq!(firms + all + clients.untimed, clients.rows);
    assert!(clients.polls > clients.empty_polls);
    assert!(clients.clean());

    let summary = Summary::new(&core, &clients);
    assert!(summary.correct(), "{summary}");
    assert!(
        summary.to_string().contains("0 omissions, 0 reorderings"),
        "{summary}"
    );
    assert!(summary.to_string().contains("to 2 shard(s)"), "{summary}");
    assert!(
        summary.to_string().contains("by client   firms' avg"),
        "{summary}"
    );
    servers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_on_one_server_and_a_replica_over_http_see_no_omission_and_no_reordering() {
    let servers = sharded_with_replica(2).await;
    let connector = HttpConnector::new(vec![servers.servers[0].url.clone()])
        .unwrap()
        .with_shards(2)
        .unwrap()
        .with_replicas(vec![servers.replicas[0].url.clone()])
        .unwrap();
    assert_eq!(connector.layout().targets(), 1);
    two_shards_and_five_clients(servers, connector).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_on_one_server_and_a_replica_over_tcp_see_no_omission_and_no_reordering() {
    let servers = sharded_with_replica(2).await;
    let connector = TcpConnector::new(vec![servers.servers[0].tcp.to_string()])
        .with_shards(2)
        .unwrap()
        .with_replicas(vec![servers.replicas[0].tcp.to_string()])
        .unwrap()
        .with_window(4);
    two_shards_and_five_clients(servers, connector).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_on_servers_of_their_own_see_no_omission_and_no_reordering() {
    let servers = servers(2).await;
    let connector = TcpConnector::new(servers.servers.iter().map(|s| s.tcp.to_string()).collect())
        .with_window(4);
    assert_eq!(connector.layout().targets(), 2);
    two_shards_and_five_clients(servers, connector).await;
}

#[test]
fn a_layout_is_one_server_or_one_per_shard() {
    let one = Layout::new(3, 1).unwrap();
    assert_eq!((one.core(2), one.served(0)), ((0, 2), 0..3));
    let own = Layout::new(3, 3).unwrap();
    assert_eq!((own.core(2), own.served(2)), ((2, 0), 2..3));
    let error = Layout::new(3, 2).unwrap_err();
    assert!(error.to_string().contains("one per shard"), "{error}");
    assert!(Layout::new(0, 1).is_err() && Layout::new(17, 1).is_err());
    let url = url::Url::parse("http://127.0.0.1:1/").unwrap();
    let refused = HttpConnector::new(vec![url.clone()])
        .unwrap()
        .with_replicas(vec![url.clone(), url])
        .unwrap_err();
    assert!(
        refused.to_string().contains("a replica per target"),
        "{refused}"
    );
}

/// Swaps the first two rows of one shard in the first page holding two, then loses
/// the first finished order of a later page (a finished order is never sent again):
/// once each per link.
#[derive(Clone)]
struct Lossy(HttpConnector);

struct LossyFeed {
    inner: HttpFeed,
    lost: bool,
    swapped: bool,
}

impl Connector for Lossy {
    type Core = HttpCore;
    type Feed = LossyFeed;
    fn layout(&self) -> Layout {
        self.0.layout()
    }
    async fn core(&self, shard: usize) -> Result<HttpCore, LinkError> {
        self.0.core(shard).await
    }
    async fn feed(&self, target: usize, filter: Filter) -> Result<LossyFeed, LinkError> {
        Ok(LossyFeed {
            inner: self.0.feed(target, filter).await?,
            lost: false,
            swapped: false,
        })
    }
}

impl FeedLink for LossyFeed {
    async fn send_read(&mut self, request: ReadRequest) -> Result<(), LinkError> {
        self.inner.send_read(request).await
    }
    async fn recv_head(&mut self) -> Result<PageHead, LinkError> {
        self.inner.recv_head().await
    }
    async fn recv_body(&mut self) -> Result<PageBody, LinkError> {
        let mut page = self.inner.recv_body().await?;
        let first = page.orders.first().map(|o| shard_of(o.id));
        let same = page
            .orders
            .iter()
            .skip(1)
            .position(|o| Some(shard_of(o.id)) == first);
        if let (false, Some(i)) = (self.swapped, same) {
            page.orders.swap(0, i + 1);
            self.swapped = true;
        } else if self.swapped && !self.lost {
            if let Some(i) = page.orders.iter().position(|o| o.status.is_terminal()) {
                page.orders.remove(i);
                self.lost = true;
            }
        }
        Ok(page)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_row_and_two_swapped_rows_of_a_shard_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve_loopback_shards(dir.path(), 2, Durability::Never)
        .await
        .unwrap();
    let connector = Lossy(
        HttpConnector::new(vec![server.url.clone()])
            .unwrap()
            .with_shards(2)
            .unwrap(),
    );
    let (_, clients) = run(&connector).await;
    assert!(clients.checked && clients.caught_up, "{clients:?}");
    // Every client lost one order and got two rows the wrong way round.
    assert_eq!(clients.omissions, 5, "{:?}", clients.problems);
    assert_eq!(clients.reorderings, 5, "{:?}", clients.problems);
    assert!(!clients.clean());
    // The row lost is an order's terminal one: said as an order never received when
    // it was the order's only row in view, else as one whose last row never came.
    assert!(
        clients
            .problems
            .iter()
            .any(|p| p.contains("never received") || p.contains("last received seq")),
        "{:?}",
        clients.problems
    );
    server.stop(Duration::from_secs(10)).await.unwrap();
}

/// A target that never answers.
#[derive(Clone)]
struct Silent;

struct SilentCore;

impl CoreLink for SilentCore {
    fn window(&self) -> usize {
        1
    }
    fn max_batch(&self) -> usize {
        100
    }
    async fn acked(&mut self) -> Result<(), LinkError> {
        std::future::pending().await
    }
    async fn send(&mut self, _: &[Event]) -> Result<(), LinkError> {
        std::future::pending().await
    }
}

impl Connector for Silent {
    type Core = SilentCore;
    type Feed = HttpFeed;
    fn layout(&self) -> Layout {
        Layout::new(1, 1).unwrap()
    }
    async fn core(&self, _: usize) -> Result<SilentCore, LinkError> {
        Ok(SilentCore)
    }
    async fn feed(&self, _: usize, _: Filter) -> Result<HttpFeed, LinkError> {
        Err(LinkError::Transport {
            target: "silent".into(),
            message: "no clients here".into(),
        })
    }
}

#[tokio::test]
async fn a_core_whose_target_does_not_keep_up_stops_and_says_so() {
    let plan = CorePlan {
        rate: 10_000.0,
        duration: Duration::from_secs(60),
        max_batch: 100,
        max_backlog: Duration::from_millis(50),
        ..core_plan()
    };
    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        run_core(&Silent, &plan, CancellationToken::new()),
    )
    .await
    .expect("the core stops long before its minute");
    match outcome {
        Err(
            error @ CoreError::Behind {
                shard: 0, backlog, ..
            },
        ) => {
            assert!(backlog > 500, "{error}");
            assert!(error.to_string().contains("fell behind"), "{error}");
        }
        other => panic!("expected Behind, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_core_sends_what_it_made_and_ends_a_pending_ioc_order() {
    let servers = servers(1).await;
    let server = &servers.servers[0];
    let store = server.store(0);
    let connector = HttpConnector::new(vec![server.url.clone()]).unwrap();
    let plan = CorePlan {
        duration: Duration::from_secs(60),
        ..core_plan()
    };
    let stop = CancellationToken::new();
    let stopper = async {
        tranche_test_support::poll_until("500 orders", Duration::from_secs(30), || {
            store.len() >= 500
        })
        .await;
        stop.cancel();
    };
    let (report, ()) = tokio::join!(run_core(&connector, &plan, stop.clone()), stopper);
    let report = report.unwrap();
    assert!(report.stopped_early, "{report:?}");
    assert!(report.scheduled_s < 30.0, "{report:?}");
    // Everything made was sent, and the last event left no IOC order open.
    assert_eq!(store.marks().0, report.events[0]);
    let mut replayed = Book::new(book(), SEED, 0);
    for stamp in 1..=report.events[0] {
        replayed.next(stamp);
    }
    assert!(!replayed.ioc_pending());
    let expected = Expected::replay(&book(), SEED, &report.events);
    assert_eq!(store.len(), expected.shards[0].len());
    servers.stop().await;
}
