//! The links over the feed's HTTP API (`tranche-feed-http`): one keep-alive
//! connection pool (reqwest) shared by every core and client of a process.
//!
//! A core posts JSON batches to `POST /v1/feed/events?shard=k`, one at a time (two
//! requests in flight could be applied out of order). A client long-polls
//! `GET /v1/feed/orders` by vector cursor (every shard of the server merged), each
//! poll a task of its own; the answer's header fields
//! (`next_cursor`, `count`) come first in its JSON, so the task hands the header over
//! as soon as the body's first bytes hold it, and the client sends its next poll (on
//! another pooled connection) while this one's rows still arrive and parse.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use tranche_feed::{
    BrokerId, Event, Filter, FirmId, InstrumentId, Order, OrderId, VectorCursor,
    MAX_VECTOR_CURSOR_CHARS,
};
use tranche_feed_http::wire::{ErrorBody, OrdersPage, StatusBody, WireEvent, WireOrder};
use url::Url;

use crate::link::{
    now_ns, Connector, CoreLink, FeedLink, Layout, LayoutError, LinkError, PageBody, PageHead,
    ReadRequest,
};

/// Connects to the run's HTTP feed servers: one of `K` shards (`tranche feed serve
/// --shards K`), or one per shard ([`Layout`]); and, if given, a read replica of each
/// for the unfiltered clients.
#[derive(Clone)]
pub struct HttpConnector {
    client: reqwest::Client,
    targets: Vec<Url>,
    replicas: Vec<Url>,
    layout: Layout,
    core_token: Option<String>,
    read_token: Option<String>,
}

/// By hand: tokens are left out.
impl std::fmt::Debug for HttpConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConnector")
            .field(
                "targets",
                &self.targets.iter().map(Url::as_str).collect::<Vec<_>>(),
            )
            .field(
                "replicas",
                &self.replicas.iter().map(Url::as_str).collect::<Vec<_>>(),
            )
            .field("layout", &self.layout)
            .field("core_token", &self.core_token.as_ref().map(|_| "…"))
            .field("read_token", &self.read_token.as_ref().map(|_| "…"))
            .finish()
    }
}

/// `url` with a path ending in `/`, so that joining a relative path appends to it.
fn base(mut url: Url) -> Url {
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    url
}

impl HttpConnector {
    /// A connector to these base URLs (e.g. `http://127.0.0.1:8090`), one per shard
    /// (see [`HttpConnector::with_shards`] for one server of several).
    pub fn new(targets: Vec<Url>) -> Result<HttpConnector, LinkError> {
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| LinkError::Transport {
                target: "reqwest".into(),
                message: error_chain(&e),
            })?;
        let layout = Layout::new(targets.len(), targets.len())?;
        Ok(HttpConnector {
            client,
            targets: targets.into_iter().map(base).collect(),
            replicas: Vec::new(),
            layout,
            core_token: None,
            read_token: None,
        })
    }

    /// Runs `shards` shards on the targets: all on one server of that many shards,
    /// or one per target.
    pub fn with_shards(mut self, shards: usize) -> Result<HttpConnector, LayoutError> {
        self.layout = Layout::new(shards, self.targets.len())?;
        Ok(self)
    }

    /// Sends the unfiltered clients' polls to these read replicas (`tranche feed
    /// serve --replica-of`), one per target, instead of the targets.
    pub fn with_replicas(mut self, replicas: Vec<Url>) -> Result<HttpConnector, LayoutError> {
        if !replicas.is_empty() && replicas.len() != self.targets.len() {
            return Err(LayoutError(format!(
                "expected a replica per target ({}), got {}",
                self.targets.len(),
                replicas.len()
            )));
        }
        self.replicas = replicas.into_iter().map(base).collect();
        Ok(self)
    }

    /// Sends `core` as the bearer token of cores and `read` as that of clients.
    pub fn with_tokens(mut self, core: Option<String>, read: Option<String>) -> HttpConnector {
        self.core_token = core;
        self.read_token = read;
        self
    }
}

