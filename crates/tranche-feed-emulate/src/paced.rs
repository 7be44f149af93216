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
use crate::reconnect::{Backoff, Outages, Reconnect};

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
    /// [`CoreError::Behind`]. Not while a shard has lost its server, nor after it
    /// is back until its backlog is under this again (for at most the reconnect's
    /// `retry_for`).
    pub max_backlog: Duration,
    /// When a shard's server is lost (refused, reset, 5xx, `shutting_down`), reconnect
    /// and resume ([`Reconnect`]); `None`: the first failure stops the run.
    pub reconnect: Option<Reconnect>,
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
            reconnect: None,
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
    /// The server came back holding less of the shard than it had acknowledged: it
    /// lost acknowledged writes (a store not synced on every write, a crash).
    #[error(
        "shard {shard}: the server came back holding seq {held}, but seq {acknowledged} had \
         been acknowledged: it lost acknowledged writes (its --durability does not sync \
         every write?)"
    )]
    LostWrites {
        /// The shard.
        shard: usize,
        /// The shard's highest `seq` on the server.
        held: u64,
        /// The highest `seq` it had acknowledged.
        acknowledged: u64,
    },
    /// The server came back holding a `seq` this core did not send, or only part of
    /// one of its batches: something else writes the shard.
    #[error(
        "shard {shard}: the server came back holding seq {held}, expected the end of one of \
         this core's batches from {acknowledged} to {sent}: does another core write this \
         shard?"
    )]
    Foreign {
        /// The shard.
        shard: usize,
        /// The shard's highest `seq` on the server.
        held: u64,
        /// The highest `seq` acknowledged.
        acknowledged: u64,
        /// The highest `seq` sent.
        sent: u64,
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
    /// Times a server was lost (each outage once, whichever shard noticed).
    #[serde(default)]
    pub outages: u64,
    /// Times a shard's link was made again after its server was lost.
    #[serde(default)]
    pub reconnects: u64,
    /// Batches left unacknowledged by a lost link that the server turned out to have
    /// applied (its highest `seq` reached theirs): acknowledged then, not sent again.
    #[serde(default)]
    pub batches_found_applied: u64,
    /// Batches left unacknowledged by a lost link that the server had not applied:
    /// sent again (as requests, also in `batches`).
    #[serde(default)]
    pub batches_resent: u64,
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
    found_applied: u64,
    resent: u64,
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
/// stops all of them; with [`CorePlan::reconnect`], a lost server is not a failure
/// until a shard could not reconnect for its `retry_for`.
///
/// After reconnecting, a shard resumes from the server's highest `seq` for it
/// ([`CoreLink::applied_seq`]): of the batches the lost link left unacknowledged,
/// those at or below it were applied (the store applies a batch whole, and only above
/// its highest `seq`) and count as acknowledged; the rest are sent again, in order.
/// So nothing is lost or applied twice, and the run's event counts are exact. A
/// server holding less than it acknowledged stops the run ([`CoreError::LostWrites`]),
/// as does one holding what this core did not send ([`CoreError::Foreign`]).
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
    let outages = plan.reconnect.clone().map(Outages::new);
    let mut tasks = JoinSet::new();
    for (shard, link) in links.into_iter().enumerate() {
        let plan = plan.clone();
        let abort = abort.clone();
        let sender = Sender::new(
            connector.clone(),
            shard,
            outages.clone(),
            abort.clone(),
            plan.max_batch.min(link.max_batch()).max(1),
        );
        tasks.spawn(async move {
            let result = run_shard(sender, link, &plan, rate, start, abort.clone()).await;
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
        outages: outages.as_ref().map_or(0, |o| o.outages()),
        reconnects: outages.as_ref().map_or(0, |o| o.reconnects()),
        batches_found_applied: runs.iter().map(|r| r.found_applied).sum(),
        batches_resent: runs.iter().map(|r| r.resent).sum(),
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
    found_applied: u64,
    resent: u64,
}

/// A batch sent and not yet acknowledged: its events (sent again if a lost link
/// leaves it unapplied) and when each part of it was made.
struct InFlight {
    events: Vec<Event>,
    made: Vec<(Instant, usize)>,
}

impl InFlight {
    fn first_seq(&self) -> u64 {
        self.events.first().map_or(0, Event::seq)
    }

    fn last_seq(&self) -> u64 {
        self.events.last().map_or(0, Event::seq)
    }
}

/// Whether a shard's link is up, for the generator's backlog check (a shard is not
/// behind its server while it has none).
#[derive(Default)]
struct LinkState {
    down: std::sync::atomic::AtomicBool,
    /// Times it came back.
    backs: AtomicU64,
}

/// One shard's sender: sends what the generator queues (batches merged up to
/// `max_batch` events, up to the link's window unacknowledged at once,
/// acknowledgements taken in order), and after losing its server reconnects and
/// resumes.
struct Sender<C: Connector> {
    connector: C,
    shard: usize,
    server: String,
    outages: Option<Arc<Outages>>,
    /// The server's epoch when the link was made ([`Outages::epoch`]).
    epoch: u64,
    halt: CancellationToken,
    max_batch: usize,
    in_flight: VecDeque<InFlight>,
    /// Of `in_flight`, how many (from the front) were sent on the current link.
    sent_here: usize,
    /// A batch that did not fit into the last request.
    carry: Option<Pending>,
    /// Whether the generator may queue more.
    open: bool,
    /// The highest `seq` acknowledged.
    acked_seq: u64,
    sent: Sent,
    state: Arc<LinkState>,
}

impl<C: Connector> Sender<C> {
    fn new(
        connector: C,
        shard: usize,
        outages: Option<Arc<Outages>>,
        halt: CancellationToken,
        max_batch: usize,
    ) -> Sender<C> {
        let server = connector.core_server(shard);
        let epoch = outages.as_ref().map_or(0, |o| o.epoch(&server));
        Sender {
            connector,
            shard,
            server,
            outages,
            epoch,
            halt,
            max_batch,
            in_flight: VecDeque::new(),
            sent_here: 0,
            carry: None,
            open: true,
            acked_seq: 0,
            sent: Sent {
                batches: 0,
                last_ack: None,
                ack_latency: Latency::new(),
                found_applied: 0,
                resent: 0,
            },
            state: Arc::default(),
        }
    }

    /// Sends everything the generator queues until it is done and all is
    /// acknowledged, riding out lost servers if told to.
    async fn run(
        mut self,
        mut link: C::Core,
        mut rx: mpsc::UnboundedReceiver<Pending>,
        acked: Arc<AtomicU64>,
    ) -> Result<Sent, CoreError> {
        loop {
            let error = match self.pump(&mut link, &mut rx, &acked).await {
                Ok(()) => return Ok(self.sent),
                Err(error) => error,
            };
            let shard = self.shard;
            let outages = match &self.outages {
                Some(outages) if error.server_lost() => outages.clone(),
                _ => {
                    return Err(CoreError::Link {
                        shard,
                        source: error,
                    })
                }
            };
            drop(link);
            link = self.reconnect(&outages, error, &acked).await?;
        }
    }

    /// Sends and takes acknowledgements on `link` until done or it fails.
    async fn pump(
        &mut self,
        link: &mut C::Core,
        rx: &mut mpsc::UnboundedReceiver<Pending>,
        acked: &AtomicU64,
    ) -> Result<(), LinkError> {
        let window = link.window().max(1);
        // After a reconnect: the batches the server had not applied, again, in order.
        while self.sent_here < self.in_flight.len() {
            link.send(&self.in_flight[self.sent_here].events).await?;
            self.sent_here += 1;
            self.sent.batches += 1;
            self.sent.resent += 1;
        }
        loop {
            let next = if self.in_flight.len() >= window {
                None
            } else if let Some(pending) = self.carry.take() {
                Some(pending)
            } else if !self.open {
                None
            } else if self.in_flight.is_empty() {
                // Nothing to acknowledge: wait for the generator.
                let pending = rx.recv().await;
                self.open = pending.is_some();
                pending
            } else {
                // The next batch or the oldest acknowledgement, whichever comes first.
                tokio::select! {
                    biased;
                    done = link.acked() => {
                        done?;
                        self.acknowledge(acked, false);
                        continue;
                    }
                    pending = rx.recv() => {
                        self.open = pending.is_some();
                        pending
                    }
                }
            };
            let Some(first) = next else {
                if self.in_flight.is_empty() {
                    return Ok(()); // the generator is done and everything acknowledged
                }
                link.acked().await?;
                self.acknowledge(acked, false);
                continue;
            };
            let mut made = vec![(first.made, first.events.len())];
            let mut events = first.events;
            // Whatever queued up behind a slow request goes into this one.
            while events.len() < self.max_batch {
                match rx.try_recv() {
                    Ok(next) if events.len() + next.events.len() <= self.max_batch => {
                        made.push((next.made, next.events.len()));
                        events.extend_from_slice(&next.events);
                    }
                    Ok(next) => {
                        self.carry = Some(next);
                        break;
                    }
                    Err(_) => break,
                }
            }
            // In flight from before it is sent: a failed send may still have applied it.
            self.in_flight.push_back(InFlight { events, made });
            let batch = self.in_flight.back().expect("just pushed");
            link.send(&batch.events).await?;
            self.sent_here += 1;
            self.sent.batches += 1;
        }
    }

    /// The oldest batch in flight is acknowledged (or found applied).
    fn acknowledge(&mut self, acked: &AtomicU64, found_applied: bool) {
        let Some(batch) = self.in_flight.pop_front() else {
            return;
        };
        self.sent_here = self.sent_here.saturating_sub(1);
        let at = Instant::now();
        self.sent.last_ack = Some(at);
        if found_applied {
            self.sent.found_applied += 1;
        }
        self.acked_seq = batch.last_seq();
        let mut n = 0;
        for (when, count) in batch.made {
            let micros = (at - when).as_micros() as u64;
            self.sent.ack_latency.record_n(micros, count as u64);
            n += count as u64;
        }
        acked.fetch_add(n, Ordering::Release);
    }

    /// The server was lost (`error`): reconnects with backoff for up to the
    /// reconnect's `retry_for`, then settles the batches in flight by the shard's
    /// highest `seq` on the server (see [`run_core`]).
    async fn reconnect(
        &mut self,
        outages: &Outages,
        error: LinkError,
        acked: &AtomicU64,
    ) -> Result<C::Core, CoreError> {
        let shard = self.shard;
        self.state.down.store(true, Ordering::Release);
        let began = outages.lost(&self.server, self.epoch, &error);
        let mut backoff = Backoff::new(began, outages.retry_for());
        let mut last = error;
        loop {
            if !backoff.pause(&self.halt).await {
                if !self.halt.is_cancelled() {
                    outages.gave_up(&self.server, backoff.began());
                }
                return Err(CoreError::Link {
                    shard,
                    source: last,
                });
            }
            let epoch = outages.epoch(&self.server);
            let link = match self.connector.core(shard).await {
                Ok(link) => link,
                Err(error) if error.server_lost() => {
                    outages.lost(&self.server, epoch, &error);
                    last = error;
                    continue;
                }
                Err(source) => return Err(CoreError::Link { shard, source }),
            };
            // A link that cannot say where its shard stands cannot resume safely.
            let Some(held) = link.applied_seq() else {
                return Err(CoreError::Link {
                    shard,
                    source: last,
                });
            };
            self.settle(held, acked)?;
            self.epoch = outages.back(&self.server);
            self.sent_here = 0;
            self.state.down.store(false, Ordering::Release);
            self.state.backs.fetch_add(1, Ordering::Release);
            return Ok(link);
        }
    }

    /// Settles the batches in flight by `held`, the shard's highest `seq` on the
    /// server: those it reaches were applied; it must be where one ends.
    fn settle(&mut self, held: u64, acked: &AtomicU64) -> Result<(), CoreError> {
        if held < self.acked_seq {
            return Err(CoreError::LostWrites {
                shard: self.shard,
                held,
                acknowledged: self.acked_seq,
            });
        }
        while self.in_flight.front().is_some_and(|b| b.last_seq() <= held) {
            self.acknowledge(acked, true);
        }
        let sent = self
            .in_flight
            .back()
            .map_or(self.acked_seq, InFlight::last_seq);
        if held != self.acked_seq
            || self
                .in_flight
                .front()
                .is_some_and(|b| b.first_seq() <= held)
        {
            return Err(CoreError::Foreign {
                shard: self.shard,
                held,
                acknowledged: self.acked_seq,
                sent,
            });
        }
        Ok(())
    }
}

async fn run_shard<C: Connector>(
    sender: Sender<C>,
    link: C::Core,
    plan: &CorePlan,
    rate: f64,
    start: Instant,
    stop: CancellationToken,
) -> Result<ShardRun, CoreError> {
    let shard = sender.shard;
    let (tx, rx) = mpsc::unbounded_channel();
    let acked = Arc::new(AtomicU64::new(0));
    let max_batch = sender.max_batch;
    let link_state = sender.state.clone();
    let mut sender = tokio::spawn(sender.run(link, rx, acked.clone()));
    // While the server is lost, and once back until the backlog is under the limit
    // again (for at most `retry_for`), the shard is not behind: it has no server.
    let catch_up_for = plan
        .reconnect
        .as_ref()
        .map_or(Duration::ZERO, |r| r.retry_for());
    let mut catching_up: Option<Instant> = None;
    let mut backs_seen = 0;
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
        let excused = if link_state.down.load(Ordering::Acquire) {
            catching_up = None;
            true
        } else {
            let backs = link_state.backs.load(Ordering::Acquire);
            if backs != backs_seen {
                backs_seen = backs;
                catching_up = Some(Instant::now() + catch_up_for);
            }
            if catching_up.is_some_and(|until| backlog <= allowed || Instant::now() >= until) {
                catching_up = None;
            }
            catching_up.is_some()
        };
        if backlog > allowed && !excused {
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
    let sent = joined.expect("the sender does not panic")?;
    Ok(ShardRun {
        events: generated,
        batches: sent.batches,
        found_applied: sent.found_applied,
        resent: sent.resent,
        last_ack: sent.last_ack,
        ack_latency: sent.ack_latency,
        max_backlog,
        max_tick_late,
        stopped_early,
        kinds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::http::HttpConnector;

    /// A shard's sender with batches of `sizes` events in flight (the book's first
    /// events, `seq` from 1), all sent on its link.
    fn in_flight(sizes: &[usize]) -> Sender<HttpConnector> {
        let target = url::Url::parse("http://127.0.0.1:9").unwrap();
        let connector = HttpConnector::new(vec![target]).unwrap();
        let mut sender = Sender::new(connector, 0, None, CancellationToken::new(), 100);
        let mut book = Book::new(BookConfig::default(), 1, 0);
        let made = Instant::now();
        for &n in sizes {
            let events: Vec<Event> = (0..n).map(|_| book.next(1).event).collect();
            sender.in_flight.push_back(InFlight {
                events,
                made: vec![(made, n)],
            });
        }
        sender.sent_here = sender.in_flight.len();
        sender
    }

    fn seqs(sender: &Sender<HttpConnector>) -> Vec<(u64, u64)> {
        let seqs = sender.in_flight.iter();
        seqs.map(|b| (b.first_seq(), b.last_seq())).collect()
    }

    #[test]
    fn the_shards_highest_seq_settles_which_batches_in_flight_were_applied() {
        let acked = AtomicU64::new(0);
        // Seqs 1–10 acknowledged; 11–15, 16–20 and 21–30 in flight when the link failed.
        let mut sender = in_flight(&[10, 5, 5, 10]);
        sender.acknowledge(&acked, false);
        assert_eq!((sender.acked_seq, acked.load(Ordering::Acquire)), (10, 10));
        // The server applied the first of them: acknowledged, not sent again.
        sender.settle(15, &acked).unwrap();
        assert_eq!(seqs(&sender), [(16, 20), (21, 30)]);
        assert_eq!((sender.acked_seq, acked.load(Ordering::Acquire)), (15, 15));
        assert_eq!(sender.sent.found_applied, 1);
        // Nothing more: the rest is to be sent again, as it is.
        sender.settle(15, &acked).unwrap();
        assert_eq!(seqs(&sender), [(16, 20), (21, 30)]);
        // Less than was acknowledged: the server lost acknowledged writes.
        match sender.settle(12, &acked) {
            Err(
                error @ CoreError::LostWrites {
                    held: 12,
                    acknowledged: 15,
                    ..
                },
            ) => {
                assert!(
                    error.to_string().contains("lost acknowledged writes"),
                    "{error}"
                );
            }
            other => panic!("expected LostWrites, got {other:?}"),
        }
        // Inside a batch: not how this core's batches are applied.
        match sender.settle(18, &acked) {
            Err(CoreError::Foreign {
                held: 18,
                acknowledged: 15,
                sent: 30,
                ..
            }) => {}
            other => panic!("expected Foreign, got {other:?}"),
        }
        assert_eq!(seqs(&sender), [(16, 20), (21, 30)], "nothing settled");
        // Past everything sent: another writer.
        let mut sender = in_flight(&[4, 4]);
        match sender.settle(9, &acked) {
            Err(error @ CoreError::Foreign { held: 9, .. }) => {
                assert!(error.to_string().contains("another core"), "{error}");
            }
            other => panic!("expected Foreign, got {other:?}"),
        }
        // All of them applied.
        let mut sender = in_flight(&[4, 4]);
        sender.settle(8, &acked).unwrap();
        assert!(sender.in_flight.is_empty());
        assert_eq!((sender.acked_seq, sender.sent.found_applied), (8, 2));
    }
}
