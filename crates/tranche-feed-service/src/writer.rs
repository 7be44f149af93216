//! The one group-committing writer task per shard: every protocol's batches go
//! through an [`Ingest`], and the task drains whatever batches are queued into one
//! [`Writer::apply_group`] call (one log write and one sync for all of them).

use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tranche_feed::{BatchError, Cursor, Event, StoreError, Writer};

use crate::metrics::FeedMetrics;

/// Batches queued for the writer before requests wait for room.
const QUEUE: usize = 1_024;
/// The writer stops adding queued batches to a group past this many events.
const GROUP_EVENTS: usize = 65_536;

/// One request's batch on its way to the writer task.
struct Job {
    events: Vec<Event>,
    reply: oneshot::Sender<Done>,
}

/// The writer task's answer: the outcome, and the batch's buffer handed back (emptied)
/// so that a connection streaming batches can reuse it.
#[derive(Debug)]
struct Done {
    result: Result<Cursor, Refused>,
    events: Vec<Event>,
}

/// Why [`Ingest::apply`] did not apply a batch: in every case nothing of it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// An event is invalid (its index and field are in the error).
    Batch(BatchError),
    /// The store could not write the group the batch was in (logged by the task).
    Store,
    /// The writer task has stopped.
    Closed,
}

/// The sending side of the writer task: cheap to clone. The task ends (syncing the
/// log) once every `Ingest` is dropped.
#[derive(Clone, Debug)]
pub struct Ingest {
    tx: mpsc::Sender<Job>,
    evictions: mpsc::Sender<Eviction>,
    metrics: FeedMetrics,
}

/// A request to the writer task to evict finished orders through a floor.
#[derive(Debug)]
struct Eviction {
    floor: Cursor,
    reply: oneshot::Sender<Result<usize, StoreError>>,
}

/// Starts the one writer task over `writer`. `sync_every`: under
/// [`tranche_feed::Durability::Interval`], that interval, so an idle writer still
/// syncs ([`Writer::sync_if_due`]); `None` otherwise. The task returns once every
/// [`Ingest`] is dropped, after a final sync (an error of the files if that failed).
pub fn spawn_writer(
    writer: Writer,
    sync_every: Option<Duration>,
) -> (Ingest, JoinHandle<Result<(), StoreError>>) {
    spawn_writer_with(writer, sync_every, FeedMetrics::new(1), 0)
}

/// [`spawn_writer`] recording into `metrics` as shard `shard` of the feed.
pub fn spawn_writer_with(
    writer: Writer,
    sync_every: Option<Duration>,
    metrics: FeedMetrics,
    shard: usize,
) -> (Ingest, JoinHandle<Result<(), StoreError>>) {
    let (tx, rx) = mpsc::channel(QUEUE);
    let (evictions, evictions_rx) = mpsc::channel(1);
    let task = tokio::spawn(run_writer(
        writer,
        rx,
        evictions_rx,
        sync_every,
        metrics.clone(),
        shard,
    ));
    (
        Ingest {
            tx,
            evictions,
            metrics,
        },
        task,
    )
}

impl Ingest {
    /// Hands `events` to the writer task and waits until they are applied and durable
    /// (the position of the last event), or refused. Batches queued together are
    /// group-committed.
    pub async fn apply(&self, events: Vec<Event>) -> Result<Cursor, Refused> {
        self.submit(events).await?.wait().await
    }

    /// Queues `events` for the writer task, waiting only for room in its queue, and
    /// returns what resolves once they are applied and durable. Batches one caller
    /// submits one after the other are applied in that order, so a connection can
    /// pipeline: submit the next batch before the last one is durable, and await the
    /// answers in order.
    pub async fn submit(&self, events: Vec<Event>) -> Result<Pending, Refused> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Job { events, reply })
            .await
            .map_err(|_| Refused::Closed)?;
        Ok(Pending { answer })
    }

    /// Has the writer task evict the finished orders at or before `floor`
    /// ([`Writer::evict_terminal_through`]) between two groups of batches, and answers
    /// how many it evicted. `Err` (the store's) when the floor is behind the current one
    /// or past the newest change, or the files failed; [`Refused::Closed`]'s case is an
    /// `Err` too.
    pub async fn evict_terminal_through(&self, floor: Cursor) -> Result<usize, String> {
        let (reply, answer) = oneshot::channel();
        self.evictions
            .send(Eviction { floor, reply })
            .await
            .map_err(|_| "the writer task has stopped".to_string())?;
        match answer.await {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(_) => Err("the writer task has stopped".to_string()),
        }
    }

    /// The figures of the server this writer belongs to: every protocol serving
    /// through it records its reads here.
    pub fn metrics(&self) -> &FeedMetrics {
        &self.metrics
    }
}

