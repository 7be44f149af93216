//! A server started for one test, on 127.0.0.1 with an ephemeral port.

use std::sync::Arc;
use std::time::Duration;

use reqwest::{Client, RequestBuilder, Response};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tranche_core::Client as EngineClient;
use tranche_server::ServerConfig;
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_types::Clock;

pub struct Live {
    pub base: String,
    /// The server's backend, for work done beside the HTTP API.
    pub backend: EngineClient,
    pub client: Client,
    pub token: Option<String>,
    /// The server's ACH entry ledger, for setting up what the API only reads.
    pub ledger: Option<Arc<dyn tranche_ach_ledger::Ledger>>,
    stop: CancellationToken,
    dir: tempfile::TempDir,
    ledger_dir: Option<tempfile::TempDir>,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub async fn start() -> Live {
    start_with(ServerConfig::default()).await
}

/// A server with an ACH entry ledger (SQLite, in its own temporary directory).
pub async fn start_with_ledger(config: ServerConfig) -> Live {
    start_with_ledger_on(config, SqliteOptions::default().clock).await
}

/// [`start_with_ledger`], the backend reading time from `clock`.
pub async fn start_with_ledger_on(mut config: ServerConfig, clock: Arc<dyn Clock>) -> Live {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger: Arc<dyn tranche_ach_ledger::Ledger> =
        Arc::new(tranche_ach_ledger::SqliteLedger::open(dir.path()).expect("open ledger"));
    config.ledger = Some(tranche_server::LedgerHandle(ledger.clone()));
    let mut live = start_on(config, clock).await;
    live.ledger_dir = Some(dir);
    live.ledger = Some(ledger);
    live
}

pub async fn start_with(config: ServerConfig) -> Live {
    start_on(config, SqliteOptions::default().clock).await
}

/// A server whose backend reads time from `clock` (a `ManualClock` to move by hand).
pub async fn start_on(mut config: ServerConfig, clock: Arc<dyn Clock>) -> Live {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = SqliteOptions {
        poll_interval: Duration::from_millis(100),
        clock,
        ..SqliteOptions::default()
    };
    let backend =
        EngineClient::new(SqliteBackend::open(dir.path(), options).expect("open backend"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    config.listen = listener.local_addr().unwrap();
    let base = format!("http://{}", config.listen);
    let stop = CancellationToken::new();
    let (b, s) = (backend.clone(), stop.clone());
    tokio::spawn(async move {
        tranche_server::serve(listener, b, config, s)
            .await
            .expect("server runs")
    });
    Live {
        base,
        backend,
        client: Client::new(),
        token: None,
        ledger: None,
        stop,
        dir,
        ledger_dir: None,
    }
}

impl Live {
    /// The backend's SQLite file, for tests that break it under the server.
    pub fn database(&self) -> std::path::PathBuf {
        self.dir.path().join(SqliteBackend::FILE_NAME)
    }

    fn auth(&self, rb: RequestBuilder) -> RequestBuilder {
        match &self.token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }

    pub async fn get(&self, path: &str) -> Response {
        self.auth(self.client.get(format!("{}{path}", self.base)))
            .send()
            .await
            .expect("GET")
    }

    pub async fn delete(&self, path: &str) -> Response {
        self.auth(self.client.delete(format!("{}{path}", self.base)))
            .send()
            .await
            .expect("DELETE")
    }

    /// The bytes the ACH ledger's files hold (0 without a ledger).
    pub fn ledger_bytes(&self) -> u64 {
        let Some(dir) = &self.ledger_dir else {
            return 0;
        };
        std::fs::read_dir(dir.path())
            .expect("the ledger's directory")
            .map(|f| f.expect("a file").metadata().expect("its size").len())
            .sum()
    }

    pub async fn post(&self, path: &str, body: &Value) -> Response {
        self.auth(self.client.post(format!("{}{path}", self.base)).json(body))
            .send()
            .await
            .expect("POST")
    }

    pub async fn put(&self, path: &str, body: &Value) -> Response {
        self.auth(self.client.put(format!("{}{path}", self.base)).json(body))
            .send()
            .await
            .expect("PUT")
    }

    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> Response {
        self.auth(
            self.client
                .post(format!("{}{path}", self.base))
                .header("content-type", "application/json")
                .body(body),
        )
        .send()
        .await
        .expect("POST")
    }

    /// POST, expect `status`, return the JSON body.
    pub async fn post_ok(&self, path: &str, body: &Value, status: u16) -> Value {
        let resp = self.post(path, body).await;
        expect(resp, status).await
    }

    pub async fn get_ok(&self, path: &str) -> Value {
        expect(self.get(path).await, 200).await
    }

    /// Poll a queue; returns the jobs.
    pub async fn poll(&self, queue: &str, max: usize, wait_ms: u64) -> Vec<Value> {
        let out = self
            .post_ok(
                "/v1/workers/poll",
                &json!({"queue": queue, "max": max, "wait_ms": wait_ms}),
                200,
            )
            .await;
        out["jobs"].as_array().expect("jobs").clone()
    }
}

pub async fn expect(resp: Response, status: u16) -> Value {
    let got = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    assert_eq!(got, status, "unexpected status; body: {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

pub fn lease(job: &Value) -> Value {
    json!({"job": job["id"], "attempt": job["attempt"]})
}

pub fn ids(v: &Value) -> Vec<i64> {
    v["ids"]
        .as_array()
        .expect("ids")
        .iter()
        .map(|i| i.as_i64().unwrap())
        .collect()
}
