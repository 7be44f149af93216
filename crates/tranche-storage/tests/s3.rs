//! S3Store against a real S3-compatible server: `s3s-fs` (see `.ci/run`), started per
//! test on a free loopback port with its data in a temporary directory. Without
//! `s3s-fs` the tests fail when `CI` is set and are skipped otherwise.
//!
//! The one fake here is a small TCP proxy in front of that server, which answers the
//! first requests with faults a healthy server does not give (503 SlowDown, 500, a
//! stall) and forwards the rest, to prove the retries.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tranche_storage::{
    conformance, open_store, open_store_with_vars, S3Store, Storage, StorageError, StoreKey,
};

const BUCKET: &str = "tranche-test";
const ACCESS_KEY: &str = "AKTRANCHETEST";
const SECRET_KEY: &str = "sk-tranche-s3cr3t";

struct S3sFs {
    child: Child,
    root: tempfile::TempDir,
    addr: SocketAddr,
}

impl Drop for S3sFs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running s3s-fs with bucket [`BUCKET`], or `None` (skipped) when it is not
/// installed outside CI.
fn s3s_fs() -> Option<S3sFs> {
    let root = tempfile::tempdir().unwrap();
    // s3s-fs serves each subdirectory of its root as a bucket.
    std::fs::create_dir(root.path().join(BUCKET)).unwrap();
    for _attempt in 0..3 {
        let port = free_port();
        let spawned = Command::new("s3s-fs")
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(root.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if tranche_test_support::tools_required() {
                    panic!("s3s-fs is not installed (.ci/run installs it)");
                }
                // Straight to stderr: libtest would capture eprintln! of a passing test.
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED: s3s-fs is not installed \
                     (cargo install s3s-fs --version 0.14.1 --features binary --locked)"
                );
                return None;
            }
            Err(e) => panic!("starting s3s-fs: {e}"),
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if TcpStream::connect(addr).is_ok() {
                return Some(S3sFs { child, root, addr });
            }
            if child.try_wait().unwrap().is_some() {
                break; // lost the port to someone else: try another
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("s3s-fs did not start listening");
}

fn vars(endpoint: SocketAddr, secret: &str) -> Vec<(String, String)> {
    [
        ("AWS_ENDPOINT_URL", format!("http://{endpoint}")),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
        ("AWS_SECRET_ACCESS_KEY", secret.into()),
        // Not ours: ignored.
        ("AWS_PROFILE", "nightly".into()),
        ("HOME", "/nonexistent".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn key(entity: &str) -> StoreKey {
    StoreKey::partitioned("signed-pdf", "2026-11-20", entity, "pdf").unwrap()
}

#[tokio::test]
async fn s3_store_passes_the_suite() {
    let Some(server) = s3s_fs() else { return };
    let store =
        S3Store::from_vars(&format!("s3://{BUCKET}"), vars(server.addr, SECRET_KEY)).unwrap();
    conformance::exercise(&store).await;
    // And under a prefix.
    let store = S3Store::from_vars(
        &format!("s3://{BUCKET}/fleet-a/nightly/"),
        vars(server.addr, SECRET_KEY),
    )
    .unwrap();
    conformance::exercise(&store).await;
}

#[tokio::test]
async fn open_store_picks_s3_by_url_and_objects_land_under_the_prefix() {
    let Some(server) = s3s_fs() else { return };
    let store = open_store_with_vars(
        &format!("s3://{BUCKET}/fleet-a"),
        vars(server.addr, SECRET_KEY),
    )
    .unwrap();
    let k = key("C0000007");
    store.put(&k, b"%PDF-1.7".to_vec()).await.unwrap();
    assert_eq!(
        store.locate(&k),
        format!("s3://{BUCKET}/fleet-a/{}", k.as_str())
    );
    // What the server wrote, read back from its own directory.
    let on_disk: PathBuf = server
        .root
        .path()
        .join(BUCKET)
        .join("fleet-a")
        .join(k.as_str());
    assert_eq!(std::fs::read(&on_disk).unwrap(), b"%PDF-1.7");
}

#[tokio::test]
async fn open_store_takes_a_directory_and_refuses_other_urls() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path().to_str().unwrap()).unwrap();
    let k = key("C1");
    store.put(&k, b"x".to_vec()).await.unwrap();
    assert_eq!(std::fs::read(dir.path().join(k.as_str())).unwrap(), b"x");

    for bad in [
        "",
        "gs://bucket",
        "https://s3.amazonaws.com/bucket",
        "s3://",
        "s3://Bad_Bucket",
        "s3://bucket/../up",
        "s3://user:pw@bucket",
    ] {
        let e = open_store(bad).err().expect(bad);
        let msg = e.to_string();
        assert!(matches!(e, StorageError::Config(_)), "{bad}: {msg}");
        assert!(
            msg.starts_with("expected s3://bucket[/prefix] or a directory, got"),
            "{bad}: {msg}"
        );
        assert!(!msg.contains("pw"), "{msg}");
    }
}

#[tokio::test]
async fn wrong_credentials_are_errors_that_show_no_secret() {
    let Some(server) = s3s_fs() else { return };
    let wrong = "wrong-s3cr3t-value";
    let store = S3Store::from_vars(&format!("s3://{BUCKET}"), vars(server.addr, wrong)).unwrap();
    let k = key("C2");
    for result in [
        store.put(&k, b"x".to_vec()).await.map(|_| ()),
        store.get(&k).await.map(|_| ()),
    ] {
        let e = result.unwrap_err();
        assert!(matches!(e, StorageError::Io { .. }), "{e:?}");
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains(wrong), "{shown}");
    }
    assert!(!format!("{store:?}").contains(wrong));
}

enum Fault {
    Status(u16, &'static str),
    /// Read the request and never answer.
    Stall,
}

/// A proxy to `upstream` whose first connections each get one of `faults`; the rest are
/// forwarded byte for byte (the Host header, hence the SigV4 signature, is untouched).
/// Returns its address and the count of faults served.
fn fault_proxy(upstream: SocketAddr, faults: Vec<Fault>) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let faults = Arc::new(Mutex::new(VecDeque::from(faults)));
    let served = Arc::new(AtomicUsize::new(0));
    let served2 = served.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let fault = faults.lock().unwrap().pop_front();
            let served = served2.clone();
            std::thread::spawn(move || match fault {
                Some(fault) => {
                    read_request(&mut conn);
                    served.fetch_add(1, Ordering::SeqCst);
                    match fault {
                        Fault::Status(status, code) => {
                            let body = format!(
                                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
                                 <Error><Code>{code}</Code><Message>injected</Message></Error>"
                            );
                            let _ = write!(
                                conn,
                                "HTTP/1.1 {status} {code}\r\nContent-Type: application/xml\r\n\
                                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                                body.len()
                            );
                            let _ = conn.shutdown(Shutdown::Write);
                        }
                        Fault::Stall => std::thread::sleep(Duration::from_secs(30)),
                    }
                }
                None => {
                    let Ok(mut up) = TcpStream::connect(upstream) else {
                        return;
                    };
                    let (mut conn2, mut up2) = (conn.try_clone().unwrap(), up.try_clone().unwrap());
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut up2, &mut conn2);
                        let _ = conn2.shutdown(Shutdown::Write);
                    });
                    let _ = std::io::copy(&mut conn, &mut up);
                    let _ = up.shutdown(Shutdown::Write);
                }
            });
        }
    });
    (addr, served)
}

