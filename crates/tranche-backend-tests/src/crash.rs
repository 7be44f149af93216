//! The crash test: a child process working through a run is killed with SIGKILL about
//! half way; a fresh process resumes. Every job must reach a terminal state, no job
//! that had succeeded may run again, and every recorded effect must have happened once
//! (an effect caught between happening and being recorded may happen twice: that is
//! the at-least-once window, and the test checks it is the only way to get a repeat).
//!
//! Wiring, in a backend's test crate:
//! - an ignored test named [`CHILD_TEST`] that, when [`CHILD_ENV`] is set, opens the
//!   backend the parent describes and calls [`child`];
//! - a test that calls [`kill_and_resume`] with a backend opener and a way to spawn
//!   that test binary as a child (see [`spawn_self`]).

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tranche_backend::Backend;
use tranche_core::{Client, Engine, JobContext, Registry, TaskOptions};
use tranche_types::{EnqueueItem, JobId, JobState};

/// Set in the child's environment to the log file it writes.
pub const CHILD_ENV: &str = "TRANCHE_CRASH_CHILD_LOG";
/// The name of the backend's ignored child test, whose full libtest name (with its
/// module's path) is given to [`spawn_self`].
pub const CHILD_TEST: &str = "crash_child";
const RUN: &str = "crash/night";
const KIND: &str = "crash.effect";

/// Spawn the current test binary running only the ignored child test `child` (its full
/// libtest name, `module::crash_child`), with `env` added.
pub fn spawn_self(child: &str, log: &Path, env: &[(&str, String)]) -> Child {
    let exe = std::env::current_exe().expect("current test binary");
    let mut cmd = Command::new(exe);
    cmd.args([
        "--exact",
        child,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, log)
    .stdin(Stdio::null())
    .stdout(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn crash child")
}

struct Log(Mutex<std::fs::File>);

impl Log {
    fn line(&self, s: String) {
        // One write per line with O_APPEND: a kill never leaves half a line mixed in.
        let mut f = self.0.lock().expect("log lock");
        f.write_all(format!("{s}\n").as_bytes()).expect("write log");
    }
}

/// The child's side: work through the crash run until it has finished.
pub async fn child(backend: Arc<dyn Backend>, log: PathBuf) {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .expect("open log");
    let log = Arc::new(Log(Mutex::new(file)));
    let mut reg = Registry::new();
    let l = log.clone();
    reg.register(
        KIND,
        TaskOptions::default(),
        move |ctx: JobContext, i: u32| {
            let log = l.clone();
            async move {
                log.line(format!("begin {i} {}", ctx.attempt()));
                let key = format!("crash/{i}");
                let l2 = log.clone();
                ctx.once(&key, || async move {
                    l2.line(format!("effect {i}"));
                    Ok::<_, String>(format!("done {i}"))
                })
                .await
                .map_err(|e| e.to_string())?;
                log.line(format!("recorded {i}"));
                // Keep each job busy a little, so the kill lands mid-run.
                tokio::time::sleep(Duration::from_millis(2)).await;
                Ok::<_, String>(i)
            }
        },
    );
    let engine = Engine::new(Client::from_shared(backend.clone()), reg);
    let config = crate::worker::test_config(&["default"]).lease(Duration::from_secs(1));
    let worker = engine
        .worker(tranche_core::WorkerConfig {
            grace: Duration::from_secs(5),
            ..config
        })
        .unwrap();
    let stop = CancellationToken::new();
    let s = stop.clone();
    let run = tokio::spawn(async move { worker.run(s).await });
    let name = crate::run(RUN);
    Client::from_shared(backend.clone())
        .wait_finished(
            &name,
            Duration::from_millis(20),
            Some(Duration::from_secs(300)),
            |_| {},
        )
        .await
        .expect("run finishes in the child");
    stop.cancel();
    run.await.expect("worker task").expect("worker");
}

fn read_log(path: &Path) -> Vec<(String, u32)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut parts = l.split(' ');
            let what = parts.next()?.to_string();
            let i = parts.next()?.parse().ok()?;
            Some((what, i))
        })
        .collect()
}

