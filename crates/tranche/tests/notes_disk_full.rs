//! `tranche notes run` with a disk full, for real: the store's, the database's or the
//! report's directory on a small tmpfs (mounted per test; root is needed, see
//! [`SmallDisk`]) that the night fills up. A full disk pauses the night with one
//! message naming the path, and the night resumes by itself once the test frees space
//! (it deletes a filler file as soon as it sees the message); no client fails for it,
//! everyone is mailed once. A report that cannot be written says where it went.

use crate::support;

use std::path::Path;
use std::time::Duration;

use support::*;

const CLIENTS: usize = 30;

/// Every client mailed exactly once, and the report says so.
fn everyone_mailed_once(
    input: &Path,
    report_rows: &std::collections::BTreeMap<String, Vec<String>>,
    sink: &Sink,
) {
    let traders = traders(input);
    let clients = clients(input);
    assert_eq!(report_rows.len(), traders.len());
    for (code, row) in report_rows {
        assert_eq!(row[0], "mailed", "{code}: {row:?}");
    }
    let messages = sink.messages();
    for code in &traders {
        let email = &clients[code].1;
        let got = messages.iter().filter(|m| &m.0 == email).count();
        assert_eq!(got, 1, "{code} got {got} messages");
    }
}

/// A night started with `args`, its stderr logged under `dir` and watched.
fn start(dir: &Path, args: impl IntoIterator<Item = String>) -> Watched {
    let mut cmd = tranche();
    cmd.args(args);
    Watched::spawn(cmd, dir.join("night.log"), "notes run")
}

/// Its exit code, stdout and stderr once it has finished.
fn finish(night: Watched) -> (Option<i32>, String, String) {
    let log = night.log.clone();
    let (status, stdout, _) = night.finish(Duration::from_secs(300));
    let stderr = std::fs::read_to_string(log).unwrap();
    (status.code(), stdout, stderr)
}

#[test]
fn a_full_store_pauses_the_night_which_resumes_once_space_is_freed() {
    if !have("python3", &["-c", "import aiosmtpd"]) {
        return;
    }
    let Some(disk) = SmallDisk::mount("16m") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    let out = tmp.path().join("out");
    generate(&input, CLIENTS);
    let sink = Sink::start(&tmp.path().join("sink"));
    // Room for a part of the night only: 30 signed notes and their data need more.
    let filler = disk.fill_but("filler", 1 << 20);
    let store = disk.path().join("store");

    let mut args = vec![
        "--data".to_string(),
        tmp.path().join("state").display().to_string(),
    ];
    args.extend(run_args(&input, &out));
    args.extend([
        "--smtp".into(),
        sink.url(),
        "--store".into(),
        store.display().to_string(),
    ]);
    let mut night = start(tmp.path(), args);
    let paused = night.wait_for("is full", Duration::from_secs(300));
    assert!(
        paused.contains(&format!("the store at {} is full", store.display())),
        "{paused}"
    );
    assert!(paused.contains(" free;"), "how much is free: {paused}");
    assert!(
        paused.contains("more needed"),
        "roughly how much is needed: {paused}"
    );
    assert!(
        paused.contains("resumes by itself when space is freed"),
        "{paused}"
    );
    std::fs::remove_file(&filler).unwrap();
    night.wait_for("resumed after", Duration::from_secs(120));

    let (code, stdout, stderr) = finish(night);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        stderr.matches("is full").count(),
        1,
        "one message while paused, not one per job:\n{stderr}"
    );
    assert!(!stderr.contains("WARN"), "{stderr}");
    everyone_mailed_once(&input, &report(&out), &sink);
}

#[test]
fn a_full_database_disk_pauses_the_night_which_resumes_once_space_is_freed() {
    if !have("python3", &["-c", "import aiosmtpd"]) {
        return;
    }
    let Some(disk) = SmallDisk::mount("16m") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    let out = tmp.path().join("out");
    generate(&input, CLIENTS);
    let sink = Sink::start(&tmp.path().join("sink"));
    // Room for the night's jobs (about 0.4 MB), not for all their progress (over 4 MB).
    let filler = disk.fill_but("filler", 1536 << 10);
    let data = disk.path().join("state");

    let mut args = vec!["--data".to_string(), data.display().to_string()];
    args.extend(run_args(&input, &out));
    args.extend(["--smtp".into(), sink.url()]);
    let mut night = start(tmp.path(), args);
    let paused = night.wait_for("is full", Duration::from_secs(300));
    let db = data.join("tranche.db");
    assert!(
        paused.contains(&format!("the database {} is full", db.display())),
        "{paused}"
    );
    assert!(
        paused.contains("resumes by itself when space is freed"),
        "{paused}"
    );
    std::fs::remove_file(&filler).unwrap();
    night.wait_for("resumed after", Duration::from_secs(120));

    let (code, stdout, stderr) = finish(night);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        stderr.matches("is full").count(),
        1,
        "one message while paused, not one per retried call:\n{stderr}"
    );
    everyone_mailed_once(&input, &report(&out), &sink);
}

