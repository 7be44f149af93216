//! The server: one task per connection, its reading and answering halves joined.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tranche_feed::{Cursor, Event, Filter, Order, ReadError, Store, MAX_READ_LIMIT};
use tranche_feed_http::{FeedTokens, Grant, Ingest, Pending, Protocol, Refused, MAX_WAIT_MS};

use crate::frame::{
    self, Access, Ack, ErrorCode, Frame, FrameError, ReadHeader, ReadRequest, ServerError, Welcome,
    MAX_BATCH_EVENTS, MAX_FRAME_LEN, MAX_HELLO_LEN, VERSION,
};
use crate::stream::{FrameReader, ReadFrameError};

/// How long a new connection has to send its HELLO.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Batches and reads a connection may have read but not yet answered: past this the
/// server stops reading it until answers go out (and a core's sends wait).
pub const MAX_IN_FLIGHT: usize = 256;
/// After an error that closes a connection, how long the server goes on reading (and
/// dropping) what the client still sends: closing a socket with unread bytes resets
/// the connection, which could destroy the error before the client reads it.
const LINGER: Duration = Duration::from_secs(2);
/// Batch buffers a connection keeps for reuse.
const POOLED: usize = 8;

struct Shared {
    store: Store,
    ingest: Ingest,
    tokens: FeedTokens,
    shutdown: CancellationToken,
}

/// Serves the feed's TCP protocol on `listener` until `shutdown` is cancelled: reads
/// from `store`, batches through `ingest` (the writer task HTTP shares), for the
/// holders of `tokens` (none: everyone, so listen on loopback only).
///
/// On shutdown it stops accepting; each connection stops reading, answers what it
/// has read (a waiting read at once, with what is ready; a batch once durable), sends
/// [`ErrorCode::ShuttingDown`] and closes. Returns once every connection has closed,
/// having dropped its clones of `ingest`.
pub async fn serve(
    listener: TcpListener,
    store: Store,
    ingest: Ingest,
    tokens: FeedTokens,
    shutdown: CancellationToken,
) {
    let shared = Arc::new(Shared {
        store,
        ingest,
        tokens,
        shutdown,
    });
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            biased;
            () = shared.shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                connections.spawn(connection(stream, peer, Arc::clone(&shared)));
            }
            Err(error) => {
                // Out of file descriptors, or a connection reset while queued: the
                // listener itself is fine, so back off a little and go on.
                tracing::warn!(%error, "feed tcp: accept failed");
                tokio::select! {
                    () = shared.shutdown.cancelled() => break,
                    () = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
            }
        }
    }
    drop(listener);
    drop(shared);
    connections.close();
    connections.wait().await;
}

/// What the reading half hands the answering half, in the order read.
enum Reply {
    Ack {
        frame: u64,
        batch: u64,
        count: u32,
        pending: Pending,
    },
    Read {
        frame: u64,
        request: u64,
        read: ReadRequest,
        filter: Filter,
    },
    /// Answer everything before it, send this, close.
    Fatal(ServerError),
}

fn error_of(code: ErrorCode, frame: u64, id: u64, field: &str, message: String) -> ServerError {
    ServerError {
        code,
        frame,
        id,
        index: None,
        oldest: None,
        field: field.into(),
        message,
    }
}

fn malformed(error: FrameError) -> ServerError {
    let message = error.to_string();
    error_of(ErrorCode::Malformed, error.frame, 0, &error.field, message)
}

fn shutting_down() -> ServerError {
    error_of(
        ErrorCode::ShuttingDown,
        0,
        0,
        "",
        "the feed server is stopping".into(),
    )
}