/// A batch queued by [`Ingest::submit`].
#[derive(Debug)]
pub struct Pending {
    answer: oneshot::Receiver<Done>,
}

impl Pending {
    /// Waits until the batch is applied and durable (the position of its last event),
    /// or refused.
    pub async fn wait(self) -> Result<Cursor, Refused> {
        self.wait_reclaim().await.0
    }

    /// [`Pending::wait`], also handing back the batch's `Vec` (emptied, its capacity
    /// kept) for the next batch; an empty new `Vec` if the writer task has stopped.
    pub async fn wait_reclaim(self) -> (Result<Cursor, Refused>, Vec<Event>) {
        match self.answer.await {
            Ok(done) => (done.result, done.events),
            Err(_) => (Err(Refused::Closed), Vec::new()),
        }
    }

    /// [`Pending::wait_reclaim`]'s answer if the writer task has given it already,
    /// else `None` (without waiting): a connection answering several batches writes
    /// the answers that are ready together, and waits only for the next one that is
    /// not.
    pub fn try_reclaim(&mut self) -> Option<(Result<Cursor, Refused>, Vec<Event>)> {
        match self.answer.try_recv() {
            Ok(done) => Some((done.result, done.events)),
            Err(oneshot::error::TryRecvError::Empty) => None,
            Err(oneshot::error::TryRecvError::Closed) => Some((Err(Refused::Closed), Vec::new())),
        }
    }
}

impl Job {
    fn answer(self, result: Result<Cursor, Refused>) {
        let mut events = self.events;
        events.clear();
        let _ = self.reply.send(Done { result, events });
    }
}

async fn run_writer(
    mut writer: Writer,
    mut rx: mpsc::Receiver<Job>,
    mut evictions: mpsc::Receiver<Eviction>,
    sync_every: Option<Duration>,
    metrics: FeedMetrics,
    shard: usize,
) -> Result<(), StoreError> {
    // Whether a write may be unsynced: only then does an idle writer wake to sync
    // (after an idle interval, one `sync_if_due` is due and syncs whatever is left).
    let mut dirty = false;
    let mut evictions_open = true;
    loop {
        // An eviction runs between two groups, never inside one: the writer is the
        // one owner of the store's files.
        let received = tokio::select! {
            biased;
            eviction = evictions.recv(), if evictions_open => {
                match eviction {
                    Some(Eviction { floor, reply }) => {
                        let (back, evicted) = tokio::task::spawn_blocking(move || {
                            let evicted = writer.evict_terminal_through(floor);
                            (writer, evicted)
                        })
                        .await
                        .expect("the writer's eviction does not panic");
                        writer = back;
                        let _ = reply.send(evicted);
                    }
                    None => evictions_open = false,
                }
                continue;
            }
            received = async {
                match sync_every.filter(|_| dirty) {
                    Some(every) => tokio::time::timeout(every, rx.recv()).await,
                    None => Ok(rx.recv().await),
                }
            } => received,
        };
        let first = match received {
            Ok(Some(job)) => job,
            Ok(None) => break,
            Err(_) => {
                let (back, synced) = tokio::task::spawn_blocking(move || {
                    let synced = writer.sync_if_due();
                    (writer, synced)
                })
                .await
                .expect("the writer's sync does not panic");
                writer = back;
                dirty = false;
                if let Err(error) = synced {
                    tracing::error!(%error, "feed: periodic sync failed");
                }
                continue;
            }
        };
        let mut events = first.events.len();
        let mut jobs = vec![first];
        while events < GROUP_EVENTS {
            match rx.try_recv() {
                Ok(job) => {
                    events += job.events.len();
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        let started = Instant::now();
        let (back, jobs, outcome) = tokio::task::spawn_blocking(move || {
            let batches: Vec<&[Event]> = jobs.iter().map(|job| &job.events[..]).collect();
            let outcome = writer.apply_group(&batches);
            (writer, jobs, outcome)
        })
        .await
        .expect("the writer's apply does not panic");
        writer = back;
        dirty = sync_every.is_some();
        match outcome {
            Ok(results) => {
                let sizes = jobs.iter().map(|job| job.events.len());
                metrics.group_committed(
                    shard,
                    sizes.zip(results.iter().map(Result::is_ok)),
                    started.elapsed(),
                );
                for (job, result) in jobs.into_iter().zip(results) {
                    job.answer(result.map_err(Refused::Batch));
                }
            }
            Err(error) => {
                tracing::error!(%error, batches = jobs.len(), "feed: a group write failed");
                metrics.group_failed(shard, jobs.len(), started.elapsed());
                for job in jobs {
                    job.answer(Err(Refused::Store));
                }
            }
        }
    }
    tokio::task::spawn_blocking(move || {
        let synced = writer.sync();
        drop(writer);
        synced
    })
    .await
    .expect("the writer's close does not panic")
}
