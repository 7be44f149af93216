//! `tranche feed emulate-core`, `tranche feed emulate-clients` and `tranche bench feed`:
//! thin commands over `tranche-feed-emulate` (its crate docs explain the design).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::builder::TypedValueParser;
use clap::{Args, ValueEnum};
use tokio_util::sync::CancellationToken;
use tranche_feed::Durability;
use tranche_feed_emulate::{
    now_ns, run_clients, run_core, serve_loopback, BookConfig, ClientsPlan, ClientsReport,
    Connector, CoreError, CorePlan, CoreReport, Expected, HttpConnector, RunFile, RunState,
    Summary, TcpConnector, RUN_FILE_VERSION,
};

/// Exit status when a core could not keep to the rate asked.
const FELL_BEHIND: u8 = 3;
/// Exit status when the clients found omissions, reorderings or wrong rows, or could
/// not check.
const PROBLEMS: u8 = 2;

/// The protocol the emulators speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// JSON over HTTP: `POST /v1/feed/events`, `GET /v1/feed/orders`.
    Http,
    /// The binary TCP protocol (`tranche feed serve --tcp`).
    Tcp,
}

/// Where the shards are.
#[derive(Debug, Args)]
pub struct Targets {
    /// A shard's feed server, once per shard, in shard order: a base URL for http
    /// (http://127.0.0.1:8090), HOST:PORT (or tcp://HOST:PORT) for tcp. Shard i has
    /// its own store, so its own server: the store requires each core's seq to grow.
    #[arg(long = "target", value_name = "URL|ADDR", required = true)]
    pub targets: Vec<String>,
    /// How many shards (cores, each with its own seq and rec): must be the number of
    /// --target given (the default).
    #[arg(long, value_name = "K")]
    pub shards: Option<usize>,
    /// The protocol.
    #[arg(long, value_enum, default_value = "http")]
    pub transport: Transport,
    /// tcp: batches a core keeps unacknowledged on its connection.
    #[arg(long, default_value_t = tranche_feed_emulate::DEFAULT_WINDOW, value_parser = clap::value_parser!(u64).range(1..=256).map(|n| n as usize))]
    pub window: usize,
}

/// The shape of the generated book (the same for every shard).
#[derive(Debug, Args)]
pub struct BookArgs {
    /// Seed of the books: the same seed makes the same events.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Member firms (1..=N); each filtered client follows one.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub firms: u32,
    /// Instruments.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    pub instruments: u32,
    /// How many instruments are hot (take a third of new orders, and the bursts).
    #[arg(long, default_value_t = 5)]
    pub hot_instruments: u32,
    /// Open orders each shard keeps about.
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub resting_orders: u32,
}

impl BookArgs {
    fn config(&self) -> Result<BookConfig> {
        let config = BookConfig {
            firms: self.firms,
            instruments: self.instruments,
            hot_instruments: self.hot_instruments,
            resting_orders: self.resting_orders,
            ..BookConfig::default()
        };
        config.validate()?;
        Ok(config)
    }
}

