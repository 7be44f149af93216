//! Riding out a lost feed server (a restart, a crash, a network cut): how long cores
//! and clients keep reconnecting ([`Reconnect`]), and saying once per server that it
//! was lost and once that it is back ([`Outage`]), however many links noticed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::link::LinkError;

/// The first pause after a failed attempt; it doubles up to [`MAX_PAUSE`]. Short, so a
/// restart of a second costs about a second (the broker's reconnects pace the same).
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// An outage as the emulators report it: each once per server and outage, whichever
/// link (a shard's core, a client) noticed first.
#[derive(Debug)]
pub enum Outage<'a> {
    /// A link to `server` failed as a lost server does (refused, reset, 5xx,
    /// `shutting_down`): links to it are reconnected for up to `retry_for`.
    Lost {
        /// The server (its base URL or address).
        server: &'a str,
        /// The failure that began the outage.
        error: &'a LinkError,
        /// How long each link keeps trying.
        retry_for: Duration,
    },
    /// A link reconnected after the outage began (the server answered).
    Back {
        /// The server.
        server: &'a str,
        /// How long the outage lasted.
        after: Duration,
    },
    /// A link failed to reconnect for `retry_for`: the run stops with its error.
    GaveUp {
        /// The server.
        server: &'a str,
        /// How long it tried.
        after: Duration,
    },
}

/// How cores and clients ride out a lost server: each link reconnects, with backoff
/// (50 ms doubling to 1 s), for up to `retry_for` per outage, and `report` hears once
/// per server when an outage begins and once when it ends.
#[derive(Clone)]
pub struct Reconnect {
    retry_for: Duration,
    report: Arc<dyn Fn(Outage<'_>) + Send + Sync>,
}

impl Reconnect {
    /// Reconnects for up to `retry_for` per outage, telling `report`.
    pub fn new(retry_for: Duration, report: impl Fn(Outage<'_>) + Send + Sync + 'static) -> Self {
        Reconnect {
            retry_for,
            report: Arc::new(report),
        }
    }

    /// How long a link keeps trying.
    pub fn retry_for(&self) -> Duration {
        self.retry_for
    }
}

/// By hand: the report is a closure.
impl std::fmt::Debug for Reconnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconnect")
            .field("retry_for", &self.retry_for)
            .finish_non_exhaustive()
    }
}

/// One server as the links of a run see it.
#[derive(Default)]
struct Server {
    /// Raised each time the server is back: a link made before a raise talked to a
    /// process that has since been lost.
    epoch: u64,
    /// When the outage under way began.
    down_since: Option<Instant>,
}

/// What the links of one run know of their servers' outages, and the counts a report
/// gives.
pub(crate) struct Outages {
    reconnect: Reconnect,
    servers: Mutex<HashMap<String, Server>>,
    outages: AtomicU64,
    reconnects: AtomicU64,
}

impl Outages {
    pub(crate) fn new(reconnect: Reconnect) -> Arc<Outages> {
        Arc::new(Outages {
            reconnect,
            servers: Mutex::new(HashMap::new()),
            outages: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
        })
    }

    pub(crate) fn retry_for(&self) -> Duration {
        self.reconnect.retry_for
    }

    /// The server's epoch now: what a link made now is tagged with.
    pub(crate) fn epoch(&self, server: &str) -> u64 {
        let servers = self.servers.lock().expect("not poisoned");
        servers.get(server).map_or(0, |s| s.epoch)
    }

    /// A link to `server` made in `epoch` failed with `error`, as a lost server does.
    /// Begins an outage (said once) unless one is under way, or the server came back
    /// since the link was made (the link talked to a process already lost, and that
    /// outage is over). Answers when the link's trouble began: the outage's start, or
    /// now.
    pub(crate) fn lost(&self, server: &str, epoch: u64, error: &LinkError) -> Instant {
        let now = Instant::now();
        let began = {
            let mut servers = self.servers.lock().expect("not poisoned");
            let state = servers.entry(server.to_owned()).or_default();
            match state.down_since {
                Some(since) => return since,
                None if epoch < state.epoch => return now,
                None => {
                    state.down_since = Some(now);
                    now
                }
            }
        };
        self.outages.fetch_add(1, Ordering::Relaxed);
        (self.reconnect.report)(Outage::Lost {
            server,
            error,
            retry_for: self.reconnect.retry_for,
        });
        began
    }

    /// A link to `server` works again: ends the outage under way (said once).
    /// Answers the epoch to tag the link with.
    pub(crate) fn back(&self, server: &str) -> u64 {
        self.reconnects.fetch_add(1, Ordering::Relaxed);
        let (epoch, after) = {
            let mut servers = self.servers.lock().expect("not poisoned");
            let state = servers.entry(server.to_owned()).or_default();
            match state.down_since.take() {
                Some(since) => {
                    state.epoch += 1;
                    (state.epoch, Some(since.elapsed()))
                }
                None => (state.epoch, None),
            }
        };
        if let Some(after) = after {
            (self.reconnect.report)(Outage::Back { server, after });
        }
        epoch
    }

