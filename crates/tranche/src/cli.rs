use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, Parser, Subcommand};

/// Tranche runs the nightly bulk work of a financial back office: millions of small
/// jobs (chains, groups, runs) with leases, retries and exactly-once effects, on one
/// machine with no server to install.
#[derive(Debug, Parser)]
#[command(name = "tranche", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub data: DataArgs,
    /// Export traces (a span per job attempt and per HTTP request, linked across a
    /// chain's steps and to the request that enqueued them) over OTLP/HTTP to the
    /// collector at this base URL, e.g. http://127.0.0.1:4318 (spans go to
    /// URL/v1/traces). For `worker`, `server` and `notes run`. Off by default.
    #[arg(
        long,
        global = true,
        env = "OTEL_EXPORTER_OTLP_ENDPOINT",
        value_name = "URL",
        help_heading = "Global options"
    )]
    pub otlp_endpoint: Option<url::Url>,
    #[command(subcommand)]
    pub command: Command,
}

/// Options of every command, after each command's own in `--help`: where the engine's
/// state and the ACH ledger are. Commands that keep no engine state (the feed's)
/// refuse them on the command line: see [`refuse_unused_globals`].
#[derive(Args)]
#[command(next_help_heading = "Global options")]
pub struct DataArgs {
    /// Directory of the embedded state (SQLite, WAL mode).
    #[arg(
        long,
        global = true,
        env = "TRANCHE_DATA",
        default_value = "./tranche-data"
    )]
    pub data: PathBuf,
    /// Keep job state in this Redis server instead (a fleet: every machine runs the
    /// same binary against it), e.g. redis://10.0.0.5:6379/0. No password in the URL:
    /// it comes from TRANCHE_REDIS_PASSWORD or TRANCHE_REDIS_PASSWORD_FILE.
    #[arg(long, global = true, env = "TRANCHE_BROKER", value_name = "URL")]
    pub broker: Option<String>,
    /// Prefix of every Redis key, with one {hash tag} (one cluster slot per prefix).
    #[arg(
        long,
        global = true,
        env = "TRANCHE_REDIS_PREFIX",
        default_value = "{tranche}:"
    )]
    pub prefix: String,
    /// When the broker becomes unreachable (a Redis restart, a network cut), how long
    /// long-running commands (worker, wait, notes run, bench engine) keep reconnecting,
    /// with backoff, before giving up. They say on stderr when the broker is lost and
    /// when it is back.
    #[arg(
        long,
        global = true,
        env = "TRANCHE_RECONNECT_FOR",
        value_name = "SECS",
        default_value_t = 60
    )]
    pub reconnect_for: u64,
    /// The ACH entry ledger (`tranche ach import|entry|cancel`, `tranche server`):
    /// PostgreSQL for a fleet, e.g. postgres://tranche@10.0.0.6:5432/ledger. No
    /// password in the URL: it comes from TRANCHE_LEDGER_PASSWORD or
    /// TRANCHE_LEDGER_PASSWORD_FILE. Default: SQLite in DATA/ach/ledger.sqlite (none
    /// for a server on --broker: its /v1/ach routes answer 404 no_ledger).
    #[arg(long, global = true, env = "TRANCHE_LEDGER", value_name = "URL")]
    pub ledger: Option<String>,
}

/// `tranche feed …` keeps its own state (`--dir`), none of the engine's: an engine
/// option given to it on the command line is a mistake (a script meant for another
/// command, a `--data` meant as the feed's directory), said rather than ignored. The
/// same options from the environment (TRANCHE_DATA…) pass: one shell serves every
/// command.
pub fn refuse_unused_globals(matches: &ArgMatches) -> Result<(), clap::Error> {
    let Some(("feed", _)) = matches.subcommand() else {
        return Ok(());
    };
    let engine_options = ["data", "broker", "prefix", "reconnect_for", "ledger"];
    match engine_options
        .into_iter()
        .find(|id| matches.value_source(id) == Some(ValueSource::CommandLine))
    {
        None => Ok(()),
        Some(id) => Err(Cli::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            format!(
                "--{} is an engine option; `tranche feed` does not use it (the feed's \
                 store is in `feed serve --dir`)",
                id.replace('_', "-")
            ),
        )),
    }
}

