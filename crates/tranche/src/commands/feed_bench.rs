//! `tranche bench feed`: the order-state feed's server (and a read replica of it) as
//! child processes of this binary (`tranche feed serve`), so that their memory and
//! CPU are measured apart from the load; emulated cores and clients in this process
//! (`tranche-feed-emulate`); one summary per write rate, judged against the issue's
//! criteria. `--in-process` serves from this process instead.

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::builder::TypedValueParser;
use clap::Args;
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;
use tranche_feed::Durability;
use tranche_feed_emulate::{
    run_clients, run_core, serve_loopback_replica, serve_loopback_shards, ClientsPlan,
    ClientsReport, Connector, CoreError, CorePlan, CoreReport, Criteria, Expected, LoopbackServer,
    Summary,
};

use super::feed_emulate::{
    core_details, seconds, with_connector, BookArgs, ClientArgs, Servers, Transport, FELL_BEHIND,
    PROBLEMS,
};

/// Exit status of `--find-max`/`--rates` when no rate met the criteria.
const NONE_MET: u8 = 3;

/// `tranche bench feed`.
#[derive(Debug, Args)]
pub struct BenchFeedArgs {
    /// The pilot's shape: 2 shards on one server, 100 filtered clients (one per firm,
    /// 100 firms), 2 unfiltered clients on a read replica, over tcp, at 100,000
    /// writes/s. A flag given beside it wins (e.g. --pilot --transport http).
    #[arg(long)]
    pub pilot: bool,
    /// Shards (trading cores, each with its own seq and rec), all on one server
    /// (`tranche feed serve --shards K`). [--pilot: 2]
    #[arg(long, value_name = "K", default_value_t = 1, default_value_if("pilot", "true", "2"),
          value_parser = clap::value_parser!(u64).range(1..=tranche_feed::MAX_SHARDS as u64).map(|n| n as usize))]
    pub shards: usize,
    /// Clients following one firm each (client i follows firm 1 + i mod firms).
    /// [--pilot: 100]
    #[arg(
        long,
        value_name = "F",
        default_value_t = 20,
        default_value_if("pilot", "true", "100")
    )]
    pub filtered: usize,
    /// Clients following every order (on the replica with --replica).
    #[arg(long, value_name = "U", default_value_t = 2)]
    pub unfiltered: usize,
    /// Member firms of the book. [--pilot: 100]
    #[arg(long, default_value_t = 20, default_value_if("pilot", "true", "100"),
          value_parser = clap::value_parser!(u32).range(1..))]
    pub firms: u32,
    /// Start a read replica of the server (`tranche feed serve --replica-of`) and
    /// have the unfiltered clients read it; firms read the server. [--pilot: on]
    #[arg(long, default_value_if("pilot", "true", "true"))]
    pub replica: bool,
    /// Events per second, all shards together; with --find-max, the first rate
    /// tried. [--pilot: 100000]
    #[arg(
        long,
        value_name = "R",
        default_value_t = 10_000.0,
        default_value_if("pilot", "true", "100000")
    )]
    pub rate: f64,
    /// Run at each of these rates in turn (events/s, comma-separated), each on a
    /// fresh server, and report the highest that met the criteria (average latency
    /// ≤ 1 ms, p99 ≤ 5 ms, no omission, reordering or wrong row, ≤ 5 % empty
    /// answers, the rate kept).
    #[arg(
        long,
        value_name = "R,R,…",
        value_delimiter = ',',
        conflicts_with = "find_max"
    )]
    pub rates: Vec<f64>,
    /// Step the rate up from --rate (× --step) until a run misses the criteria (or
    /// --max-rate), then halve the gap twice; if --rate already misses, halve it
    /// until one meets them (four times at most). Reports every run and the highest
    /// rate that met the criteria. Each run takes --duration.
    #[arg(long)]
    pub find_max: bool,
    /// --find-max: the factor between one rate and the next.
    #[arg(long, default_value_t = 1.25)]
    pub step: f64,
    /// --find-max: the highest rate tried.
    #[arg(long, value_name = "R", default_value_t = 2_000_000.0)]
    pub max_rate: f64,
    /// How long the cores generate, in seconds (per rate).
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub duration: f64,
    /// The protocol cores and clients speak. [--pilot: tcp]
    #[arg(
        long,
        value_enum,
        default_value = "http",
        default_value_if("pilot", "true", "tcp")
    )]
    pub transport: Transport,
    /// tcp: batches a core keeps unacknowledged on its connection.
    #[arg(long, default_value_t = tranche_feed_emulate::DEFAULT_WINDOW, value_parser = clap::value_parser!(u64).range(1..=256).map(|n| n as usize))]
    pub window: usize,
    /// When the server (and replica) sync writes (as `tranche feed serve
    /// --durability`).
    #[arg(long, default_value = "every-write", value_parser = crate::commands::parse_durability)]
    pub durability: Durability,
    /// Where the stores go (default: a fresh temporary directory, removed
    /// afterwards): the server's in DIR/primary, the replica's in DIR/replica; with
    /// several rates, in DIR/<rate>/. Must not hold a store already.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Serve from this process instead of child processes (then the server's memory
    /// and CPU cannot be told apart from the cores' and clients').
    #[arg(long)]
    pub in_process: bool,
    #[command(flatten)]
    pub book: BookArgs,
    #[command(flatten)]
    pub clients: ClientArgs,
    /// Print one JSON document: the summary, both reports, the processes' figures
    /// and the verdict (with several rates, one per run and the highest met).
    #[arg(long)]
    pub json: bool,
}

