//! Reading frames off a byte stream into one reused buffer.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::frame::{self, FrameError, LEN_BYTES};

/// Why no frame could be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadFrameError {
    /// The stream failed.
    #[error("could not read the connection")]
    Io(#[source] io::Error),
    /// The bytes are not a frame (too long, or cut short by the end of the stream).
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// What the buffer starts with and grows back to: a frame larger than this is read
/// into a buffer grown for it, which is then kept (a core sends batches of one size).
const INITIAL: usize = 64 << 10;

/// Frames off `inner`, each borrowed from one buffer until the next is read: reading
/// allocates nothing once the buffer has grown to the largest frame.
pub(crate) struct FrameReader<R> {
    inner: R,
    buf: Vec<u8>,
    /// The unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// Frames returned so far (the next one is number `frames + 1`).
    frames: u64,
    max_len: u32,
}

impl<R> std::fmt::Debug for FrameReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FrameReader({} frames read)", self.frames)
    }
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(inner: R, max_len: u32) -> FrameReader<R> {
        FrameReader {
            inner,
            buf: vec![0; INITIAL],
            start: 0,
            end: 0,
            frames: 0,
            max_len,
        }
    }

    /// Sets the largest frame length accepted from now on.
    pub fn set_max_len(&mut self, max_len: u32) {
        self.max_len = max_len;
    }

    /// Reads until at least `want` unread bytes are buffered; returns how many there
    /// are if the stream ends first.
    async fn fill(&mut self, want: usize) -> Result<Result<(), usize>, io::Error> {
        if self.start + want > self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if want > self.buf.len() {
                self.buf.resize(want, 0);
            }
        }
        while self.end - self.start < want {
            let n = self.inner.read(&mut self.buf[self.end..]).await?;
            if n == 0 {
                return Ok(Err(self.end - self.start));
            }
            self.end += n;
        }
        Ok(Ok(()))
    }

    /// The next frame: its number, kind byte and body; `None` at a clean end of the
    /// stream (between frames).
    pub async fn next(&mut self) -> Result<Option<(u64, u8, &[u8])>, ReadFrameError> {
        let number = self.frames + 1;
        if let Err(got) = self.fill(LEN_BYTES).await.map_err(ReadFrameError::Io)? {
            if got == 0 {
                return Ok(None);
            }
            return Err(FrameError::new(
                number,
                None,
                "length",
                format!("expected {LEN_BYTES} bytes, got {got} before the end of the stream"),
            )
            .into());
        }
        let declared = u32::from_le_bytes(
            self.buf[self.start..self.start + LEN_BYTES]
                .try_into()
                .expect("4 bytes"),
        );
        let len = frame::check_len(number, declared, self.max_len)?;
        if let Err(got) = self
            .fill(LEN_BYTES + len)
            .await
            .map_err(ReadFrameError::Io)?
        {
            return Err(FrameError::new(
                number,
                (got > LEN_BYTES).then(|| self.buf[self.start + LEN_BYTES]),
                "body",
                format!(
                    "expected {len} bytes after the length, got {} before the end of the stream",
                    got - LEN_BYTES
                ),
            )
            .into());
        }
        let at = self.start;
        self.start += LEN_BYTES + len;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        self.frames = number;
        let kind = self.buf[at + LEN_BYTES];
        Ok(Some((
            number,
            kind,
            &self.buf[at + LEN_BYTES + 1..at + LEN_BYTES + len],
        )))
    }

    /// Reads and drops whatever comes until the stream ends or fails.
    pub async fn discard_rest(&mut self) {
        loop {
            match self.inner.read(&mut self.buf[..]).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Kind, MAX_FRAME_LEN};

    fn frame_error(result: Result<Option<(u64, u8, &[u8])>, ReadFrameError>) -> FrameError {
        match result {
            Err(ReadFrameError::Frame(error)) => error,
            other => panic!("expected a frame error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn frames_are_numbered_and_the_stream_may_end_between_them() {
        let mut bytes = Vec::new();
        frame::encode_hello(b"t", &mut bytes);
        // Larger than the initial buffer: it grows for it.
        let big = vec![
            tranche_feed::Event::Change(tranche_feed::OrderChange {
                seq: 1,
                id: tranche_feed::OrderId(1),
                price: 1,
                quantity: 1,
                filled: 0,
                status: tranche_feed::Status::Cancelled,
                updated_at: 1,
            });
            5_000
        ];
        frame::encode_batch(1, &big, &mut bytes);
        frame::encode_orders(&[], &mut bytes);
        let mut reader = FrameReader::new(&bytes[..], MAX_FRAME_LEN);
        let (n, kind, _) = reader.next().await.unwrap().unwrap();
        assert_eq!((n, kind), (1, Kind::Hello.code()));
        let (n, kind, body) = reader.next().await.unwrap().unwrap();
        assert_eq!(
            (n, kind, body.len()),
            (2, Kind::Batch.code(), 16 + 5_000 * 64)
        );
        let (n, kind, body) = reader.next().await.unwrap().unwrap();
        assert_eq!((n, kind, body.len()), (3, Kind::Orders.code(), 0));
        assert!(reader.next().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_stream_cut_short_names_the_frame_and_what_was_missing() {
        let mut bytes = Vec::new();
        frame::encode_hello(b"t", &mut bytes);
        frame::encode_hello(b"token", &mut bytes);
        let second = bytes.len() - (LEN_BYTES + 1 + 10 + 5);

        // Cut in the second frame's length.
        let mut reader = FrameReader::new(&bytes[..second + 2], MAX_FRAME_LEN);
        reader.next().await.unwrap().unwrap();
        let error = frame_error(reader.next().await);
        assert_eq!((error.frame, error.field.as_str()), (2, "length"));
        assert_eq!(
            error.problem,
            "expected 4 bytes, got 2 before the end of the stream"
        );

        // Cut in its body.
        let mut reader = FrameReader::new(&bytes[..bytes.len() - 3], MAX_FRAME_LEN);
        reader.next().await.unwrap().unwrap();
        let error = frame_error(reader.next().await);
        assert_eq!((error.frame, error.field.as_str()), (2, "body"));
        assert_eq!(error.kind, Some(Kind::Hello.code()));
        assert_eq!(
            error.problem,
            "expected 16 bytes after the length, got 13 before the end of the stream"
        );
    }

    #[tokio::test]
    async fn a_length_over_the_limit_is_refused_without_reading_the_body() {
        let mut bytes = 5_000u32.to_le_bytes().to_vec();
        bytes.push(Kind::Hello.code());
        let mut reader = FrameReader::new(&bytes[..], 4_096);
        let error = frame_error(reader.next().await);
        assert_eq!((error.frame, error.field.as_str()), (1, "length"));
        assert_eq!(error.problem, "expected at most 4096 bytes, got 5000");
    }
}
