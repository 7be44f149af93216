//! The crash test: a child process writes a seeded book (syncing every write, taking a
//! snapshot every 64 KiB of log) and records each acknowledged batch; it is killed with
//! SIGKILL mid-stream. Reopened, the store holds every acknowledged batch, and exactly
//! a prefix of the batches (at most one more, written but not yet recorded), at a
//! batch boundary.

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{read_all, Book};
use tranche_feed::*;

const CHILD_ENV: &str = "TRANCHE_FEED_CRASH_DIR";
const SEED: u64 = 77;
const BATCH: usize = 50;

fn crash_options() -> FeedOptions {
    FeedOptions {
        durability: Durability::EveryWrite,
        snapshot_after_bytes: Some(64 << 10),
        zero_ahead: Some(64 << 10),
    }
}

/// The child: writes batches until killed, appending `seq` of each acknowledged one.
#[test]
#[ignore = "run by a_killed_writer_loses_no_acknowledged_batch"]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let dir = Path::new(&dir);
    let (_, mut writer) = Store::open(&dir.join("store"), crash_options()).unwrap();
    let mut acks = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("acks"))
        .unwrap();
    let mut book = Book::new(SEED);
    // Bounded, in case the parent is gone.
    for _ in 0..200_000 {
        let batch = book.batch(BATCH);
        writer.apply(&batch).unwrap();
        acks.write_all(format!("{}\n", book.seq).as_bytes())
            .unwrap();
    }
}

fn last_ack(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    // Only complete lines: a kill may cut the last one.
    let complete = &text[..text.rfind('\n')? + 1];
    complete.lines().last().map(|l| l.parse().unwrap())
}

#[test]
fn a_killed_writer_loses_no_acknowledged_batch() {
    let dir = tempfile::tempdir().unwrap();
    let child_test = tranche_test_support::libtest_name(module_path!(), "crash_child");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &child_test, "--ignored", "--test-threads=1"])
        .env(CHILD_ENV, dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let acks = dir.path().join("acks");
    // Past a few snapshots (one every ~13 batches), then kill it.
    tranche_test_support::eventually(
        "the child acknowledges 300 batches",
        Duration::from_secs(60),
        || {
            let acked = last_ack(&acks);
            if acked.is_some_and(|seq| seq >= 300 * BATCH as u64) {
                return Ok(());
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("the child ended before it was killed: {status}");
            }
            Err(format!("acknowledged up to seq {acked:?}"))
        },
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let acknowledged = last_ack(&acks).unwrap();

    let (store, writer) = Store::open(&dir.path().join("store"), crash_options()).unwrap();
    let (seq, _) = store.marks();
    assert!(
        seq >= acknowledged,
        "expected every acknowledged batch (to seq {acknowledged}), got up to {seq}"
    );
    let mut book = Book::new(SEED);
    let mut batches = 0;
    while book.seq < seq {
        book.batch(BATCH);
        batches += 1;
    }
    assert_eq!(book.seq, seq, "the store ends mid-batch");
    assert!(
        book.seq <= acknowledged + BATCH as u64,
        "more than one unrecorded batch"
    );
    assert_eq!(
        read_all(&store, Cursor::START, Filter::All, 1000),
        book.expected(Filter::All)
    );
    assert!(
        writer.recovery().snapshot.is_some(),
        "{batches} batches and no snapshot"
    );
}
