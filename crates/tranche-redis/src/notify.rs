//! Wake-ups: every script publishes the queues it made jobs runnable in (`q:<queue>`)
//! and whether it appended to the feed (`f`) on one channel per prefix. One
//! subscriber task per backend turns those messages into in-process notifications,
//! so waiting reserves and feed reads sleep instead of polling. A lost message (the
//! subscriber reconnecting) only delays a waiter until its bounded fallback poll.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::oneshot;
use tranche_backend::Notifier;

/// Subscribe to the wake channel until the backend is dropped (the task is aborted),
/// reconnecting with a capped backoff. `ready` is answered after the first subscribe.
pub async fn listen(
    client: redis::Client,
    channel: String,
    notifier: Arc<Notifier>,
    ready: oneshot::Sender<()>,
) {
    let mut ready = Some(ready);
    let mut pause = Duration::from_millis(50);
    loop {
        match subscribe(&client, &channel).await {
            Ok(pubsub) => {
                pause = Duration::from_millis(50);
                notifier.wake_all();
                if let Some(r) = ready.take() {
                    let _ = r.send(());
                }
                let mut messages = pubsub.into_on_message();
                while let Some(msg) = messages.next().await {
                    let payload: Vec<u8> = msg.get_payload_bytes().to_vec();
                    match payload.as_slice() {
                        b"f" => notifier.feed().notify_waiters(),
                        // A kind's limit changed: its jobs may wait in any queue.
                        b"*" => notifier.wake_all(),
                        [b'q', b':', queue @ ..] => {
                            notifier.wake([String::from_utf8_lossy(queue).as_ref()]);
                        }
                        _ => {}
                    }
                }
                // Not a warning: the calls that fail meanwhile say the broker is gone
                // (once, see tranche_core::Reconnecting); a line per retry would drown it.
                tracing::info!(channel = %channel, "wake-up subscription lost; reconnecting");
            }
            Err(e) => {
                tracing::debug!(channel = %channel, error = %e, retry_in = ?pause, "could not subscribe to wake-ups");
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

async fn subscribe(
    client: &redis::Client,
    channel: &str,
) -> redis::RedisResult<redis::aio::PubSub> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    Ok(pubsub)
}
