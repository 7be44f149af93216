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
use tranche_feed::{
    Event, Filter, Order, ReadError, ShardReadError, Store, VectorCursor, MAX_READ_LIMIT,
};
use tranche_feed_service::{
    FeedService, FeedTokens, Grant, Ingest, Pending, Protocol, Refused, MAX_WAIT_MS,
};

use crate::frame::{
    self, Access, Ack, CursorBytes, ErrorCode, Follow, Frame, FrameError, ReadHeader,
    ReplicateHead, ServerError, VectorHeader, Welcome, MAX_BATCH_EVENTS, MAX_FRAME_LEN,
    MAX_HELLO_LEN, VERSION,
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
/// How often a followed shard is sent a REPLICATE when nothing changes, unless the
/// FOLLOW asks otherwise.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(1);

struct Shared {
    feed: FeedService,
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
/// having dropped its clones of `ingest`. [`serve_feed`] serves several shards, or a
/// replica.
pub async fn serve(
    listener: TcpListener,
    store: Store,
    ingest: Ingest,
    tokens: FeedTokens,
    shutdown: CancellationToken,
) {
    serve_feed(
        listener,
        FeedService::single(store, ingest),
        tokens,
        shutdown,
    )
    .await;
}

/// [`serve`] over a feed of one or more shards (a core's HELLO names its shard;
/// reads span every shard by vector cursor, READV), or a read replica's (no batches,
/// unfiltered reads). Replicas of this server FOLLOW its shards over it.
pub async fn serve_feed(
    listener: TcpListener,
    feed: FeedService,
    tokens: FeedTokens,
    shutdown: CancellationToken,
) {
    let shared = Arc::new(Shared {
        feed,
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
    Read(Read),
    /// Stream a shard to a replica until the connection ends.
    Follow {
        frame: u64,
        follow: Follow,
    },
    /// Answer everything before it, send this, close.
    Fatal(ServerError),
}

/// A READ or READV, as the answering half serves it.
struct Read {
    frame: u64,
    request: u64,
    cursor: CursorBytes,
    filter: Filter,
    limit: u32,
    min_batch: u32,
    wait_ms: u32,
    linger_us: u16,
    /// A READV, answered by a HEADERV (else a READ, by a HEADER).
    vector: bool,
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
    let (access, shard) = match greeted {
        Ok(Ok(greeted)) => greeted,
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
    // The writer task of the core's shard; none on a replica (batches refused).
    let ingest = match (
        access.may_write(),
        shared.feed.ingest.get(usize::from(shard)),
    ) {
        (false, _) => None,
        (true, Some(ingest)) => Some(ingest.clone()),
        (true, None) if shared.feed.replica.is_some() && access == Access::Open => None,
        (true, None) => {
            let error = if shared.feed.replica.is_some() {
                error_of(
                    ErrorCode::Forbidden,
                    1,
                    0,
                    "token",
                    "this server is a read replica: cores send their batches to its primary".into(),
                )
            } else {
                malformed(FrameError::new(
                    1,
                    Some(frame::Kind::Hello.code()),
                    "shard",
                    format!(
                        "expected a shard from 0 to {}, got {shard}",
                        shared.feed.ingest.len().saturating_sub(1)
                    ),
                ))
            };
            refuse(&mut reader, &mut wr, &error).await;
            return;
        }
    };
    let marks = match (&ingest, shared.feed.shards.shard(usize::from(shard))) {
        (Some(_), Some(store)) => store.marks(),
        _ => (0, 0),
    };
    let mut out = Vec::with_capacity(256);
    frame::encode_welcome(
        &Welcome {
            version: VERSION,
            access,
            marks,
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
    // A follower's end: the replica closed its side (or broke the protocol).
    let gone = CancellationToken::new();
    tokio::join!(
        read_side(reader, access, ingest, &shared, tx, &closing, &gone, &pool),
        answer_side(wr, rx, &shared, &closing, &gone, &pool, out),
    );
    tracing::debug!(%peer, "feed tcp: closed");
}

/// Reads the HELLO: the access its token grants, or the error to answer (`None`: the
/// client went away).
async fn hello(
    reader: &mut FrameReader<OwnedReadHalf>,
    tokens: &FeedTokens,
) -> Result<(Access, u16), Option<ServerError>> {
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
    let shard = hello.shard;
    if tokens.is_empty() {
        return Ok((Access::Open, shard));
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
        Some(Grant::Core) => Ok((Access::Core, shard)),
        Some(Grant::Firm(firm)) => Ok((Access::Firm(firm), shard)),
        Some(Grant::Reader) => Ok((Access::Reader, shard)),
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

#[allow(clippy::too_many_arguments)]
async fn read_side(
    mut reader: FrameReader<OwnedReadHalf>,
    access: Access,
    ingest: Option<Ingest>,
    shared: &Shared,
    tx: mpsc::Sender<Reply>,
    closing: &CancellationToken,
    gone: &CancellationToken,
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
                let Some(ingest) = ingest.as_ref() else {
                    let message = if access.may_write() {
                        "this server is a read replica: send batches to its primary"
                    } else {
                        "only a core's token may send batches"
                    };
                    break Some(error_of(
                        ErrorCode::Forbidden,
                        number,
                        batch.batch,
                        "",
                        message.into(),
                    ));
                };
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
                match ingest.submit(events).await {
                    Ok(pending) => permit.send(Reply::Ack {
                        frame: number,
                        batch: batch.batch,
                        count: batch.count,
                        pending,
                    }),
                    Err(_) => break Some(shutting_down()),
                }
            }
            Frame::Read { .. } | Frame::ReadV { .. } => {
                let (request, read) = match frame {
                    Frame::Read { request, read } => (
                        request,
                        Read {
                            frame: number,
                            request,
                            cursor: CursorBytes::from_slice(&read.cursor).expect("21 bytes fit"),
                            filter: read.filter,
                            limit: read.limit,
                            min_batch: read.min_batch,
                            wait_ms: read.wait_ms,
                            linger_us: read.linger_us,
                            vector: false,
                        },
                    ),
                    Frame::ReadV { request, read } => (
                        request,
                        Read {
                            frame: number,
                            request,
                            cursor: read.cursor,
                            filter: read.filter,
                            limit: read.limit,
                            min_batch: read.min_batch,
                            wait_ms: read.wait_ms,
                            linger_us: read.linger_us,
                            vector: true,
                        },
                    ),
                    _ => unreachable!("matched above"),
                };
                let shards = shared.feed.shards.len();
                if !read.vector && shards > 1 {
                    break Some(malformed(FrameError::new(
                        number,
                        Some(kind),
                        "kind",
                        format!(
                            "expected a READV (0x04): this feed has {shards} shards, whose \
                             cursors do not fit a READ's 21 bytes"
                        ),
                    )));
                }
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
                if tx.send(Reply::Read(Read { filter, ..read })).await.is_err() {
                    break None;
                }
            }
            Frame::Follow(follow) => {
                if !matches!(access, Access::Open | Access::Reader) {
                    break Some(error_of(
                        ErrorCode::Forbidden,
                        number,
                        0,
                        "token",
                        "only a reader's token may follow the feed (a replica holds every \
                         order)"
                            .into(),
                    ));
                }
                if tx
                    .send(Reply::Follow {
                        frame: number,
                        follow,
                    })
                    .await
                    .is_err()
                {
                    break None;
                }
                // Nothing more may come on a follower's connection: its end, or
                // anything else, ends the stream.
                tokio::select! {
                    biased;
                    () = &mut closed => {}
                    () = &mut stopping => {}
                    _ = reader.next() => gone.cancel(),
                }
                break None;
            }
            other => {
                break Some(malformed(FrameError::new(
                    number,
                    Some(kind),
                    "kind",
                    format!(
                        "expected a BATCH, a READ, a READV or a FOLLOW, got {}",
                        other.kind()
                    ),
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
    gone: &CancellationToken,
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
                Reply::Read(read) => {
                    answer_read(shared, &mut wr, &mut out, &mut orders, &read).await?
                }
                Reply::Follow { frame, follow } => {
                    stream_shard(shared, &mut wr, &mut out, &mut orders, frame, &follow, gone)
                        .await?;
                    break;
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

/// The ERROR answering read `read` whose cursor the feed cannot serve.
fn cursor_error(read: &Read, error: &ShardReadError) -> ServerError {
    let (code, field, oldest) = match error {
        ShardReadError::TooOld { oldest, .. } => {
            (ErrorCode::CursorTooOld, "cursor", Some(**oldest))
        }
        ShardReadError::Ahead { .. } => (ErrorCode::CursorAhead, "cursor", None),
        ShardReadError::Shards { .. } => (ErrorCode::BadCursor, "cursor", None),
        ShardReadError::Unfiltered { .. } => (ErrorCode::Forbidden, "filter", None),
    };
    let mut answer = error_of(code, read.frame, read.request, field, error.to_string());
    answer.oldest = oldest;
    answer
}

/// Answers one read: waits for `min_batch` orders (woken by any shard's writer),
/// reads them across the shards, and appends a HEADER (HEADERV for a READV) and the
/// ORDERS to `out`, or an ERROR about the cursor.
async fn answer_read(
    shared: &Shared,
    wr: &mut OwnedWriteHalf,
    out: &mut Vec<u8>,
    orders: &mut Vec<Order>,
    read: &Read,
) -> std::io::Result<()> {
    // A READ's cursor is a store's, version 1 only: its errors say so.
    let cursor = match read.vector {
        true => read.cursor.cursor(),
        false => tranche_feed::Cursor::from_bytes(read.cursor.as_bytes()).map(VectorCursor::from),
    };
    let cursor = match cursor {
        Ok(cursor) => cursor,
        Err(error) => {
            let error = error_of(
                ErrorCode::BadCursor,
                read.frame,
                read.request,
                "cursor",
                error.to_string(),
            );
            frame::encode_error(&error, out);
            return Ok(());
        }
    };
    let limit = (read.limit as usize).min(MAX_READ_LIMIT);
    let min_batch = (read.min_batch as usize).min(limit);
    let wait = Duration::from_millis(u64::from(read.wait_ms).min(MAX_WAIT_MS));
    let linger = tranche_feed_service::linger_of(u64::from(read.linger_us));
    // What is written already must not wait behind this read's wait.
    flush(wr, out, &shared.shutdown).await?;
    let shards = &shared.feed.shards;
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + wait;
    let waited = tokio::select! {
        biased;
        waited = shards.wait_for(read.filter, &cursor, min_batch, deadline, linger) => waited.map(Some),
        () = shared.shutdown.cancelled() => Ok(None),
    };
    let outcome = match waited {
        Ok(outcome) => outcome,
        Err(error) => {
            let answer = cursor_error(read, &error);
            frame::encode_error(&answer, out);
            return Ok(());
        }
    };
    let waited = started.elapsed();
    orders.clear();
    let next = match shards.read_into(&cursor, read.filter, limit, orders) {
        Ok(next) => next,
        Err(error) => {
            frame::encode_error(&cursor_error(read, &error), out);
            return Ok(());
        }
    };
    let read_time = started.elapsed() - waited;
    shared
        .feed
        .metrics
        .read_answered(Protocol::Tcp, orders, outcome);
    let oldest_created_at = orders.iter().map(|o| o.created_at).min();
    if read.vector {
        frame::encode_header_vector(
            &VectorHeader {
                request: read.request,
                next,
                count: orders.len() as u32,
                oldest_created_at,
                server_wait_us: waited.as_micros() as u64,
                server_read_us: read_time.as_micros() as u64,
            },
            out,
        );
    } else {
        frame::encode_header(
            &ReadHeader {
                request: read.request,
                next: next.position(0),
                count: orders.len() as u32,
                oldest_created_at,
                server_wait_us: waited.as_micros() as u64,
                server_read_us: read_time.as_micros() as u64,
            },
            out,
        );
    }
    frame::encode_orders(orders, out);
    Ok(())
}

/// Streams one shard to a replica: every order after the FOLLOW's position, a
/// REPLICATE at a time as writes make them visible (woken by the shard's writer), an
/// empty one when nothing changed for a heartbeat; each carries the shard's marks
/// and floor. Ends when the replica goes, the server stops (an ERROR
/// `shutting_down`), or the replica's position cannot be served (an ERROR
/// `cursor_too_old` or `cursor_ahead`: the replica starts over).
async fn stream_shard(
    shared: &Shared,
    wr: &mut OwnedWriteHalf,
    out: &mut Vec<u8>,
    orders: &mut Vec<Order>,
    frame: u64,
    follow: &Follow,
    gone: &CancellationToken,
) -> std::io::Result<()> {
    let shards = &shared.feed.shards;
    let Some(store) = shards.shard(usize::from(follow.shard)) else {
        let error = malformed(FrameError::new(
            frame,
            Some(frame::Kind::Follow.code()),
            "shard",
            format!(
                "expected a shard from 0 to {}, got {}",
                shards.len().saturating_sub(1),
                follow.shard
            ),
        ));
        frame::encode_error(&error, out);
        return Ok(());
    };
    let heartbeat = match follow.heartbeat_ms {
        0 => DEFAULT_HEARTBEAT,
        ms => Duration::from_millis(u64::from(ms).min(MAX_WAIT_MS)),
    };
    let max = match follow.max_orders {
        0 => MAX_READ_LIMIT,
        n => (n as usize).min(MAX_READ_LIMIT),
    };
    let mut after = follow.after;
    let mut known = follow.known_floor;
    // None until the first REPLICATE, which goes out at once: the replica learns the
    // primary's shards and marks before anything changes.
    let mut last_sent: Option<tokio::time::Instant> = None;
    let refuse = |error: ReadError| {
        let (code, oldest) = match error {
            ReadError::TooOld { oldest, .. } => {
                (ErrorCode::CursorTooOld, Some(VectorCursor::from(oldest)))
            }
            ReadError::Ahead { .. } => (ErrorCode::CursorAhead, None),
        };
        let mut answer = error_of(code, frame, 0, "after", error.to_string());
        answer.oldest = oldest;
        answer
    };
    loop {
        orders.clear();
        // Before the read: an eviction since can only drop orders the read then
        // misses, which the replica drops too when it adopts this floor.
        let floor = store.oldest();
        // Before the read too: everything up to it is visible to the read.
        let newest_seq = store.marks().0;
        let next = match store.read_for_replica(after, known, max, orders) {
            Ok(next) => next,
            Err(error) => {
                frame::encode_error(&refuse(error), out);
                return Ok(());
            }
        };
        if !orders.is_empty() || last_sent.is_none_or(|at| at.elapsed() >= heartbeat) {
            frame::encode_replicate(
                &ReplicateHead {
                    shard: follow.shard,
                    shards: shards.len() as u16,
                    count: orders.len() as u32,
                    newest_seq,
                    floor,
                    next,
                    // Not cut by the limit, nor by a floor moving during the read.
                    complete: orders.len() < max && store.oldest() == floor,
                },
                orders,
                out,
            );
            // Whether or not it had orders, the replica adopts this floor.
            known = floor;
            after = next;
            last_sent = Some(tokio::time::Instant::now());
            // Awaited: a replica that reads slowly holds its stream back here.
            tokio::select! {
                biased;
                () = gone.cancelled() => return Ok(()),
                flushed = flush(wr, out, &shared.shutdown) => flushed?,
            }
            if !orders.is_empty() {
                continue;
            }
        }
        let waited = tokio::select! {
            biased;
            () = gone.cancelled() => return Ok(()),
            () = shared.shutdown.cancelled() => {
                frame::encode_error(&shutting_down(), out);
                return Ok(());
            }
            waited = store.wait_for_replica(
                after,
                known,
                last_sent.map_or_else(tokio::time::Instant::now, |at| at + heartbeat),
            ) => waited,
        };
        if let Err(error) = waited {
            frame::encode_error(&refuse(error), out);
            return Ok(());
        }
    }
}
