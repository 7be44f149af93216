//! Two `tranche ach engine` processes on one Redis and one PostgreSQL ledger package a
//! generated day together; one is killed with SIGKILL mid-packaging, and the other
//! finishes the work: every entry ends in exactly one submitted file, every file passes
//! our validator and moov-io's achcli, and what the banks received is what the ledger
//! recorded.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::*;
use tranche_test_support::ach_rules::Bank;
use tranche_test_support::nacha::assert_file_checks_out;
use tranche_test_support::Postgres;

const DAY: &str = "2026-03-03";

/// Two banks, small files (a pass has many writers, so a kill lands mid-pass), claims
/// that lapse after 3 s, no pacing.
fn rules(dir: &Path) -> String {
    let bank = |bank: Bank, name: &str| {
        bank.with("max_entries_per_file = 200")
            .with("pacing = \"0s\"")
            .outbox(&format!("{}/outbox/{name}", dir.display()))
            .same_day_morning()
            .window("nd", "next-day", "17:30", "20:00")
    };
    format!(
        "[engine]\ntick = \"5m\"\nclaim_ttl = \"3s\"\n{}{}",
        bank(Bank::new("first", "021000021", "BANK first"), "first"),
        bank(Bank::new("second", "026009593", "BANK second"), "second")
    )
}

fn engine(redis: &str, ledger: &str, dir: &Path, data: &str, at: &str) -> Command {
    let mut c = tranche();
    c.args(["--broker", redis, "--ledger", ledger])
        .arg("--data")
        .arg(dir.join(data))
        .args(["ach", "engine", "--once", "--at", at])
        .arg("--rules")
        .arg(dir.join("ach.toml"))
        .arg("--store")
        .arg(dir.join("store"))
        .env("TRANCHE_LOG", "tranche_ach_pipeline=info");
    c
}

/// How many entries files hold: the runs' lengths summed.
const HELD: &str = "SELECT coalesce(sum(upper(seqs) - lower(seqs)), 0) FROM member_runs";

fn count(pg: &Postgres, sql: &str) -> u64 {
    let out = pg.psql("ach", sql);
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

#[test]
fn two_engines_share_a_day_and_one_killed_mid_packaging_loses_nothing() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let Some(pg) = Postgres::start() else { return };
    pg.create_database("ach");
    let dir = tempfile::tempdir().unwrap();
    let (_redis, port) = redis(dir.path());
    let redis_url = format!("redis://127.0.0.1:{port}");
    let ledger = pg.url("ach");
    let day = dir.path().join("day");
    let out = tranche()
        .args([
            "ach",
            "generate",
            "--entries",
            "8000",
            "--date",
            DAY,
            "--banks",
            "first,second",
            "--out",
        ])
        .arg(&day)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    std::fs::write(dir.path().join("ach.toml"), rules(dir.path())).unwrap();
    let out = tranche()
        .args(["--ledger", &ledger, "ach", "import"])
        .arg(day.join("entries.csv"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let accepted = count(&pg, "SELECT count(*) FROM entries WHERE state = 0");
    assert_eq!(accepted, 8000);
    let same_day = count(&pg, "SELECT count(*) FROM entries WHERE same_day");
    assert!(
        same_day > 500,
        "the generated day has same-day entries: {same_day}"
    );

    // 07:00 New York: sd1 packages. Both engines tick the same slot (one pass) and
    // both work it; A is killed once a pass has claimed its entries.
    let seven = "2026-03-03T07:00:00-05:00";
    let mut a = Watched::spawn(
        engine(&redis_url, &ledger, dir.path(), "a", seven),
        dir.path().join("a.log"),
        "engine A",
    );
    let b = Watched::spawn(
        engine(&redis_url, &ledger, dir.path(), "b", seven),
        dir.path().join("b.log"),
        "engine B",
    );
    tranche_test_support::eventually("a pass planned", Duration::from_secs(60), || {
        let (said_a, said_b) = (a.stderr(), b.stderr());
        if said_a.contains("ACH pass planned") || said_b.contains("ACH pass planned") {
            Ok(())
        } else {
            Err(format!("A:\n{said_a}\nB:\n{said_b}"))
        }
    });
    a.child.kill().unwrap();
    let _ = a.child.wait();
    // Which file holds an entry is a run of seqs in `member_runs` (the entry's own row
    // keeps `accepted`); a submitted entry is one whose file is submitted.
    let packaged_at_kill = count(&pg, HELD);
    let (status, _, said) = b.finish(Duration::from_secs(180));
    assert!(status.success(), "engine B: {said}");

    // Whatever A held comes back: its jobs' leases expire and B's worker takes them;
    // claims of an attempt that died lapse. Later ticks (new slots) package the rest.
    let mut minute = 5;
    while count(
        &pg,
        "SELECT count(*) FROM entries e WHERE same_day AND state = 0 \
         AND NOT EXISTS (SELECT 1 FROM member_runs m WHERE m.seqs @> e.seq)",
    ) > 0
    {
        assert!(
            minute < 60,
            "same-day entries still unpackaged after many ticks"
        );
        let at = format!("2026-03-03T07:{minute:02}:00-05:00");
        let out = engine(&redis_url, &ledger, dir.path(), "b", &at)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        minute += 5;
    }
    eprintln!("at the kill {packaged_at_kill} of {same_day} same-day entries were packaged; {} ticks after", (minute - 5) / 5);

    for at in ["2026-03-03T08:30:00-05:00", "2026-03-03T17:30:00-05:00"] {
        let out = engine(&redis_url, &ledger, dir.path(), "b", at)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }

    // Every entry once, in a submitted file; files hold what their entries sum to.
    assert_eq!(
        count(
            &pg,
            "SELECT count(*) FROM entries e WHERE NOT EXISTS (SELECT 1 FROM member_runs m \
             JOIN files f ON f.file_id = m.file_id WHERE m.seqs @> e.seq AND f.state = 2)"
        ),
        0,
        "every entry is in a submitted file"
    );
    assert_eq!(
        count(&pg, HELD),
        8000,
        "and in one only (the runs cannot overlap)"
    );
    assert_eq!(
        count(
            &pg,
            "SELECT coalesce(sum(entries), 0) FROM files WHERE state = 2"
        ),
        8000,
        "the submitted files hold every entry once"
    );
    assert_eq!(
        count(&pg, "SELECT count(*) FROM files WHERE state IN (0, 1)"),
        0
    );
    let files = count(&pg, "SELECT count(*) FROM files WHERE state = 2");
    let mut delivered = 0;
    let mut records = 0;
    for bank in ["first", "second"] {
        for entry in std::fs::read_dir(dir.path().join("outbox").join(bank)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "ach") {
                let bytes = std::fs::read(&path).unwrap();
                let report = tranche_ach::validate(&bytes);
                assert!(
                    report.is_valid(),
                    "{}: {:?}",
                    path.display(),
                    report.findings
                );
                assert_file_checks_out(&path.display().to_string(), &bytes);
                records += report.entries;
                delivered += 1;
            }
        }
    }
    assert_eq!(delivered, files, "each submitted file was delivered once");
    assert_eq!(records, 8000, "the delivered files hold every entry once");
}