/// What a run is made of.
#[derive(Clone, Debug, Serialize)]
struct Shape {
    shards: usize,
    filtered: usize,
    unfiltered: usize,
    firms: u32,
    replica: bool,
    transport: String,
    durability: String,
    duration_s: f64,
    /// "child processes" or "in process".
    server: &'static str,
}

impl Shape {
    fn of(args: &BenchFeedArgs) -> Shape {
        Shape {
            shards: args.shards,
            filtered: args.filtered,
            unfiltered: args.unfiltered,
            firms: args.firms,
            replica: args.replica,
            transport: format!("{:?}", args.transport).to_lowercase(),
            durability: durability_arg(args.durability),
            duration_s: args.duration,
            server: if args.in_process {
                "in process"
            } else {
                "child processes"
            },
        }
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} shard(s) on one server ({}), {} filtered client(s) of {} firms on it, {} unfiltered on {}, {}, durability {}, {} s per rate",
            self.shards,
            self.server,
            self.filtered,
            self.firms,
            self.unfiltered,
            if self.replica { "a replica" } else { "the server" },
            self.transport,
            self.durability,
            self.duration_s
        )
    }
}

/// `--durability`'s text for `durability`.
fn durability_arg(durability: Durability) -> String {
    match durability {
        Durability::EveryWrite => "every-write".into(),
        Durability::Never => "never".into(),
        Durability::Interval(every) => format!("interval:{}us", every.as_micros()),
    }
}

/// A process's memory and CPU over a run.
#[derive(Clone, Debug, Serialize)]
struct ProcessFigures {
    /// `server`, `replica`, `load` (this process: cores and clients) or `all` (this
    /// process serving too, `--in-process`).
    role: &'static str,
    pid: u32,
    /// Its resident set's high-water mark (`VmHWM`), MB.
    peak_rss_mb: Option<f64>,
    /// CPU time (user and system), seconds.
    cpu_s: Option<f64>,
}

