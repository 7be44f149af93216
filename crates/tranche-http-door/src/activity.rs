//! What a connection is doing, for its watchdog: idle (no request in flight, no byte
//! of the next one), reading a request's headers (since its first byte), or busy with
//! requests in flight (no deadline). The socket ([`Watched`]) reports bytes read, the
//! service reports requests beginning and ending ([`InFlight`]), and
//! [`Activity::expired`] returns once the current phase's deadline passes.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::Limits;

#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Nothing in flight and no byte of a next request, since then.
    Idle(Instant),
    /// A request's first byte came then; its headers are not complete yet.
    Headers(Instant),
    /// This many requests in flight (one at a time on HTTP/1.1, but counted).
    Busy(usize),
}

/// One connection's phase, and a wake-up for its watchdog when it changes.
pub(crate) struct Activity {
    phase: Mutex<Phase>,
    changed: Notify,
}

impl Activity {
    /// A connection just accepted: idle.
    pub(crate) fn new() -> Activity {
        Activity {
            phase: Mutex::new(Phase::Idle(Instant::now())),
            changed: Notify::new(),
        }
    }

    fn set(&self, change: impl FnOnce(Phase) -> Phase) {
        let mut phase = self
            .phase
            .lock()
            .expect("never poisoned: no panics under it");
        *phase = change(*phase);
        drop(phase);
        // One waiter (the watchdog); a permit is kept if it is not waiting right now.
        self.changed.notify_one();
    }

    /// Bytes came from the client: an idle connection starts reading headers.
    fn bytes_read(&self) {
        let idle = matches!(*self.phase.lock().expect("never poisoned"), Phase::Idle(_));
        if idle {
            self.set(|phase| match phase {
                Phase::Idle(_) => Phase::Headers(Instant::now()),
                other => other,
            });
        }
    }

    /// A request's headers are complete: it is in flight until the guard is dropped.
    pub(crate) fn request_began(self: &Arc<Self>) -> InFlight {
        self.set(|phase| match phase {
            Phase::Busy(n) => Phase::Busy(n + 1),
            Phase::Idle(_) | Phase::Headers(_) => Phase::Busy(1),
        });
        InFlight(self.clone())
    }

    /// Returns once the connection has been idle for `limits.idle_timeout`, or reading
    /// one request's headers for `limits.header_timeout`, naming which.
    pub(crate) async fn expired(&self, limits: &Limits) -> &'static str {
        loop {
            let phase = *self.phase.lock().expect("never poisoned");
            let (deadline, name) = match phase {
                Phase::Idle(since) => (since + limits.idle_timeout, "idle"),
                Phase::Headers(since) => (since + limits.header_timeout, "header"),
                Phase::Busy(_) => {
                    self.changed.notified().await;
                    continue;
                }
            };
            if deadline <= Instant::now() {
                return name;
            }
            tokio::select! {
                () = self.changed.notified() => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

/// A request in flight; dropped with its answer's body, once hyper has written it (or
/// with the request, if the connection goes first).
pub(crate) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.set(|phase| match phase {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => Phase::Idle(Instant::now()),
        });
    }
}

/// A connection's socket, reporting the bytes it reads to its [`Activity`], and
/// failing a write that makes no progress for `write_stall`: a client that stops
/// reading an answer (a large page, a slow-read attack) would otherwise hold its
/// connection, and its slot under the cap, for as long as it likes. A client that
/// reads slowly but reads keeps going: every write that moves resets the clock.
pub(crate) struct Watched<S> {
    io: S,
    activity: Arc<Activity>,
    write_stall: std::time::Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> Watched<S> {
    pub(crate) fn new(
        io: S,
        activity: Arc<Activity>,
        write_stall: std::time::Duration,
    ) -> Watched<S> {
        Watched {
            io,
            activity,
            write_stall,
            stalled: None,
        }
    }

    /// `polled` is what the socket answered a write or flush: a pending one starts (or
    /// goes on with) the stall's clock, and fails once it has run out; any other
    /// answer stops it.
    fn bounded<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let stall = self.write_stall;
        let clock = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
        if clock.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing of the answer for the body timeout",
            )));
        }
        Poll::Pending
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.bytes_read();
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.bounded(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.bounded(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_flush(cx);
        this.bounded(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
