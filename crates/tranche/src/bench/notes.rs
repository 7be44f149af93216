//! `tranche bench notes`: a generated night of contract notes worked end to end in this
//! process (process → render → sign → mail), with notes/s, per-step and per-note
//! latencies and peak memory. Mail goes to `--smtp` (a local sink) or the outbox.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use serde::Serialize;
use tranche_notes::generate::GenerateOptions;
use tranche_notes::night::generated_day;
use tranche_notes::note::build;
use tranche_notes::pipeline::{Corrections, Day, Workers, STEPS};
use tranche_notes::render::typst_sources;
use tranche_sign::Cipher;

use super::figures::{ms, peak_rss_mb, percentile_of};
use super::state_dir::StateDir;
use crate::cli::BenchNotes;
use crate::data::open_with;
use crate::night::work_night;
use crate::notes_setup::RunOptions;

#[derive(Serialize)]
struct StepFigures {
    step: &'static str,
    done: u64,
    p50_ms: f64,
    p99_ms: f64,
    /// CPU-bound steps: notes per second of one core's handler time.
    per_core_per_sec: f64,
}

#[derive(Serialize)]
struct Report {
    clients: usize,
    trades: usize,
    mailed: usize,
    failed: usize,
    pages: usize,
    cores: usize,
    cipher: String,
    mail: String,
    enqueue_seconds: f64,
    work_seconds: f64,
    notes_per_sec: f64,
    notes_per_sec_per_core: f64,
    note_p50_ms: f64,
    note_p99_ms: f64,
    steps: Vec<StepFigures>,
    peak_rss_mb: f64,
}

