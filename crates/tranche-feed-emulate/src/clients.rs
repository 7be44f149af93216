//! The polling clients: filtered ones (one firm each) and unfiltered ones, each
//! following every shard through one vector cursor per target (one in all when the
//! shards are on one server), timing each row's delivery and checking what it
//! receives.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tranche_feed::{Filter, FirmId, VectorCursor};

use crate::check::{Ends, Expected, FeedView, Verdict};
use crate::latency::Latency;
use crate::link::{Connector, FeedLink, LinkError, PageBody, PageHead, ReadRequest};
use crate::reconnect::{Backoff, Outages, Reconnect};

/// What a clients run is asked to do.
#[derive(Clone, Debug)]
pub struct ClientsPlan {
    /// Clients that follow one firm each: client `i` follows firm `1 + i % firms`.
    pub filtered: usize,
    /// Clients that follow every order.
    pub unfiltered: usize,
    /// The book's firms (its [`crate::BookConfig::firms`]).
    pub firms: u32,
    /// Rows per poll at most.
    pub limit: usize,
    /// A poll waits for this many rows…
    pub min_batch: usize,
    /// …or this many milliseconds…
    pub wait_ms: u64,
    /// …or, once some rows are ready, this many microseconds (0: no linger).
    pub linger_us: u64,
    /// Send the next poll as soon as a page's header arrives, before its rows are
    /// read (otherwise after).
    pub pipeline: bool,
    /// Once the final state is known, how long clients have to reach it.
    pub drain_timeout: Duration,
    /// When a client's server is lost (refused, reset, 5xx, `shutting_down`),
    /// reconnect and poll on from the cursor of the last page it took whole
    /// ([`Reconnect`]); `None`: the first failure stops the run.
    pub reconnect: Option<Reconnect>,
}

impl Default for ClientsPlan {
    fn default() -> ClientsPlan {
        ClientsPlan {
            filtered: 20,
            unfiltered: 2,
            firms: 20,
            limit: 1_000,
            min_batch: 1,
            wait_ms: 1_000,
            linger_us: 0,
            pipeline: true,
            drain_timeout: Duration::from_secs(30),
            reconnect: None,
        }
    }
}

impl ClientsPlan {
    /// The filters of the clients, filtered ones first.
    pub fn filters(&self) -> Vec<Filter> {
        let firms = self.firms.max(1);
        (0..self.filtered)
            .map(|i| Filter::Firm(FirmId(1 + (i as u32) % firms)))
            .chain((0..self.unfiltered).map(|_| Filter::All))
            .collect()
    }
}

/// Why a clients run failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientsError {
    /// A client's link failed.
    #[error("client {client} ({filter:?}), target {target}: {source}")]
    Link {
        /// The client's number.
        client: usize,
        /// Its filter.
        filter: Filter,
        /// The target (server) it read.
        target: usize,
        /// What failed.
        #[source]
        source: LinkError,
    },
    /// The final state does not have the connector's number of shards.
    #[error("the final state has {expected} shards, the connector {got}")]
    Shards {
        /// In the final state.
        expected: usize,
        /// The connector's.
        got: usize,
    },
}

/// What the clients saw and what the checks found.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClientsReport {
    /// Clients run.
    pub clients: usize,
    /// Polls answered.
    pub polls: u64,
    /// Of which with no rows.
    pub empty_polls: u64,
    /// Rows received.
    pub rows: u64,
    /// Seconds from the clients' start to the last row's arrival.
    pub elapsed_s: f64,
    /// From an order version's stamp (`updated_at`, the core's clock; `created_at` for
    /// a new order) to the arrival of the page holding it (this process's clock), µs.
    /// Versions stamped before their client sent its first poll are delivered and
    /// checked but not timed: a client that was not listening yet cannot be late (the
    /// clients start once the core's run file appears, up to a poll of it after the
    /// core's first events).
    pub latency: Latency,
    /// The same, of the filtered clients alone.
    #[serde(default)]
    pub filtered_latency: Latency,
    /// The same, of the unfiltered clients alone (on a replica when they read one).
    #[serde(default)]
    pub unfiltered_latency: Latency,
    /// Rows not timed: versions stamped before their client sent its first poll (see
    /// `latency`). `latency`'s count plus these is `rows`.
    #[serde(default)]
    pub untimed: u64,
    /// Whether the final state was known and every view compared with it.
    pub checked: bool,
    /// Whether every client reached the last position of its filter in every shard.
    pub caught_up: bool,
    /// Orders the views should hold (every client's filter, every shard).
    pub expected: u64,
    /// Orders (or their last versions) a view lacks.
    pub omissions: u64,
    /// Rows received out of `(seq, rec)` order, or an older version after a newer.
    pub reorderings: u64,
    /// Orders a view holds with contents the final state does not have.
    pub mismatches: u64,
    /// Rows that do not pass their client's filter.
    pub misfiltered: u64,
    /// The first few problems, in words.
    pub problems: Vec<String>,
    /// Times a server was lost (each outage once, whichever client noticed).
    #[serde(default)]
    pub outages: u64,
    /// Times a client's link was made again after its server was lost (each client
    /// resumed from its cursor).
    #[serde(default)]
    pub reconnects: u64,
}