/// A night whose output directory's disk filled up before its report was written.
struct FullOutput {
    disk: SmallDisk,
    tmp: tempfile::TempDir,
    input: std::path::PathBuf,
    out: std::path::PathBuf,
    args: Vec<String>,
    sink: Sink,
    filler: std::path::PathBuf,
}

/// Work a night whose output directory's disk fills up after the accounting is
/// written (mails wait meanwhile), with the temporary directory `tmpdir` under the
/// test's directory (`None`: on the full disk too). The night, its exit code, stdout
/// and stderr.
fn night_with_a_full_output(
    tmpdir: Option<&str>,
) -> Option<(FullOutput, Option<i32>, String, String)> {
    if !have("python3", &["-c", "import aiosmtpd"]) {
        return None;
    }
    let disk = SmallDisk::mount("4m")?;
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    let out = disk.path().join("out");
    let tmpdir = match tmpdir {
        Some(name) => tmp.path().join(name),
        None => disk.path().join("tmpdir"),
    };
    std::fs::create_dir(&tmpdir).unwrap();
    generate(&input, 8);
    let sink = Sink::start(&tmp.path().join("sink"));
    // The night cannot finish (mails wait) until the output's disk is full.
    sink.hold(true);
    let mut args = vec![
        "--data".to_string(),
        tmp.path().join("state").display().to_string(),
    ];
    args.extend(run_args(&input, &out));
    args.extend([
        "--smtp".into(),
        sink.url(),
        "--store".into(),
        tmp.path().join("store").display().to_string(),
    ]);
    let mut cmd = tranche();
    cmd.args(&args).env("TMPDIR", &tmpdir);
    let mut night = Watched::spawn(cmd, tmp.path().join("night.log"), "notes run");
    // The accounting is the last thing written to OUT before the report.
    night.wait_for("rows read", Duration::from_secs(120));
    assert!(out.join("accounting.csv").exists());
    let filler = disk.fill_but("filler", 0);
    sink.hold(false);
    let (code, stdout, stderr) = finish(night);
    Some((
        FullOutput {
            disk,
            tmp,
            input,
            out,
            args,
            sink,
            filler,
        },
        code,
        stdout,
        stderr,
    ))
}

impl FullOutput {
    /// Once there is space, running the night again writes the report and mails
    /// nobody again.
    fn free_space_and_run_again(self) {
        std::fs::remove_file(&self.filler).unwrap();
        let again = tranche().args(&self.args).output().unwrap();
        assert!(again.status.success(), "{}", text(&again));
        everyone_mailed_once(&self.input, &report(&self.out), &self.sink);
        drop(self.disk);
    }
}

#[test]
fn a_report_that_does_not_fit_goes_to_the_temporary_directory_said_where() {
    let Some((night, code, stdout, stderr)) = night_with_a_full_output(Some("tmpdir")) else {
        return;
    };
    assert_eq!(code, Some(0), "the night went well: {stdout}\n{stderr}");
    let wanted = night.out.join("report.csv");
    let instead = night
        .tmp
        .path()
        .join("tmpdir/tranche-report-contract-notes-2026-11-20.csv");
    assert!(
        stderr.contains(&format!(
            "could not write the report to {}: No space left on device",
            wanted.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains(" free there"), "{stderr}");
    assert!(
        stderr.contains(&format!("it is at {} instead", instead.display())),
        "{stderr}"
    );
    assert!(
        stdout.contains(&format!("report   {}", instead.display())),
        "{stdout}"
    );
    assert!(!wanted.exists());
    std::fs::copy(&instead, night.tmp.path().join("report.csv")).unwrap();
    everyone_mailed_once(&night.input, &report(night.tmp.path()), &night.sink);
    night.free_space_and_run_again();
}

#[test]
fn a_report_that_fits_nowhere_says_where_it_could_not_be_written() {
    let Some((night, code, stdout, stderr)) = night_with_a_full_output(None) else {
        return;
    };
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    let wanted = night.out.join("report.csv");
    assert!(
        stderr.contains(&format!(
            "could not write the report to {} (No space left on device",
            wanted.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("run this command again — nothing is redone"),
        "{stderr}"
    );
    assert!(stdout.contains("report   not written"), "{stdout}");
    night.free_space_and_run_again();
}