pub async fn notes(args: BenchNotes) -> Result<ExitCode> {
    let state = StateDir::new(args.keep.as_deref(), "notes")?;
    let dir: PathBuf = state.path().to_path_buf();
    let input = dir.join("input");
    let date = args.date;
    let (g, day) = generated_day(
        &input,
        &GenerateOptions {
            clients: args.clients,
            date,
            seed: args.seed,
            heavy_trades: args.heavy_trades,
        },
    )?;
    eprintln!(
        "bench notes: {} clients, {} trades on {date}, in {}",
        g.clients,
        g.trades,
        dir.display()
    );
    if let Some(out) = &args.export_typst {
        export_typst(&day, out)?;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cipher = if args.aes128 {
        Cipher::Aes128
    } else {
        Cipher::Aes256
    };
    let mut options = RunOptions::local(&dir.join("out"), args.smtp.clone());
    options.smtp_connections = args.smtp_connections;
    options.cipher = cipher;
    options.workers = Workers {
        cpu: cores,
        mail: args.smtp_connections as usize * 2,
        queues: Vec::new(),
    };
    let mail = match &args.smtp {
        Some(_) => format!("SMTP, {} connections", args.smtp_connections),
        None => "outbox (.eml files)".to_string(),
    };
    let backend = open_with(&dir.join("state"), Default::default())?;
    let result = work_night(backend.clone(), day, &options, Corrections::default(), true).await?;
    ensure!(!result.interrupted, "interrupted");
    let s = &result.totals;

    // A note's latency: its `process` step starting to its mail being recorded.
    let mut note_us = Vec::with_capacity(result.chains.len());
    for chain in &result.chains {
        let first = backend.job(chain.process_job()).await?;
        let last = backend.job(chain.mail_job()).await?;
        if let (Some(f), Some(l)) = (first, last) {
            if let (Some(start), Some(end)) = (f.started_at, l.finished_at) {
                note_us.push(end.since(start).as_micros().min(u128::from(u32::MAX)) as u32);
            }
        }
    }
    note_us.sort_unstable();
    let seconds = (result.enqueue_time + result.work_time).as_secs_f64();
    let done = result.steps.done();
    let steps = STEPS
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let times = result.steps.sorted_times(i);
            let busy: f64 = times.iter().map(Duration::as_secs_f64).sum();
            StepFigures {
                step: step.queue,
                done: done[i],
                p50_ms: ms(percentile_of(&times, 0.50)),
                p99_ms: ms(percentile_of(&times, 0.99)),
                per_core_per_sec: if busy > 0.0 {
                    times.len() as f64 / busy
                } else {
                    0.0
                },
            }
        })
        .collect();
    let report = Report {
        clients: g.clients,
        trades: g.trades,
        mailed: s.mailed,
        failed: s.failed,
        pages: result.rows.iter().filter_map(|r| r.pages).sum(),
        cores,
        cipher: cipher.to_string(),
        mail,
        enqueue_seconds: result.enqueue_time.as_secs_f64(),
        work_seconds: result.work_time.as_secs_f64(),
        notes_per_sec: s.mailed as f64 / seconds,
        notes_per_sec_per_core: s.mailed as f64 / seconds / cores as f64,
        note_p50_ms: ms(percentile_of(&to_durations(&note_us), 0.50)),
        note_p99_ms: ms(percentile_of(&to_durations(&note_us), 0.99)),
        steps,
        peak_rss_mb: peak_rss_mb(),
    };
    ensure!(
        s.failed == 0 && s.pending == 0,
        "{} notes failed, {} not finished: see {}",
        s.failed,
        s.pending,
        options.out.join("report.csv").display()
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn to_durations(us: &[u32]) -> Vec<Duration> {
    us.iter()
        .map(|u| Duration::from_micros(u64::from(*u)))
        .collect()
}

fn print(r: &Report) {
    println!(
        "notes                {} mailed of {} clients ({} trades, {} pages), {} cores",
        r.mailed, r.clients, r.trades, r.pages, r.cores
    );
    println!("encryption           {}; mail to {}", r.cipher, r.mail);
    println!(
        "end to end           {:.2} s ({:.1} notes/s, {:.1} notes/s per core)",
        r.enqueue_seconds + r.work_seconds,
        r.notes_per_sec,
        r.notes_per_sec_per_core
    );
    println!(
        "per note             p50 {:.0} ms  p99 {:.0} ms  (process start → mail recorded)",
        r.note_p50_ms, r.note_p99_ms
    );
    for s in &r.steps {
        println!(
            "  {:<8} {:>7} done  p50 {:>8.1} ms  p99 {:>8.1} ms  {:>7.1}/s per core",
            s.step, s.done, s.p50_ms, s.p99_ms, s.per_core_per_sec
        );
    }
    println!("peak RSS             {:.0} MB", r.peak_rss_mb);
}

/// Write each short note's Typst sources (template, note.json, part.json) to
/// `DIR/<client>/` and the fonts to `DIR/fonts/`, so the `typst` CLI can compile the
/// same documents one process per note (bench/notes-vs-peers.sh).
fn export_typst(day: &Day, dir: &Path) -> Result<()> {
    let io = |p: &Path| format!("cannot write {}", p.display());
    let fonts = dir.join("fonts");
    std::fs::create_dir_all(&fonts).with_context(|| io(&fonts))?;
    let mut n = 0;
    for (i, (code, trades)) in day.trades.by_client.iter().enumerate() {
        let Some(client) = day.clients.by_code.get(code) else {
            continue;
        };
        let Ok(note) = build(&day.broker, client, trades, day.date, i as u32 + 1) else {
            continue;
        };
        let Some(files) = typst_sources(&note)? else {
            continue; // a long note is rendered in parts: not one document
        };
        let d = dir.join(code);
        std::fs::create_dir_all(&d).with_context(|| io(&d))?;
        for (name, bytes) in files.files {
            std::fs::write(d.join(name), bytes).with_context(|| io(&d))?;
        }
        n += 1;
    }
    for (name, bytes) in tranche_notes::render::FONT_FILES {
        std::fs::write(fonts.join(name), bytes).with_context(|| io(&fonts))?;
    }
    eprintln!("wrote the Typst sources of {n} notes to {}", dir.display());
    Ok(())
}