async fn connection(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>) {
    // Acks and headers are small and latency is the point: never hold them back.
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%peer, %error, "feed tcp: could not set TCP_NODELAY");
    }
    let (rd, mut wr) = stream.into_split();
    let mut reader = FrameReader::new(rd, MAX_HELLO_LEN);
    let greeted = tokio::select! {
        biased;
        () = shared.shutdown.cancelled() => return,
        greeted = tokio::time::timeout(HELLO_TIMEOUT, hello(&mut reader, &shared.tokens)) => greeted,
    };
    let access = match greeted {
        Ok(Ok(access)) => access,
        Ok(Err(None)) => return,
        Ok(Err(Some(error))) => {
            refuse(&mut reader, &mut wr, &error).await;
            return;
        }
        Err(_) => {
            let error = error_of(
                ErrorCode::Malformed,
                1,
                0,
                "kind",
                format!("expected a HELLO within {} s", HELLO_TIMEOUT.as_secs()),
            );
            refuse(&mut reader, &mut wr, &error).await;
            return;
        }
    };
    let mut out = Vec::with_capacity(256);
    frame::encode_welcome(
        &Welcome {
            version: VERSION,
            access,
            marks: if access.may_write() {
                shared.store.marks()
            } else {
                (0, 0)
            },
            max_batch_events: MAX_BATCH_EVENTS,
        },
        &mut out,
    );
    if wr.write_all(&out).await.is_err() {
        return;
    }
    tracing::debug!(%peer, ?access, "feed tcp: connection");
    // Only a writer's frames may be large: a reader's are READs of 49 bytes, so a
    // reader's token cannot make the server buffer megabytes.
    if access.may_write() {
        reader.set_max_len(MAX_FRAME_LEN);
    }
    let (tx, rx) = mpsc::channel(MAX_IN_FLIGHT);
    let closing = CancellationToken::new();
    let pool = Mutex::new(Vec::new());
    tokio::join!(
        read_side(reader, access, &shared, tx, &closing, &pool),
        answer_side(wr, rx, &shared, &closing, &pool, out),
    );
    tracing::debug!(%peer, "feed tcp: closed");
}

/// Reads the HELLO: the access its token grants, or the error to answer (`None`: the
/// client went away).
async fn hello(
    reader: &mut FrameReader<OwnedReadHalf>,
    tokens: &FeedTokens,
) -> Result<Access, Option<ServerError>> {
    let (number, kind, body) = match reader.next().await {
        Ok(Some(frame)) => frame,
        Ok(None) | Err(ReadFrameError::Io(_)) => return Err(None),
        Err(ReadFrameError::Frame(error)) => return Err(Some(malformed(error))),
    };
    let hello = match frame::decode(number, kind, body) {
        Ok(Frame::Hello(hello)) => hello,
        Ok(other) => {
            return Err(Some(malformed(FrameError::new(
                number,
                Some(kind),
                "kind",
                format!("expected a HELLO first, got {}", other.kind()),
            ))))
        }
        Err(error) => return Err(Some(malformed(error))),
    };
    if tokens.is_empty() {
        return Ok(Access::Open);
    }
    let unauthorized = |message: &str| {
        Some(error_of(
            ErrorCode::Unauthorized,
            number,
            0,
            "token",
            message.into(),
        ))
    };
    if hello.token.is_empty() {
        return Err(unauthorized("expected a token: this server has tokens"));
    }
    match tokens.check(hello.token) {
        Some(Grant::Core) => Ok(Access::Core),
        Some(Grant::Firm(firm)) => Ok(Access::Firm(firm)),
        Some(Grant::Reader) => Ok(Access::Reader),
        None => Err(unauthorized("the token is not valid")),
    }
}

/// Sends `error` on a connection nothing else is answering, and closes it.
async fn refuse(
    reader: &mut FrameReader<OwnedReadHalf>,
    wr: &mut OwnedWriteHalf,
    error: &ServerError,
) {
    let mut out = Vec::new();
    frame::encode_error(error, &mut out);
    if wr.write_all(&out).await.is_ok() {
        let _ = wr.shutdown().await;
        let _ = tokio::time::timeout(LINGER, reader.discard_rest()).await;
    }
}

