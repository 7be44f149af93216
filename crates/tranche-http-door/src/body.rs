//! Request bodies with a deadline ([`TimedBody`]), answer bodies that end their
//! request's time in flight when dropped ([`Tracked`]), and [`BodyTimedOut`], the
//! error a late body fails with.

use std::error::Error;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::activity::InFlight;

type BoxError = Box<dyn Error + Send + Sync>;

/// A request body was not all received within the body timeout
/// ([`Limits::body_timeout`](crate::Limits::body_timeout)) of its headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the request body did not arrive within {} ms", .timeout.as_millis())]
pub struct BodyTimedOut {
    /// The body timeout.
    pub timeout: Duration,
}

/// The [`BodyTimedOut`] in `error` or among its causes, if reading a body failed for
/// that: how an application tells a late body (408) from other body errors, whatever
/// wrapped it on the way (axum's extractors and `to_bytes` do).
pub fn body_timed_out<'a>(error: &'a (dyn Error + 'static)) -> Option<&'a BodyTimedOut> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(timed_out) = error.downcast_ref::<BodyTimedOut>() {
            return Some(timed_out);
        }
        next = error.source();
    }
    None
}

/// A request body that fails with [`BodyTimedOut`] once `timeout` has passed since the
/// request came in, unless it has ended. The deadline is for the whole body, so a client
/// sending a byte now and then cannot stretch it.
pub(crate) struct TimedBody<B> {
    inner: B,
    timeout: Duration,
    deadline: Instant,
    /// Made the first time the body waits for the client: most bodies never do.
    sleep: Option<Pin<Box<Sleep>>>,
}

impl<B> TimedBody<B> {
    pub(crate) fn new(inner: B, timeout: Duration) -> TimedBody<B> {
        TimedBody {
            inner,
            timeout,
            deadline: Instant::now() + timeout,
            sleep: None,
        }
    }

    fn timed_out(&self) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(Some(Err(Box::new(BodyTimedOut {
            timeout: self.timeout,
        }))))
    }
}

impl<B> Body for TimedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if !this.inner.is_end_stream() && Instant::now() >= this.deadline {
            return this.timed_out();
        }
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => this.timed_out(),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// An answer's body, holding its request [`InFlight`] until hyper drops it, which it
/// does once the body is written (or the connection closes).
pub(crate) struct Tracked<B> {
    inner: B,
    _in_flight: InFlight,
}

impl<B> Tracked<B> {
    pub(crate) fn new(inner: B, in_flight: InFlight) -> Tracked<B> {
        Tracked {
            inner,
            _in_flight: in_flight,
        }
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::FromRequest;

    /// A body whose client sent its headers and then nothing.
    struct Stalled;

    impl Body for Stalled {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Pending
        }
    }

    /// A late body's error is found through what axum wraps it in, both ways an
    /// application reads a body.
    #[tokio::test]
    async fn a_late_body_fails_with_body_timed_out_through_axums_wrapping() {
        let timeout = Duration::from_millis(50);
        let body = || axum::body::Body::new(TimedBody::new(Stalled, timeout));

        let started = std::time::Instant::now();
        let error = axum::body::to_bytes(body(), 1 << 20).await.unwrap_err();
        assert!(started.elapsed() >= timeout);
        assert_eq!(body_timed_out(&error), Some(&BodyTimedOut { timeout }));
        assert_eq!(
            error.to_string(),
            "the request body did not arrive within 50 ms"
        );

        let request = axum::http::Request::new(body());
        let rejection = Bytes::from_request(request, &()).await.unwrap_err();
        assert_eq!(body_timed_out(&rejection), Some(&BodyTimedOut { timeout }));

        let other = std::io::Error::other("connection reset");
        assert_eq!(body_timed_out(&other), None);
    }
}