/// `tranche feed emulate-core`.
#[derive(Debug, Args)]
pub struct EmulateCoreArgs {
    #[command(flatten)]
    pub targets: Targets,
    #[command(flatten)]
    pub book: BookArgs,
    /// Events per second, all shards together (each shard gets R / K).
    #[arg(long, value_name = "R", default_value_t = 10_000.0)]
    pub rate: f64,
    /// How long to generate, in seconds (SIGINT/SIGTERM stops sooner: what was
    /// generated is still sent).
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub duration: f64,
    /// A batch per shard every this many milliseconds, holding the events due since
    /// the last one.
    #[arg(long, value_name = "MS", default_value_t = 1.0)]
    pub tick_ms: f64,
    /// The most events per request (batches queued behind a slow one are merged up
    /// to this).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..).map(|n| n as usize))]
    pub max_batch: usize,
    /// Stop (exit 3) once a shard has more than this many milliseconds of events due
    /// and unacknowledged: the target does not take the rate asked.
    #[arg(long, value_name = "MS", default_value_t = 2_000)]
    pub max_backlog_ms: u64,
    /// Publish the run here (seed, book, then each shard's event count) for
    /// `emulate-clients --run-file`, which replays the final state from it. Written
    /// whole (renamed into place) at the start and at the end.
    #[arg(long, value_name = "FILE")]
    pub run_file: Option<PathBuf>,
    /// Print the report as one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// `tranche feed emulate-clients`.
#[derive(Debug, Args)]
pub struct EmulateClientsArgs {
    #[command(flatten)]
    pub targets: Targets,
    /// The core's run file (`emulate-core --run-file`): the book's firms, then the
    /// final state to check against. The clients wait for it to say a run is under
    /// way, so they can be started before the core.
    #[arg(long, value_name = "FILE")]
    pub run_file: PathBuf,
    /// Also accept a run that has already finished (check a store after the fact).
    #[arg(long)]
    pub finished_ok: bool,
    /// How long to wait for the run file to show a run, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub wait_for_core: u64,
    #[command(flatten)]
    pub clients: ClientArgs,
    /// Print the report as one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// What the clients do.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Clients following one firm each (client i follows firm 1 + i mod firms).
    #[arg(long, value_name = "F", default_value_t = 20)]
    pub filtered: usize,
    /// Clients following every order.
    #[arg(long, value_name = "U", default_value_t = 2)]
    pub unfiltered: usize,
    /// Rows per poll at most.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=10_000).map(|n| n as usize))]
    pub limit: usize,
    /// A poll waits until this many rows are ready (batched long poll)…
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..).map(|n| n as usize))]
    pub min_batch: usize,
    /// …or this many milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1_000)]
    pub wait_ms: u64,
    /// Wait for a page's rows before sending the next poll (by default it goes out as
    /// soon as the page's header arrives).
    #[arg(long)]
    pub no_pipeline: bool,
    /// Once the core has finished, how long clients have to reach its final state, in
    /// seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub drain_timeout: u64,
}

impl ClientArgs {
    fn plan(&self, firms: u32) -> ClientsPlan {
        ClientsPlan {
            filtered: self.filtered,
            unfiltered: self.unfiltered,
            firms,
            limit: self.limit,
            min_batch: self.min_batch,
            wait_ms: self.wait_ms,
            pipeline: !self.no_pipeline,
            drain_timeout: Duration::from_secs(self.drain_timeout),
        }
    }
}

/// `tranche bench feed`.
#[derive(Debug, Args)]
pub struct BenchFeedArgs {
    /// How long the core generates, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub duration: f64,
    /// Events per second.
    #[arg(long, value_name = "R", default_value_t = 10_000.0)]
    pub rate: f64,
    /// The protocol cores and clients speak.
    #[arg(long, value_enum, default_value = "http")]
    pub transport: Transport,
    /// When the server syncs writes (as `tranche feed serve --durability`).
    #[arg(long, default_value = "every-write", value_parser = crate::commands::parse_durability)]
    pub durability: Durability,
    /// The store's directory (default: a fresh temporary one, removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub book: BookArgs,
    #[command(flatten)]
    pub clients: ClientArgs,
    /// Print the summary with both reports as one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// Tokens come from the environment, never the command line.
fn token(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|t| !t.is_empty())
}

const CORE_TOKEN: &str = "TRANCHE_FEED_CORE_TOKEN";
const READ_TOKEN: &str = "TRANCHE_FEED_READ_TOKEN";

/// Runs `f` with the connector the targets ask for.
macro_rules! with_connector {
    ($targets:expr, |$connector:ident| $body:expr) => {{
        let targets: &Targets = $targets;
        check_shards(targets)?;
        match targets.transport {
            Transport::Http => {
                let mut urls = Vec::new();
                for target in &targets.targets {
                    urls.push(
                        url::Url::parse(target)
                            .with_context(|| format!("--target {target}: expected a URL"))?,
                    );
                }
                let $connector =
                    HttpConnector::new(urls)?.with_tokens(token(CORE_TOKEN), token(READ_TOKEN));
                $body
            }
            Transport::Tcp => {
                let addrs = targets
                    .targets
                    .iter()
                    .map(|t| t.strip_prefix("tcp://").unwrap_or(t).to_owned())
                    .collect();
                let $connector = TcpConnector::new(addrs)
                    .with_tokens(token(CORE_TOKEN), token(READ_TOKEN))
                    .with_window(targets.window);
                $body
            }
        }
    }};
}

