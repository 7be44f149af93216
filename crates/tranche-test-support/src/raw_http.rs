//! Reading a server's answers off a raw socket, for tests of what an HTTP listener does
//! to slow, idle and trickling clients (which no HTTP client library lets a test be).

use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Everything the server sends until it closes the connection (a reset counts as a
/// close), and how long that took; fails if it is still open after `patience`.
pub async fn read_until_closed(stream: &mut TcpStream, patience: Duration) -> (String, Duration) {
    let started = Instant::now();
    let mut got = Vec::new();
    let read = tokio::time::timeout(patience, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the server kept the connection open for {patience:?}; it sent {} bytes, starting {:?}",
        got.len(),
        String::from_utf8_lossy(&got[..got.len().min(300)])
    );
    (
        String::from_utf8_lossy(&got).into_owned(),
        started.elapsed(),
    )
}

/// One answer on a keep-alive connection: its status line and body.
pub async fn read_response(stream: &mut TcpStream) -> (String, String) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .expect("a content-length");
            if body.len() >= length {
                let status = head.lines().next().unwrap_or_default().to_string();
                return (status, body.to_string());
            }
        }
        let n = stream.read(&mut buf).await.expect("read");
        assert!(n > 0, "closed mid-answer: {text:?}");
        got.extend_from_slice(&buf[..n]);
    }
}