fn endpoint(base: &Url, path: &str) -> Result<Url, LinkError> {
    base.join(path).map_err(|e| LinkError::Transport {
        target: base.to_string(),
        message: e.to_string(),
    })
}

impl Connector for HttpConnector {
    type Core = HttpCore;
    type Feed = HttpFeed;

    fn layout(&self) -> Layout {
        self.layout
    }

    fn core_server(&self, shard: usize) -> String {
        let target = self.layout.core(shard).0;
        self.targets
            .get(target)
            .map_or_else(|| format!("target {target}"), |url| url.to_string())
    }

    fn feed_server(&self, target: usize, filter: Filter) -> String {
        match (self.replicas.get(target), self.targets.get(target)) {
            (Some(replica), _) if filter == Filter::All => replica.to_string(),
            (_, Some(url)) => url.to_string(),
            _ => format!("target {target}"),
        }
    }

    /// Checks that the target has the shard (`GET /v1/feed/status`), as a TCP HELLO
    /// naming it does: a core of a shard the server lacks fails before any core
    /// writes, not at its first batch. The same answer gives the shard's highest
    /// `seq` ([`CoreLink::applied_seq`]).
    async fn core(&self, shard: usize) -> Result<HttpCore, LinkError> {
        self.layout.check_shard(shard)?;
        let (target, on_target) = self.layout.core(shard);
        let status_url = endpoint(&self.targets[target], "v1/feed/status")?;
        let mut status = self.client.get(status_url.clone());
        if let Some(token) = &self.core_token {
            status = status.bearer_auth(token);
        }
        let response = status.send().await.map_err(|e| transport(&status_url, e))?;
        if !response.status().is_success() {
            return Err(refused(&status_url, response).await);
        }
        let body: StatusBody = response.json().await.map_err(|e| LinkError::Protocol {
            target: status_url.to_string(),
            message: error_chain(&e),
        })?;
        if on_target >= body.shards.len() {
            return Err(LinkError::Refused {
                target: status_url.to_string(),
                status: 400,
                code: "bad_request".into(),
                message: format!(
                    "expected a shard from 0 to {}, got {on_target}",
                    body.shards.len().saturating_sub(1)
                ),
            });
        }
        let applied = body.shards[on_target].seq;
        let mut url = endpoint(&self.targets[target], "v1/feed/events")?;
        url.query_pairs_mut()
            .append_pair("shard", &on_target.to_string());
        Ok(HttpCore {
            client: self.client.clone(),
            url,
            token: self.core_token.clone(),
            unreported: 0,
            applied,
        })
    }

    async fn feed(&self, target: usize, filter: Filter) -> Result<HttpFeed, LinkError> {
        self.layout.check_target(target)?;
        let server = match self.replicas.get(target) {
            Some(replica) if filter == Filter::All => replica,
            _ => &self.targets[target],
        };
        Ok(HttpFeed {
            client: self.client.clone(),
            url: endpoint(server, "v1/feed/orders")?,
            token: self.read_token.clone(),
            reads: VecDeque::new(),
        })
    }
}

/// A core's link: `POST /v1/feed/events`.
pub struct HttpCore {
    client: reqwest::Client,
    url: Url,
    token: Option<String>,
    /// Batches acknowledged whose acknowledgement `acked` has not reported yet.
    unreported: usize,
    /// The shard's highest `seq` when the link was opened.
    applied: u64,
}

#[derive(serde::Serialize)]
struct Batch {
    events: Vec<WireEvent>,
}

