//! `tranche ach generate` and `tranche ach demo`: a realistic day of payment entries,
//! and that day run end to end on the embedded default.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use chrono::{DateTime, NaiveDate, Utc};
use tranche_ach_rules::generate::{write_day, DayOptions};

use super::ach_engine::{load_rules, open_payments, print_status, spawn_worker};
use crate::cli::{AchDemo, DataArgs};

const DEMO_MARKER: &str = ".tranche-ach-demo";

fn day_options(
    entries: u64,
    date: NaiveDate,
    banks: Vec<String>,
    bad: u64,
    seed: u64,
) -> DayOptions {
    DayOptions {
        entries,
        date,
        seed,
        banks,
        bad,
        ..DayOptions::default()
    }
}

pub fn generate(
    entries: u64,
    date: NaiveDate,
    out: &Path,
    banks: Vec<String>,
    bad: u64,
    seed: u64,
) -> Result<ExitCode> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let files = write_day(out, &day_options(entries, date, banks, bad, seed))
        .with_context(|| format!("cannot write the day into {}", out.display()))?;
    println!("{files}");
    Ok(ExitCode::SUCCESS)
}

/// The demo's uploads go a second apart, so a day runs in seconds: the shipped rules'
/// pacing (15 s, 30 s) is what banks ask, and the demo says it changed it.
fn demo_pacing(rules: &Path) -> Result<()> {
    let text = std::fs::read_to_string(rules)
        .with_context(|| format!("cannot read {}", rules.display()))?;
    let paced: Vec<String> = text
        .lines()
        .map(|l| match l.strip_prefix("pacing = ") {
            Some(shipped) => format!("pacing = \"1s\"  # the demo's; the example says {shipped}"),
            None => l.to_string(),
        })
        .collect();
    std::fs::write(rules, paced.join("\n") + "\n")
        .with_context(|| format!("cannot write {}", rules.display()))
}

pub async fn demo(_global: &DataArgs, args: AchDemo) -> Result<ExitCode> {
    let dir = &args.dir;
    super::demo_dir::prepare(dir, DEMO_MARKER, "tranche ach demo")?;
    let banks = vec!["first".to_string(), "second".to_string()];
    // A few invalid rows on purpose: the import names each by line and field.
    let files = write_day(
        dir,
        &day_options(args.entries, args.date, banks, 3, args.seed),
    )
    .with_context(|| format!("cannot write the day into {}", dir.display()))?;
    eprintln!("{files}");
    demo_pacing(&files.rules)?;
    let at = DataArgs {
        data: dir.join("state"),
        broker: None,
        prefix: "{tranche}:".into(),
        reconnect_for: 60,
        ledger: None,
    };
    let entries_csv = dir.join("entries.csv");
    eprintln!(
        "importing {} (3 rows are invalid on purpose):",
        entries_csv.display()
    );
    let rules_file = dir.join("ach.toml");
    super::ach::import(&at, &entries_csv, Some(&rules_file)).await?;

    let rules = load_rules(&rules_file)?;
    let store = dir.join("store").display().to_string();
    let payments = open_payments(&at, rules, Some(&store)).await?;
    payments.apply_pacing().await?;
    let stop = tranche_core::on_terminate();
    let worker = spawn_worker(&payments, 16, &stop)?;

    // The day's windows in the order they open: one tick at each opening packages
    // what is eligible and submits it (uploads paced per bank, as the rules say).
    let mut moments: Vec<(DateTime<Utc>, String)> = payments
        .rules()
        .banks
        .iter()
        .flat_map(|b| {
            b.windows.iter().map(move |w| {
                (
                    w.begins(args.date, b.time_zone),
                    format!("{}/{}", b.profile.bank, w.name),
                )
            })
        })
        .collect();
    moments.sort();
    let pacing: Vec<String> = payments
        .rules()
        .banks
        .iter()
        .map(|b| {
            format!(
                "{} {}",
                b.profile.bank,
                tranche_ach_rules::format_duration(b.pacing)
            )
        })
        .collect();
    eprintln!(
        "running the day's windows in order (uploads to a bank are paced as its rules say: {})",
        pacing.join(", ")
    );
    let started = std::time::Instant::now();
    for (moment, what) in &moments {
        let tick = payments.tick(*moment).await?;
        for run in tick.runs() {
            let p = payments
                .client()
                .wait_finished(&run, std::time::Duration::from_millis(100), None, |_| {})
                .await?;
            if p.failed > 0 {
                for f in payments.client().run_failures(&run, None, 5).await? {
                    eprintln!("{run}: job {} ({}) failed: {}", f.id, f.kind, f.error);
                }
            }
        }
        eprintln!(
            "{} {what} opened: packaged and submitted ({:.1} s in)",
            moment.format("%H:%M UTC"),
            started.elapsed().as_secs_f64()
        );
    }
    stop.cancel();
    worker.await??;
    let status = payments.status(args.date).await?;
    print_status(&status);

    let outboxes: Vec<PathBuf> = payments
        .rules()
        .banks
        .iter()
        .filter_map(|b| match &b.delivery {
            tranche_ach_rules::Delivery::Outbox { dir } => Some(dir.clone()),
            tranche_ach_rules::Delivery::Sftp { .. } => None,
        })
        .collect();
    let mut delivered = 0;
    let mut invalid = 0;
    for o in &outboxes {
        for e in std::fs::read_dir(o).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().ends_with(".ach") {
                delivered += 1;
                let bytes = std::fs::read(e.path())?;
                if !tranche_ach::validate(&bytes).is_valid() {
                    invalid += 1;
                }
            }
        }
    }
    println!("{delivered} files delivered, {invalid} invalid by tranche ach validate");
    println!("where to look:");
    println!("  entries       {}", entries_csv.display());
    println!("  rules         {}", rules_file.display());
    for o in &outboxes {
        println!("  delivered     {}", o.display());
    }
    println!(
        "  manifests     {}",
        dir.join("store/*-ach-manifest").display()
    );
    println!(
        "  check files   tranche ach validate {}/*/*.ach",
        dir.join("outbox").display()
    );
    println!(
        "  status        tranche --data {} ach status {} --rules {}",
        at.data.display(),
        args.date,
        rules_file.display()
    );
    println!(
        "  one entry     tranche --data {} ach entry ID",
        at.data.display()
    );
    Ok(if invalid > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