fn check_shards(targets: &Targets) -> Result<()> {
    if let Some(k) = targets.shards {
        if k != targets.targets.len() {
            bail!(
                "--shards {k}: expected one --target per shard, got {} (each shard is a core with its own seq and rec, so a store of its own)",
                targets.targets.len()
            );
        }
    }
    Ok(())
}

fn seconds(value: f64, flag: &str) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .with_context(|| format!("{flag}: expected a number of seconds above 0, got {value}"))
}

fn core_plan(args: &EmulateCoreArgs) -> Result<CorePlan> {
    Ok(CorePlan {
        rate: args.rate,
        duration: seconds(args.duration, "--duration")?,
        tick: seconds(args.tick_ms / 1e3, "--tick-ms")?,
        seed: args.book.seed,
        book: args.book.config()?,
        max_batch: args.max_batch,
        max_backlog: Duration::from_millis(args.max_backlog_ms),
    })
}

pub async fn emulate_core(args: EmulateCoreArgs) -> Result<ExitCode> {
    let plan = core_plan(&args)?;
    let stop = tranche_core::on_terminate();
    let mut run_file = RunFile {
        version: RUN_FILE_VERSION,
        started_at: now_ns(),
        seed: plan.seed,
        book: plan.book.clone(),
        targets: args.targets.targets.clone(),
        rate: plan.rate,
        state: RunState::Running,
    };
    if let Some(path) = &args.run_file {
        run_file.write(path)?;
    }
    eprintln!(
        "emulating {} core(s) at {:.0} events/s for {:.1} s over {:?} (seed {})",
        args.targets.targets.len(),
        plan.rate,
        plan.duration.as_secs_f64(),
        args.targets.transport,
        plan.seed
    );
    let outcome = with_connector!(&args.targets, |connector| run_core(
        &connector,
        &plan,
        stop.clone()
    )
    .await);
    if let Some(path) = &args.run_file {
        run_file.state = match &outcome {
            Ok(report) => RunState::Finished {
                events: report.events.clone(),
            },
            Err(error) => RunState::Failed {
                error: error.to_string(),
            },
        };
        run_file.write(path)?;
    }
    match outcome {
        Ok(report) => {
            if args.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", core_text(&report));
            }
            if report.kept_up {
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!(
                    "FELL BEHIND: asked {:.0} events/s, achieved {:.0}/s",
                    report.asked_rate, report.achieved_rate
                );
                Ok(ExitCode::from(FELL_BEHIND))
            }
        }
        Err(error @ CoreError::Behind { .. }) => {
            eprintln!("FELL BEHIND: {error}");
            Ok(ExitCode::from(FELL_BEHIND))
        }
        Err(CoreError::Link { shard, source }) if source.to_string().contains("field seq") => {
            bail!(
                "shard {shard}: {source} (a core numbers its events from 1: give each shard an empty store)"
            )
        }
        Err(error) => Err(error.into()),
    }
}

fn core_text(r: &CoreReport) -> String {
    format!(
        "core        {} shard(s), asked {:.0} events/s, achieved {:.0}/s{}: {} events in {} requests over {:.1} s\n{}",
        r.shards,
        r.asked_rate,
        r.achieved_rate,
        if r.stopped_early { " (stopped early)" } else { "" },
        r.total_events(),
        r.batches,
        r.elapsed_s,
        core_details(r)
    )
}

/// The core's acknowledgement lag, backlog and event mix.
fn core_details(r: &CoreReport) -> String {
    let total = r.total_events().max(1) as f64;
    let mix: Vec<String> = r
        .kinds
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(kind, &n)| format!("{kind} {:.1} %", n as f64 * 100.0 / total))
        .collect();
    format!(
        "acks        generation to acknowledgement avg {:.0} us, p50 {} us, p99 {} us, max {} us; \
         backlog at most {} events; ticks at most {:.1} ms late\n\
         mix         {}\n",
        r.ack_latency.avg_us,
        r.ack_latency.p50_us,
        r.ack_latency.p99_us,
        r.ack_latency.max_us,
        r.max_backlog,
        r.max_tick_late_ms,
        mix.join(", ")
    )
}