fn wire_event(event: &Event) -> WireEvent {
    use tranche_feed_http::wire::EventType;
    match event {
        Event::Insert(e) => WireEvent {
            kind: Some(EventType::Insert),
            seq: Some(e.seq),
            rec: Some(e.rec),
            id: Some(e.id.0),
            firm: Some(e.firm.0),
            broker: Some(e.broker.0),
            instrument: Some(e.instrument.0),
            side: Some(e.side.into()),
            price: Some(e.price),
            quantity: Some(e.quantity),
            created_at: Some(e.created_at),
            ..WireEvent::default()
        },
        Event::Change(e) => WireEvent {
            kind: Some(EventType::Change),
            seq: Some(e.seq),
            id: Some(e.id.0),
            price: Some(e.price),
            quantity: Some(e.quantity),
            filled: Some(e.filled),
            status: Some(e.status.into()),
            updated_at: Some(e.updated_at),
            ..WireEvent::default()
        },
    }
}

/// A reqwest error with its causes on one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

fn transport(url: &Url, error: reqwest::Error) -> LinkError {
    LinkError::Transport {
        target: url.to_string(),
        message: error_chain(&error),
    }
}

/// The error an unsuccessful answer carries.
async fn refused(url: &Url, response: reqwest::Response) -> LinkError {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    match serde_json::from_str::<ErrorBody>(&text) {
        Ok(body) => LinkError::Refused {
            target: url.to_string(),
            status,
            code: body.error.code,
            message: body.error.message,
        },
        Err(_) => LinkError::Refused {
            target: url.to_string(),
            status,
            code: String::new(),
            message: text.chars().take(200).collect(),
        },
    }
}

/// The most events per request: well under the server's 32 MiB body limit.
const HTTP_MAX_BATCH: usize = 100_000;

impl CoreLink for HttpCore {
    fn window(&self) -> usize {
        1
    }

    fn max_batch(&self) -> usize {
        HTTP_MAX_BATCH
    }

    fn applied_seq(&self) -> Option<u64> {
        Some(self.applied)
    }

    async fn acked(&mut self) -> Result<(), LinkError> {
        // Each send waited for its answer.
        if self.unreported == 0 {
            return Err(LinkError::Protocol {
                target: self.url.to_string(),
                message: "expected a batch in flight, got none".into(),
            });
        }
        self.unreported -= 1;
        Ok(())
    }

    async fn send(&mut self, events: &[Event]) -> Result<(), LinkError> {
        let batch = Batch {
            events: events.iter().map(wire_event).collect(),
        };
        let body = serde_json::to_vec(&batch).expect("events serialise");
        let mut request = self
            .client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .timeout(Duration::from_secs(60))
            .body(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| transport(&self.url, e))?;
        if !response.status().is_success() {
            return Err(refused(&self.url, response).await);
        }
        // Read the (small) answer so the connection goes back to the pool.
        response
            .bytes()
            .await
            .map_err(|e| transport(&self.url, e))?;
        self.unreported += 1;
        Ok(())
    }
}

/// A client's link: `GET /v1/feed/orders`, each poll a task of its own on the pooled
/// connections, so a poll sent while the last one's rows still arrive goes out at once.
pub struct HttpFeed {
    client: reqwest::Client,
    url: Url,
    token: Option<String>,
    reads: VecDeque<Read>,
}

/// A poll under way: its task hands over the header, then the rows.
struct Read {
    head: Option<oneshot::Receiver<Result<PageHead, LinkError>>>,
    body: oneshot::Receiver<Result<PageBody, LinkError>>,
    task: JoinHandle<()>,
}

