//! The client library: [`CoreConnection`] for trading cores, [`FeedClient`] for
//! readers.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpStream, ToSocketAddrs};
use tranche_feed::{Event, Order};

use crate::frame::{
    self, Ack, Frame, FrameError, Kind, ReadHeader, ReadRequest, ServerError, VectorHeader,
    VectorRead, Welcome, MAX_FRAME_LEN,
};
use crate::stream::{FrameReader, ReadFrameError};

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The connection failed (`action`: "connect to", "send to", "read from").
    #[error("could not {action} the feed server")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The server sent something that is not a frame of this protocol, or not the one
    /// expected now.
    #[error("unexpected answer from the feed server")]
    Protocol(#[source] FrameError),
    /// The server refused the connection or something on it, and closed it.
    #[error("the feed server closed the connection: {0}")]
    Server(ServerError),
    /// The server refused one batch (nothing of it was applied) or one read (a cursor
    /// it cannot serve); the connection goes on.
    #[error("refused: {0}")]
    Refused(ServerError),
    /// The server closed the connection without saying why.
    #[error("the feed server closed the connection")]
    Closed,
    /// A batch larger than the protocol allows (nothing was sent).
    #[error("expected at most {max} events in a batch, got {got}")]
    TooLarge {
        /// Events given.
        got: usize,
        /// The most a batch may hold.
        max: u32,
    },
    /// A call that awaits its own answer while others are in flight: their answers
    /// come first (nothing was sent).
    #[error("expected nothing in flight, got {0} answers still due (receive them first)")]
    InFlight(u64),
    /// A call out of turn (nothing was sent or read).
    #[error("{0}")]
    OutOfTurn(&'static str),
}

impl ClientError {
    /// The server's ERROR, for [`ClientError::Server`] and [`ClientError::Refused`].
    pub fn server_error(&self) -> Option<&ServerError> {
        match self {
            ClientError::Server(e) | ClientError::Refused(e) => Some(e),
            _ => None,
        }
    }
}

fn io_error(action: &'static str) -> impl FnOnce(io::Error) -> ClientError {
    move |source| ClientError::Io { action, source }
}

/// Connects, says HELLO with `token` (and the shard a core writes to), and reads the
/// WELCOME.
pub(crate) async fn handshake(
    addr: impl ToSocketAddrs,
    token: Option<&str>,
    shard: u16,
) -> Result<(FrameReader<OwnedReadHalf>, OwnedWriteHalf, Welcome), ClientError> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(io_error("connect to"))?;
    // Batches and read requests go out whole, in one write each: nothing to gain
    // from Nagle's delay, and a request held back is latency.
    stream.set_nodelay(true).map_err(io_error("connect to"))?;
    let (rd, mut wr) = stream.into_split();
    let mut buf = Vec::new();
    frame::encode_hello_shard(token.unwrap_or_default().as_bytes(), shard, &mut buf);
    wr.write_all(&buf).await.map_err(io_error("send to"))?;
    let mut reader = FrameReader::new(rd, MAX_FRAME_LEN);
    let welcome = match next_frame(&mut reader).await? {
        (_, Frame::Welcome(welcome)) => welcome,
        (_, Frame::Error(error)) => return Err(ClientError::Server(error)),
        (number, other) => return Err(unexpected(number, &other, "a WELCOME or an ERROR")),
    };
    Ok((reader, wr, welcome))
}

pub(crate) async fn next_frame(
    reader: &mut FrameReader<OwnedReadHalf>,
) -> Result<(u64, Frame<'_>), ClientError> {
    match reader.next().await {
        Ok(Some((number, kind, body))) => frame::decode(number, kind, body)
            .map(|frame| (number, frame))
            .map_err(ClientError::Protocol),
        Ok(None) => Err(ClientError::Closed),
        Err(ReadFrameError::Io(source)) => Err(ClientError::Io {
            action: "read from",
            source,
        }),
        Err(ReadFrameError::Frame(error)) => Err(ClientError::Protocol(error)),
    }
}

pub(crate) fn unexpected(number: u64, frame: &Frame<'_>, expected: &str) -> ClientError {
    ClientError::Protocol(FrameError::new(
        number,
        Some(frame.kind().code()),
        "kind",
        format!("expected {expected}, got {}", frame.kind()),
    ))
}

