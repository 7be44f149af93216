//! `tranche feed emulate-core` and `tranche feed emulate-clients`: thin commands over
//! `tranche-feed-emulate` (its crate docs explain the design); `tranche bench feed`
//! is in `feed_bench.rs`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::builder::TypedValueParser;
use clap::{Args, ValueEnum};
use tokio_util::sync::CancellationToken;
use tranche_feed_emulate::{
    now_ns, run_clients, run_core, BookConfig, ClientsPlan, ClientsReport, CoreError, CorePlan,
    CoreReport, Expected, HttpConnector, Outage, Reconnect, RunFile, RunState, TcpConnector,
    RUN_FILE_VERSION,
};
use tranche_types::{Clock, SystemClock};

use crate::output::{duration, when};

/// Exit status when a core could not keep to the rate asked.
pub(crate) const FELL_BEHIND: u8 = 3;
/// Exit status when the clients found omissions, reorderings or wrong rows, or could
/// not check.
pub(crate) const PROBLEMS: u8 = 2;

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
    /// The feed server: a base URL for http (http://127.0.0.1:8090), HOST:PORT (or
    /// tcp://HOST:PORT) for tcp. Once, for a server of --shards K shards (`tranche
    /// feed serve --shards K`: core k writes its shard, clients read all of them
    /// through one cursor); or once per shard, in shard order, for one-shard servers.
    #[arg(long = "target", value_name = "URL|ADDR", required = true)]
    pub targets: Vec<String>,
    /// How many shards (cores, each with its own seq and rec). Default: one per
    /// --target; with one --target, the server must have at least K shards.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=tranche_feed::MAX_SHARDS as u64).map(|n| n as usize))]
    pub shards: Option<usize>,
    /// The protocol.
    #[arg(long, value_enum, default_value = "http")]
    pub transport: Transport,
    /// tcp: batches a core keeps unacknowledged on its connection.
    #[arg(long, default_value_t = tranche_feed_emulate::DEFAULT_WINDOW, value_parser = clap::value_parser!(u64).range(1..=256).map(|n| n as usize))]
    pub window: usize,
}

/// The shape of the generated book (the same for every shard), but its firms.
#[derive(Debug, Args)]
pub struct BookArgs {
    /// Seed of the books: the same seed makes the same events.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
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
    pub(crate) fn config(&self, firms: u32) -> Result<BookConfig> {
        let config = BookConfig {
            firms,
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
    /// Member firms (1..=N); each filtered client follows one.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub firms: u32,
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
    #[command(flatten)]
    pub reconnect: ReconnectArgs,
    /// Print the report as one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// Riding out a lost feed server.
#[derive(Debug, Args)]
pub struct ReconnectArgs {
    /// When the feed server goes away (a restart, a crash: refused, reset, 5xx,
    /// shutting_down), reconnect with backoff (50 ms doubling to 1 s) for up to SECS
    /// per outage instead of stopping at the first failure; stderr says once when the
    /// server is lost and once when it is back, and the report counts outages and
    /// reconnects. A core resumes after the shard's highest seq on the server, so of
    /// the batches left unacknowledged it sends again exactly those not applied; a
    /// client polls on from the cursor of the last page it took whole. Default: no
    /// reconnecting. (The engine's --reconnect-for, a global option with a default of
    /// 60, is not this: `tranche feed` refuses it.)
    #[arg(long = "reconnect-within", value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub secs: Option<u64>,
}

impl ReconnectArgs {
    /// The reconnect policy, its outages said on stderr by `who` (`core`, `clients`).
    fn reconnect(&self, who: &'static str) -> Option<Reconnect> {
        let secs = self.secs?;
        Some(Reconnect::new(Duration::from_secs(secs), move |outage| {
            match outage {
                Outage::Lost {
                    server,
                    error,
                    retry_for,
                } => eprintln!(
                    "{who}: lost the feed server {server} at {} ({error}): reconnecting for up to {} s",
                    when(Some(SystemClock.now())),
                    retry_for.as_secs()
                ),
                Outage::Back { server, after } => eprintln!(
                    "{who}: the feed server {server} is back (after {})",
                    duration(after)
                ),
                Outage::GaveUp { server, after } => eprintln!(
                    "{who}: gave up on the feed server {server}: unreachable for {} (see --reconnect-within)",
                    duration(after)
                ),
            }
        }))
    }
}

/// `tranche feed emulate-clients`.
#[derive(Debug, Args)]
pub struct EmulateClientsArgs {
    #[command(flatten)]
    pub targets: Targets,
    /// A read replica of the --target (`tranche feed serve --replica-of`), once per
    /// --target: the unfiltered clients poll it instead (firms poll the primary: a
    /// replica serves unfiltered reads only). They are checked against the
    /// primary's final state, so they wait for the replica to catch up.
    #[arg(long = "replica", value_name = "URL|ADDR")]
    pub replicas: Vec<String>,
    /// Clients following one firm each (client i follows firm 1 + i mod firms).
    #[arg(long, value_name = "F", default_value_t = 20)]
    pub filtered: usize,
    /// Clients following every order.
    #[arg(long, value_name = "U", default_value_t = 2)]
    pub unfiltered: usize,
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
    #[command(flatten)]
    pub reconnect: ReconnectArgs,
    /// Print the report as one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// How the clients poll.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Rows per poll at most.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=10_000).map(|n| n as usize))]
    pub limit: usize,
    /// A poll waits until this many rows are ready (batched long poll)…
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..).map(|n| n as usize))]
    pub min_batch: usize,
    /// …or this many milliseconds…
    #[arg(long, value_name = "MS", default_value_t = 1_000)]
    pub wait_ms: u64,
    /// …or, once some rows are ready but fewer than --min-batch, this many
    /// microseconds more (the exchange pilot's linger; 0: none, up to 65,535).
    #[arg(long, value_name = "US", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=65_535))]
    pub linger_us: u64,
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
    pub(crate) fn plan(&self, filtered: usize, unfiltered: usize, firms: u32) -> ClientsPlan {
        ClientsPlan {
            filtered,
            unfiltered,
            firms,
            limit: self.limit,
            min_batch: self.min_batch,
            wait_ms: self.wait_ms,
            linger_us: self.linger_us,
            pipeline: !self.no_pipeline,
            drain_timeout: Duration::from_secs(self.drain_timeout),
            reconnect: None,
        }
    }
}