/// The parent's side. `backend` is open on the same store the children use; `spawn`
/// starts a child process writing the given log.
pub async fn kill_and_resume(
    backend: Arc<dyn Backend>,
    dir: &Path,
    jobs: u32,
    spawn: impl Fn(&Path) -> Child,
) {
    let items = (0..jobs)
        .map(|i| EnqueueItem::Job(tranche_types::JobSpec::new(KIND, i.to_string()).max_attempts(5)))
        .collect();
    let out = crate::enqueue(&*backend, RUN, items).await;
    let ids: Vec<JobId> = out.iter().map(|e| e.ids[0]).collect();

    let (log1, log2) = (dir.join("child1.log"), dir.join("child2.log"));
    let mut first = spawn(&log1);
    let half = u64::from(jobs / 2);
    // Poll until half the jobs succeeded, then kill.
    tranche_test_support::poll_until_async(
        "half the jobs succeeded in the child",
        Duration::from_secs(300),
        async || {
            let p = crate::progress(&*backend, RUN).await;
            if let Some(status) = first.try_wait().expect("child status") {
                panic!("child exited early with {status}: {p:?}");
            }
            p.succeeded >= half
        },
    )
    .await;
    first.kill().expect("SIGKILL the child");
    first.wait().expect("reap the child");

    let mut succeeded_before = HashSet::new();
    for id in &ids {
        let rec = backend.job(*id).await.unwrap().unwrap();
        if rec.state == JobState::Succeeded {
            succeeded_before.insert(rec.args.parse::<u32>().unwrap());
        }
    }
    let at_kill = crate::progress(&*backend, RUN).await;
    assert!(
        at_kill.succeeded < u64::from(jobs),
        "the kill landed before the end: {at_kill:?}"
    );

    let mut second = spawn(&log2);
    let status = tokio::task::spawn_blocking(move || second.wait())
        .await
        .unwrap()
        .expect("wait child");
    assert!(status.success(), "the resuming child failed: {status}");

    let p = crate::progress(&*backend, RUN).await;
    assert_eq!(
        (p.total, p.succeeded),
        (u64::from(jobs), u64::from(jobs)),
        "every job succeeded: {p:?}"
    );

    let (l1, l2) = (read_log(&log1), read_log(&log2));
    let in_doubt: HashSet<u32> = {
        let effected: HashSet<u32> = l1
            .iter()
            .filter(|(w, _)| w == "effect")
            .map(|(_, i)| *i)
            .collect();
        let recorded: HashSet<u32> = l1
            .iter()
            .filter(|(w, _)| w == "recorded")
            .map(|(_, i)| *i)
            .collect();
        effected.difference(&recorded).copied().collect()
    };
    let mut effects: HashMap<u32, u32> = HashMap::new();
    for (what, i) in l1.iter().chain(&l2) {
        if what == "effect" {
            *effects.entry(*i).or_default() += 1;
        }
    }
    for i in 0..jobs {
        let n = effects.get(&i).copied().unwrap_or(0);
        let allowed = if in_doubt.contains(&i) { 2 } else { 1 };
        assert!(n >= 1, "effect {i} never happened");
        assert!(
            n <= allowed,
            "effect {i} happened {n} times (in doubt at the kill: {})",
            in_doubt.contains(&i)
        );
        let e = backend.effect(&format!("crash/{i}")).await.unwrap();
        assert_eq!(
            e.map(|e| e.value),
            Some(format!("done {i}")),
            "effect {i} recorded"
        );
    }
    let rerun: Vec<u32> = l2
        .iter()
        .filter(|(w, i)| w == "begin" && succeeded_before.contains(i))
        .map(|(_, i)| *i)
        .collect();
    assert!(
        rerun.is_empty(),
        "jobs that had succeeded ran again: {rerun:?}"
    );
    let recorded_before: HashSet<u32> = l1
        .iter()
        .filter(|(w, _)| w == "recorded")
        .map(|(_, i)| *i)
        .collect();
    let redone: Vec<u32> = l2
        .iter()
        .filter(|(w, i)| w == "effect" && recorded_before.contains(i))
        .map(|(_, i)| *i)
        .collect();
    assert!(
        redone.is_empty(),
        "effects recorded before the kill were performed again: {redone:?}"
    );
    let resumed: HashSet<u32> = l2
        .iter()
        .filter(|(w, _)| w == "begin")
        .map(|(_, i)| *i)
        .collect();
    let skipped = resumed.intersection(&recorded_before).count();
    assert!(!resumed.is_empty(), "the second process did the rest");
    eprintln!(
        "crash test: {} of {jobs} had succeeded at the kill, {} resumed, {} redelivered with their effect skipped, {} effects in doubt",
        succeeded_before.len(),
        resumed.len(),
        skipped,
        in_doubt.len()
    );
}