/// An ERROR as the caller sees it: refused (the connection goes on) or closing.
fn server_error(error: ServerError) -> ClientError {
    if error.code.closes() {
        ClientError::Server(error)
    } else {
        ClientError::Refused(error)
    }
}

/// A trading core's connection: sends batches of events, pipelined, and receives
/// their acknowledgements in order.
///
/// ```no_run
/// # async fn core(batches: Vec<Vec<tranche_feed::Event>>) -> Result<(), tranche_feed_tcp::ClientError> {
/// use tranche_feed_tcp::CoreConnection;
/// let mut core = CoreConnection::connect("127.0.0.1:8091", Some("core-secret")).await?;
/// let (seq, rec) = core.welcome().marks; // resume after these
/// for batch in &batches {
///     while core.in_flight() >= 8 {
///         let ack = core.recv_ack().await?; // durable: `ack.batch`, in order
///     }
///     core.send(batch).await?;
/// }
/// while core.in_flight() > 0 {
///     core.recv_ack().await?;
/// }
/// # Ok(()) }
/// ```
///
/// A refused batch is [`ClientError::Refused`] from [`CoreConnection::recv_ack`]
/// (nothing of it applied; the batches after it are judged on their own, as separate
/// HTTP posts are); any other error ends the connection, and a reconnecting core
/// resumes after the [`Welcome::marks`] of its new connection. Keep the batches in
/// flight bounded and receive acknowledgements as you go (or [`split`] the connection
/// into two tasks): the server stops reading a connection with
/// [`MAX_IN_FLIGHT`](crate::MAX_IN_FLIGHT) unanswered batches.
///
/// [`split`]: CoreConnection::split
#[derive(Debug)]
pub struct CoreConnection {
    sender: BatchSender,
    acks: AckReceiver,
}

/// The sending half of a [`CoreConnection`].
#[derive(Debug)]
pub struct BatchSender {
    wr: OwnedWriteHalf,
    buf: Vec<u8>,
    /// The last batch number sent (batches are numbered 1, 2, 3…).
    sent: Arc<AtomicU64>,
    max_events: u32,
}

/// The receiving half of a [`CoreConnection`].
#[derive(Debug)]
pub struct AckReceiver {
    reader: FrameReader<OwnedReadHalf>,
    sent: Arc<AtomicU64>,
    answered: u64,
    closed: bool,
    welcome: Welcome,
}

impl CoreConnection {
    /// Connects to the feed server at `addr` with a core's `token` (`None` when the
    /// server has no tokens).
    pub async fn connect(
        addr: impl ToSocketAddrs,
        token: Option<&str>,
    ) -> Result<CoreConnection, ClientError> {
        CoreConnection::connect_shard(addr, token, 0).await
    }

    /// [`CoreConnection::connect`] for the core of shard `shard` of a feed of several
    /// (each shard numbers its own `seq` and `rec`; the WELCOME's marks are its
    /// shard's). A shard the server does not have is refused.
    pub async fn connect_shard(
        addr: impl ToSocketAddrs,
        token: Option<&str>,
        shard: u16,
    ) -> Result<CoreConnection, ClientError> {
        let (reader, wr, welcome) = handshake(addr, token, shard).await?;
        let sent = Arc::new(AtomicU64::new(0));
        Ok(CoreConnection {
            sender: BatchSender {
                wr,
                buf: Vec::new(),
                sent: Arc::clone(&sent),
                max_events: welcome.max_batch_events,
            },
            acks: AckReceiver {
                reader,
                sent,
                answered: 0,
                closed: false,
                welcome,
            },
        })
    }

    /// What the server said on connecting: the access the token has, and the store's
    /// marks (the highest `seq` and `rec` applied: continue after them).
    pub fn welcome(&self) -> &Welcome {
        &self.acks.welcome
    }

    /// Sends `events` as the next batch without waiting for its acknowledgement;
    /// returns its number (1, 2, 3… on this connection).
    pub async fn send(&mut self, events: &[Event]) -> Result<u64, ClientError> {
        self.sender.send(events).await
    }

