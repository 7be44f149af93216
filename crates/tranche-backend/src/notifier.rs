use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Wakes in-process callers waiting on a backend: reserves waiting on a queue as soon as
/// a commit made jobs of it runnable, and readers of the change feed as soon as a commit
/// added events, so idle workers neither poll hard nor wait out their timeout. A backend
/// wakes it after its own commits (SQLite's writer) or on a message from other
/// processes (Redis pub/sub).
#[derive(Default)]
pub struct Notifier {
    queues: Mutex<HashMap<String, Arc<Notify>>>,
    feed: Notify,
}

impl Notifier {
    /// What a reserve on `queue` waits on.
    pub fn queue(&self, queue: &str) -> Arc<Notify> {
        self.queues
            .lock()
            .expect("notifier lock")
            .entry(queue.to_string())
            .or_default()
            .clone()
    }

    /// What a change-feed read waits on.
    pub fn feed(&self) -> &Notify {
        &self.feed
    }

    /// Jobs of these queues became runnable.
    pub fn wake<'a>(&self, queues: impl IntoIterator<Item = &'a str>) {
        let waiting = self.queues.lock().expect("notifier lock");
        for queue in queues {
            if let Some(n) = waiting.get(queue) {
                n.notify_waiters();
            }
        }
    }

    /// Wake-ups may have been missed (a reconnect, another process's commit): every
    /// waiter looks again.
    pub fn wake_all(&self) {
        for n in self.queues.lock().expect("notifier lock").values() {
            n.notify_waiters();
        }
        self.feed.notify_waiters();
    }
}