impl ClientsReport {
    /// Rows received per second.
    pub fn rows_per_sec(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.rows as f64 / self.elapsed_s
        } else {
            0.0
        }
    }

    /// Share of polls answered with no rows.
    pub fn empty_share(&self) -> f64 {
        if self.polls > 0 {
            self.empty_polls as f64 / self.polls as f64
        } else {
            0.0
        }
    }

    /// Whether everything was checked and found right.
    pub fn clean(&self) -> bool {
        self.checked
            && self.caught_up
            && self.omissions == 0
            && self.reorderings == 0
            && self.mismatches == 0
            && self.misfiltered == 0
    }

    /// Adds another process's report (its clients ran alongside these).
    pub fn merge(&mut self, other: &ClientsReport) {
        let first = self.clients == 0;
        self.clients += other.clients;
        self.polls += other.polls;
        self.empty_polls += other.empty_polls;
        self.rows += other.rows;
        self.elapsed_s = self.elapsed_s.max(other.elapsed_s);
        self.latency.merge(&other.latency);
        self.filtered_latency.merge(&other.filtered_latency);
        self.unfiltered_latency.merge(&other.unfiltered_latency);
        self.untimed += other.untimed;
        self.checked = (first || self.checked) && other.checked;
        self.caught_up = (first || self.caught_up) && other.caught_up;
        self.expected += other.expected;
        self.omissions += other.omissions;
        self.reorderings += other.reorderings;
        self.mismatches += other.mismatches;
        self.misfiltered += other.misfiltered;
        self.outages += other.outages;
        self.reconnects += other.reconnects;
        for problem in &other.problems {
            if self.problems.len() < PROBLEMS {
                self.problems.push(problem.clone());
            }
        }
    }
}

const PROBLEMS: usize = 10;

/// What one client did on one target.
struct Followed {
    client: usize,
    target: usize,
    view: FeedView,
    latency: Latency,
    /// Rows stamped before its first poll, not timed.
    untimed: u64,
    caught_up: bool,
    /// When its last row arrived.
    last_row_at: Option<Instant>,
}

/// The final state, once known, with each shard's last positions per filter.
struct Known {
    expected: Expected,
    ends: Vec<Ends>,
}

impl Known {
    /// Where a client of `filter` reading the shards `served` has read everything.
    fn end(&self, filter: Filter, served: std::ops::Range<usize>) -> VectorCursor {
        let mut end = VectorCursor::START;
        for (i, shard) in served.enumerate() {
            if let Some(ends) = self.ends.get(shard) {
                end.set(i, ends.get(filter));
            }
        }
        end
    }
}

/// The final state, once known: `None` until then (and for good if the core failed:
/// the clients are then halted).
type Final = Option<Arc<Known>>;