/// Reads one HTTP/1.1 request with a Content-Length body (all object_store sends).
fn read_request(conn: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= end + 4 + length {
                return;
            }
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

#[tokio::test]
async fn slow_down_server_errors_and_timeouts_are_retried_with_backoff() {
    let Some(server) = s3s_fs() else { return };
    let (proxy, served) = fault_proxy(
        server.addr,
        vec![
            Fault::Status(503, "SlowDown"),
            Fault::Status(503, "SlowDown"),
            Fault::Status(500, "InternalError"),
        ],
    );
    let store = S3Store::from_vars(&format!("s3://{BUCKET}"), vars(proxy, SECRET_KEY)).unwrap();
    let k = key("C3");
    let started = Instant::now();
    store.put(&k, b"after three faults".to_vec()).await.unwrap();
    let waited = started.elapsed();
    assert_eq!(served.load(Ordering::SeqCst), 3);
    // Three backoffs, each at least the initial 200 ms.
    assert!(waited >= Duration::from_millis(600), "{waited:?}");
    assert_eq!(store.get(&k).await.unwrap(), b"after three faults");

    // A request that gets no answer times out (1 s here) and is retried.
    let (proxy, served) = fault_proxy(server.addr, vec![Fault::Stall]);
    let mut env = vars(proxy, SECRET_KEY);
    env.push(("AWS_TIMEOUT".into(), "1s".into()));
    let store = S3Store::from_vars(&format!("s3://{BUCKET}"), env).unwrap();
    assert_eq!(store.get(&k).await.unwrap(), b"after three faults");
    assert_eq!(served.load(Ordering::SeqCst), 1);
}

/// s3s-fs creates a missing bucket on PUT and answers NoSuchKey on GET, so AWS's answer
/// for a missing bucket is injected.
#[tokio::test]
async fn a_missing_bucket_is_not_a_missing_object() {
    let Some(server) = s3s_fs() else { return };
    let (proxy, served) = fault_proxy(
        server.addr,
        vec![
            Fault::Status(404, "NoSuchBucket"),
            Fault::Status(404, "NoSuchKey"),
        ],
    );
    let store = S3Store::from_vars(&format!("s3://{BUCKET}"), vars(proxy, SECRET_KEY)).unwrap();
    let k = key("C4");
    match store.get(&k).await {
        Err(StorageError::Io { op, source, .. }) => {
            assert_eq!(op, "get");
            assert!(source.to_string().contains("NoSuchBucket"), "{source}");
        }
        other => panic!("expected an Io error, got {other:?}"),
    }
    assert!(matches!(
        store.get(&k).await,
        Err(StorageError::NotFound { .. })
    ));
    assert_eq!(served.load(Ordering::SeqCst), 2, "a 404 is not retried");
}
