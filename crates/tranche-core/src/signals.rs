use std::sync::OnceLock;

use tokio_util::sync::CancellationToken;

/// Cancelled with the tokens of [`on_terminate`]: the process has been asked to stop.
/// Process-wide because signals are; it stays untouched in a process that never asked
/// for graceful shutdown (a signal then ends it as usual).
pub(crate) fn terminating() -> &'static CancellationToken {
    static TERMINATING: OnceLock<CancellationToken> = OnceLock::new();
    TERMINATING.get_or_init(CancellationToken::new)
}

/// A token cancelled on the first SIGINT or SIGTERM, for graceful shutdown: pass it to
/// [`Worker::run`](crate::Worker::run), which then stops reserving, lets in-flight jobs
/// finish within the grace period and hands the rest back. A second signal is left to
/// its default action, so an impatient operator can still stop the process.
pub fn on_terminate() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                tracing::warn!("could not listen for SIGINT/SIGTERM; graceful shutdown disabled");
                return;
            };
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("shutdown requested: finishing in-flight jobs");
        t.cancel();
        terminating().cancel();
    });
    token
}