    /// A link to `server` gave up after trying since `began`.
    pub(crate) fn gave_up(&self, server: &str, began: Instant) {
        (self.reconnect.report)(Outage::GaveUp {
            server,
            after: began.elapsed(),
        });
    }

    /// Servers lost (outages begun).
    pub(crate) fn outages(&self) -> u64 {
        self.outages.load(Ordering::Relaxed)
    }

    /// Links made again after failing.
    pub(crate) fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }
}

/// The pauses between a link's attempts to reconnect: 50 ms doubling to 1 s, none
/// past the link's `retry_for` since its trouble began.
pub(crate) struct Backoff {
    began: Instant,
    retry_for: Duration,
    pause: Duration,
}

impl Backoff {
    pub(crate) fn new(began: Instant, retry_for: Duration) -> Backoff {
        Backoff {
            began,
            retry_for,
            pause: FIRST_PAUSE,
        }
    }

    pub(crate) fn began(&self) -> Instant {
        self.began
    }

    /// Waits before the next attempt: `false` if `retry_for` has passed (give up) or
    /// `halt` was cancelled meanwhile.
    pub(crate) async fn pause(&mut self, halt: &CancellationToken) -> bool {
        let deadline = self.began + self.retry_for;
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        let until = (now + self.pause).min(deadline);
        self.pause = (self.pause * 2).min(MAX_PAUSE);
        tokio::select! {
            biased;
            () = halt.cancelled() => false,
            () = tokio::time::sleep_until(until) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost() -> LinkError {
        LinkError::Transport {
            target: "s".into(),
            message: "connection refused".into(),
        }
    }

    #[test]
    fn an_outage_is_told_once_however_many_links_notice_it() {
        let said = Arc::new(Mutex::new(Vec::new()));
        let outages = Outages::new(Reconnect::new(Duration::from_secs(5), {
            let said = said.clone();
            move |outage| {
                let word = match outage {
                    Outage::Lost { server, .. } => format!("lost {server}"),
                    Outage::Back { server, .. } => format!("back {server}"),
                    Outage::GaveUp { server, .. } => format!("gave up {server}"),
                };
                said.lock().unwrap().push(word);
            }
        }));
        // Three links made before the crash; two notice it, one only later.
        let made = outages.epoch("s");
        outages.lost("s", made, &lost());
        outages.lost("s", made, &lost());
        let again = outages.back("s");
        // The third link's failure is of the same crash: no second outage.
        outages.lost("s", made, &lost());
        outages.back("s");
        assert_eq!(*said.lock().unwrap(), ["lost s", "back s"]);
        assert_eq!((outages.outages(), outages.reconnects()), (1, 2));
        // A link made since fails: a new outage. Another server's are its own.
        outages.lost("s", again, &lost());
        outages.lost("t", outages.epoch("t"), &lost());
        outages.gave_up("t", Instant::now());
        assert_eq!(
            *said.lock().unwrap(),
            ["lost s", "back s", "lost s", "lost t", "gave up t"]
        );
        assert_eq!(outages.outages(), 3);
    }

    #[test]
    fn lost_servers_are_told_from_refusals() {
        let refused = |status: u16, code: &str| LinkError::Refused {
            target: "s".into(),
            status,
            code: code.into(),
            message: String::new(),
        };
        assert!(lost().server_lost());
        assert!(refused(503, "shutting_down").server_lost());
        assert!(refused(502, "").server_lost());
        assert!(refused(9, "shutting_down").server_lost(), "TCP's code");
        assert!(refused(8, "store_failed").server_lost());
        assert!(!refused(400, "bad_batch").server_lost());
        assert!(!refused(410, "cursor_too_old").server_lost());
        let unreadable = LinkError::Protocol {
            target: "s".into(),
            message: "?".into(),
        };
        assert!(!unreadable.server_lost());
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_doubles_to_a_second_and_stops_at_retry_for() {
        let halt = CancellationToken::new();
        let began = Instant::now();
        let mut backoff = Backoff::new(began, Duration::from_secs(3));
        let mut at = Vec::new();
        while backoff.pause(&halt).await {
            at.push((Instant::now() - began).as_millis());
        }
        assert_eq!(at, [50, 150, 350, 750, 1_550, 2_550, 3_000]);
        let mut halted = Backoff::new(Instant::now(), Duration::from_secs(3));
        halt.cancel();
        assert!(!halted.pause(&halt).await);
    }
}