/// Tokens come from the environment, never the command line.
fn token(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|t| !t.is_empty())
}

const CORE_TOKEN: &str = "TRANCHE_FEED_CORE_TOKEN";
const READ_TOKEN: &str = "TRANCHE_FEED_READ_TOKEN";

/// Where a run's cores write and its clients read.
pub(crate) struct Servers<'a> {
    pub transport: Transport,
    /// One server of `shards` shards, or one per shard.
    pub targets: &'a [String],
    pub shards: usize,
    /// A read replica of each target for the unfiltered clients (or none).
    pub replicas: &'a [String],
    /// tcp: batches a core keeps unacknowledged.
    pub window: usize,
}

impl Servers<'_> {
    pub(crate) fn http(&self) -> Result<HttpConnector> {
        let urls = |flag: &str, list: &[String]| -> Result<Vec<url::Url>> {
            list.iter()
                .map(|t| url::Url::parse(t).with_context(|| format!("{flag} {t}: expected a URL")))
                .collect()
        };
        Ok(HttpConnector::new(urls("--target", self.targets)?)?
            .with_shards(self.shards)?
            .with_replicas(urls("--replica", self.replicas)?)?
            .with_tokens(token(CORE_TOKEN), token(READ_TOKEN)))
    }

    pub(crate) fn tcp(&self) -> Result<TcpConnector> {
        let addrs = |list: &[String]| {
            list.iter()
                .map(|t| t.strip_prefix("tcp://").unwrap_or(t).to_owned())
                .collect::<Vec<_>>()
        };
        if !(1..=tranche_feed::MAX_SHARDS).contains(&self.targets.len()) {
            bail!(
                "expected 1 to {} --target, got {}",
                tranche_feed::MAX_SHARDS,
                self.targets.len()
            );
        }
        Ok(TcpConnector::new(addrs(self.targets))
            .with_shards(self.shards)?
            .with_replicas(addrs(self.replicas))?
            .with_tokens(token(CORE_TOKEN), token(READ_TOKEN))
            .with_window(self.window))
    }
}

/// Runs `$body` with `$connector` bound to the connector `$servers` (a [`Servers`])
/// asks for.
macro_rules! with_connector {
    ($servers:expr, |$connector:ident| $body:expr) => {{
        let servers: &Servers<'_> = $servers;
        match servers.transport {
            Transport::Http => {
                let $connector = servers.http()?;
                $body
            }
            Transport::Tcp => {
                let $connector = servers.tcp()?;
                $body
            }
        }
    }};
}
pub(crate) use with_connector;

pub(crate) fn seconds(value: f64, flag: &str) -> Result<Duration> {
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
        book: args.book.config(args.firms)?,
        max_batch: args.max_batch,
        max_backlog: Duration::from_millis(args.max_backlog_ms),
        reconnect: args.reconnect.reconnect("core"),
    })
}

