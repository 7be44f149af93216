use tokio_util::sync::CancellationToken;

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
    });
    token
}