/// By hand: the broker URL is shown masked (see `tranche_redis::redacted_url`).
impl std::fmt::Debug for DataArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataArgs")
            .field("data", &self.data)
            .field(
                "broker",
                &self.broker.as_deref().map(tranche_redis::redacted_url),
            )
            .field("prefix", &self.prefix)
            .field("reconnect_for", &self.reconnect_for)
            .field(
                "ledger",
                &self.ledger.as_deref().map(tranche_ach_ledger::mask_url),
            )
            .finish()
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List runs, newest first, with their progress.
    Runs {
        /// How many runs to show.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show a run's progress and its failed jobs with their errors.
    Status {
        /// The run, e.g. contract-notes/2026-11-20.
        run: String,
        /// How many failures to list.
        #[arg(long, default_value_t = 20)]
        failures: usize,
        #[arg(long)]
        json: bool,
    },
    /// Re-run a run's failed jobs (fresh attempts) and the chain steps they blocked.
    /// Succeeded and cancelled jobs are left as they are. With --job, one failed or
    /// cancelled job (and the cancelled chain steps after it).
    Retry {
        /// The run whose failed jobs to re-run.
        #[arg(required_unless_present = "job", conflicts_with = "job")]
        run: Option<String>,
        /// Re-run this failed or cancelled job instead.
        #[arg(long)]
        job: Option<i64>,
    },
    /// Delete one ended job (succeeded, failed or cancelled) and its attempts; its
    /// run's counters no longer count it. A job still queued or running: cancel it
    /// first.
    Delete {
        /// The job to delete.
        #[arg(long)]
        job: i64,
    },
    /// Show one job: its state, arguments, result, and every failed attempt's error.
    Job {
        /// The job's id.
        id: i64,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List jobs by run, state, queue and kind (the filters combine), in id order.
    Jobs(JobsArgs),
    /// Cancel a whole run, or one job (with the rest of its chain). Cancellation wins:
    /// nothing cancelled is started, running handlers are told to stop.
    Cancel {
        /// The run to cancel.
        #[arg(required_unless_present_any = ["job", "chain"], conflicts_with_all = ["job", "chain"])]
        run: Option<String>,
        /// Cancel this job (and the chain steps after it) instead.
        #[arg(long)]
        job: Option<i64>,
        /// Cancel the chain steps from this job on, even if it has already ended.
        #[arg(long)]
        chain: Option<i64>,
        /// Recorded as the cancelled jobs' reason.
        #[arg(long, default_value = "cancelled by operator")]
        reason: String,
    },
    /// Jobs waiting and running per queue, and which queues are paused.
    Queues {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Pause a queue: no worker of any process sharing --data (or --broker) takes its
    /// jobs until it is resumed. Running jobs finish and report; new jobs are accepted
    /// and wait.
    Pause {
        /// The queue, e.g. mail.
        queue: String,
    },
    /// Resume a paused queue: its jobs are runnable again at once.
    Resume {
        /// The queue, e.g. mail.
        queue: String,
    },
    /// Wait until a run finishes, then optionally run a command once (however many
    /// processes wait on the same run), e.g. to tear a fleet down.
    Wait {
        run: String,
        /// Shell command run once when the run finishes; it gets TRANCHE_RUN,
        /// TRANCHE_SUCCEEDED, TRANCHE_FAILED and TRANCHE_CANCELLED in its environment.
        #[arg(long)]
        on_done: Option<String>,
        /// Give up after this many seconds.
        #[arg(long)]
        timeout: Option<u64>,
    },
    /// Remove runs that finished before a date, with their jobs (both backends also do
    /// this by themselves after their retention, 7 days by default). Runs that have
    /// not finished are never touched; effects are kept.
    Prune {
        /// Remove runs whose last job ended before this: YYYY-MM-DD (start of the day,
        /// UTC) or an RFC 3339 time.
        #[arg(long, value_name = "DATE", value_parser = crate::commands::parse_before)]
        before: tranche_types::Timestamp,
        /// List what would be removed and remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Measure the engine.
    #[command(subcommand)]
    Bench(Bench),
    /// Contract notes: a broker's night of per-client notes.
    #[command(subcommand)]
    Notes(Notes),
    /// Payment files: ACH entries and NACHA files.
    #[command(subcommand)]
    Ach(Ach),
    /// The order-state feed (issue 17): serve its store; emulate cores and clients.
    #[command(subcommand)]
    Feed(Feed),
    /// Serve the HTTP API (submit, runs, remote workers, change feed, /metrics) over
    /// the state in --data (or --broker).
    Server(ServerArgs),
    /// Work the contract-note steps of every night submitted to --broker, from the
    /// queues given (a machine role), until stopped (SIGTERM: finish or hand back).
    Worker(WorkerArgs),
    /// Declare or remove schedules (periodic and one-off jobs). Every `tranche worker`
    /// and `tranche server` fires them, exactly once per due time between them.
    #[command(subcommand)]
    Schedule(ScheduleCmd),
    /// List schedules with their next due times.
    Schedules {
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Set or remove a rate limit or running cap on a queue's or a task kind's jobs,
    /// enforced for every worker sharing --data (or --broker).
    #[command(subcommand)]
    Limit(LimitCmd),
    /// List limits with their use now (jobs running, starts in the current window).
    Limits {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Conductor-compatible workflows: apply definitions, start, show with the steps'
    /// timeline, list, terminate, pause, resume, retry, restart, rerun from a step. The
    /// same workflows `tranche server` serves under /api; a server runs their joins,
    /// sub-workflows' ends, waits, scripts and timeouts.
    #[command(subcommand)]
    Workflow(WorkflowCmd),
}

#[derive(Debug, Subcommand)]
pub enum WorkflowCmd {
    /// Store workflow definitions (Conductor's JSON: one or an array per file). Every
    /// problem of every file is said at once (file, workflow, step path, expected,
    /// got) and nothing is stored; exit 2.
    Apply {
        /// Definition files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Store task definitions (Conductor's JSON: retryCount, retryLogic,
    /// responseTimeoutSeconds, rate and concurrency limits…).
    Tasks {
        /// Task definition files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Start a workflow; prints its id.
    Start {
        /// The definition's name.
        name: String,
        /// Its version; the latest when absent.
        #[arg(long)]
        version: Option<u32>,
        /// Its input: a JSON object, or @FILE.
        #[arg(long, value_name = "JSON|@FILE")]
        input: Option<String>,
        /// A correlation id to find it by.
        #[arg(long)]
        correlation_id: Option<String>,
    },
    /// A workflow with its steps: type, status, attempts, when each started and how
    /// long it took, and why it failed.
    Show {
        /// The workflow's id.
        id: String,
        /// Print Conductor's JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Workflows, newest first.
    List {
        /// Only this definition's.
        #[arg(long)]
        name: Option<String>,
        /// Only those in this status (RUNNING, PAUSED, COMPLETED, FAILED, TIMED_OUT,
        /// TERMINATED).
        #[arg(long)]
        status: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// End a running or paused workflow; its remaining steps are cancelled.
    Terminate {
        /// The workflow's id.
        id: String,
        /// Why (kept as its reason).
        #[arg(long, default_value = "terminated from the command line")]
        reason: String,
    },
    /// Hold a running workflow: steps that end are kept, nothing new is made ready.
    Pause {
        /// The workflow's id.
        id: String,
    },
    /// Resume a paused workflow, deciding what its steps' ends made ready meanwhile.
    Resume {
        /// The workflow's id.
        id: String,
    },
    /// Run a failed (or terminated) workflow's failed steps again, fresh attempts.
    Retry {
        /// The workflow's id.
        id: String,
    },
    /// Run an ended workflow again from its start, same id and input.
    Restart {
        /// The workflow's id.
        id: String,
    },
    /// Run an ended workflow again from one step: the steps before it keep their
    /// outputs; it and every step after it (with the sub-workflows they started) run
    /// anew. A step inside a fork's branch or a loop's body is rerun from its fork or
    /// loop.
    Rerun {
        /// The workflow's id.
        id: String,
        /// The step: its reference name, or a task id `workflow show --json` gives.
        #[arg(long, value_name = "STEP")]
        from: String,
        /// Replace that step's input: a JSON object, or @FILE.
        #[arg(long, value_name = "JSON|@FILE")]
        task_input: Option<String>,
        /// Replace the workflow's input: a JSON object, or @FILE.
        #[arg(long, value_name = "JSON|@FILE")]
        input: Option<String>,
    },
}

/// Which jobs a limit applies to.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct LimitTarget {
    /// The jobs of this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// The jobs of this task kind, in every queue.
    #[arg(long)]
    pub kind: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum LimitCmd {
    /// Limit a queue's or a kind's jobs: at most N starts in any window of --per (a
    /// strict sliding window: `--starts 1 --per 15s` never lets two start 14.9 s
    /// apart; retries count as starts), at most K running at once, or both. Replaces
    /// the scope's limit. Jobs of a kind at its limit wait in their queue (no attempt
    /// used) while other kinds go ahead.
    #[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["starts", "running"])))]
    Set {
        #[command(flatten)]
        target: LimitTarget,
        /// Starts allowed per window.
        #[arg(long, value_name = "N")]
        starts: Option<u32>,
        /// The window of --starts: 500ms, 15s, 1m, 1h.
        #[arg(long, value_name = "DURATION", requires = "starts", default_value = "1s",
              value_parser = crate::commands::parse_per)]
        per: std::time::Duration,
        /// Jobs running at once, across every worker process.
        #[arg(long, value_name = "K")]
        running: Option<u32>,
    },
    /// Remove a queue's or a kind's limit: its jobs start as fast as workers take them.
    Delete {
        #[command(flatten)]
        target: LimitTarget,
    },
}

#[derive(Debug, Subcommand)]
pub enum ScheduleCmd {
    /// Declare the schedules of a TOML file (`[[schedule]]` tables: name, cron or at,
    /// zone, skip_missed, kind, queue, args, max_attempts, priority, run). A schedule
    /// declared again with the same timing keeps what it has fired.
    Apply {
        /// The schedule file.
        file: PathBuf,
    },
    /// Remove a schedule (jobs it enqueued stay).
    Delete {
        /// The schedule's name.
        name: String,
    },
}

#[derive(Debug, Args)]
pub struct JobsArgs {
    /// Only this run's jobs.
    #[arg(long)]
    pub run: Option<String>,
    /// Only jobs in this state: pending, available, running, succeeded, failed or
    /// cancelled.
    #[arg(long, value_parser = crate::commands::parse_state)]
    pub state: Option<tranche_types::JobState>,
    /// Only this queue's jobs.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only jobs of this task kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Start after this job id (the `--after` a previous listing printed).
    #[arg(long)]
    pub after: Option<i64>,
    /// How many jobs to show.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl JobsArgs {
    /// The filters as arguments, for the hint that prints the next page's command.
    pub fn filter_args(&self) -> String {
        let mut out = String::new();
        for (flag, value) in [
            ("run", self.run.clone()),
            ("state", self.state.map(|s| s.to_string())),
            ("queue", self.queue.clone()),
            ("kind", self.kind.clone()),
        ] {
            if let Some(v) = value {
                out.push_str(&format!(" --{flag} {v}"));
            }
        }
        out
    }
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The queues this process serves: process, render, sign, mail.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "process,render,sign,mail"
    )]
    pub queues: Vec<String>,
    /// Where this worker keeps its outbox/, demo-signer/ and owner-password.
    #[arg(long, default_value = "./tranche-worker")]
    pub out: PathBuf,
    #[command(flatten)]
    pub steps: StepOptions,
}

#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Address to listen on (port 0 picks a free port; the address is printed).
    /// Without tokens only a loopback address is accepted.
    #[arg(long, default_value = "127.0.0.1:7070")]
    pub listen: std::net::SocketAddr,
    /// Bearer tokens, one per line: `TOKEN` (every endpoint, personal data in job
    /// text masked: PANs as ABXXXXXX4F, e-mails as r***@example.com), `TOKEN pii`
    /// (every endpoint, personal data shown) or `TOKEN worker` (the worker endpoints
    /// only; polled jobs carry their real arguments). TRANCHE_TOKENS adds more
    /// (comma-separated).
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
    /// Refuse submissions (429) to a queue holding this many waiting jobs: `N` for
    /// every queue, or `QUEUE=N`. Repeatable.
    #[arg(long, value_name = "[QUEUE=]N")]
    pub queue_limit: Vec<String>,
    /// Without tokens (loopback only): show personal data (PANs, e-mail addresses) in
    /// job text instead of masking it. With tokens, give `TOKEN pii` instead.
    #[arg(long)]
    pub show_personal_data: bool,
    /// ACH rules (as for `tranche ach engine`) whose banks and windows, with their
    /// times, /v1/ach/status and the dashboard list; without them, the banks and
    /// windows the day's entries and files name. Invalid rules: every problem is
    /// printed and the server exits 2.
    #[arg(long, value_name = "ach.toml")]
    pub ach_rules: Option<PathBuf>,
    #[command(flatten)]
    pub door: DoorArgs,
}

/// What an HTTP listener tolerates of its clients: the same flags, defaults and code
/// (`tranche-http-door`) for `tranche server` and `tranche feed serve`.
#[derive(Debug, Args)]
#[command(next_help_heading = "Slow and idle clients")]
pub struct DoorArgs {
    /// Seconds a client may take to send a request's headers, from their first byte.
    /// Slower clients, such as one sending a byte now and then (slowloris), are
    /// disconnected.
    #[arg(long, value_name = "SECS", default_value_t = tranche_http_door::DEFAULT_HEADER_TIMEOUT_SECS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout: u64,
    /// Seconds a connection is kept open with no request in flight (just accepted, or
    /// kept alive after an answer); then it is closed. A long poll waiting for its
    /// answer is in flight, not idle, however long it waits.
    #[arg(long, value_name = "SECS", default_value_t = tranche_http_door::DEFAULT_IDLE_TIMEOUT_SECS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout: u64,
    /// Seconds a client may take to send a request's body once its headers are in;
    /// slower requests are answered 408 (body_timeout). Also the longest a client may
    /// leave an answer unread (no byte of it taken): its connection is then closed. A
    /// long poll's wait is not timed: it still waits its whole wait.
    #[arg(long, value_name = "SECS", default_value_t = tranche_http_door::DEFAULT_BODY_TIMEOUT_SECS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout: u64,
    /// Most connections open at once; further ones wait in the listen backlog until one
    /// closes (served late, not refused).
    #[arg(long, value_name = "N", default_value_t = tranche_http_door::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: usize,
}

impl DoorArgs {
    /// The limits these flags set.
    pub fn limits(&self) -> tranche_http_door::Limits {
        use std::time::Duration;
        tranche_http_door::Limits {
            header_timeout: Duration::from_secs(self.header_timeout),
            idle_timeout: Duration::from_secs(self.idle_timeout),
            body_timeout: Duration::from_secs(self.body_timeout),
            max_connections: self.max_connections,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Feed {
    /// Serve the order-state feed's store in --dir over HTTP: `POST /v1/feed/events`
    /// (batches from a trading core, group-committed by one writer) and
    /// `GET /v1/feed/orders` (filtered long polls by cursor), and with --tcp the same
    /// over the binary TCP protocol, until SIGINT/SIGTERM, which answers waiting polls,
    /// finishes queued writes and syncs the log. Without --tokens, loopback addresses
    /// only. With --shards K, one store and writer per trading core, read as one feed;
    /// with --replica-of ADDR, a read replica of another server.
    Serve(FeedServeArgs),
    /// Emulate K trading cores (--shards, each with its own seq and rec) writing one
    /// --target of K shards (`feed serve --shards K`), or one --target per shard: a
    /// realistic book (most orders amended or filled one to three times, cancels,
    /// immediate-or-cancel orders ended by the next event, bursts on a few hot
    /// instruments), stamped with created_at when made, paced open loop at --rate
    /// (a batch per tick, never waiting on the server). Reports the rate asked and
    /// achieved; exits 3 if it fell behind. With --run-file, publishes the run for
    /// emulate-clients. A core's token comes from TRANCHE_FEED_CORE_TOKEN.
    EmulateCore(crate::commands::feed_emulate::EmulateCoreArgs),
    /// Emulate polling clients, one per firm (--filtered) and unfiltered ones (on a
    /// read replica with --replica), each following every shard through one vector
    /// cursor with batched, pipelined long polls: delivery
    /// latency (created_at/updated_at to arrival) as a histogram, and a check that
    /// each client's final view equals the core's final state for its filter (replayed
    /// from --run-file): no omission, no reordering. Exits 2 if anything was wrong or
    /// could not be checked. A reader's token comes from TRANCHE_FEED_READ_TOKEN.
    EmulateClients(crate::commands::feed_emulate::EmulateClientsArgs),
}

#[derive(Debug, Args)]
pub struct FeedServeArgs {
    /// Address to listen on (loopback only without --tokens), e.g. 127.0.0.1:8090;
    /// port 0 picks a free one (printed on stdout).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8090")]
    pub listen: std::net::SocketAddr,
    /// Bearer tokens, one per line (`#` comments): `TOKEN core` may post events only,
    /// `TOKEN firm=N` may read firm N's orders only, `TOKEN reader` may read all.
    /// Required to listen on a non-loopback address.
    #[arg(long, value_name = "FILE", env = "TRANCHE_FEED_TOKENS")]
    pub tokens: Option<PathBuf>,
    /// Also serve the feed's binary TCP protocol (the fast path for trading cores and
    /// polling clients, see the tranche-feed-tcp crate) on this address, beside HTTP:
    /// the same store, writer and tokens; loopback only without --tokens; port 0 picks
    /// a free one (printed on stdout).
    #[arg(long, value_name = "ADDR")]
    pub tcp: Option<std::net::SocketAddr>,
    /// The store's directory (created if missing; one server per directory).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// When writes are synced before they are acknowledged: every-write (survives a
    /// power cut), interval:5ms (survives the process dying; a power cut loses at most
    /// about the interval; units us, ms, s) or never (tests and emulators). Unless
    /// never, on ext4 and XFS the log is kept zeroed 8 MiB ahead of its end, so that a
    /// sync writes the data alone (a log file is up to 8 MiB longer while it is open).
    #[arg(long, default_value = "every-write", value_parser = crate::commands::parse_durability)]
    pub durability: tranche_feed::Durability,
    /// Shards: one per trading core, each with its own seq and rec, store
    /// (shard 0 in --dir, shard k in --dir/shard-k), writer and group commit. A core
    /// posts to its shard (HTTP ?shard=k; TCP: its HELLO); readers read every shard
    /// through one opaque cursor. Shards can be added at a restart (old cursors stay
    /// valid and read the new shard from its start), not removed.
    #[arg(long, value_name = "K", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=tranche_feed::MAX_SHARDS as i64),
          conflicts_with = "replica_of")]
    pub shards: u16,
    /// Run as a read replica of the primary whose --tcp listener is at ADDR
    /// (HOST:PORT): follow every shard it has into --dir (resuming from there after a
    /// restart, reconnecting with backoff when the primary goes), serve unfiltered
    /// reads over HTTP (and --tcp), take no events. Its lag is in /v1/feed/status and
    /// /metrics. The primary's reader token comes from TRANCHE_FEED_REPLICA_TOKEN or
    /// --replica-token-file.
    #[arg(long, value_name = "ADDR")]
    pub replica_of: Option<String>,
    /// A file holding the reader token --replica-of presents to the primary (instead
    /// of TRANCHE_FEED_REPLICA_TOKEN; never on the command line, where ps shows it).
    #[arg(long, value_name = "FILE", requires = "replica_of")]
    pub replica_token_file: Option<PathBuf>,
    /// Evict finished orders (filled, cancelled, rejected, expired) whose last change
    /// is older than this: <n>s|m|h|d, or off to keep everything. Open orders are kept
    /// whatever their age; a cursor older than what is kept gets 410 with the oldest
    /// cursor served. A replica follows its primary's eviction instead.
    #[arg(long, value_name = "DURATION", default_value = "24h",
          value_parser = crate::commands::feed_retention::parse_retention)]
    pub retain: crate::commands::feed_retention::Retention,
    #[command(flatten)]
    pub door: DoorArgs,
}

#[derive(Debug, Subcommand)]
pub enum Ach {
    /// Check NACHA files as a bank's front end would: record lengths, record order,
    /// blocking and padding, counts, totals and entry hashes, batch and trace
    /// numbers, dates, routing check digits, codes, the character set, addenda
    /// indicators, the Same Day ACH limit. Prints every problem by file, line and
    /// field; exits 1 when any file is invalid, 2 when one cannot be read.
    Validate {
        /// The files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// One JSON document: each file's findings and counts.
        #[arg(long)]
        json: bool,
    },
    /// Import entries from a CSV file (a header row naming Entry's fields) into the
    /// ledger (--ledger, or SQLite in --data). Each row is validated: a bad one is
    /// reported by line and field and stored rejected (a row that is no entry, or
    /// has more or fewer fields than the header, is reported and not stored).
    /// Idempotent per entry id. Exits 1 when a row was rejected or conflicts with a
    /// stored entry.
    Import {
        /// The CSV file.
        #[arg(value_name = "ENTRIES.csv")]
        file: PathBuf,
        /// Reject entries of a bank these rules do not have (they would never be
        /// packaged).
        #[arg(long, value_name = "ach.toml")]
        rules: Option<PathBuf>,
    },
    /// Cancel an entry: it will never be submitted (refused once its file's
    /// submission has begun). An id never imported is refused (exit 1: a mistyped id
    /// must not pass for a cancel) unless --before-import.
    Cancel {
        /// The entry id.
        entry_id: String,
        /// Why (recorded with the cancellation).
        #[arg(long, default_value = "cancelled from the command line")]
        reason: String,
        /// Cancel an id not imported yet: its import, when it comes, stores it
        /// cancelled (a cancel that overtakes its entry).
        #[arg(long)]
        before_import: bool,
    },
    /// Show an entry: state, file, rejection, cancellation (account masked).
    Entry {
        /// The entry id.
        entry_id: String,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Package and submit payment files. Every tick (ach.toml [engine] tick, 5 min by
    /// default) it packages the entries of each bank's windows whose packaging time
    /// has come (claim, group by batch, split into files, write, validate, record),
    /// rebuilds packaged files that now hold a cancelled entry, and from each window's
    /// submission_begin uploads its files with the bank's pacing. Several engines may
    /// share one broker and ledger: each entry goes in one file. Runs until
    /// SIGTERM; with --once, runs one tick and waits for what it enqueued.
    Engine(AchEngineArgs),
    /// Per bank and window: entries accepted, packaged, submitted, rejected and
    /// cancelled (with amounts), files by state and their totals.
    Status {
        /// The submission date (YYYY-MM-DD; default today, UTC).
        date: Option<chrono::NaiveDate>,
        /// Read window names and times from these rules.
        #[arg(long, value_name = "ach.toml")]
        rules: Option<PathBuf>,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write a realistic day of entries (DIR/entries.csv: a few large employers'
    /// payrolls, many small ones, vendor payments, collections, prenotes, over several
    /// banks) and a commented DIR/ach.toml with the Same Day and next-day windows.
    Generate {
        /// How many entries.
        #[arg(long, default_value_t = 100_000)]
        entries: u64,
        /// The submission date (YYYY-MM-DD).
        #[arg(long)]
        date: chrono::NaiveDate,
        /// Where to write.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The banks, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "first,second")]
        banks: Vec<String>,
        /// Rows to make invalid (each reported by line and field on import).
        #[arg(long, default_value_t = 0)]
        bad: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// A day of payment files end to end on the embedded default: generate entries
    /// and rules, import them, run every window of the day (package, validate,
    /// submit to an outbox under DIR), and print where to look.
    Demo(AchDemo),
}

#[derive(Debug, Args)]
pub struct AchEngineArgs {
    /// The banks and windows.
    #[arg(long, default_value = "ach.toml", value_name = "ach.toml")]
    pub rules: PathBuf,
    /// Where files and manifests are kept: a directory or s3://bucket[/prefix]
    /// (default DATA/ach/store). Engines of a fleet must share it.
    #[arg(long, value_name = "DIR|s3://…")]
    pub store: Option<String>,
    /// Run one tick, wait until what it enqueued has finished, print the day's status
    /// and exit (1 if a job failed, or the status names a problem such as entries no file ID
    /// modifier is left for): for cron, and to replay a moment with --at.
    #[arg(long)]
    pub once: bool,
    /// The moment a --once tick or --dry-run acts at (RFC 3339, e.g.
    /// 2026-03-03T08:30:00-05:00); default now.
    #[arg(long, value_parser = parse_instant)]
    pub at: Option<chrono::DateTime<chrono::Utc>>,
    /// Say what a tick would do (entries, batches, files, submissions), doing none
    /// of it.
    #[arg(long)]
    pub dry_run: bool,
    /// ACH jobs this process runs at once.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Only work the ACH jobs (no tick): more hands beside a ticking engine, on the
    /// same --broker, --ledger and --store.
    #[arg(long, conflicts_with_all = ["once", "dry_run", "at"])]
    pub work_only: bool,
}

#[derive(Debug, Args)]
pub struct AchDemo {
    /// Where the demo goes (entries, rules, state, ledger, store, outboxes). A previous
    /// demo there is replaced.
    #[arg(long, default_value = "./tranche-ach-demo")]
    pub dir: PathBuf,
    /// How many entries.
    #[arg(long, default_value_t = 20_000)]
    pub entries: u64,
    /// The submission date.
    #[arg(long, default_value = "2026-11-24")]
    pub date: chrono::NaiveDate,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// An instant as RFC 3339.
pub fn parse_instant(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| format!("expected an instant like 2026-03-03T08:30:00-05:00, got {s:?} ({e})"))
}

#[derive(Debug, Subcommand)]
pub enum Notes {
    /// Write a realistic synthetic day (trades.csv, clients.csv, broker.toml) to DIR.
    Generate {
        /// How many clients (most trade 1–40 times; about one in 200 trades thousands).
        #[arg(long, default_value_t = 1000)]
        clients: usize,
        /// The trade date, YYYY-MM-DD.
        #[arg(long)]
        date: chrono::NaiveDate,
        #[arg(long)]
        out: PathBuf,
        /// Same seed, same files.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Add one client with exactly K trades (60,000 makes a ~2,000-page note).
        #[arg(long, value_name = "K")]
        heavy_trades: Option<usize>,
    },
    /// Run a night: one chain per client (process → render → sign → mail) in the run
    /// contract-notes/DATE, worked by this process until every client is mailed or
    /// failed; writes OUT/report.csv. Running it again resumes (nothing done is redone).
    ///
    /// Secrets never go on the command line: the PKCS#12 password comes from
    /// TRANCHE_SIGN_P12_PASSWORD (or TRANCHE_SIGN_P12_PASSWORD_FILE), the PDFs' owner
    /// password from TRANCHE_OWNER_PASSWORD(_FILE) (else a random one kept in
    /// OUT/owner-password), the SMTP password from TRANCHE_SMTP_PASSWORD(_FILE).
    Run(Box<NotesRun>),
    /// Generate 1,000 clients and run their night into ./tranche-demo (no server, no key,
    /// no SMTP needed), then print where to look.
    Demo(NotesDemo),
    /// Serve render requests on stdin and stdout: the helper process a worker starts
    /// for each of its --render-processes.
    #[command(hide = true)]
    RenderHelper {
        #[arg(long, value_name = "FILE.typ")]
        template: Option<PathBuf>,
    },
    /// Read a day's files, compute every client's note and report what would fail and
    /// why (file, line, field), without running anything.
    Check {
        #[arg(long)]
        trades: PathBuf,
        #[arg(long)]
        clients: PathBuf,
        #[arg(long)]
        broker_file: PathBuf,
        /// The trade date, YYYY-MM-DD.
        #[arg(long)]
        date: chrono::NaiveDate,
        /// How many problems to list.
        #[arg(long, default_value_t = 20)]
        show: usize,
    },
}

#[derive(Debug, Args)]
pub struct NotesRun {
    /// The day's trades (CSV; see the README for the columns).
    #[arg(long)]
    pub trades: PathBuf,
    /// The client master (CSV).
    #[arg(long)]
    pub clients: PathBuf,
    /// The broker's details and dated charge rates (TOML).
    #[arg(long)]
    pub broker_file: PathBuf,
    /// The trade date, YYYY-MM-DD.
    #[arg(long)]
    pub date: chrono::NaiveDate,
    /// Output directory: report.csv, and by default store/, outbox/, demo-signer/.
    #[arg(long)]
    pub out: PathBuf,
    /// Only submit the night and watch it (a control node): workers elsewhere
    /// (`tranche worker`, sharing --broker and --store) do the steps.
    #[arg(long)]
    pub no_work: bool,
    /// Clients whose note was already mailed and whose input has changed since (a run
    /// submitted again lists them and sends nothing for them): send each a corrected
    /// note, with a new number naming the one it replaces. Client codes separated by
    /// commas, or `all`. The decision is recorded in the run.
    #[arg(long, value_name = "CLIENTS")]
    pub issue_corrections: Option<String>,
    #[command(flatten)]
    pub steps: StepOptions,
}

/// How this process does the steps (for `notes run` and `worker`).
#[derive(Debug, Args)]
pub struct StepOptions {
    /// Where artifacts go: a directory, or s3://bucket[/prefix] (endpoint and
    /// credentials from AWS_* variables). Default: OUT/store.
    #[arg(long, env = "TRANCHE_STORE", value_name = "DIR|URL")]
    pub store: Option<String>,
    /// SMTP server, e.g. smtp://relay:25, smtp://relay:587?tls=starttls or
    /// smtps://user@relay:465. Without it, e-mails are written to OUT/outbox/.
    #[arg(long, env = "TRANCHE_SMTP")]
    pub smtp: Option<String>,
    /// SMTP connections kept open at most.
    #[arg(long, default_value_t = 4)]
    pub smtp_connections: u32,
    /// The broker's signing key and certificate (PKCS#12). Without it, a self-signed
    /// demo certificate is made in OUT/demo-signer/.
    #[arg(long, value_name = "FILE")]
    pub sign_p12: Option<PathBuf>,
    /// A Typst template instead of the built-in one (it reads /note.json).
    #[arg(long, value_name = "FILE.typ")]
    pub template: Option<PathBuf>,
    /// The PDF password of each client: {pan} (upper case), {pan_lower}, {ucc}.
    #[arg(long, default_value = "{pan}")]
    pub password_rule: String,
    /// PDF encryption: aes256 (PDF 2.0, R6) or aes128 (R4, for old readers).
    #[arg(long, value_enum, default_value_t = CipherArg::Aes256)]
    pub cipher: CipherArg,
    /// Notes processed, rendered and signed at once (default: the cores).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Helper processes rendering notes, one note each at a time (Typst uses one core
    /// per process, whatever its threads); 0 renders in this process, one note at a
    /// time. Default: the cores.
    #[arg(long, value_name = "N")]
    pub render_processes: Option<usize>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CipherArg {
    Aes256,
    Aes128,
}

#[derive(Debug, Args)]
pub struct NotesDemo {
    /// Where the demo goes (inputs, state, store, outbox, report). A previous demo
    /// there is replaced.
    #[arg(long, default_value = "./tranche-demo")]
    pub dir: PathBuf,
    #[arg(long, default_value_t = 1000)]
    pub clients: usize,
    #[arg(long, default_value = "2026-11-20")]
    pub date: chrono::NaiveDate,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Send the e-mails to this SMTP server instead of the outbox directory.
    #[arg(long)]
    pub smtp: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Bench {
    /// Enqueue N no-op jobs (or N chains of K steps) on the embedded backend (or on
    /// Redis with --broker, under a fresh key prefix of its own), process them with all
    /// cores (or in N worker processes), and print enqueue rate, jobs/s, latency and
    /// peak memory.
    Engine(BenchEngine),
    /// Generate a night of contract notes and work it end to end in this process
    /// (process → render → sign → mail): notes/s, per-core rate, p50/p99 per step and
    /// per note, peak memory.
    Notes(BenchNotes),
    /// Start the HTTP server in this process over a fresh embedded backend (or a fresh
    /// prefix in the Redis server of --broker) and measure submit throughput (batched
    /// requests) and remote executions (poll + complete by HTTP workers), with p50/p99
    /// latencies.
    Server(BenchServer),
    /// Fill a fresh store (embedded, or a fresh prefix on --broker) with N jobs over
    /// many runs, some failed and the newest waiting, then time what an operator does:
    /// a job by id, a page of the job list per filter, and gathering the first 50
    /// matches as `tranche jobs` does (p50/p99 per query).
    Browse(BenchBrowse),
    /// Generate a realistic day of ACH entries (a few large employers, many small
    /// ones, several banks), import it (CSV into the ledger) and package it into NACHA
    /// files (claims, map, reduce, files written, validated and recorded), on the
    /// embedded default or on --broker and --ledger with --processes workers; then the
    /// day over HTTP into a fresh ledger. Prints entries/s for each, files, wall times
    /// and peak memory. With --writer-only, the file writer alone on one core.
    /// bench/ach-vs-moov.sh runs both beside moov-io/ach.
    Ach(BenchAch),
    /// Start the order-state feed's server (`tranche feed serve --shards K` as a
    /// child process, a fresh store; with --replica a read replica of it too),
    /// emulated cores at --rate and emulated clients, for --duration: writes/s,
    /// delivered rows/s, delivery latency avg/p50/p99/max, share of empty polls, the
    /// check (omissions, reorderings) and each process's peak RSS and CPU. --pilot
    /// runs the pilot's shape (2 shards, 100 firms' clients, 2 unfiltered on a
    /// replica, tcp); --rates or --find-max step the rate and report the highest
    /// meeting avg <= 1 ms, p99 <= 5 ms, no omission or reordering, <= 5 % empty.
    /// Exits 2 if a check failed, 3 if the core fell behind (or no rate met the
    /// criteria).
    Feed(crate::commands::feed_bench::BenchFeedArgs),
}

#[derive(Debug, Args)]
pub struct BenchAch {
    /// How many entries.
    #[arg(long, default_value_t = 1_000_000)]
    pub entries: u64,
    /// Entries per file at most (the banks' max_entries_per_file).
    #[arg(long, default_value_t = 25_000)]
    pub cap: u32,
    /// Banks the entries are spread over.
    #[arg(long, default_value_t = 4)]
    pub banks: u32,
    /// Work the jobs in N worker processes (`tranche ach engine --work-only`) sharing
    /// --broker and --ledger, instead of in this one.
    #[arg(long, default_value_t = 0)]
    pub processes: usize,
    /// ACH jobs a worker runs at once.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Keep everything (entries, ledger, state, files) in DIR instead of a temporary
    /// directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Only the file writer, on one core: N PPD credits built, written into files of
    /// --cap, each validated and written to disk, in a process of its own (the shape
    /// of moov-io/ach's yardstick, which bench/ach-vs-moov.sh runs beside it).
    #[arg(long)]
    pub writer_only: bool,
    /// One JSON line instead of a sentence.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchBrowse {
    /// Jobs in the store.
    #[arg(long, default_value_t = 10_000_000)]
    pub jobs: u64,
    /// Runs they are spread over; the last is left waiting (available).
    #[arg(long, default_value_t = 100)]
    pub runs: u64,
    /// One job in N fails (its run's failures are what an operator looks for).
    #[arg(long, default_value_t = 10_000)]
    pub fail_every: u64,
    /// Timed calls per query.
    #[arg(long, default_value_t = 50)]
    pub samples: usize,
    /// Keep the bench database (in --data) instead of a fresh temporary one.
    #[arg(long)]
    pub keep: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchNotes {
    /// Clients in the generated day (most trade 1–40 times, one in 200 thousands).
    #[arg(long, default_value_t = 1000)]
    pub clients: usize,
    /// Add one client with K trades (60,000 makes a ~2,000-page note).
    #[arg(long, value_name = "K")]
    pub heavy_trades: Option<usize>,
    #[arg(long, default_value = "2026-11-20")]
    pub date: chrono::NaiveDate,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Mail to this SMTP server (e.g. a local sink) instead of the outbox directory.
    #[arg(long)]
    pub smtp: Option<String>,
    #[arg(long, default_value_t = 4)]
    pub smtp_connections: u32,
    /// AES-128 (R4) instead of AES-256 (R6).
    #[arg(long)]
    pub aes128: bool,
    /// Keep everything (inputs, state, store, outbox) in DIR instead of a temporary one.
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Also write each short note's Typst sources to DIR, for the `typst` CLI.
    #[arg(long, value_name = "DIR")]
    pub export_typst: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchServer {
    /// Jobs to submit.
    #[arg(long, default_value_t = 200_000)]
    pub jobs: u64,
    /// Jobs per submit request.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// Concurrent submitting clients.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// No-op jobs executed by the HTTP workers.
    #[arg(long, default_value_t = 100_000)]
    pub executions: u64,
    /// Concurrent HTTP workers.
    #[arg(long, default_value_t = 16)]
    pub workers: usize,
    /// Most jobs per poll.
    #[arg(long, default_value_t = 10)]
    pub poll_batch: usize,
    /// Keep the bench database (in --data) instead of a fresh temporary one.
    #[arg(long)]
    pub keep: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchEngine {
    /// How many jobs (or chains).
    #[arg(long, default_value_t = 100_000)]
    pub jobs: u64,
    /// Steps per chain; 1 means single jobs.
    #[arg(long, default_value_t = 1)]
    pub chain_length: u32,
    /// In-flight jobs per worker.
    #[arg(long, default_value_t = 2048)]
    pub concurrency: usize,
    /// Most jobs per reserve call.
    #[arg(long, default_value_t = 1024)]
    pub batch: usize,
    /// Jobs per enqueue call [default: 100,000 on the embedded backend (one
    /// transaction); 2,000 on Redis, where one script call holds the server]
    #[arg(long)]
    pub enqueue_batch: Option<usize>,
    /// Enqueue calls in flight at once [default: 1 on the embedded backend (one
    /// writer); 4 on Redis, so the next batch travels while Redis runs the last]
    #[arg(long)]
    pub enqueuers: Option<usize>,
    /// Work the jobs in N worker processes (this binary, started N times against
    /// --broker) instead of in this one; 0 works them here. Needs --broker.
    #[arg(long, default_value_t = 0)]
    pub processes: usize,
    /// Internal: be one of those worker processes, for this run; exits when it is done.
    #[arg(long, hide = true, value_name = "RUN")]
    pub work_run: Option<String>,
    /// fsync every commit (durable against power loss, not only a killed process).
    #[arg(long)]
    pub full_sync: bool,
    /// Keep the bench database (in --data) instead of a fresh temporary one.
    #[arg(long)]
    pub keep: bool,
    /// Limit the bench's queue to --rate starts per second (a backend limit) and
    /// report the measured start rate against it. Enqueue a few seconds' worth.
    #[arg(long, conflicts_with = "processes")]
    pub rate_limited: bool,
    /// The start rate of --rate-limited, per second.
    #[arg(long, default_value_t = 5_000, requires = "rate_limited")]
    pub rate: u32,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}
