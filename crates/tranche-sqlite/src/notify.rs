use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Wakes in-process reserve calls waiting on a queue as soon as a commit made jobs of
/// it runnable, so idle workers neither poll hard nor wait out their timeout; and
/// readers of the change feed as soon as a commit added events.
#[derive(Default)]
pub struct Notifier {
    queues: Mutex<HashMap<String, Arc<Notify>>>,
    feed: Notify,
}

impl Notifier {
    pub fn feed(&self) -> &Notify {
        &self.feed
    }

    pub fn queue(&self, name: &str) -> Arc<Notify> {
        let mut q = self.queues.lock().expect("notifier lock");
        if let Some(n) = q.get(name) {
            return n.clone();
        }
        let n = Arc::new(Notify::new());
        q.insert(name.to_string(), n.clone());
        n
    }

    pub fn wake<'a>(&self, names: impl Iterator<Item = &'a String>) {
        let q = self.queues.lock().expect("notifier lock");
        for name in names {
            if let Some(n) = q.get(name) {
                n.notify_waiters();
            }
        }
    }

    pub fn wake_all(&self) {
        let q = self.queues.lock().expect("notifier lock");
        q.values().for_each(|n| n.notify_waiters());
    }
}
