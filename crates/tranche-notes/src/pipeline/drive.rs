//! Working a night in this process: serve the four step queues until the run has
//! finished (or the process is told to stop), counting per step what this process did
//! so a progress display and the benchmark can show it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tranche_core::{Client, Finished, Observer, Registry, Worker, WorkerConfig, WorkerError};
use tranche_types::{BackendError, Resolution, RunName, RunProgress};

use super::{register, NightSource, STEPS};

/// Per step: attempts that succeeded in this process, and how long each took from its
/// handler's start to its result being durable (microseconds).
#[derive(Default)]
pub struct StepCounts {
    done: [AtomicU64; 4],
    retried: [AtomicU64; 4],
    times: [Mutex<Vec<u32>>; 4],
}

impl std::fmt::Debug for StepCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepCounts")
            .field("done", &self.done())
            .finish()
    }
}

impl StepCounts {
    /// Succeeded attempts per step, in chain order.
    pub fn done(&self) -> [u64; 4] {
        std::array::from_fn(|i| self.done[i].load(Ordering::Relaxed))
    }

    /// Attempts per step that will be tried again (4xx mail replies, store hiccups).
    pub fn retried(&self) -> [u64; 4] {
        std::array::from_fn(|i| self.retried[i].load(Ordering::Relaxed))
    }

    /// Handler start → result durable, per successful attempt of `step`, sorted.
    pub fn sorted_times(&self, step: usize) -> Vec<Duration> {
        let mut v = self.times[step].lock().expect("step times").clone();
        v.sort_unstable();
        v.into_iter()
            .map(|us| Duration::from_micros(u64::from(us)))
            .collect()
    }

    /// "processed 10 · rendered 8 · signed 8 · mailed 7"
    pub fn summary(&self) -> String {
        let done = self.done();
        STEPS
            .iter()
            .zip(done)
            .map(|(s, n)| format!("{} {n}", s.done_label))
            .collect::<Vec<_>>()
            .join(" · ")
    }
}

impl Observer for StepCounts {
    fn finished(&self, f: &Finished<'_>) {
        let Some(step) = STEPS.iter().position(|s| s.kind == f.kind) else {
            return;
        };
        match f.resolution {
            Resolution::Succeeded { .. } | Resolution::SucceededTraced { .. } => {
                self.done[step].fetch_add(1, Ordering::Relaxed);
                let us = f.finished_at.since(f.started_at).as_micros();
                self.times[step]
                    .lock()
                    .expect("step times")
                    .push(us.min(u128::from(u32::MAX)) as u32);
            }
            Resolution::Retry { .. } => {
                self.retried[step].fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

/// Leases are extended while a step runs; a lost worker's notes are picked up again
/// after this long (and a rerun after a `kill -9` waits for it).
pub(crate) const LEASE: Duration = Duration::from_secs(30);

/// How many of each step this process runs at once.
#[derive(Clone, Debug)]
pub struct Workers {
    /// CPU-bound steps (process, render, sign) in flight: the cores, by default.
    pub cpu: usize,
    /// Mails in flight (the SMTP pool's size is the real bound on connections).
    pub mail: usize,
    /// Only these queues (machine roles); all four when empty.
    pub queues: Vec<String>,
}

impl Default for Workers {
    fn default() -> Self {
        Workers {
            cpu: std::thread::available_parallelism().map_or(2, |n| n.get()),
            mail: 8,
            queues: Vec::new(),
        }
    }
}

impl Workers {
    /// A worker for the steps of any night `source` can load, reporting to `counts`.
    pub fn worker(
        &self,
        backend: Client,
        source: Arc<NightSource>,
        counts: Arc<StepCounts>,
    ) -> Result<Worker, WorkerError> {
        let mut registry = Registry::new();
        let helpers = source.helpers.as_ref().map_or(0, |h| h.size());
        register(&mut registry, source, self.cpu, self.mail);
        let queues = STEPS
            .iter()
            .filter(|s| self.queues.is_empty() || self.queues.iter().any(|q| q == s.queue))
            .map(|s| {
                // A few reserved ahead of the handlers keep every core busy between
                // reserve calls; the task limits bound what actually runs.
                let ahead = if s.queue == "mail" {
                    self.mail
                } else {
                    self.cpu
                };
                (s.queue.to_string(), ahead * 2)
            })
            .collect();
        let config = WorkerConfig {
            queues,
            batch: 64,
            lease: LEASE,
            heartbeat: Duration::from_secs(10),
            reserve_wait: Duration::from_millis(500),
            // A render handler given helper processes only waits for one: it must not
            // hold a thread the process and sign steps compute on.
            cpu_threads: self.cpu.max(1) + helpers,
            observer: Some(counts),
            ..WorkerConfig::default()
        };
        Worker::new(&backend, registry, config)
    }
}

/// Why working or watching a run stopped before it finished.
#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    /// The worker failed.
    #[error(transparent)]
    Worker(#[from] WorkerError),
    /// The run's progress could not be read.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The backend has no such run.
    #[error("run {0} does not exist")]
    NoSuchRun(RunName),
    /// The worker ended without being asked to, or its task panicked.
    #[error("the worker stopped: {0}")]
    Stopped(String),
}

/// Serve the worker's queues (if given one; else only watch) until `run` has finished
/// (returns its progress) or `stop` is cancelled (returns `None` once the worker has
/// finished or handed back what it held). `tick` sees the progress about every `every`.
pub(crate) async fn work_until_finished(
    backend: Client,
    worker: Option<Worker>,
    run: &RunName,
    stop: CancellationToken,
    every: Duration,
    mut tick: impl FnMut(&RunProgress),
) -> Result<Option<RunProgress>, DriveError> {
    let worker_stop = stop.child_token();
    let s = worker_stop.clone();
    let mut handle = tokio::spawn(async move {
        match worker {
            Some(w) => w.run(s).await,
            None => {
                s.cancelled().await;
                Ok(())
            }
        }
    });
    let outcome = loop {
        let p = backend
            .run_progress(run)
            .await?
            .ok_or_else(|| DriveError::NoSuchRun(run.clone()))?;
        tick(&p);
        if p.is_finished() {
            break Some(p);
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.cancelled() => break None,
            r = &mut handle => {
                // The worker only ends on its own when its backend gives up on it.
                let why = match r {
                    Ok(Ok(())) => "without being asked to".to_string(),
                    Ok(Err(e)) => e.to_string(),
                    Err(e) => e.to_string(),
                };
                return Err(DriveError::Stopped(why));
            }
        }
    };
    worker_stop.cancel();
    match handle.await {
        Ok(Ok(())) => Ok(outcome),
        Ok(Err(e)) => Err(e.into()),
        Err(e) => Err(DriveError::Stopped(e.to_string())),
    }
}
