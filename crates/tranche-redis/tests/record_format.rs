//! The job records stored in Redis, byte for byte: data written by an earlier version
//! must stay readable, so the packed layout (documented at the top of
//! `src/scripts/common.lua`) may only change together with a migration.

mod server;

use std::sync::Arc;
use std::time::Duration;

use tranche_backend::Backend;
use tranche_redis::{RedisBackend, RedisOptions};
use tranche_types::{
    Completion, EnqueueItem, EnqueueRequest, JobSpec, JobState, ManualClock, ReserveRequest,
    Resolution, RunName, Timestamp,
};

const START: Timestamp = Timestamp(1_700_000_000_000_000);

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn take(b: &RedisBackend, queue: &str) -> tranche_types::ReservedJob {
    b.reserve(ReserveRequest {
        queue: queue.into(),
        max: 1,
        lease: Duration::from_secs(30),
        wait: Duration::ZERO,
    })
    .await
    .unwrap()
    .remove(0)
}

/// Every kind of record: pending with and without a group, available after a retry
/// (attempt errors), succeeded with input and result, failed, and cancelled by an
/// upstream failure.
#[tokio::test]
async fn records_keep_their_packed_layout() {
    if !server::available() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let redis = server::Server::start(dir.path(), false);
    let prefix = server::fresh_prefix();
    let clock = ManualClock::new(START);
    let b = RedisBackend::connect(RedisOptions {
        url: redis.url(),
        prefix: prefix.clone(),
        clock: Arc::new(clock.clone()),
        ..RedisOptions::default()
    })
    .await
    .unwrap();
    let run = RunName::new("fmt/a").unwrap();
    let spec = |kind: &str, queue: &str| JobSpec::new(kind, "{\"n\":1}").queue(queue);
    b.enqueue(EnqueueRequest {
        run: run.clone(),
        items: vec![
            // 1 fails, so 2 is cancelled as its upstream failed.
            EnqueueItem::Chain(vec![
                spec("a", "qa").max_attempts(1).priority(-3),
                spec("b", "qa").unique_key("u,b"),
            ]),
            // 3 succeeds, so 4 gets its result as input.
            EnqueueItem::Chain(vec![spec("c", "qc"), spec("d", "qd")]),
            // Member 5 retries; 6 is the group's callback.
            EnqueueItem::Group {
                members: vec![spec("m", "qm").priority(9)],
                callback: spec("cb", "qcb"),
            },
        ],
        on_done: None,
    })
    .await
    .unwrap();
    clock.advance(Duration::from_secs(1));
    let a = take(&b, "qa").await;
    let c = take(&b, "qc").await;
    let m = take(&b, "qm").await;
    clock.advance(Duration::from_secs(2));
    let failed = Resolution::Failed {
        error: "bad".into(),
    };
    let succeeded = Resolution::Succeeded {
        result: "{\"r\":2}".into(),
    };
    let retry = Resolution::Retry {
        error: "again".into(),
        at: START.plus(Duration::from_secs(60)),
    };
    b.complete(vec![
        Completion {
            lease: a.lease(),
            resolution: failed,
        },
        Completion {
            lease: c.lease(),
            resolution: succeeded,
        },
        Completion {
            lease: m.lease(),
            resolution: retry,
        },
    ])
    .await
    .unwrap();
    let states: Vec<JobState> = {
        let mut states = Vec::new();
        for id in 1..=6 {
            states.push(
                b.job(tranche_types::JobId(id))
                    .await
                    .unwrap()
                    .unwrap()
                    .state,
            );
        }
        states
    };
    assert_eq!(
        states,
        [
            JobState::Failed,
            JobState::Cancelled,
            JobState::Succeeded,
            JobState::Available,
            JobState::Available,
            JobState::Pending
        ]
    );

    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let records: Vec<Vec<u8>> = redis::cmd("HMGET")
        .arg(format!("{prefix}b:"))
        .arg(&["1", "2", "3", "4", "5", "6"])
        .query_async(&mut conn)
        .await
        .unwrap();
    let records: Vec<String> = records.iter().map(|r| hex(r)).collect();
    assert_eq!(records, GOLDEN.map(String::from));
}

/// Jobs 1 to 6 as an earlier version wrote them.
const GOLDEN: [&str; 6] = [
    // 1 failed
    "0401000000000079609028184300007960902818430009b66090281843001b306190281843fdff010001320005666d742f61020000007161010b000000611f311f7b226e223a317d0000000000000000000001030000006261640000000000",
    // 2 cancelled, its upstream failed
    "0500000000000079609028184300007960902818430000000000000000001b30619028184300000001000005666d742f61020000007161010c000000621f31301f7b226e223a317d000000000000000000000115000000757073747265616d206a6f622031206661696c65640103000000752c62",
    // 3 succeeded
    "0301000000000079609028184300007960902818430009b66090281843001b3061902818430000000001340005666d742f61020000007163010c000000631f31301f7b226e223a317d000000000001070000007b2272223a327d00000000000000000000",
    // 4 available with input
    "0100000000001b30619028184300007960902818430000000000000000000000000000000000000000000005666d742f61020000007164010c000000641f31301f7b226e223a317d01070000007b2272223a327d000000000000000000000000000000",
    // 5 available after a retry
    "0101000000001cc76e9028184300007960902818430009b6609028184300000000000000000900010000013605666d742f6102000000716d010c0000006d1f31301f7b226e223a317d000000000000000000000105000000616761696e0000000000",
    // 6 pending callback
    "0000000000000079609028184300007960902818430000000000000000000000000000000000000000000005666d742f6103000000716362010d00000063621f31301f7b226e223a317d0000000000000000000000000000000000000000",
];