/// Runs the clients of `plan` against every target of `connector` (a link per client
/// and target, reading the target's shards through one vector cursor) until they
/// have caught up with the final state `expected` resolves to (then they are
/// checked against it), or until `stop` (then nothing is checked unless the final
/// state was known). `expected` resolving to `None` means there will be no final
/// state (the core failed): the clients stop at once and are not checked. The first
/// client that fails stops the others, and the run returns its error. With
/// [`ClientsPlan::reconnect`], a lost server is not a failure until a client could not
/// reconnect for its `retry_for`: each client polls on from the cursor of the last
/// page it took whole, so its checks go on as if nothing happened (a row missed or
/// received twice is still an omission or a reordering).
pub async fn run_clients<C: Connector>(
    connector: &C,
    plan: &ClientsPlan,
    expected: impl Future<Output = Option<Expected>> + Send,
    stop: CancellationToken,
) -> Result<ClientsReport, ClientsError> {
    let started = Instant::now();
    let layout = connector.layout();
    let filters = plan.filters();
    let (final_tx, final_rx) = watch::channel::<Final>(None);
    let halt = stop.child_token();
    let outages = plan.reconnect.clone().map(Outages::new);
    let mut tasks = JoinSet::new();
    for (client, &filter) in filters.iter().enumerate() {
        for target in 0..layout.targets() {
            let link =
                connector
                    .feed(target, filter)
                    .await
                    .map_err(|source| ClientsError::Link {
                        client,
                        filter,
                        target,
                        source,
                    })?;
            let plan = plan.clone();
            let final_rx = final_rx.clone();
            let halt = halt.clone();
            let view = FeedView::new(filter, layout.served(target));
            let reconnect = outages.clone().map(|outages| (connector.clone(), outages));
            tasks.spawn(async move {
                let following = Following {
                    client,
                    target,
                    plan: &plan,
                    reconnect,
                    halt: halt.clone(),
                };
                let followed = following
                    .follow(link, view, final_rx)
                    .await
                    .map_err(|source| ClientsError::Link {
                        client,
                        filter,
                        target,
                        source,
                    });
                if followed.is_err() {
                    halt.cancel(); // the run is reported as this error: stop the others
                }
                followed
            });
        }
    }
    drop(final_rx);
    // The final state arrives while the clients poll.
    let (known, results) = {
        let halt = halt.clone();
        let mut tasks_done = std::pin::pin!(async {
            let mut out = Vec::new();
            while let Some(joined) = tasks.join_next().await {
                out.push(joined.expect("a client does not panic"));
            }
            out
        });
        let mut expected = std::pin::pin!(expected);
        let mut known: Final = None;
        let results = loop {
            tokio::select! {
                results = &mut tasks_done => break results,
                got = &mut expected, if known.is_none() && !halt.is_cancelled() => {
                    match got {
                        Some(expected) if expected.shards.len() != layout.shards() => {
                            // Not this run's final state: nothing can be checked (the
                            // clients are aborted with their JoinSet).
                            halt.cancel();
                            return Err(ClientsError::Shards {
                                expected: expected.shards.len(),
                                got: layout.shards(),
                            });
                        }
                        Some(expected) => {
                            let ends = expected.shards.iter().map(|s| s.ends()).collect();
                            let k = Arc::new(Known { expected, ends });
                            known = Some(k.clone());
                            final_tx.send_replace(Some(k));
                        }
                        None => halt.cancel(),
                    }
                }
            }
        };
        (known, results)
    };
    let last_row_at = results
        .iter()
        .filter_map(|r| r.as_ref().ok().and_then(|f| f.last_row_at))
        .max();
    let elapsed = last_row_at.map_or(Duration::ZERO, |at| at - started);
    let mut report = ClientsReport {
        clients: filters.len(),
        elapsed_s: elapsed.as_secs_f64(),
        checked: known.is_some(),
        caught_up: true,
        outages: outages.as_ref().map_or(0, |o| o.outages()),
        reconnects: outages.as_ref().map_or(0, |o| o.reconnects()),
        ..ClientsReport::default()
    };
    let mut followed = Vec::with_capacity(results.len());
    let mut first_error = None;
    for result in results {
        match result {
            Ok(f) => followed.push(f),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(error) = first_error {
        return Err(error);
    }
    followed.sort_by_key(|f| (f.client, f.target));
    for f in &followed {
        let label = if layout.targets() == 1 {
            format!("client {} ({:?})", f.client, f.view.filter())
        } else {
            format!(
                "client {} ({:?}), target {}",
                f.client,
                f.view.filter(),
                f.target
            )
        };
        report.polls += f.view.pages;
        report.empty_polls += f.view.empty_pages;
        report.rows += f.view.rows;
        report.latency.merge(&f.latency);
        report.untimed += f.untimed;
        match f.view.filter() {
            Filter::All => report.unfiltered_latency.merge(&f.latency),
            _ => report.filtered_latency.merge(&f.latency),
        }
        report.reorderings += f.view.reorderings;
        report.misfiltered += f.view.misfiltered;
        report.caught_up &= f.caught_up;
        for problem in &f.view.problems {
            if report.problems.len() < PROBLEMS {
                report.problems.push(format!("{label}: {problem}"));
            }
        }
        if let Some(known) = &known {
            let verdict: Verdict = f.view.compare(&known.expected);
            report.expected += verdict.expected;
            report.omissions += verdict.omissions;
            report.mismatches += verdict.mismatches;
            if verdict.omissions + verdict.mismatches > 0 {
                for difference in f.view.describe_differences(&known.expected) {
                    if report.problems.len() < PROBLEMS {
                        report.problems.push(format!("{label}: {difference}"));
                    }
                }
            }
        }
    }
    if known.is_none() {
        report.caught_up = false;
    }
    Ok(report)
}

/// One client on one target, and how it reconnects.
struct Following<'a, C: Connector> {
    client: usize,
    target: usize,
    plan: &'a ClientsPlan,
    /// To reconnect after losing the server: the connector and the run's outages.
    reconnect: Option<(C, Arc<Outages>)>,
    halt: CancellationToken,
}

/// What one pass of a client's loop did.
enum Step {
    /// Took an answer; poll on.
    Polled,
    /// Done: caught up, past the drain timeout, or halted.
    Stop,
}

impl<C: Connector> Following<'_, C> {
    /// Polls from the start until the cursor reaches the last position of its
    /// filter in the final state in every shard the target serves (or the drain
    /// timeout, or `halt`). A link that fails as a lost server does is made again
    /// (with backoff, for up to the reconnect's `retry_for`) and polls on from the
    /// view's cursor: the next cursor of the last page taken whole, so a page whose
    /// rows were cut off is read again, and nothing is skipped or taken twice.
    async fn follow(
        self,
        link: C::Feed,
        mut view: FeedView,
        mut final_rx: watch::Receiver<Final>,
    ) -> Result<Followed, LinkError> {
        let (client, target, plan) = (self.client, self.target, self.plan);
        let filter = view.filter();
        let width = view.served().len();
        let server = self
            .reconnect
            .as_ref()
            .map(|(connector, _)| connector.feed_server(target, filter))
            .unwrap_or_default();
        let outages = self.reconnect.as_ref().map(|(_, outages)| outages.clone());
        // The server's epoch when the link was made ([`Outages::epoch`]).
        let mut epoch = outages.as_ref().map_or(0, |o| o.epoch(&server));
        // Since a link failed and until an answer comes on a new one: the pauses.
        let mut trouble: Option<Backoff> = None;
        let mut link = Some(link);
        let mut latency = Latency::new();
        let mut end: Option<(VectorCursor, Instant)> = None;
        // Polls sent whose header has not arrived yet.
        let mut outstanding = 0usize;
        let mut cursor = VectorCursor::START;
        let mut last_row_at = None;
        // Versions stamped before the first poll are not timed (see `ClientsReport::latency`).
        let listening_since = crate::link::now_ns();
        let mut untimed = 0;
        let request = |cursor: VectorCursor, draining: bool| ReadRequest {
            cursor,
            filter,
            limit: plan.limit,
            // Once the final state is known, nothing more is coming: no batching.
            min_batch: if draining { 1 } else { plan.min_batch },
            wait_ms: if draining {
                plan.wait_ms.min(100)
            } else {
                plan.wait_ms
            },
            linger_us: plan.linger_us,
        };
        loop {
            if end.is_none() {
                if let Some(known) = final_rx.borrow_and_update().as_ref() {
                    end = Some((
                        known.end(filter, view.served()),
                        Instant::now() + plan.drain_timeout,
                    ));
                }
            }
            let done = |cursor: &VectorCursor| {
                end.as_ref().is_some_and(|(last, deadline)| {
                    crate::check::reached(cursor, last, width) || Instant::now() >= *deadline
                })
            };
            let step: Result<Step, LinkError> = async {
                let link = match &mut link {
                    Some(link) => link,
                    None => {
                        if let Some(outages) = &outages {
                            epoch = outages.epoch(&server);
                        }
                        let (connector, _) = self.reconnect.as_ref().expect("reconnecting");
                        link.insert(connector.feed(target, filter).await?)
                    }
                };
                if outstanding == 0 {
                    if done(&cursor) {
                        return Ok(Step::Stop);
                    }
                    link.send_read(request(cursor, end.is_some())).await?;
                    outstanding += 1;
                }
                let head = tokio::select! {
                    biased;
                    () = self.halt.cancelled() => return Ok(Step::Stop),
                    head = link.recv_head() => head?,
                };
                outstanding -= 1;
                if trouble.take().is_some() {
                    // The server answered a new link.
                    if let Some(outages) = &outages {
                        epoch = outages.back(&server);
                    }
                }
                cursor = head.next;
                // Pipelining: the next poll goes out before this one's rows are read.
                if plan.pipeline && !done(&cursor) {
                    link.send_read(request(cursor, end.is_some())).await?;
                    outstanding += 1;
                }
                let body = link.recv_body().await?;
                if !body.orders.is_empty() {
                    last_row_at = Some(Instant::now());
                }
                untimed += take(&mut view, &mut latency, listening_since, &head, body);
                Ok(Step::Polled)
            }
            .await;
            let error = match step {
                Ok(Step::Polled) => continue,
                Ok(Step::Stop) => break,
                Err(error) => error,
            };
            let outages = match &outages {
                Some(outages) if error.server_lost() => outages,
                _ => return Err(error),
            };
            // Polls in flight are abandoned with the link; the next one reads from
            // the last page taken whole.
            link = None;
            outstanding = 0;
            cursor = view.cursor();
            let began = outages.lost(&server, epoch, &error);
            let backoff = trouble.get_or_insert_with(|| Backoff::new(began, outages.retry_for()));
            if !backoff.pause(&self.halt).await {
                if self.halt.is_cancelled() {
                    break;
                }
                outages.gave_up(&server, backoff.began());
                return Err(error);
            }
        }
        // A poll sent before the client knew it was done is abandoned with the link: the
        // core has finished, so nothing comes after the final state's last positions.
        let caught_up = end.as_ref().is_some_and(|(last, _)| view.reached(last));
        Ok(Followed {
            client,
            target,
            view,
            latency,
            untimed,
            caught_up,
            last_row_at,
        })
    }
}

