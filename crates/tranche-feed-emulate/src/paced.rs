//! The paced core: each shard's book, generated on a fixed schedule and sent in
//! batches, open loop.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tranche_feed::Event;

use crate::book::{Book, BookConfig, ConfigError, Kind};
use crate::latency::{Latency, LatencySummary};
use crate::link::{now_ns, Connector, CoreLink, LinkError};

/// What a core run is asked to do.
#[derive(Clone, Debug)]
pub struct CorePlan {
    /// Events per second, all shards together (each shard `rate / shards`).
    pub rate: f64,
    /// How long to generate events for.
    pub duration: Duration,
    /// How often a batch is generated: each tick makes the events due since the last.
    pub tick: Duration,
    /// The run's seed (each shard's book mixes in its shard number).
    pub seed: u64,
    /// The book's shape.
    pub book: BookConfig,
    /// The most events per request (batches queued behind a slow request are merged up
    /// to this).
    pub max_batch: usize,
    /// How far behind its schedule a shard may fall (events due but not yet
    /// acknowledged, as time at the shard's rate) before the run stops with
    /// [`CoreError::Behind`].
    pub max_backlog: Duration,
}

impl Default for CorePlan {
    fn default() -> CorePlan {
        CorePlan {
            rate: 10_000.0,
            duration: Duration::from_secs(60),
            tick: Duration::from_millis(1),
            seed: 1,
            book: BookConfig::default(),
            max_batch: 10_000,
            max_backlog: Duration::from_secs(2),
        }
    }
}

/// Why a core run stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// The plan cannot run.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The plan cannot run (not the book).
    #[error("plan: {0}")]
    Plan(String),
    /// A link failed: whether its last batch was applied is unknown.
    #[error("shard {shard}: {source}")]
    Link {
        /// The shard.
        shard: usize,
        /// What failed.
        #[source]
        source: LinkError,
    },
    /// A shard fell further behind its schedule than the plan allows: the target
    /// does not take the rate asked.
    #[error(
        "shard {shard} fell behind: {backlog} events due and not yet acknowledged \
         ({behind_ms} ms at {rate:.0}/s, more than the {allowed_ms} ms allowed) after {elapsed_ms} ms"
    )]
    Behind {
        /// The shard.
        shard: usize,
        /// Events due and not acknowledged.
        backlog: u64,
        /// That backlog as time at the shard's rate.
        behind_ms: u64,
        /// The most allowed.
        allowed_ms: u64,
        /// The shard's rate.
        rate: f64,
        /// Into the run.
        elapsed_ms: u64,
    },
}

/// What a core run did.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CoreReport {
    /// Shards driven.
    pub shards: usize,
    /// The rate asked (events/s, all shards).
    pub asked_rate: f64,
    /// Events acknowledged per second, from the start to the last acknowledgement.
    pub achieved_rate: f64,
    /// Events acknowledged, shard by shard (all that were generated).
    pub events: Vec<u64>,
    /// Requests sent.
    pub batches: u64,
    /// Seconds the schedule ran (the duration, or less if stopped).
    pub scheduled_s: f64,
    /// Seconds from the start to the last acknowledgement.
    pub elapsed_s: f64,
    /// From an event's generation (its stamp) to its batch's acknowledgement.
    pub ack_latency: LatencySummary,
    /// The most events a shard had due and not yet acknowledged.
    pub max_backlog: u64,
    /// The latest a tick ran after its time (ms): the generator's own lateness.
    pub max_tick_late_ms: f64,
    /// Whether the achieved rate was at least 95 % of the rate asked.
    pub kept_up: bool,
    /// Whether the run was stopped before its duration.
    pub stopped_early: bool,
    /// Events by what they did ([`Kind::name`]).
    pub kinds: BTreeMap<String, u64>,
}

impl CoreReport {
    /// All events acknowledged.
    pub fn total_events(&self) -> u64 {
        self.events.iter().sum()
    }
}

/// What one shard did.
struct ShardRun {
    events: u64,
    batches: u64,
    last_ack: Option<Instant>,
    ack_latency: Latency,
    max_backlog: u64,
    max_tick_late: Duration,
    stopped_early: bool,
    kinds: [u64; Kind::ALL.len()],
}

