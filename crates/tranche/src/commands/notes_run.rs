//! `tranche notes run` and `tranche notes demo`: a broker's night, as one command on the
//! embedded backend. Inputs are read and planned, one chain per client is enqueued (a
//! second run of the same night adds nothing and resumes), this process works the four
//! step queues until the run finishes, and `OUT/report.csv` is written.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use chrono::NaiveDate;
use tranche_core::Backend;
use tranche_mail::{Mailer, OutboxMailer, SmtpConfig, SmtpMailer};
use tranche_notes::generate::{generate as write_day, GenerateOptions};
use tranche_notes::input::{load_broker, read_clients, read_trades};
use tranche_notes::pipeline::{
    collect_report, enqueue_night, plan_night, run_name, work_until_finished, write_report,
    ChainIds, Day, Night, PasswordRule, ReportRow, ReportSummary, StepCounts, Workers,
};
use tranche_notes::render::Renderer;
use tranche_sign::{Cipher, Pkcs12Signer, SignatureInfo, Signer};
use tranche_storage::LocalStore;

use crate::cli::{CipherArg, DataArgs, NotesDemo, NotesRun};
use crate::data::open;
use crate::progress::RunDisplay;
use crate::secrets;

/// The variables the signing key store's password and the PDFs' owner password come
/// from (or `…_FILE`, naming a file that holds it).
pub const P12_PASSWORD_VAR: &str = "TRANCHE_SIGN_P12_PASSWORD";
pub const OWNER_PASSWORD_VAR: &str = "TRANCHE_OWNER_PASSWORD";

/// Everything a night needs, checked before anything runs.
pub struct NightSetup {
    pub night: Arc<Night>,
    pub mailer: NightMailer,
    pub mail_to: String,
    pub signer_note: String,
}

/// The mailer, kept typed so an SMTP pool can be closed at the end.
pub enum NightMailer {
    Smtp(Arc<SmtpMailer>),
    Outbox(Arc<OutboxMailer>),
}

impl NightMailer {
    fn shared(&self) -> Arc<dyn Mailer> {
        match self {
            NightMailer::Smtp(m) => m.clone(),
            NightMailer::Outbox(m) => m.clone(),
        }
    }

    pub async fn close(&self) {
        if let NightMailer::Smtp(m) = self {
            m.close().await;
        }
    }
}

/// What `notes run` needs besides the input files.
pub struct RunOptions {
    pub out: PathBuf,
    pub smtp: Option<String>,
    pub smtp_connections: u32,
    pub sign_p12: Option<PathBuf>,
    pub template: Option<PathBuf>,
    pub password_rule: String,
    pub cipher: Cipher,
    pub workers: Workers,
}

impl From<&NotesRun> for RunOptions {
    fn from(a: &NotesRun) -> Self {
        RunOptions {
            out: a.out.clone(),
            smtp: a.smtp.clone(),
            smtp_connections: a.smtp_connections,
            sign_p12: a.sign_p12.clone(),
            template: a.template.clone(),
            password_rule: a.password_rule.clone(),
            cipher: match a.cipher {
                CipherArg::Aes256 => Cipher::Aes256,
                CipherArg::Aes128 => Cipher::Aes128,
            },
            workers: Workers {
                cpu: a.concurrency.unwrap_or(Workers::default().cpu),
                mail: (a.smtp_connections as usize * 2).max(1),
                queues: Vec::new(),
            },
        }
    }
}

/// Read the day's files. A broken broker file or an unreadable trades/clients file
/// stops the night (nothing could be right); a bad row only fails its client.
pub fn read_day(trades: &Path, clients: &Path, broker: &Path, date: NaiveDate) -> Result<Day> {
    let broker_file = broker;
    let broker = load_broker(broker_file)?;
    if broker.rates_on(date).is_none() {
        bail!(
            "{}: no charge-rate table applies on {date} (each [[rates]] applies from its `from` date)",
            broker_file.display()
        );
    }
    Ok(Day {
        date,
        trades_file: trades.display().to_string(),
        broker,
        clients: read_clients(clients)?,
        trades: read_trades(trades)?,
    })
}