    /// The next answer, in the order the batches were sent: the batch's [`Ack`] once
    /// it is applied and durable, or [`ClientError::Refused`] naming it (its
    /// [`ServerError::id`]), the event and the field.
    /// With nothing in flight it waits for the server's closing ERROR (such as
    /// [`ErrorCode::ShuttingDown`](crate::ErrorCode::ShuttingDown)) or the end of the
    /// connection.
    pub async fn recv_ack(&mut self) -> Result<Ack, ClientError> {
        self.acks.recv().await
    }

    /// Sends `events` and waits for their acknowledgement (nothing else may be in
    /// flight).
    pub async fn apply(&mut self, events: &[Event]) -> Result<Ack, ClientError> {
        let in_flight = self.in_flight();
        if in_flight > 0 {
            return Err(ClientError::InFlight(in_flight));
        }
        self.send(events).await?;
        self.recv_ack().await
    }

    /// Batches sent and not yet answered.
    pub fn in_flight(&self) -> u64 {
        self.acks.in_flight()
    }

    /// The two halves, to send from one task and receive in another.
    pub fn split(self) -> (BatchSender, AckReceiver) {
        (self.sender, self.acks)
    }
}

impl BatchSender {
    /// See [`CoreConnection::send`].
    pub async fn send(&mut self, events: &[Event]) -> Result<u64, ClientError> {
        if events.len() > self.max_events as usize {
            return Err(ClientError::TooLarge {
                got: events.len(),
                max: self.max_events,
            });
        }
        let batch = self.sent.load(Ordering::Acquire) + 1;
        self.buf.clear();
        frame::encode_batch(batch, events, &mut self.buf);
        self.wr
            .write_all(&self.buf)
            .await
            .map_err(io_error("send to"))?;
        self.sent.store(batch, Ordering::Release);
        Ok(batch)
    }

    /// Says no more batches will come (the server still answers those sent).
    pub async fn finish(&mut self) -> Result<(), ClientError> {
        self.wr.shutdown().await.map_err(io_error("send to"))
    }
}

impl AckReceiver {
    /// See [`CoreConnection::recv_ack`].
    pub async fn recv(&mut self) -> Result<Ack, ClientError> {
        if self.closed {
            return Err(ClientError::Closed);
        }
        let result = match next_frame(&mut self.reader).await {
            Ok((_, Frame::Ack(ack))) => Ok(ack),
            Ok((_, Frame::Error(error))) => Err(server_error(error)),
            Ok((number, other)) => Err(unexpected(number, &other, "an ACK or an ERROR")),
            Err(error) => Err(error),
        };
        match &result {
            Ok(_) | Err(ClientError::Refused(_)) => self.answered += 1,
            Err(_) => self.closed = true,
        }
        result
    }

    /// Batches sent and not yet answered.
    pub fn in_flight(&self) -> u64 {
        self.sent.load(Ordering::Acquire) - self.answered
    }

    /// What the server said on connecting.
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }
}

/// A reader's connection: read requests (batched long polls by cursor) and their
/// answers, header first.
///
/// ```no_run
/// # async fn client() -> Result<(), tranche_feed_tcp::ClientError> {
/// use tranche_feed::{Cursor, Filter, FirmId};
/// use tranche_feed_tcp::{FeedClient, ReadRequest};
/// let mut client = FeedClient::connect("127.0.0.1:8091", Some("firm-7-secret")).await?;
/// let mut request = ReadRequest::new(Cursor::START, Filter::Firm(FirmId(7)));
/// request.min_batch = 100;
/// request.wait_ms = 50;
/// let mut orders = Vec::new();
/// client.send_read(&request).await?;
/// loop {
///     let header = client.recv_header().await?;
///     // The next request goes out before this answer's orders are decoded.
///     request.cursor = header.next.to_bytes();
///     client.send_read(&request).await?;
///     orders.clear();
///     client.recv_orders(&mut orders).await?;
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct FeedClient {
    sender: ReadSender,
    answers: AnswerReceiver,
}

/// The sending half of a [`FeedClient`].
#[derive(Debug)]
pub struct ReadSender {
    wr: OwnedWriteHalf,
    buf: Vec<u8>,
    /// The last request number sent (requests are numbered 1, 2, 3…).
    sent: Arc<AtomicU64>,
}

/// The receiving half of a [`FeedClient`].
#[derive(Debug)]
pub struct AnswerReceiver {
    reader: FrameReader<OwnedReadHalf>,
    sent: Arc<AtomicU64>,
    answered: u64,
    /// The number of orders whose ORDERS frame comes next, once a HEADER was read.
    body_due: Option<u32>,
    closed: bool,
    welcome: Welcome,
}