fn clients_text(r: &ClientsReport) -> String {
    let l = r.latency.summary();
    let mut text = format!(
        "clients     {} client(s): {} rows in {} polls ({:.1} % empty) over {:.1} s, {:.0} rows/s\n\
         latency     stamp to arrival avg {:.0} us, p50 {} us, p99 {} us, max {} us\n",
        r.clients,
        r.rows,
        r.polls,
        r.empty_share() * 100.0,
        r.elapsed_s,
        r.rows_per_sec(),
        l.avg_us,
        l.p50_us,
        l.p99_us,
        l.max_us
    );
    if r.checked {
        text += &format!(
            "checked     {} orders expected: {} omissions, {} reorderings, {} mismatches, {} misfiltered{}\n",
            r.expected,
            r.omissions,
            r.reorderings,
            r.mismatches,
            r.misfiltered,
            if r.caught_up { "" } else { " (NOT every client caught up)" }
        );
    } else {
        text += &format!(
            "checked     NOT CHECKED (no final state); {} reorderings, {} misfiltered\n",
            r.reorderings, r.misfiltered
        );
    }
    for problem in &r.problems {
        text += &format!("  {problem}\n");
    }
    text
}

/// Polls the run file every 100 ms until it shows a run, or `wait` passes: a run
/// started after the clients (whatever its state: a core that failed at once is
/// reported), or one already under way, or with `finished_ok` one already finished.
async fn await_run(path: &Path, finished_ok: bool, wait: Duration) -> Result<RunFile> {
    let deadline = tokio::time::Instant::now() + wait;
    let before = RunFile::read(path)?.map(|file| file.started_at);
    loop {
        if let Some(file) = RunFile::read(path)? {
            let new = before != Some(file.started_at);
            match &file.state {
                RunState::Running => return Ok(file),
                RunState::Finished { .. } if new || finished_ok => return Ok(file),
                RunState::Failed { error } if new => {
                    bail!("{}: the core failed: {error}", path.display())
                }
                _ => {}
            }
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "{}: no run under way after {} s (start emulate-core --run-file {} too, or give --finished-ok to check a finished one)",
                path.display(),
                wait.as_secs(),
                path.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls the run file until the run of `started_at` ends: its final state, replayed
/// (`None` if it failed or the file changed to another run).
async fn await_final(path: PathBuf, started_at: u64, stop: CancellationToken) -> Option<Expected> {
    loop {
        match RunFile::read(&path) {
            Ok(Some(file)) if file.started_at != started_at => {
                eprintln!("{}: another run started; not checking", path.display());
                return None;
            }
            Ok(Some(file)) => match &file.state {
                RunState::Running => {}
                RunState::Finished { events } => {
                    eprintln!(
                        "the core finished ({} events); replaying its final state",
                        events.iter().sum::<u64>()
                    );
                    return tokio::task::spawn_blocking(move || file.expected())
                        .await
                        .ok()
                        .flatten();
                }
                RunState::Failed { error } => {
                    eprintln!("the core failed ({error}); not checking");
                    return None;
                }
            },
            Ok(None) => {}
            Err(error) => {
                eprintln!("{error}; not checking");
                return None;
            }
        }
        tokio::select! {
            () = stop.cancelled() => return None,
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

pub async fn emulate_clients(args: EmulateClientsArgs) -> Result<ExitCode> {
    let stop = tranche_core::on_terminate();
    let run = await_run(
        &args.run_file,
        args.finished_ok,
        Duration::from_secs(args.wait_for_core),
    )
    .await?;
    if run.targets.len() != args.targets.targets.len() {
        bail!(
            "{}: the run has {} shard(s), expected one --target per shard, got {}",
            args.run_file.display(),
            run.targets.len(),
            args.targets.targets.len()
        );
    }
    let plan = args.clients.plan(run.book.firms);
    eprintln!(
        "{} filtered and {} unfiltered client(s) following {} shard(s) over {:?} (run seed {})",
        plan.filtered,
        plan.unfiltered,
        run.targets.len(),
        args.targets.transport,
        run.seed
    );
    let expected = await_final(args.run_file.clone(), run.started_at, stop.clone());
    let report = with_connector!(&args.targets, |connector| run_clients(
        &connector,
        &plan,
        expected,
        stop.clone()
    )
    .await?);
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", clients_text(&report));
    }
    Ok(if report.clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(PROBLEMS)
    })
}

/// Runs the core and the clients together over `connector`; the clients' final
/// state is replayed from the core's report.
async fn core_and_clients<C: Connector>(
    connector: &C,
    core: &CorePlan,
    clients: &ClientsPlan,
    stop: CancellationToken,
) -> Result<(CoreReport, ClientsReport)> {
    let (tx, rx) = tokio::sync::oneshot::channel::<Option<Vec<u64>>>();
    let run_core = async {
        let report = run_core(connector, core, stop.clone()).await;
        let _ = tx.send(report.as_ref().ok().map(|r| r.events.clone()));
        report
    };
    let (book, seed) = (core.book.clone(), core.seed);
    let expected = async move {
        let events = rx.await.ok().flatten()?;
        tokio::task::spawn_blocking(move || Expected::replay(&book, seed, &events))
            .await
            .ok()
    };
    let (core, clients) = tokio::join!(
        run_core,
        run_clients(connector, clients, expected, stop.clone())
    );
    Ok((core?, clients?))
}

pub async fn bench(args: BenchFeedArgs) -> Result<ExitCode> {
    let temp;
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("tranche-bench-feed")
                .tempdir()?;
            temp.path().to_owned()
        }
    };
    let server = serve_loopback(&dir, args.durability).await?;
    let core = CorePlan {
        rate: args.rate,
        duration: seconds(args.duration, "--duration")?,
        seed: args.book.seed,
        book: args.book.config()?,
        ..CorePlan::default()
    };
    let clients = args.clients.plan(core.book.firms);
    eprintln!(
        "bench feed: {:.0} events/s for {:.1} s over {:?} to a server on {} (durability {:?}), {} filtered and {} unfiltered client(s)",
        core.rate,
        core.duration.as_secs_f64(),
        args.transport,
        server.url,
        args.durability,
        clients.filtered,
        clients.unfiltered
    );
    let stop = tranche_core::on_terminate();
    let outcome = match args.transport {
        Transport::Http => {
            let connector = HttpConnector::new(vec![server.url.clone()])?;
            core_and_clients(&connector, &core, &clients, stop).await
        }
        Transport::Tcp => {
            let connector = TcpConnector::new(vec![server.tcp.to_string()]);
            core_and_clients(&connector, &core, &clients, stop).await
        }
    };
    let orders = server.store.len();
    server.stop(Duration::from_secs(10)).await?;
    let (core_report, clients_report) = match outcome {
        Ok(reports) => reports,
        Err(error) => match error.downcast_ref::<CoreError>() {
            Some(CoreError::Behind { .. }) => {
                eprintln!("FELL BEHIND: {error:#}");
                return Ok(ExitCode::from(FELL_BEHIND));
            }
            _ => return Err(error),
        },
    };
    let summary = Summary::new(&core_report, &clients_report);
    if args.json {
        let all = serde_json::json!({
            "summary": summary,
            "core": core_report,
            "clients": clients_report,
            "orders_held": orders,
        });
        println!("{}", serde_json::to_string(&all)?);
    } else {
        println!("{summary}");
        print!("{}", core_details(&core_report));
        println!("server      {orders} orders held at the end");
        for problem in &clients_report.problems {
            println!("  {problem}");
        }
    }
    Ok(if !summary.correct() {
        ExitCode::from(PROBLEMS)
    } else if !summary.kept_up {
        ExitCode::from(FELL_BEHIND)
    } else {
        ExitCode::SUCCESS
    })
}