async fn read_side(
    mut reader: FrameReader<OwnedReadHalf>,
    access: Access,
    shared: &Shared,
    tx: mpsc::Sender<Reply>,
    closing: &CancellationToken,
    pool: &Mutex<Vec<Vec<Event>>>,
) {
    let mut last_batch = 0;
    let mut last_request = 0;
    // Registered once, not once per frame.
    let closed = closing.cancelled();
    let stopping = shared.shutdown.cancelled();
    tokio::pin!(closed, stopping);
    let end = loop {
        let next = tokio::select! {
            biased;
            () = &mut closed => break None,
            () = &mut stopping => break Some(shutting_down()),
            next = reader.next() => next,
        };
        let (number, kind, body) = match next {
            Ok(Some(frame)) => frame,
            Ok(None) | Err(ReadFrameError::Io(_)) => break None,
            Err(ReadFrameError::Frame(error)) => break Some(malformed(error)),
        };
        let frame = match frame::decode(number, kind, body) {
            Ok(frame) => frame,
            Err(error) => break Some(malformed(error)),
        };
        match frame {
            Frame::Batch(batch) => {
                if !access.may_write() {
                    break Some(error_of(
                        ErrorCode::Forbidden,
                        number,
                        batch.batch,
                        "",
                        "only a core's token may send batches".into(),
                    ));
                }
                if batch.batch <= last_batch {
                    break Some(malformed(FrameError::new(
                        number,
                        Some(kind),
                        "batch",
                        format!(
                            "expected more than {last_batch} (the last batch number on this \
                             connection), got {}",
                            batch.batch
                        ),
                    )));
                }
                last_batch = batch.batch;
                let mut events = pool.lock().pop().unwrap_or_default();
                if let Err(error) = batch.decode_into(&mut events) {
                    break Some(malformed(error));
                }
                // Room for its answer first: once the batch is queued for the writer,
                // nothing may stop its ACK from being sent.
                let Ok(permit) = tx.reserve().await else {
                    break None;
                };
                match shared.ingest.submit(events).await {
                    Ok(pending) => permit.send(Reply::Ack {
                        frame: number,
                        batch: batch.batch,
                        count: batch.count,
                        pending,
                    }),
                    Err(_) => break Some(shutting_down()),
                }
            }
            Frame::Read { request, read } => {
                let filter = match access.read_filter(read.filter) {
                    Ok(filter) => filter,
                    Err(message) => {
                        break Some(error_of(
                            ErrorCode::Forbidden,
                            number,
                            request,
                            "filter",
                            message,
                        ))
                    }
                };
                if request <= last_request {
                    break Some(malformed(FrameError::new(
                        number,
                        Some(kind),
                        "request",
                        format!(
                            "expected more than {last_request} (the last request number on this \
                             connection), got {request}"
                        ),
                    )));
                }
                last_request = request;
                let reply = Reply::Read {
                    frame: number,
                    request,
                    read,
                    filter,
                };
                if tx.send(reply).await.is_err() {
                    break None;
                }
            }
            other => {
                break Some(malformed(FrameError::new(
                    number,
                    Some(kind),
                    "kind",
                    format!("expected a BATCH or a READ, got {}", other.kind()),
                )))
            }
        }
    };
    if let Some(error) = end {
        if error.code != ErrorCode::ShuttingDown {
            tracing::debug!(%error, "feed tcp: closing a connection");
        }
        let _ = tx.send(Reply::Fatal(error)).await;
    } else if !closing.is_cancelled() {
        // The client is gone or done sending: the answers still due go out.
        return;
    }
    drop(tx);
    tokio::select! {
        () = closing.cancelled() => {}
        () = shared.shutdown.cancelled() => {}
    }
    let _ = tokio::time::timeout(LINGER, reader.discard_rest()).await;
}

/// Writes `out` and empties it. Once the server is stopping, a client that does not
/// read its answers within [`LINGER`] is given up on, so that it cannot hold the
/// shutdown up.
async fn flush(
    wr: &mut OwnedWriteHalf,
    out: &mut Vec<u8>,
    shutdown: &CancellationToken,
) -> std::io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    tokio::select! {
        // First: a write that completes at once never registers for the shutdown.
        biased;
        written = wr.write_all(out) => written?,
        () = async {
            shutdown.cancelled().await;
            tokio::time::sleep(LINGER).await;
        } => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client did not read its answers while the server was stopping",
            ))
        }
    }
    out.clear();
    Ok(())
}