/// Runs one core per shard of `connector` to `plan`, until its duration passes or
/// `stop` is cancelled (then the events already generated are still sent, and a
/// pending immediate-or-cancel order is ended first). The first failure of any shard
/// stops all of them.
pub async fn run_core<C: Connector>(
    connector: &C,
    plan: &CorePlan,
    stop: CancellationToken,
) -> Result<CoreReport, CoreError> {
    plan.book.validate()?;
    let shards = connector.shards();
    if shards == 0 {
        return Err(CoreError::Plan(
            "expected at least one target, got none".into(),
        ));
    }
    if !(plan.rate > 0.0 && plan.rate.is_finite()) {
        return Err(CoreError::Plan(format!(
            "expected a rate above 0, got {}",
            plan.rate
        )));
    }
    if plan.tick.is_zero() || plan.max_batch == 0 {
        return Err(CoreError::Plan(
            "expected a tick above 0 and max_batch of at least 1".into(),
        ));
    }
    let mut links = Vec::with_capacity(shards);
    for shard in 0..shards {
        links.push(
            connector
                .core(shard)
                .await
                .map_err(|source| CoreError::Link { shard, source })?,
        );
    }
    let start = Instant::now();
    let abort = stop.child_token();
    let rate = plan.rate / shards as f64;
    let mut tasks = JoinSet::new();
    for (shard, link) in links.into_iter().enumerate() {
        let plan = plan.clone();
        let abort = abort.clone();
        tasks.spawn(async move {
            let result = run_shard(shard, link, &plan, rate, start, abort.clone()).await;
            if result.is_err() {
                abort.cancel();
            }
            (shard, result)
        });
    }
    let mut runs: Vec<Option<ShardRun>> = (0..shards).map(|_| None).collect();
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        let (shard, result) = joined.expect("a shard's core does not panic");
        match result {
            Ok(run) => runs[shard] = Some(run),
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    if let Some(error) = first_error {
        return Err(error);
    }
    let runs: Vec<ShardRun> = runs
        .into_iter()
        .map(|r| r.expect("every shard ran"))
        .collect();
    let mut ack_latency = Latency::new();
    let mut kinds = BTreeMap::new();
    for run in &runs {
        ack_latency.merge(&run.ack_latency);
        for kind in Kind::ALL {
            *kinds.entry(kind.name().to_owned()).or_insert(0) += run.kinds[kind.index()];
        }
    }
    let events: Vec<u64> = runs.iter().map(|r| r.events).collect();
    let total: u64 = events.iter().sum();
    let last_ack = runs.iter().filter_map(|r| r.last_ack).max();
    let elapsed = last_ack.map_or(Duration::ZERO, |at| at - start);
    let stopped_early = runs.iter().any(|r| r.stopped_early);
    let scheduled = if stopped_early {
        elapsed.min(plan.duration)
    } else {
        plan.duration
    };
    let achieved_rate = if elapsed.is_zero() {
        0.0
    } else {
        total as f64 / elapsed.as_secs_f64()
    };
    Ok(CoreReport {
        shards,
        asked_rate: plan.rate,
        achieved_rate,
        events,
        batches: runs.iter().map(|r| r.batches).sum(),
        scheduled_s: scheduled.as_secs_f64(),
        elapsed_s: elapsed.as_secs_f64(),
        ack_latency: ack_latency.summary(),
        max_backlog: runs.iter().map(|r| r.max_backlog).max().unwrap_or(0),
        max_tick_late_ms: runs
            .iter()
            .map(|r| r.max_tick_late)
            .max()
            .unwrap_or_default()
            .as_secs_f64()
            * 1e3,
        kept_up: achieved_rate >= 0.95 * plan.rate,
        stopped_early,
        kinds,
    })
}

/// A generated batch on its way to the sender.
struct Pending {
    events: Vec<Event>,
    made: Instant,
}

/// What the sender task did.
struct Sent {
    batches: u64,
    last_ack: Option<Instant>,
    ack_latency: Latency,
}

/// Sends what the generator queues: batches merged up to `max_batch` events, up to
/// the link's window unacknowledged at once, acknowledgements taken in order.
async fn send_all<L: CoreLink>(
    mut link: L,
    mut rx: mpsc::UnboundedReceiver<Pending>,
    acked: Arc<AtomicU64>,
    max_batch: usize,
) -> Result<Sent, LinkError> {
    let window = link.window().max(1);
    let mut sent = Sent {
        batches: 0,
        last_ack: None,
        ack_latency: Latency::new(),
    };
    // Per batch in flight: when each part of it was made, and its size.
    let mut in_flight: VecDeque<Vec<(Instant, usize)>> = VecDeque::new();
    // A batch that did not fit into the last request.
    let mut carry: Option<Pending> = None;
    let mut events = Vec::new();
    let mut open = true;
    loop {
        let next = if in_flight.len() >= window {
            None
        } else if let Some(pending) = carry.take() {
            Some(pending)
        } else if !open {
            None
        } else if in_flight.is_empty() {
            // Nothing to acknowledge: wait for the generator.
            let pending = rx.recv().await;
            open = pending.is_some();
            pending
        } else {
            // The next batch or the oldest acknowledgement, whichever comes first.
            tokio::select! {
                biased;
                done = link.acked() => {
                    done?;
                    acknowledge(&mut sent, in_flight.pop_front(), &acked);
                    continue;
                }
                pending = rx.recv() => {
                    open = pending.is_some();
                    pending
                }
            }
        };
        let Some(first) = next else {
            if in_flight.is_empty() {
                return Ok(sent); // the generator is done and everything acknowledged
            }
            link.acked().await?;
            acknowledge(&mut sent, in_flight.pop_front(), &acked);
            continue;
        };
        events.clear();
        let mut made = vec![(first.made, first.events.len())];
        events.extend_from_slice(&first.events);
        // Whatever queued up behind a slow request goes into this one.
        while events.len() < max_batch {
            match rx.try_recv() {
                Ok(next) if events.len() + next.events.len() <= max_batch => {
                    made.push((next.made, next.events.len()));
                    events.extend_from_slice(&next.events);
                }
                Ok(next) => {
                    carry = Some(next);
                    break;
                }
                Err(_) => break,
            }
        }
        link.send(&events).await?;
        sent.batches += 1;
        in_flight.push_back(made);
    }
}

fn acknowledge(sent: &mut Sent, made: Option<Vec<(Instant, usize)>>, acked: &AtomicU64) {
    let at = Instant::now();
    sent.last_ack = Some(at);
    let mut n = 0;
    for (when, count) in made.unwrap_or_default() {
        let micros = (at - when).as_micros() as u64;
        sent.ack_latency.record_n(micros, count as u64);
        n += count as u64;
    }
    acked.fetch_add(n, Ordering::Release);
}

async fn run_shard<L: CoreLink>(
    shard: usize,
    link: L,
    plan: &CorePlan,
    rate: f64,
    start: Instant,
    stop: CancellationToken,
) -> Result<ShardRun, CoreError> {
    let (tx, rx) = mpsc::unbounded_channel();
    let acked = Arc::new(AtomicU64::new(0));
    let max_batch = plan.max_batch.min(link.max_batch()).max(1);
    let mut sender = tokio::spawn(send_all(link, rx, acked.clone(), max_batch));
    let mut book = Book::new(plan.book.clone(), plan.seed, shard as u32);
    let mut kinds = [0u64; Kind::ALL.len()];
    let mut ticks = tokio::time::interval_at(start, plan.tick);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let allowed = ((rate * plan.max_backlog.as_secs_f64()) as u64).max(max_batch as u64);
    let mut generated = 0u64;
    let mut max_backlog = 0u64;
    let mut max_tick_late = Duration::ZERO;
    let mut stopped_early = false;
    let mut sender_done = None;
    loop {
        let stopping = tokio::select! {
            biased;
            () = stop.cancelled() => true,
            joined = &mut sender => {
                // The sender ends early only on an error.
                sender_done = Some(joined);
                break;
            }
            scheduled = ticks.tick() => {
                max_tick_late = max_tick_late.max(Instant::now() - scheduled);
                false
            }
        };
        let elapsed = start.elapsed();
        let last = stopping || elapsed >= plan.duration;
        stopped_early |= stopping && elapsed < plan.duration;
        let due = if stopping {
            generated
        } else {
            (rate * elapsed.min(plan.duration).as_secs_f64()) as u64
        };
        let mut count = due.saturating_sub(generated);
        // The last batch ends a pending immediate-or-cancel order.
        let mut ioc_end = false;
        while count > 0 || (last && book.ioc_pending() && !ioc_end) {
            let n = count.min(max_batch as u64) as usize;
            let stamp = now_ns();
            let mut events = Vec::with_capacity(n.max(1));
            for _ in 0..n {
                let step = book.next(stamp);
                kinds[step.kind.index()] += 1;
                events.push(step.event);
            }
            count -= n as u64;
            if count == 0 && last && book.ioc_pending() && events.len() < max_batch {
                let step = book.next(stamp);
                kinds[step.kind.index()] += 1;
                events.push(step.event);
                ioc_end = true;
            }
            generated += events.len() as u64;
            if tx
                .send(Pending {
                    events,
                    made: Instant::now(),
                })
                .is_err()
            {
                break; // the sender failed: its error is collected below
            }
        }
        let backlog = generated.saturating_sub(acked.load(Ordering::Acquire));
        max_backlog = max_backlog.max(backlog);
        if backlog > allowed {
            sender.abort();
            return Err(CoreError::Behind {
                shard,
                backlog,
                behind_ms: (backlog as f64 / rate * 1e3) as u64,
                allowed_ms: plan.max_backlog.as_millis() as u64,
                rate,
                elapsed_ms: elapsed.as_millis() as u64,
            });
        }
        if last {
            break;
        }
    }
    drop(tx);
    let joined = match sender_done {
        Some(joined) => joined,
        None => sender.await,
    };
    let sent = joined
        .expect("the sender does not panic")
        .map_err(|source| CoreError::Link { shard, source })?;
    Ok(ShardRun {
        events: generated,
        batches: sent.batches,
        last_ack: sent.last_ack,
        ack_latency: sent.ack_latency,
        max_backlog,
        max_tick_late,
        stopped_early,
        kinds,
    })
}