/// `/proc/<pid>/status`'s `VmHWM`, MB (Linux).
fn peak_rss_mb(pid: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// `/proc/<pid>/stat`'s user and system time, seconds (Linux; clock ticks of
/// 1/100 s, as Linux reports them).
fn cpu_s(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command's closing parenthesis: state is field 3, utime 14.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// CPU seconds the hypervisor has taken from this machine since boot (`/proc/stat`'s
/// steal, in the same clock ticks), if known.
fn stolen_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let all = stat.lines().find(|l| l.starts_with("cpu "))?;
    let steal: f64 = all.split_whitespace().nth(8)?.parse().ok()?;
    Some(steal / 100.0)
}

/// This process's figures since `since` (its CPU then; its peak was reset then).
fn own_figures(role: &'static str, cpu_since: Option<f64>) -> ProcessFigures {
    ProcessFigures {
        role,
        pid: std::process::id(),
        peak_rss_mb: peak_rss_mb("self"),
        cpu_s: cpu_s("self").map(|now| now - cpu_since.unwrap_or(0.0)),
    }
}

/// Resets this process's `VmHWM` to its current RSS (Linux ≥ 4.0), so each run's
/// peak is its own. Best effort.
fn reset_own_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// A `tranche feed serve` child process.
struct Child {
    role: &'static str,
    child: tokio::process::Child,
    /// `http://127.0.0.1:PORT`.
    http: String,
    /// `127.0.0.1:PORT`.
    tcp: String,
    stderr: PathBuf,
}

/// The last lines of a file, for an error message.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

impl Child {
    /// Starts `tranche feed serve --dir DIR` on free loopback ports with `extra`
    /// arguments, and reads its addresses from the line it prints.
    async fn start(
        role: &'static str,
        dir: &Path,
        durability: &str,
        extra: &[String],
    ) -> Result<Child> {
        let exe =
            std::env::current_exe().context("could not find this program to start the server")?;
        let stderr_path = dir.with_extension("err");
        let stderr = std::fs::File::create(&stderr_path)
            .with_context(|| format!("could not create {}", stderr_path.display()))?;
        let mut child = tokio::process::Command::new(exe)
            .args([
                "feed",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--tcp",
                "127.0.0.1:0",
            ])
            .arg("--dir")
            .arg(dir)
            .args(["--durability", durability])
            .args(extra)
            // A server without tokens, on loopback; the replica reads it without one.
            .env_remove("TRANCHE_FEED_TOKENS")
            .env_remove("TRANCHE_FEED_REPLICA_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("could not start the {role} (tranche feed serve)"))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        let read = tokio::time::timeout(
            Duration::from_secs(120),
            BufReader::new(stdout).read_line(&mut line),
        )
        .await;
        match read {
            Ok(Ok(n)) if n > 0 => {}
            Ok(_) => bail!(
                "the {role} (tranche feed serve) exited before listening: {}",
                tail(&stderr_path)
            ),
            Err(_) => bail!("the {role} (tranche feed serve) did not listen within 120 s"),
        }
        let word = |prefix: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(prefix))
                .map(str::to_owned)
                .with_context(|| format!("no {prefix} address in the {role}'s line {line:?}"))
        };
        Ok(Child {
            role,
            http: format!("http://{}", word("http://")?),
            tcp: word("tcp://")?,
            child,
            stderr: stderr_path,
        })
    }

    /// Its figures now, then SIGTERM, and its exit (a graceful one expected).
    async fn stop(mut self) -> Result<ProcessFigures> {
        let pid = self.child.id().context("the server has already exited")?;
        let figures = ProcessFigures {
            role: self.role,
            pid,
            peak_rss_mb: peak_rss_mb(&pid.to_string()),
            cpu_s: cpu_s(&pid.to_string()),
        };
        let raw = rustix::process::Pid::from_raw(pid as i32).context("a process id")?;
        rustix::process::kill_process(raw, rustix::process::Signal::TERM)
            .with_context(|| format!("could not stop the {} (pid {pid})", self.role))?;
        match tokio::time::timeout(Duration::from_secs(60), self.child.wait()).await {
            Ok(status) => {
                let status = status?;
                if !status.success() {
                    bail!(
                        "the {} exited with {status}: {}",
                        self.role,
                        tail(&self.stderr)
                    );
                }
            }
            Err(_) => {
                self.child.kill().await?;
                bail!("the {} did not stop within 60 s of SIGTERM", self.role);
            }
        }
        Ok(figures)
    }
}

/// The servers of one run.
enum Deployment {
    Children {
        primary: Child,
        replica: Option<Child>,
    },
    InProcess {
        primary: LoopbackServer,
        replica: Option<LoopbackServer>,
    },
}