/// The owner password: from the environment, else the one this output directory was
/// given before, else a fresh random one kept in `OUT/owner-password` (owner-only).
fn owner_password(out: &Path) -> Result<String> {
    if let Some(p) = secrets::from_env(OWNER_PASSWORD_VAR)? {
        return Ok(p);
    }
    let path = out.join("owner-password");
    match std::fs::read_to_string(&path) {
        Ok(p) if !p.trim().is_empty() => return Ok(p.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
    let password: String = (0..24).map(|_| fastrand::alphanumeric()).collect();
    secrets::write_private(&path, &password)?;
    Ok(password)
}

fn signer(options: &RunOptions, broker_name: &str) -> Result<(Arc<dyn Signer>, String)> {
    let info = SignatureInfo {
        reason: "Contract note cum tax invoice".to_string(),
        location: broker_name.to_string(),
        contact: None,
    };
    match &options.sign_p12 {
        Some(path) => {
            let password = secrets::from_env(P12_PASSWORD_VAR)?.unwrap_or_default();
            let der = std::fs::read(path)
                .with_context(|| format!("cannot read the signing key {}", path.display()))?;
            let signer = Pkcs12Signer::from_pkcs12(&der, &password, info).with_context(|| {
                format!(
                    "{}: cannot use it as a signing key (password from {P12_PASSWORD_VAR} or {P12_PASSWORD_VAR}_FILE)",
                    path.display()
                )
            })?;
            Ok((Arc::new(signer), format!("signed with {}", path.display())))
        }
        None => {
            let dir = options.out.join("demo-signer");
            // The demo key store's password only guards a throwaway key.
            let signer = Pkcs12Signer::demo_in(&dir, "demo", info).with_context(|| {
                format!("cannot make the demo signing key in {}", dir.display())
            })?;
            Ok((
                Arc::new(signer),
                format!(
                    "signed with a SELF-SIGNED DEMO certificate ({}; pass --sign-p12 for a real key)",
                    dir.join("demo-signer.pem").display()
                ),
            ))
        }
    }
}

/// Validate the options and load what every job shares (template, key, mailer).
pub fn setup(
    day_date: NaiveDate,
    broker: &tranche_notes::input::Broker,
    options: &RunOptions,
) -> Result<NightSetup> {
    let password_rule = PasswordRule::parse(&options.password_rule)
        .map_err(|e| anyhow::anyhow!("--password-rule: {e}"))?;
    std::fs::create_dir_all(&options.out)
        .with_context(|| format!("cannot create {}", options.out.display()))?;
    let renderer = match &options.template {
        Some(path) => Renderer::from_file(path)?,
        None => Renderer::new(),
    };
    let (signer, signer_note) = signer(options, &broker.name)?;
    let (mailer, mail_to) = match &options.smtp {
        Some(url) => {
            let mut config = SmtpConfig::from_env(url.clone())?;
            config.pool_size = options.smtp_connections.max(1);
            let mailer = SmtpMailer::new(config).with_context(|| "--smtp")?;
            let shown = mailer_target(url);
            (
                NightMailer::Smtp(Arc::new(mailer)),
                format!("mail via {shown}"),
            )
        }
        None => {
            let dir = options.out.join("outbox");
            let mailer = OutboxMailer::new(&dir)
                .with_context(|| format!("cannot create the outbox {}", dir.display()))?;
            (
                NightMailer::Outbox(Arc::new(mailer)),
                format!(
                    "mail written as .eml files to {} (no --smtp)",
                    dir.display()
                ),
            )
        }
    };
    let night = Night {
        date: day_date,
        broker: broker.clone(),
        store: Arc::new(LocalStore::new(options.out.join("store"))),
        renderer,
        signer,
        mailer: mailer.shared(),
        password_rule,
        owner_password: owner_password(&options.out)?,
        cipher: options.cipher,
    };
    Ok(NightSetup {
        night: Arc::new(night),
        mailer,
        mail_to,
        signer_note,
    })
}

/// The SMTP URL without anything after the host (no user names in output).
fn mailer_target(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => format!(
            "{}://{}:{}",
            u.scheme(),
            u.host_str().unwrap_or("?"),
            u.port_or_known_default().unwrap_or(0)
        ),
        Err(_) => "the SMTP server".to_string(),
    }
}

/// The result of working a night in this process.
pub struct NightResult {
    pub rows: Vec<ReportRow>,
    pub chains: Vec<ChainIds>,
    pub summary: ReportSummary,
    pub interrupted: bool,
    pub counts: Arc<StepCounts>,
    pub enqueue_time: Duration,
    pub work_time: Duration,
}

/// Enqueue the night (idempotently), work it to the end, write the report.
pub async fn work_night(
    backend: Arc<dyn Backend>,
    day: Day,
    options: &RunOptions,
    quiet: bool,
) -> Result<NightResult> {
    let date = day.date;
    let run = run_name(date);
    let trades = day.trades.count();
    let broker = day.broker.clone();
    let setup = setup(date, &broker, options)?;
    let (chains, unattributed) = plan_night(day);
    if !quiet {
        eprintln!(
            "{run}: {} clients, {trades} trades; {}; {}",
            chains.len(),
            setup.signer_note,
            setup.mail_to
        );
    }
    let started = Instant::now();
    let ids = enqueue_night(&*backend, date, &chains, 2_000, |_| {}).await?;
    let enqueue_time = started.elapsed();
    drop(chains);

    let counts = Arc::new(StepCounts::default());
    let worker = options
        .workers
        .worker(backend.clone(), setup.night.clone(), counts.clone())?;
    let mut display = (!quiet).then(|| RunDisplay::new(run.as_str()));
    let stop = tranche_core::on_terminate();
    let work_started = Instant::now();
    let c = counts.clone();
    let finished = work_until_finished(
        backend.clone(),
        worker,
        &run,
        stop,
        Duration::from_millis(200),
        |p| {
            if let Some(d) = display.as_mut() {
                d.update(p, &c.summary());
            }
        },
    )
    .await?;
    let work_time = work_started.elapsed();
    if let Some(d) = &display {
        d.finish();
    }
    setup.mailer.close().await;
    let rows = collect_report(&*backend, &ids, &unattributed).await?;
    let report = options.out.join("report.csv");
    write_report(&report, &rows).with_context(|| format!("cannot write {}", report.display()))?;
    Ok(NightResult {
        summary: ReportSummary::of(&rows),
        rows,
        chains: ids,
        interrupted: finished.is_none(),
        counts,
        enqueue_time,
        work_time,
    })
}

fn print_outcome(run: &str, at: &DataArgs, out: &Path, r: &NightResult) -> ExitCode {
    let s = &r.summary;
    println!(
        "{run}: {} mailed, {} failed, {} cancelled, {} not finished  ({:.1} s)",
        s.mailed,
        s.failed,
        s.cancelled,
        s.pending,
        (r.enqueue_time + r.work_time).as_secs_f64()
    );
    println!("  report   {}", out.join("report.csv").display());
    println!("  notes    {}", out.join("store").display());
    let data_arg = format!(" {}", at.as_args());
    if r.interrupted {
        println!("interrupted: run the same command again to resume (nothing done is redone)");
        return ExitCode::from(130);
    }
    if s.failed > 0 {
        let shown: Vec<&ReportRow> = r
            .rows
            .iter()
            .filter(|row| row.error.is_some() && row.status.as_str() == "failed")
            .take(10)
            .collect();
        println!("failed:");
        for row in shown {
            let who = if row.client_code.is_empty() {
                "(input)"
            } else {
                &row.client_code
            };
            println!("  {who:<10} {}", row.error.as_deref().unwrap_or(""));
        }
        println!("  details:  tranche{data_arg} status {run}");
        println!(
            "  re-run only the failed clients: tranche{data_arg} retry {run}, then this command again"
        );
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}

pub async fn run(at: &DataArgs, args: NotesRun) -> Result<ExitCode> {
    let options = RunOptions::from(&args);
    let day = read_day(&args.trades, &args.clients, &args.broker_file, args.date)?;
    let backend = open(at).await?;
    let result = work_night(backend, day, &options, false).await?;
    Ok(print_outcome(
        run_name(args.date).as_str(),
        at,
        &options.out,
        &result,
    ))
}

/// Marks a directory as made by `notes demo`, so a second demo may clear it.
const DEMO_MARKER: &str = ".tranche-demo";

pub async fn demo(args: NotesDemo) -> Result<ExitCode> {
    let dir = &args.dir;
    if dir.exists() {
        if dir.join(DEMO_MARKER).exists() {
            std::fs::remove_dir_all(dir)
                .with_context(|| format!("cannot clear the previous demo in {}", dir.display()))?;
        } else if std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .next()
            .is_some()
        {
            bail!(
                "{} exists and was not made by `tranche notes demo`: pass --dir with a new or empty directory",
                dir.display()
            );
        }
    }
    let input = dir.join("input");
    std::fs::create_dir_all(&input)
        .with_context(|| format!("cannot create {}", input.display()))?;
    std::fs::write(dir.join(DEMO_MARKER), "made by tranche notes demo\n")
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    let date = args.date;
    let g = write_day(
        &input,
        &GenerateOptions {
            clients: args.clients,
            date,
            seed: args.seed,
            heavy_trades: None,
        },
    )
    .with_context(|| format!("cannot write the demo day to {}", input.display()))?;
    eprintln!(
        "generated {} clients, {} trades for {date} in {}",
        g.clients,
        g.trades,
        input.display()
    );
    let at = DataArgs {
        data: dir.join("state"),
        broker: None,
        prefix: String::new(),
    };
    let options = RunOptions {
        out: dir.clone(),
        smtp: args.smtp.clone(),
        smtp_connections: 4,
        sign_p12: None,
        template: None,
        password_rule: "{pan}".to_string(),
        cipher: Cipher::Aes256,
        workers: Workers::default(),
    };
    let day = read_day(
        &input.join("trades.csv"),
        &input.join("clients.csv"),
        &input.join("broker.toml"),
        date,
    )?;
    let backend = open(&at).await?;
    let run = run_name(date);
    let result = work_night(backend, day, &options, false).await?;
    let code = print_outcome(run.as_str(), &at, dir, &result);
    let mailed = result.rows.iter().find(|r| r.message_id.is_some());
    println!("where to look:");
    println!("  inputs        {}", input.display());
    if args.smtp.is_none() {
        println!("  e-mails       {}", dir.join("outbox").display());
    }
    println!(
        "  signed notes  {}  (open with the client's PAN in upper case, e.g. `qpdf --password=PAN --decrypt`)",
        dir.join("store/*-signed-pdf").display()
    );
    println!(
        "  verify        pdfsig -upw PAN FILE  (the demo certificate: {})",
        dir.join("demo-signer/demo-signer.pem").display()
    );
    println!("  progress      tranche {} status {run}", at.as_args());
    if let Some(row) = mailed {
        println!(
            "  e.g. client {}: {} page(s), net {} (negative: payable by the client)",
            row.client_code,
            row.pages.unwrap_or(0),
            row.net_amount
                .map(|n| format!("{n:.2}"))
                .unwrap_or_default()
        );
    }
    Ok(code)
}