impl FeedClient {
    /// Connects to the feed server at `addr` with a reader's or firm's `token`
    /// (`None` when the server has no tokens).
    pub async fn connect(
        addr: impl ToSocketAddrs,
        token: Option<&str>,
    ) -> Result<FeedClient, ClientError> {
        let (reader, wr, welcome) = handshake(addr, token, 0).await?;
        let sent = Arc::new(AtomicU64::new(0));
        Ok(FeedClient {
            sender: ReadSender {
                wr,
                buf: Vec::with_capacity(64),
                sent: Arc::clone(&sent),
            },
            answers: AnswerReceiver {
                reader,
                sent,
                answered: 0,
                body_due: None,
                closed: false,
                welcome,
            },
        })
    }

    /// What the server said on connecting: the access the token has.
    pub fn welcome(&self) -> &Welcome {
        &self.answers.welcome
    }

    /// Sends a read request without waiting for its answer; returns its number (1, 2,
    /// 3… on this connection). Answers come in the order of the requests, each
    /// waiting its turn: a request's wait starts once the one before is answered.
    pub async fn send_read(&mut self, read: &ReadRequest) -> Result<u64, ClientError> {
        self.sender.send_read(read).await
    }

    /// The header of the next answer: where to read on from, how many orders follow,
    /// the oldest one's `created_at`, the server's timings. Then read the orders with
    /// [`FeedClient::recv_orders`] (send the next request first, if you like). A
    /// cursor the server cannot serve is [`ClientError::Refused`] (no orders follow):
    /// [`ErrorCode::BadCursor`](crate::ErrorCode::BadCursor),
    /// [`ErrorCode::CursorTooOld`](crate::ErrorCode::CursorTooOld) with the oldest
    /// cursor served in [`ServerError::oldest`], or
    /// [`ErrorCode::CursorAhead`](crate::ErrorCode::CursorAhead).
    pub async fn recv_header(&mut self) -> Result<ReadHeader, ClientError> {
        self.answers.recv_header().await
    }

    /// Appends the orders of the answer whose header was just received to `out`.
    pub async fn recv_orders(&mut self, out: &mut Vec<Order>) -> Result<(), ClientError> {
        self.answers.recv_orders(out).await
    }

    /// Sends `read` and receives its whole answer, appending its orders to `out`
    /// (nothing else may be in flight).
    pub async fn read(
        &mut self,
        read: &ReadRequest,
        out: &mut Vec<Order>,
    ) -> Result<ReadHeader, ClientError> {
        let in_flight = self.in_flight();
        if in_flight > 0 || self.answers.body_due.is_some() {
            return Err(ClientError::InFlight(in_flight.max(1)));
        }
        self.send_read(read).await?;
        let header = self.recv_header().await?;
        self.recv_orders(out).await?;
        Ok(header)
    }

    /// Sends a read by vector cursor (READV), for a feed of any number of shards,
    /// without waiting for its answer; returns its number. Its answer is a
    /// [`VectorHeader`] ([`FeedClient::recv_vector_header`]) and then the orders.
    pub async fn send_read_vector(&mut self, read: &VectorRead) -> Result<u64, ClientError> {
        self.sender.send_read_vector(read).await
    }

    /// The header of the next answer, to a READV: see [`FeedClient::recv_header`].
    pub async fn recv_vector_header(&mut self) -> Result<VectorHeader, ClientError> {
        self.answers.recv_vector_header().await
    }

    /// Sends `read` (READV) and receives its whole answer, appending its orders to
    /// `out` (nothing else may be in flight).
    pub async fn read_vector(
        &mut self,
        read: &VectorRead,
        out: &mut Vec<Order>,
    ) -> Result<VectorHeader, ClientError> {
        let in_flight = self.in_flight();
        if in_flight > 0 || self.answers.body_due.is_some() {
            return Err(ClientError::InFlight(in_flight.max(1)));
        }
        self.send_read_vector(read).await?;
        let header = self.recv_vector_header().await?;
        self.recv_orders(out).await?;
        Ok(header)
    }

    /// Requests sent whose header (or error) has not been received yet.
    pub fn in_flight(&self) -> u64 {
        self.answers.in_flight()
    }