impl Deployment {
    async fn start(args: &BenchFeedArgs, dir: &Path) -> Result<Deployment> {
        let (primary_dir, replica_dir) = (dir.join("primary"), dir.join("replica"));
        for store in [&primary_dir, &replica_dir] {
            if std::fs::read_dir(store).is_ok_and(|mut d| d.next().is_some()) {
                bail!(
                    "{} holds a store already: give --dir an empty directory (cores number their events from 1)",
                    store.display()
                );
            }
        }
        if args.in_process {
            let primary = serve_loopback_shards(&primary_dir, args.shards, args.durability).await?;
            let replica = match args.replica {
                true => {
                    Some(serve_loopback_replica(&replica_dir, primary.tcp, args.durability).await?)
                }
                false => None,
            };
            return Ok(Deployment::InProcess { primary, replica });
        }
        let durability = durability_arg(args.durability);
        let primary = Child::start(
            "server",
            &primary_dir,
            &durability,
            &["--shards".into(), args.shards.to_string()],
        )
        .await?;
        let replica = match args.replica {
            true => Some(
                Child::start(
                    "replica",
                    &replica_dir,
                    &durability,
                    &["--replica-of".into(), primary.tcp.clone()],
                )
                .await?,
            ),
            false => None,
        };
        Ok(Deployment::Children { primary, replica })
    }

    /// Where cores write and clients read, in `transport`'s terms: the server, and
    /// the replica if any.
    fn addresses(&self, transport: Transport) -> (String, Vec<String>) {
        let (primary, replica) = match self {
            Deployment::Children { primary, replica } => (
                (primary.http.clone(), primary.tcp.clone()),
                replica.as_ref().map(|r| (r.http.clone(), r.tcp.clone())),
            ),
            Deployment::InProcess { primary, replica } => (
                (primary.url.to_string(), primary.tcp.to_string()),
                replica
                    .as_ref()
                    .map(|r| (r.url.to_string(), r.tcp.to_string())),
            ),
        };
        let pick = |(http, tcp): (String, String)| match transport {
            Transport::Http => http,
            Transport::Tcp => tcp,
        };
        (pick(primary), replica.map(pick).into_iter().collect())
    }

    /// Orders the server holds (all shards).
    async fn orders(&self) -> Result<u64> {
        match self {
            Deployment::InProcess { primary, .. } => Ok(primary.feed.orders() as u64),
            Deployment::Children { primary, .. } => {
                let status: tranche_feed_http::wire::StatusBody =
                    reqwest::get(format!("{}/v1/feed/status", primary.http))
                        .await?
                        .error_for_status()?
                        .json()
                        .await?;
                Ok(status.shards.iter().map(|s| s.orders as u64).sum())
            }
        }
    }

    /// Stops the servers; the child processes' figures.
    async fn stop(self) -> Result<Vec<ProcessFigures>> {
        match self {
            Deployment::InProcess { primary, replica } => {
                if let Some(replica) = replica {
                    replica.stop(Duration::from_secs(10)).await?;
                }
                primary.stop(Duration::from_secs(10)).await?;
                Ok(Vec::new())
            }
            Deployment::Children { primary, replica } => {
                let mut figures = Vec::new();
                // The replica first: it would only reconnect to a primary gone.
                if let Some(replica) = replica {
                    figures.push(replica.stop().await?);
                }
                figures.insert(0, primary.stop().await?);
                Ok(figures)
            }
        }
    }
}

/// One run at one rate.
#[derive(Debug, Serialize)]
struct Run {
    /// Events per second asked.
    rate: f64,
    /// `None` if the core fell behind or the run failed.
    summary: Option<Summary>,
    core: Option<CoreReport>,
    clients: Option<ClientsReport>,
    /// Why there is no summary.
    error: Option<String>,
    fell_behind: bool,
    /// Orders the server held at the end.
    orders_held: Option<u64>,
    /// The server's and replica's processes and this one (the cores and clients).
    processes: Vec<ProcessFigures>,
    /// The processes' peaks added up: the whole run's at most.
    peak_rss_total_mb: Option<f64>,
    /// CPU seconds the hypervisor took from this machine during the run: a noisy
    /// host shows here rather than in the latencies alone.
    stolen_cpu_s: Option<f64>,
    /// Whether it met the criteria, and if not why.
    meets_criteria: bool,
    misses: Vec<String>,
}