impl Drop for Read {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The header at the start of a page's JSON as the server writes it,
/// `{"next_cursor":"<cursor>","count":<digits>,` (a vector cursor: 28 characters for
/// one shard, 51 for two…); `None` if `bytes` does not (yet) hold it in that form.
fn parse_head(bytes: &[u8]) -> Option<PageHead> {
    const OPEN: &[u8] = b"{\"next_cursor\":\"";
    const COUNT: &[u8] = b"\",\"count\":";
    let rest = bytes.strip_prefix(OPEN)?;
    let chars = rest
        .iter()
        .take(MAX_VECTOR_CURSOR_CHARS + 1)
        .position(|&b| b == b'"')?;
    let cursor = &rest[..chars];
    let rest = rest[chars..].strip_prefix(COUNT)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    // The count is whole only once something follows it.
    if digits == 0 || rest.len() == digits {
        return None;
    }
    let next: VectorCursor = std::str::from_utf8(cursor).ok()?.parse().ok()?;
    let count = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    Some(PageHead { next, count })
}

fn order(o: &WireOrder) -> Order {
    Order {
        id: OrderId(o.id),
        firm: FirmId(o.firm),
        broker: BrokerId(o.broker),
        instrument: InstrumentId(o.instrument),
        side: o.side.into(),
        price: o.price,
        quantity: o.quantity,
        filled: o.filled,
        status: o.status.into(),
        created_at: o.created_at,
        updated_at: o.updated_at,
        seq: o.seq,
        rec: o.rec,
    }
}

/// Parses a whole page, checking it against the header read first (if any).
fn parse_page(
    url: &Url,
    bytes: &[u8],
    head: Option<PageHead>,
    received_at: u64,
) -> Result<(PageHead, PageBody), LinkError> {
    let protocol = |message: String| LinkError::Protocol {
        target: url.to_string(),
        message,
    };
    let page: OrdersPage = serde_json::from_slice(bytes).map_err(|e| protocol(e.to_string()))?;
    let next: VectorCursor = page
        .next_cursor
        .parse()
        .map_err(|e| protocol(format!("next_cursor: {e}")))?;
    if page.count != page.orders.len() {
        return Err(protocol(format!(
            "count says {} orders, the page has {}",
            page.count,
            page.orders.len()
        )));
    }
    let parsed = PageHead {
        next,
        count: page.count,
    };
    if let Some(head) = head {
        if head != parsed {
            return Err(protocol(format!(
                "the header read first ({head:?}) differs from the whole page's ({parsed:?})"
            )));
        }
    }
    Ok((
        parsed,
        PageBody {
            orders: page.orders.iter().map(order).collect(),
            received_at,
        },
    ))
}

impl HttpFeed {
    fn url(&self, request: &ReadRequest) -> Url {
        let mut url = self.url.clone();
        {
            let mut query = url.query_pairs_mut();
            if request.cursor != VectorCursor::START {
                query.append_pair("cursor", &request.cursor.to_string());
            }
            match request.filter {
                Filter::All => {}
                Filter::Firm(f) => {
                    query.append_pair("firm", &f.to_string());
                }
                Filter::Broker(b) => {
                    query.append_pair("broker", &b.to_string());
                }
                Filter::Instrument(i) => {
                    query.append_pair("instrument", &i.to_string());
                }
            }
            query.append_pair("limit", &request.limit.to_string());
            query.append_pair("min_batch", &request.min_batch.to_string());
            query.append_pair("wait_ms", &request.wait_ms.to_string());
            if request.linger_us > 0 {
                query.append_pair("linger_us", &request.linger_us.to_string());
            }
        }
        url
    }
}

/// One poll: sends it, hands over the header as soon as the first bytes hold it,
/// then the rows once all have arrived.
async fn fetch(
    request: reqwest::RequestBuilder,
    url: Url,
    head_tx: oneshot::Sender<Result<PageHead, LinkError>>,
    body_tx: oneshot::Sender<Result<PageBody, LinkError>>,
) {
    let mut response = match request.send().await {
        Ok(response) if response.status().is_success() => response,
        Ok(response) => {
            let _ = head_tx.send(Err(refused(&url, response).await));
            return;
        }
        Err(e) => {
            let _ = head_tx.send(Err(transport(&url, e)));
            return;
        }
    };
    let mut bytes = Vec::new();
    let mut head = None;
    let mut head_tx = Some(head_tx);
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                bytes.extend_from_slice(&chunk);
                if head.is_none() {
                    head = parse_head(&bytes);
                    if let Some(h) = head {
                        if let Some(tx) = head_tx.take() {
                            let _ = tx.send(Ok(h));
                        }
                    }
                }
            }
            Ok(None) => break,
            Err(e) => {
                let error = transport(&url, e);
                match head_tx {
                    Some(tx) => {
                        let _ = tx.send(Err(error));
                    }
                    None => {
                        let _ = body_tx.send(Err(error));
                    }
                }
                return;
            }
        }
    }
    let received_at = now_ns();
    match (parse_page(&url, &bytes, head, received_at), head_tx) {
        // The whole page arrived without a header in the expected form.
        (Ok((parsed, body)), Some(tx)) => {
            let _ = tx.send(Ok(parsed));
            let _ = body_tx.send(Ok(body));
        }
        (Ok((_, body)), None) => {
            let _ = body_tx.send(Ok(body));
        }
        (Err(e), Some(tx)) => {
            let _ = tx.send(Err(e));
        }
        (Err(e), None) => {
            let _ = body_tx.send(Err(e));
        }
    }
}

