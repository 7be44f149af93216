//! A backend that fails for real under a running server: clients get a 5xx with a
//! stable code, a fixed sentence and a request id, never the backend's text, and the
//! server's log has the cause under that id.

use std::io;
use std::sync::{Arc, Mutex, OnceLock};

use crate::live::{expect, start};

/// Everything this test binary logs (the subscriber is process-wide, so other tests'
/// lines are here too; the checks look for one request id).
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Log {
    fn capture() -> &'static Log {
        static LOG: OnceLock<Log> = OnceLock::new();
        LOG.get_or_init(|| {
            let log = Log::default();
            let writer = log.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_writer(move || writer.clone())
                .with_ansi(false)
                .finish();
            tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
            log
        })
    }

    /// The logged line naming `request_id`.
    fn line_with(&self, request_id: &str) -> String {
        let text = String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned();
        text.lines()
            .find(|l| l.contains(request_id))
            .unwrap_or_else(|| panic!("no log line names request {request_id}:\n{text}"))
            .to_string()
    }
}

fn request_id(message: &str, prefix: &str) -> String {
    message
        .strip_prefix(prefix)
        .and_then(|m| m.trim_end().strip_suffix(')'))
        .unwrap_or_else(|| panic!("expected {prefix:?}…, got {message:?}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_backend_is_answered_without_its_text_and_logged_with_it() {
    let log = Log::capture();
    let s = start().await;
    s.get_ok("/v1/runs").await;

    // The store breaks under the server: its table of runs is gone.
    let db = rusqlite::Connection::open(s.database()).expect("open the backend's file");
    db.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    db.execute_batch("DROP TABLE runs").expect("drop a table");

    let err = expect(s.get("/v1/runs").await, 500).await;
    assert_eq!(err["error"]["code"], "internal", "{err}");
    let message = err["error"]["message"].as_str().unwrap();
    let id = request_id(message, "internal error, see server log (request id ");
    for internal in ["no such table", "runs", "sqlite", "tranche.db"] {
        assert!(
            !err.to_string().contains(internal),
            "{internal:?} leaked: {err}"
        );
    }
    let line = log.line_with(&id);
    assert!(line.contains("no such table: runs"), "{line}");
    assert!(line.contains("ERROR"), "{line}");
    assert!(
        line.contains("/v1/runs"),
        "the line names the route: {line}"
    );

    // The readiness probe, open to anyone, says as little.
    let resp = s.get("/readyz").await;
    assert_eq!(resp.status().as_u16(), 503);
    let text = resp.text().await.unwrap();
    assert!(!text.contains("no such table"), "{text}");
    let id = request_id(&text, "backend not ready (request id ");
    assert!(log.line_with(&id).contains("no such table: runs"));
}