impl Run {
    /// Whether it found a fault, not a limit: rows lost by a client that caught up,
    /// reordered, wrong or misfiltered.
    fn faulty(&self) -> bool {
        self.summary.as_ref().is_some_and(|s| {
            s.reorderings + s.mismatches + s.misfiltered > 0 || (s.caught_up && s.omissions > 0)
        })
    }
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

/// One run at `rate` on fresh servers with their stores in `dir`.
async fn run_at(
    args: &BenchFeedArgs,
    rate: f64,
    dir: &Path,
    stop: &CancellationToken,
) -> Result<Run> {
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    reset_own_peak();
    let cpu_since = cpu_s("self");
    let stolen_since = stolen_s();
    let deployment = Deployment::start(args, dir).await?;
    let (target, replicas) = deployment.addresses(args.transport);
    let targets = [target];
    let servers = Servers {
        transport: args.transport,
        targets: &targets,
        shards: args.shards,
        replicas: &replicas,
        window: args.window,
    };
    let core = CorePlan {
        rate,
        duration: seconds(args.duration, "--duration")?,
        seed: args.book.seed,
        book: args.book.config(args.firms)?,
        ..CorePlan::default()
    };
    let clients = args
        .clients
        .plan(args.filtered, args.unfiltered, args.firms);
    eprintln!(
        "bench feed: {rate:.0} events/s for {:.1} s into {} on {}{}",
        core.duration.as_secs_f64(),
        if args.shards == 1 {
            "1 shard".to_owned()
        } else {
            format!("{} shards", args.shards)
        },
        targets[0],
        match replicas.first() {
            Some(replica) => format!(", the unfiltered clients on the replica {replica}"),
            None => String::new(),
        }
    );
    let outcome = with_connector!(&servers, |connector| core_and_clients(
        &connector,
        &core,
        &clients,
        stop.clone()
    )
    .await);
    let orders_held = deployment.orders().await.ok();
    let mut processes = deployment.stop().await?;
    processes.push(own_figures(
        if args.in_process { "all" } else { "load" },
        cpu_since,
    ));
    let peak_rss_total_mb = processes.iter().map(|p| p.peak_rss_mb).sum::<Option<f64>>();
    let stolen_cpu_s = stolen_s().zip(stolen_since).map(|(now, then)| now - then);
    let mut run = Run {
        rate,
        summary: None,
        core: None,
        clients: None,
        error: None,
        fell_behind: false,
        orders_held,
        processes,
        peak_rss_total_mb,
        stolen_cpu_s,
        meets_criteria: false,
        misses: Vec::new(),
    };
    match outcome {
        Ok((core, clients)) => {
            let summary = Summary::new(&core, &clients);
            run.misses = summary.misses(&Criteria::ISSUE);
            run.meets_criteria = run.misses.is_empty();
            run.fell_behind = !summary.kept_up;
            run.summary = Some(summary);
            run.core = Some(core);
            run.clients = Some(clients);
        }
        Err(error) => {
            run.fell_behind = matches!(
                error.downcast_ref::<CoreError>(),
                Some(CoreError::Behind { .. })
            );
            if !run.fell_behind {
                return Err(error);
            }
            run.misses = vec![format!("the core fell behind: {error:#}")];
            run.error = Some(format!("{error:#}"));
        }
    }
    Ok(run)
}

/// The processes' figures, in words.
fn processes_text(run: &Run) -> String {
    let one = |p: &ProcessFigures| {
        let mb = p
            .peak_rss_mb
            .map_or("?".to_owned(), |mb| format!("{mb:.0} MB"));
        let cpu = p.cpu_s.map_or("?".to_owned(), |s| format!("{s:.1} s"));
        let who = match p.role {
            "load" => "cores and clients (this process)",
            "all" => "server, cores and clients (this process)",
            role => role,
        };
        format!("{who} {mb} peak RSS, {cpu} CPU")
    };
    let mut text = format!(
        "processes   {}",
        run.processes.iter().map(one).collect::<Vec<_>>().join("; ")
    );
    if let Some(total) = run.peak_rss_total_mb {
        if run.processes.len() > 1 {
            text += &format!("; whole run {total:.0} MB (the peaks added)");
        }
    }
    if let Some(stolen) = run.stolen_cpu_s {
        text +=
            &format!("\nhost        {stolen:.1} s of CPU stolen by the hypervisor during the run");
    }
    text
}

fn run_text(run: &Run) -> String {
    let mut text = String::new();
    match (&run.summary, &run.core) {
        (Some(summary), Some(core)) => {
            text += &format!("{summary}\n");
            text += &core_details(core);
        }
        _ => {
            text += &format!(
                "FELL BEHIND at {:.0} events/s: {}\n",
                run.rate,
                run.error.as_deref().unwrap_or("?")
            );
        }
    }
    if let Some(orders) = run.orders_held {
        text += &format!("server      {orders} orders held at the end\n");
    }
    text += &processes_text(run);
    text.push('\n');
    if run.meets_criteria {
        text += "criteria    met (avg <= 1 ms, p99 <= 5 ms, <= 5 % empty, no omission or reordering, the rate kept)\n";
    } else {
        text += &format!("criteria    NOT met: {}\n", run.misses.join("; "));
    }
    if let Some(clients) = &run.clients {
        for problem in &clients.problems {
            text += &format!("  {problem}\n");
        }
    }
    text
}

/// The next rate `--find-max` tries, given the runs so far (rate, whether it met the
/// criteria); `None` when done. Up by `--step` while runs meet the criteria (to
/// `--max-rate`); if the first misses, halved (four times at most); once a rate met
/// and a rate missed, the gap between the highest met and the lowest missed is
/// halved twice.
fn next_rate(args: &BenchFeedArgs, runs: &[(f64, bool)]) -> Option<f64> {
    const BISECTIONS: usize = 2;
    const HALVINGS: usize = 4;
    let Some(&(last, met)) = runs.last() else {
        return Some(args.rate);
    };
    let highest_met = runs.iter().filter(|r| r.1).map(|r| r.0).reduce(f64::max);
    let lowest_missed = runs.iter().filter(|r| !r.1).map(|r| r.0).reduce(f64::min);
    match (highest_met, lowest_missed) {
        (Some(_), None) => {
            let next = (last * args.step).min(args.max_rate).round();
            (met && next > last).then_some(next)
        }
        (None, Some(missed)) => (runs.len() <= HALVINGS).then(|| (missed / 2.0).round().max(1.0)),
        (Some(lo), Some(hi)) => {
            // Runs made once both a met and a missed rate were known.
            let (mut seen_met, mut seen_missed, mut bisections) = (false, false, 0);
            for &(_, met) in runs {
                if seen_met && seen_missed {
                    bisections += 1;
                }
                seen_met |= met;
                seen_missed |= !met;
            }
            let mid = ((lo + hi) / 2.0).round();
            (bisections < BISECTIONS && mid > lo && mid < hi).then_some(mid)
        }
        (None, None) => None,
    }
}

pub async fn bench(args: BenchFeedArgs) -> Result<ExitCode> {
    if !(args.rate > 0.0 && args.rate.is_finite()) {
        bail!(
            "--rate: expected events per second above 0, got {}",
            args.rate
        );
    }
    if let Some(bad) = args.rates.iter().find(|r| !(**r > 0.0 && r.is_finite())) {
        bail!("--rates: expected events per second above 0, got {bad}");
    }
    if args.find_max && !(args.step > 1.0 && args.step.is_finite()) {
        bail!("--step: expected a factor above 1, got {}", args.step);
    }
    seconds(args.duration, "--duration")?;
    args.book.config(args.firms)?;
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
    let shape = Shape::of(&args);
    let stop = tranche_core::on_terminate();
    let ladder = args.find_max || !args.rates.is_empty();
    if !ladder {
        eprintln!("bench feed: {shape}");
        let run = run_at(&args, args.rate, &dir, &stop).await?;
        if run.summary.is_none() {
            eprintln!("FELL BEHIND: {}", run.error.as_deref().unwrap_or("?"));
            if !args.json {
                println!("{}", processes_text(&run));
            }
            return Ok(ExitCode::from(FELL_BEHIND));
        }
        let summary = run.summary.as_ref().expect("a summary");
        if args.json {
            let all = serde_json::json!({
                "shape": shape,
                "criteria": Criteria::ISSUE,
                "summary": summary,
                "core": run.core,
                "clients": run.clients,
                "orders_held": run.orders_held,
                "processes": run.processes,
                "peak_rss_total_mb": run.peak_rss_total_mb,
                "stolen_cpu_s": run.stolen_cpu_s,
                "meets_criteria": run.meets_criteria,
                "misses": run.misses,
            });
            println!("{}", serde_json::to_string(&all)?);
        } else {
            print!("{}", run_text(&run));
        }
        return Ok(if !summary.correct() {
            ExitCode::from(PROBLEMS)
        } else if !summary.kept_up {
            ExitCode::from(FELL_BEHIND)
        } else {
            ExitCode::SUCCESS
        });
    }

    eprintln!(
        "bench feed: {shape}; {}",
        if args.find_max {
            format!(
                "finding the highest rate meeting the criteria from {:.0}/s (x{} up to {:.0}/s)",
                args.rate, args.step, args.max_rate
            )
        } else {
            format!(
                "at {} events/s",
                args.rates
                    .iter()
                    .map(|r| format!("{r:.0}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    let mut runs: Vec<Run> = Vec::new();
    let mut queue: std::collections::VecDeque<f64> = args.rates.iter().copied().collect();
    loop {
        let rate = if args.find_max {
            let tried: Vec<(f64, bool)> = runs.iter().map(|r| (r.rate, r.meets_criteria)).collect();
            match next_rate(&args, &tried) {
                Some(rate) => rate,
                None => break,
            }
        } else {
            match queue.pop_front() {
                Some(rate) => rate,
                None => break,
            }
        };
        if stop.is_cancelled() {
            break;
        }
        let run = run_at(
            &args,
            rate,
            &dir.join(format!("{}-{rate:.0}", runs.len() + 1)),
            &stop,
        )
        .await?;
        if !args.json {
            println!("== {rate:.0} events/s asked ==");
            print!("{}", run_text(&run));
            println!();
        }
        runs.push(run);
    }
    let best = runs
        .iter()
        .filter(|r| r.meets_criteria)
        .max_by(|a, b| a.rate.total_cmp(&b.rate));
    if args.json {
        let all = serde_json::json!({
            "shape": shape,
            "criteria": Criteria::ISSUE,
            "runs": runs,
            "max_rate": best.map(|r| r.rate),
            "max_writes_per_sec": best.and_then(|r| r.summary.as_ref()).map(|s| s.writes_per_sec),
        });
        println!("{}", serde_json::to_string(&all)?);
    } else {
        println!("{}", ladder_table(&runs));
        match best {
            Some(run) => {
                let s = run
                    .summary
                    .as_ref()
                    .expect("a run that met the criteria has a summary");
                println!(
                    "highest rate meeting the criteria: {:.0} events/s asked, {:.0} writes/s, latency avg {:.0} us, p99 {} us, {:.1} % empty; server peak RSS {}",
                    run.rate,
                    s.writes_per_sec,
                    s.latency.avg_us,
                    s.latency.p99_us,
                    s.empty_share * 100.0,
                    run.processes
                        .first()
                        .and_then(|p| p.peak_rss_mb)
                        .map_or("?".to_owned(), |mb| format!("{mb:.0} MB"))
                );
            }
            None => println!("no rate met the criteria"),
        }
    }
    Ok(if runs.iter().any(Run::faulty) {
        ExitCode::from(PROBLEMS)
    } else if best.is_none() {
        ExitCode::from(NONE_MET)
    } else {
        ExitCode::SUCCESS
    })
}

/// One line per run.
fn ladder_table(runs: &[Run]) -> String {
    let mut text = format!(
        "{:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>6} {:>5} {:>5} {:>9} {:>9}  {}\n",
        "asked/s",
        "writes/s",
        "rows/s",
        "avg us",
        "p50 us",
        "p99 us",
        "max us",
        "empty",
        "omit",
        "reord",
        "server",
        "all RSS",
        "criteria"
    );
    for run in runs {
        let mb = |v: Option<f64>| v.map_or("?".to_owned(), |mb| format!("{mb:.0} MB"));
        let server = mb(run.processes.first().and_then(|p| p.peak_rss_mb));
        let all = mb(run.peak_rss_total_mb);
        let verdict = if run.meets_criteria {
            "met".to_owned()
        } else {
            format!("missed: {}", run.misses.join("; "))
        };
        match &run.summary {
            Some(s) => {
                let l = &s.latency;
                text += &format!(
                    "{:>10.0} {:>10.0} {:>10.0} {:>8.0} {:>8} {:>8} {:>8} {:>5.1}% {:>5} {:>5} {:>9} {:>9}  {}\n",
                    run.rate, s.writes_per_sec, s.delivered_rows_per_sec, l.avg_us, l.p50_us, l.p99_us, l.max_us,
                    s.empty_share * 100.0, s.omissions, s.reorderings, server, all, verdict
                );
            }
            None => {
                text += &format!(
                    "{:>10.0} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>6} {:>5} {:>5} {:>9} {:>9}  {}\n",
                    run.rate, "-", "-", "-", "-", "-", "-", "-", "-", "-", server, all, verdict
                );
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: BenchFeedArgs,
    }

    fn parse(words: &[&str]) -> BenchFeedArgs {
        Cli::try_parse_from(std::iter::once("bench").chain(words.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn the_pilot_sets_the_shape_and_flags_beside_it_win() {
        let plain = parse(&[]);
        assert_eq!(
            (
                plain.shards,
                plain.filtered,
                plain.unfiltered,
                plain.firms,
                plain.replica
            ),
            (1, 20, 2, 20, false)
        );
        assert_eq!((plain.transport, plain.rate), (Transport::Http, 10_000.0));
        let pilot = parse(&["--pilot"]);
        assert_eq!(
            (
                pilot.shards,
                pilot.filtered,
                pilot.unfiltered,
                pilot.firms,
                pilot.replica
            ),
            (2, 100, 2, 100, true)
        );
        assert_eq!((pilot.transport, pilot.rate), (Transport::Tcp, 100_000.0));
        let mixed = parse(&[
            "--pilot",
            "--transport",
            "http",
            "--rate",
            "5000",
            "--filtered",
            "10",
        ]);
        assert_eq!(
            (mixed.transport, mixed.rate, mixed.filtered, mixed.shards),
            (Transport::Http, 5_000.0, 10, 2)
        );
        let rates = parse(&["--rates", "1000,2000,4000"]);
        assert_eq!(rates.rates, vec![1_000.0, 2_000.0, 4_000.0]);
    }

    #[test]
    fn find_max_steps_up_then_bisects_or_halves_down() {
        let args = parse(&[
            "--find-max",
            "--rate",
            "1000",
            "--step",
            "2",
            "--max-rate",
            "100000",
        ]);
        assert_eq!(next_rate(&args, &[]), Some(1_000.0));
        let mut runs = vec![(1_000.0, true)];
        assert_eq!(next_rate(&args, &runs), Some(2_000.0));
        runs.push((2_000.0, true));
        runs.push((4_000.0, false));
        // Between 2,000 (met) and 4,000 (missed): twice.
        assert_eq!(next_rate(&args, &runs), Some(3_000.0));
        runs.push((3_000.0, true));
        assert_eq!(next_rate(&args, &runs), Some(3_500.0));
        runs.push((3_500.0, false));
        assert_eq!(next_rate(&args, &runs), None);
        // The first rate missed: halve, up to four times.
        let mut down = vec![(1_000.0, false)];
        assert_eq!(next_rate(&args, &down), Some(500.0));
        down.push((500.0, true));
        // Then bisect between 500 and 1,000.
        assert_eq!(next_rate(&args, &down), Some(750.0));
        let never: Vec<(f64, bool)> = [1_000.0, 500.0, 250.0, 125.0, 63.0]
            .iter()
            .map(|&r| (r, false))
            .collect();
        assert_eq!(next_rate(&args, &never), None);
        // Up to --max-rate, then done.
        let capped = parse(&[
            "--find-max",
            "--rate",
            "60000",
            "--step",
            "2",
            "--max-rate",
            "100000",
        ]);
        assert_eq!(next_rate(&capped, &[(60_000.0, true)]), Some(100_000.0));
        assert_eq!(
            next_rate(&capped, &[(60_000.0, true), (100_000.0, true)]),
            None
        );
    }

    #[test]
    fn durabilities_round_trip_through_their_flag() {
        for d in [
            Durability::EveryWrite,
            Durability::Never,
            Durability::Interval(Duration::from_millis(5)),
        ] {
            assert_eq!(crate::commands::parse_durability(&durability_arg(d)), Ok(d));
        }
    }
}