impl FeedLink for HttpFeed {
    async fn send_read(&mut self, request: ReadRequest) -> Result<(), LinkError> {
        let mut get = self
            .client
            .get(self.url(&request))
            .timeout(Duration::from_millis(request.wait_ms) + Duration::from_secs(60));
        if let Some(token) = &self.token {
            get = get.bearer_auth(token);
        }
        let (head_tx, head) = oneshot::channel();
        let (body_tx, body) = oneshot::channel();
        let task = tokio::spawn(fetch(get, self.url.clone(), head_tx, body_tx));
        self.reads.push_back(Read {
            head: Some(head),
            body,
            task,
        });
        Ok(())
    }

    async fn recv_head(&mut self) -> Result<PageHead, LinkError> {
        let ended = || LinkError::Transport {
            target: self.url.to_string(),
            message: "the poll's task ended without an answer".into(),
        };
        let read = self
            .reads
            .iter_mut()
            .find(|r| r.head.is_some())
            .ok_or_else(|| LinkError::Protocol {
                target: self.url.to_string(),
                message: "expected a poll in flight, got none".into(),
            })?;
        let head = read.head.as_mut().expect("found by it").await;
        read.head = None;
        head.map_err(|_| ended())?
    }

    async fn recv_body(&mut self) -> Result<PageBody, LinkError> {
        let read = match self.reads.front() {
            Some(read) if read.head.is_none() => self.reads.pop_front().expect("a front"),
            _ => {
                return Err(LinkError::Protocol {
                    target: self.url.to_string(),
                    message: "expected a header received first, got none".into(),
                })
            }
        };
        let mut read = read;
        let body = (&mut read.body).await;
        body.map_err(|_| LinkError::Transport {
            target: self.url.to_string(),
            message: "the poll's task ended without its rows".into(),
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use tranche_feed::Cursor;

    #[test]
    fn the_header_is_read_from_the_first_bytes_only_when_whole() {
        let two = VectorCursor::from_positions(&[Cursor::new(3, 2), Cursor::new(9, 4)]).unwrap();
        for next in [VectorCursor::from(Cursor::new(42, 7)), two] {
            let text = format!("{{\"next_cursor\":\"{next}\",\"count\":12,\"oldest_created_at\":1");
            assert_eq!(
                parse_head(text.as_bytes()),
                Some(PageHead { next, count: 12 })
            );
        }
        let cursor = Cursor::new(42, 7).to_string();
        let text = format!("{{\"next_cursor\":\"{cursor}\",\"count\":12,\"oldest_created_at\":1");
        let bytes = text.as_bytes();
        // Cut inside the count: not yet.
        let cut = text.find("12").unwrap() + 1;
        assert_eq!(parse_head(&bytes[..cut]), None);
        assert_eq!(parse_head(&bytes[..20]), None);
        // Another layout (spaces): left to the whole page's parse.
        assert_eq!(parse_head(text.replace(':', ": ").as_bytes()), None);
    }
}