/// Answers the replies in order, writing those that are ready together and flushing
/// before every wait; then closes the sending side of the connection.
async fn answer_side(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Reply>,
    shared: &Shared,
    closing: &CancellationToken,
    pool: &Mutex<Vec<Vec<Event>>>,
    mut out: Vec<u8>,
) {
    out.clear();
    let mut orders = Vec::new();
    let result: std::io::Result<()> = async {
        loop {
            let reply = match rx.try_recv() {
                Ok(reply) => reply,
                Err(mpsc::error::TryRecvError::Empty) => {
                    flush(&mut wr, &mut out, &shared.shutdown).await?;
                    match rx.recv().await {
                        Some(reply) => reply,
                        None => break,
                    }
                }
                Err(mpsc::error::TryRecvError::Disconnected) => break,
            };
            match reply {
                Reply::Ack {
                    frame,
                    batch,
                    count,
                    mut pending,
                } => {
                    let (result, events) = match pending.try_reclaim() {
                        Some(done) => done,
                        None => {
                            flush(&mut wr, &mut out, &shared.shutdown).await?;
                            pending.wait_reclaim().await
                        }
                    };
                    {
                        let mut pool = pool.lock();
                        if pool.len() < POOLED && events.capacity() > 0 {
                            pool.push(events);
                        }
                    }
                    match result {
                        Ok(position) => frame::encode_ack(
                            &Ack {
                                batch,
                                events: count,
                                position,
                            },
                            &mut out,
                        ),
                        Err(Refused::Batch(error)) => {
                            let mut refused = error_of(
                                ErrorCode::Refused,
                                frame,
                                batch,
                                &format!("events[{}].{}", error.index, error.field),
                                error.to_string(),
                            );
                            refused.index = Some(error.index as u32);
                            frame::encode_error(&refused, &mut out);
                        }
                        Err(Refused::Store) => {
                            let error = error_of(
                                ErrorCode::StoreFailed,
                                frame,
                                batch,
                                "",
                                "the store could not write the batch (see the server's log); \
                                 nothing was acknowledged"
                                    .into(),
                            );
                            frame::encode_error(&error, &mut out);
                            break;
                        }
                        Err(Refused::Closed) => {
                            frame::encode_error(&shutting_down(), &mut out);
                            break;
                        }
                    }
                }
                Reply::Read {
                    frame,
                    request,
                    read,
                    filter,
                } => {
                    answer_read(
                        shared,
                        &mut wr,
                        &mut out,
                        &mut orders,
                        (frame, request),
                        &read,
                        filter,
                    )
                    .await?
                }
                Reply::Fatal(error) => {
                    frame::encode_error(&error, &mut out);
                    break;
                }
            }
        }
        flush(&mut wr, &mut out, &shared.shutdown).await?;
        wr.shutdown().await
    }
    .await;
    if let Err(error) = result {
        tracing::debug!(%error, "feed tcp: could not answer a connection");
    }
    closing.cancel();
}

/// Answers one read: waits for `min_batch` orders (woken by the writer), reads them,
/// and appends a HEADER and the ORDERS to `out`, or an ERROR about the cursor.
async fn answer_read(
    shared: &Shared,
    wr: &mut OwnedWriteHalf,
    out: &mut Vec<u8>,
    orders: &mut Vec<Order>,
    (frame, request): (u64, u64),
    read: &ReadRequest,
    filter: Filter,
) -> std::io::Result<()> {
    let cursor_error = |code: ErrorCode, message: String, oldest: Option<Cursor>| {
        let mut error = error_of(code, frame, request, "cursor", message);
        error.oldest = oldest;
        error
    };
    let read_error = |error: ReadError| match error {
        ReadError::TooOld { oldest, .. } => {
            cursor_error(ErrorCode::CursorTooOld, error.to_string(), Some(oldest))
        }
        ReadError::Ahead { .. } => cursor_error(ErrorCode::CursorAhead, error.to_string(), None),
    };
    let cursor = match Cursor::from_bytes(&read.cursor) {
        Ok(cursor) => cursor,
        Err(error) => {
            let error = cursor_error(ErrorCode::BadCursor, error.to_string(), None);
            frame::encode_error(&error, out);
            return Ok(());
        }
    };
    let limit = (read.limit as usize).min(MAX_READ_LIMIT);
    let min_batch = (read.min_batch as usize).min(limit);
    let wait = Duration::from_millis(u64::from(read.wait_ms).min(MAX_WAIT_MS));
    // What is written already must not wait behind this read's wait.
    flush(wr, out, &shared.shutdown).await?;
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + wait;
    let waited = tokio::select! {
        biased;
        waited = shared.store.wait_for(filter, cursor, min_batch, deadline) => waited.map(Some),
        () = shared.shutdown.cancelled() => Ok(None),
    };
    let outcome = match waited {
        Ok(outcome) => outcome,
        Err(error) => {
            frame::encode_error(&read_error(error), out);
            return Ok(());
        }
    };
    let waited = started.elapsed();
    orders.clear();
    let next = match shared.store.read_into(cursor, filter, limit, orders) {
        Ok(next) => next,
        Err(error) => {
            frame::encode_error(&read_error(error), out);
            return Ok(());
        }
    };
    let read_time = started.elapsed() - waited;
    shared
        .ingest
        .metrics()
        .read_answered(Protocol::Tcp, orders, outcome);
    frame::encode_header(
        &ReadHeader {
            request,
            next,
            count: orders.len() as u32,
            oldest_created_at: orders.iter().map(|o| o.created_at).min(),
            server_wait_us: waited.as_micros() as u64,
            server_read_us: read_time.as_micros() as u64,
        },
        out,
    );
    frame::encode_orders(orders, out);
    Ok(())
}
