use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tranche_types::{Clock, Timestamp};

/// One look at the store by a long-poll.
#[derive(Debug)]
pub enum Answer<T> {
    /// Something to return now.
    Ready(T),
    /// Nothing yet; a scheduled item becomes due at `next_due`, if any.
    NotYet {
        /// When the earliest scheduled item becomes due (wait no longer than that).
        next_due: Option<Timestamp>,
    },
}

/// Ask `ask` until it has something, waiting between asks for a wake-up on `wake`, the
/// next due time, or `poll_interval` (what another process's commit may take to be
/// seen), for at most `wait` in all; `T::default()` (an empty batch) after that. The
/// wake-up is registered before each ask, so a commit between the ask and the wait
/// still wakes it: no busy polling, no missed wake-up.
pub async fn long_poll<T, E, F, Fut>(
    wake: &Notify,
    wait: Duration,
    poll_interval: Duration,
    clock: &dyn Clock,
    mut ask: F,
) -> Result<T, E>
where
    T: Default,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Answer<T>, E>>,
{
    let deadline = Instant::now() + wait;
    loop {
        let notified = wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let next_due = match ask().await? {
            Answer::Ready(found) => return Ok(found),
            Answer::NotYet { next_due } => next_due,
        };
        let now = Instant::now();
        if now >= deadline {
            return Ok(T::default());
        }
        let mut pause = (deadline - now).min(poll_interval);
        if let Some(at) = next_due {
            pause = pause.min(at.since(clock.now()).max(Duration::from_millis(1)));
        }
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tranche_types::SystemClock;

    #[tokio::test]
    async fn a_wake_up_ends_the_wait_before_the_poll_interval() {
        let wake = Arc::new(Notify::new());
        let asks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let waker = {
            let wake = wake.clone();
            let asks = asks.clone();
            tokio::spawn(async move {
                // Wake only once the first ask has happened, so the wake-up is the
                // thing that ends the wait.
                while asks.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                    tokio::task::yield_now().await;
                }
                wake.notify_waiters();
            })
        };
        let started = Instant::now();
        let found: Vec<u32> = long_poll(
            &wake,
            Duration::from_secs(30),
            Duration::from_secs(30),
            &SystemClock,
            || {
                let n = asks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                async move {
                    Ok::<_, ()>(if n == 0 {
                        Answer::NotYet { next_due: None }
                    } else {
                        Answer::Ready(vec![7])
                    })
                }
            },
        )
        .await
        .unwrap();
        waker.await.unwrap();
        assert_eq!(found, vec![7]);
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn nothing_within_the_wait_returns_empty() {
        let wake = Notify::new();
        let found: Vec<u32> = long_poll(
            &wake,
            Duration::from_millis(30),
            Duration::from_millis(5),
            &SystemClock,
            || async { Ok::<_, ()>(Answer::NotYet { next_due: None }) },
        )
        .await
        .unwrap();
        assert!(found.is_empty());
    }
}