pub async fn emulate_core(args: EmulateCoreArgs) -> Result<ExitCode> {
    let plan = core_plan(&args)?;
    let shards = args.targets.shards.unwrap_or(args.targets.targets.len());
    let servers = Servers {
        transport: args.targets.transport,
        targets: &args.targets.targets,
        shards,
        replicas: &[],
        window: args.targets.window,
    };
    // The layout is checked before the run file says a run started.
    match servers.transport {
        Transport::Http => drop(servers.http()?),
        Transport::Tcp => drop(servers.tcp()?),
    }
    let stop = tranche_core::on_terminate();
    let mut run_file = RunFile {
        version: RUN_FILE_VERSION,
        started_at: now_ns(),
        seed: plan.seed,
        book: plan.book.clone(),
        shards,
        targets: args.targets.targets.clone(),
        rate: plan.rate,
        state: RunState::Running,
    };
    if let Some(path) = &args.run_file {
        run_file.write(path)?;
    }
    eprintln!(
        "emulating {shards} core(s) at {:.0} events/s for {:.1} s into {} over {:?} (seed {})",
        plan.rate,
        plan.duration.as_secs_f64(),
        layout_words(shards, args.targets.targets.len()),
        args.targets.transport,
        plan.seed
    );
    let outcome = with_connector!(&servers, |connector| run_core(
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
        Err(CoreError::Link { shard, source })
            if args.targets.targets.len() == 1
                && source.to_string().contains("expected a shard from") =>
        {
            bail!(
                "shard {shard}: {source} (with one --target, the server needs --shards {shards} or more)"
            )
        }
        Err(error) => Err(error.into()),
    }
}

/// "one server of K shards" or "K servers, one per shard".
pub(crate) fn layout_words(shards: usize, targets: usize) -> String {
    if targets == 1 {
        format!("one server of {shards} shard(s)")
    } else {
        format!("{targets} servers, one per shard")
    }
}

fn core_text(r: &CoreReport) -> String {
    let mut text = format!(
        "core        {} shard(s), asked {:.0} events/s, achieved {:.0}/s{}: {} events in {} requests over {:.1} s\n{}",
        r.shards,
        r.asked_rate,
        r.achieved_rate,
        if r.stopped_early { " (stopped early)" } else { "" },
        r.total_events(),
        r.batches,
        r.elapsed_s,
        core_details(r)
    );
    if r.outages + r.reconnects > 0 {
        text += &format!(
            "outages     {} server outage(s), {} reconnect(s); of the batches left unacknowledged, {} found applied, {} sent again\n",
            r.outages, r.reconnects, r.batches_found_applied, r.batches_resent
        );
    }
    text
}

/// The core's acknowledgement lag, backlog and event mix.
pub(crate) fn core_details(r: &CoreReport) -> String {
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
    if r.untimed > 0 {
        text += &format!(
            "            not timed: {} rows stamped before their client's first poll\n",
            r.untimed
        );
    }
    let (firms, all) = (r.filtered_latency.summary(), r.unfiltered_latency.summary());
    if firms.count > 0 && all.count > 0 {
        text += &format!(
            "by client   firms' avg {:.0} us, p99 {} us, max {} us; unfiltered avg {:.0} us, p99 {} us, max {} us\n",
            firms.avg_us, firms.p99_us, firms.max_us, all.avg_us, all.p99_us, all.max_us
        );
    }
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
    if r.outages + r.reconnects > 0 {
        text += &format!(
            "outages     {} server outage(s), {} reconnect(s), each client polling on from its cursor\n",
            r.outages, r.reconnects
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
    if let Some(k) = args.targets.shards {
        if k != run.shards {
            bail!(
                "--shards {k}: the run in {} has {} shard(s)",
                args.run_file.display(),
                run.shards
            );
        }
    }
    if run.targets.len() != args.targets.targets.len() {
        bail!(
            "{}: the run wrote to {} ({}), expected as many --target, got {}",
            args.run_file.display(),
            layout_words(run.shards, run.targets.len()),
            run.targets.join(", "),
            args.targets.targets.len()
        );
    }
    let servers = Servers {
        transport: args.targets.transport,
        targets: &args.targets.targets,
        shards: run.shards,
        replicas: &args.replicas,
        window: args.targets.window,
    };
    let plan = ClientsPlan {
        reconnect: args.reconnect.reconnect("clients"),
        ..args
            .clients
            .plan(args.filtered, args.unfiltered, run.book.firms)
    };
    eprintln!(
        "{} filtered and {} unfiltered client(s){} following {} over {:?} (run seed {})",
        plan.filtered,
        plan.unfiltered,
        if args.replicas.is_empty() {
            ""
        } else {
            " (the unfiltered on the replica)"
        },
        layout_words(run.shards, run.targets.len()),
        args.targets.transport,
        run.seed
    );
    let expected = await_final(args.run_file.clone(), run.started_at, stop.clone());
    let report = with_connector!(&servers, |connector| run_clients(
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