    /// The two halves, to send requests from one task while another reads answers
    /// (e.g. the next request goes out while the last answer's orders are still
    /// being read, from a task of their own).
    pub fn split(self) -> (ReadSender, AnswerReceiver) {
        (self.sender, self.answers)
    }
}

impl ReadSender {
    /// See [`FeedClient::send_read`].
    pub async fn send_read(&mut self, read: &ReadRequest) -> Result<u64, ClientError> {
        let request = self.sent.load(Ordering::Acquire) + 1;
        self.buf.clear();
        frame::encode_read(request, read, &mut self.buf);
        self.wr
            .write_all(&self.buf)
            .await
            .map_err(io_error("send to"))?;
        self.sent.store(request, Ordering::Release);
        Ok(request)
    }

    /// See [`FeedClient::send_read_vector`].
    pub async fn send_read_vector(&mut self, read: &VectorRead) -> Result<u64, ClientError> {
        let request = self.sent.load(Ordering::Acquire) + 1;
        self.buf.clear();
        frame::encode_read_vector(request, read, &mut self.buf);
        self.wr
            .write_all(&self.buf)
            .await
            .map_err(io_error("send to"))?;
        self.sent.store(request, Ordering::Release);
        Ok(request)
    }
}

impl AnswerReceiver {
    /// See [`FeedClient::recv_header`].
    pub async fn recv_header(&mut self) -> Result<ReadHeader, ClientError> {
        self.recv_any_header(|frame| match frame {
            Frame::Header(header) => Some((header.count, *header)),
            _ => None,
        })
        .await
    }

    /// See [`FeedClient::recv_vector_header`].
    pub async fn recv_vector_header(&mut self) -> Result<VectorHeader, ClientError> {
        self.recv_any_header(|frame| match frame {
            Frame::HeaderV(header) => Some((header.count, *header)),
            _ => None,
        })
        .await
    }

    /// The next answer's header as `pick` takes it (with its count of orders).
    async fn recv_any_header<H>(
        &mut self,
        pick: impl FnOnce(&Frame<'_>) -> Option<(u32, H)>,
    ) -> Result<H, ClientError> {
        if self.body_due.is_some() {
            return Err(ClientError::OutOfTurn(
                "expected the orders of the last header to be received first (recv_orders)",
            ));
        }
        if self.closed {
            return Err(ClientError::Closed);
        }
        let result = match next_frame(&mut self.reader).await {
            Ok((_, Frame::Error(error))) => Err(server_error(error)),
            Ok((number, frame)) => match pick(&frame) {
                Some(header) => Ok(header),
                None => Err(unexpected(number, &frame, "a header or an ERROR")),
            },
            Err(error) => Err(error),
        };
        match result {
            Ok((count, header)) => {
                self.answered += 1;
                self.body_due = Some(count);
                Ok(header)
            }
            Err(error) => {
                match &error {
                    ClientError::Refused(_) => self.answered += 1,
                    _ => self.closed = true,
                }
                Err(error)
            }
        }
    }

    /// See [`FeedClient::recv_orders`].
    pub async fn recv_orders(&mut self, out: &mut Vec<Order>) -> Result<(), ClientError> {
        let Some(count) = self.body_due else {
            return Err(ClientError::OutOfTurn(
                "expected a header to be received first (recv_header)",
            ));
        };
        let result = match next_frame(&mut self.reader).await {
            Ok((number, Frame::Orders(orders))) => {
                if orders.len() != count as usize {
                    Err(ClientError::Protocol(FrameError::new(
                        number,
                        Some(Kind::Orders.code()),
                        "length",
                        format!("expected the header's {count} orders, got {}", orders.len()),
                    )))
                } else {
                    orders.decode_into(out).map_err(ClientError::Protocol)
                }
            }
            Ok((_, Frame::Error(error))) => Err(server_error(error)),
            Ok((number, other)) => Err(unexpected(number, &other, "ORDERS")),
            Err(error) => Err(error),
        };
        match &result {
            Ok(()) => self.body_due = None,
            Err(_) => self.closed = true,
        }
        result
    }

    /// Requests sent whose header (or error) has not been received yet.
    pub fn in_flight(&self) -> u64 {
        self.sent.load(Ordering::Acquire) - self.answered
    }

    /// What the server said on connecting.
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }
}