/// Accepts a page into `view`, timing its versions stamped since `listening_since`;
/// answers how many it did not time.
fn take(
    view: &mut FeedView,
    latency: &mut Latency,
    listening_since: u64,
    head: &PageHead,
    body: PageBody,
) -> u64 {
    let mut untimed = 0;
    for order in &body.orders {
        if order.updated_at >= listening_since {
            latency.record(body.received_at.saturating_sub(order.updated_at) / 1_000);
        } else {
            untimed += 1;
        }
    }
    view.accept(&head.next, &body.orders);
    untimed
}

#[cfg(test)]
mod tests {
    use tranche_feed::{Filter, VectorCursor};

    use super::take;
    use crate::book::{Book, BookConfig};
    use crate::check::FeedView;
    use crate::latency::Latency;
    use crate::link::{PageBody, PageHead};

    #[test]
    fn versions_stamped_before_the_first_poll_are_accepted_but_not_timed() {
        let mut book = Book::new(BookConfig::default(), 1, 0);
        let early = book.next(10_000_000).order;
        let late = book.next(30_000_000).order;
        let mut view = FeedView::new(Filter::All, 0..1);
        let mut latency = Latency::new();
        let head = PageHead {
            next: VectorCursor::from_positions(&[late.position()]).unwrap(),
            count: 2,
        };
        let body = PageBody {
            orders: vec![early, late],
            received_at: 32_000_000,
        };
        let untimed = take(&mut view, &mut latency, 20_000_000, &head, body);
        assert_eq!(untimed, 1);
        assert_eq!(latency.count(), 1);
        assert_eq!(latency.summary().max_us, 2_000, "the late version's 2 ms");
        assert_eq!(view.rows, 2, "both versions are in the view");
    }
}
