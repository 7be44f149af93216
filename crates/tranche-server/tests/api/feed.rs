use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::live::start;

async fn read(client: &reqwest::Client, base: &str, after: u64, wait: u64, limit: usize) -> Value {
    client
        .get(format!(
            "{base}/v1/events?after={after}&wait={wait}&limit={limit}"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_waits_then_wakes() {
    let s = start().await;
    let started = Instant::now();
    let empty = read(&s.client, &s.base, 0, 400, 100).await;
    assert_eq!(empty["events"], json!([]));
    assert_eq!(empty["next"], 0);
    assert!(started.elapsed() >= Duration::from_millis(400));
    let waiter = {
        let (c, b) = (s.client.clone(), s.base.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            (read(&c, &b, 0, 20_000, 100).await, started.elapsed())
        })
    };
    s.post_ok(
        "/v1/jobs",
        &json!({"run": "feed/w", "job": {"kind": "x"}}),
        201,
    )
    .await;
    let (got, waited) = waiter.await.unwrap();
    assert!(waited < Duration::from_secs(10), "woke after {waited:?}");
    let e = &got["events"][0];
    assert_eq!(
        (e["run"].as_str(), e["state"].as_str()),
        (Some("feed/w"), Some("available"))
    );
    assert_eq!(got["next"], e["seq"]);
    // `latest`: only what happens from now on.
    let now = crate::live::expect(s.get("/v1/events?after=latest&wait=300").await, 200).await;
    assert_eq!(now["events"], json!([]));
    assert_eq!(now["next"], e["seq"]);
    let err = crate::live::expect(s.get("/v1/events?after=soon").await, 400).await;
    assert_eq!(err["error"]["field"], "after");
}

/// Submitters and HTTP workers run concurrently while a reader tails the feed with a
/// small page size: it must see every event, in commit order, with no gaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_has_no_gaps_under_concurrent_writes() {
    let s = start().await;
    const SUBMITTERS: usize = 3;
    const BATCHES: usize = 10;
    const PER_BATCH: usize = 40;
    let total = SUBMITTERS * BATCHES * PER_BATCH;
    // Read here, beside the spawned submitters and workers, until every job's three
    // events are in.
    let tail = async {
        let mut seen: Vec<Value> = Vec::new();
        let mut cursor = 0;
        tranche_test_support::poll_until_async(
            "every job's three events read",
            Duration::from_secs(60),
            async || {
                let page = read(&s.client, &s.base, cursor, 500, 37).await;
                cursor = page["next"].as_u64().unwrap();
                seen.extend(page["events"].as_array().unwrap().iter().cloned());
                seen.len() >= total * 3
            },
        )
        .await;
        seen
    };
    let mut tasks = Vec::new();
    for w in 0..SUBMITTERS {
        let (c, b) = (s.client.clone(), s.base.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..BATCHES {
                let items: Vec<_> = (0..PER_BATCH)
                    .map(|i| json!({"job": {"kind": "x", "queue": format!("fq{w}"), "args": i}}))
                    .collect();
                let r = c
                    .post(format!("{b}/v1/batches"))
                    .json(&json!({"run": format!("feed/c{w}"), "items": items}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status().as_u16(), 201);
            }
        }));
        let (c, b) = (s.client.clone(), s.base.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = 0;
            while done < BATCHES * PER_BATCH {
                let out: Value = c
                    .post(format!("{b}/v1/workers/poll"))
                    .json(&json!({"queue": format!("fq{w}"), "max": 25, "wait_ms": 100}))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                let results: Vec<_> = out["jobs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|j| json!({"job": j["id"], "attempt": j["attempt"]}))
                    .collect();
                done += results.len();
                if !results.is_empty() {
                    let r = c
                        .post(format!("{b}/v1/workers/complete"))
                        .json(&json!({"results": results}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status().as_u16(), 200);
                }
            }
        }));
    }
    let (seen, ()) = tokio::join!(tail, async {
        for t in tasks {
            t.await.unwrap();
        }
    });
    let whole = read(&s.client, &s.base, 0, 0, 10_000).await["events"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(whole.len(), total * 3);
    assert_eq!(seen, whole, "the tail saw every event, in order");
    let seqs: Vec<u64> = whole.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    let mut history: HashMap<i64, Vec<String>> = HashMap::new();
    for e in &whole {
        history
            .entry(e["job"].as_i64().unwrap())
            .or_default()
            .push(e["state"].as_str().unwrap().to_string());
    }
    assert_eq!(history.len(), total);
    assert!(history
        .values()
        .all(|h| h == &["available", "running", "succeeded"]));
}
