//! The job records stored in Redis, byte for byte: data written by an earlier version
//! must stay readable, so the packed layout (documented at the top of
//! `src/scripts/common.lua`) may only change together with a migration.

use crate::server;

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

/// A traced job's spec text starts with its trace context between two `\x1e`
/// (packed.rs), and a traced success writes the context it hands on into the next
/// step's spec; every other byte is laid out as for an untraced job.
#[tokio::test]
async fn traced_records_keep_their_packed_layout() {
    if !server::available() {
        return;
    }
    const A: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const C: &str = "00-0af7651916cd43dd8448eb211c80319c-53995c3f42cd8ad8-01";
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
    let run = RunName::new("fmt/t").unwrap();
    b.enqueue(EnqueueRequest {
        run: run.clone(),
        items: vec![EnqueueItem::Chain(vec![
            JobSpec::new("a", "{}").queue("qa").trace(A),
            JobSpec::new("b", "{}").queue("qb"),
            JobSpec::new("c", "{}").queue("qc"),
        ])],
        on_done: None,
    })
    .await
    .unwrap();
    let a = take(&b, "qa").await;
    b.complete(vec![Completion {
        lease: a.lease(),
        resolution: Resolution::SucceededTraced {
            result: "1".into(),
            trace: C.into(),
        },
    }])
    .await
    .unwrap();
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let records: Vec<Vec<u8>> = redis::cmd("HMGET")
        .arg(format!("{prefix}b:"))
        .arg(&["1", "2", "3"])
        .query_async(&mut conn)
        .await
        .unwrap();
    let records: Vec<String> = records.iter().map(|r| hex(r)).collect();
    // The spec text: presence byte, length (u32 little-endian), then the packed spec.
    let spec_text = |trace: &str, kind: &str| {
        let packed = format!("\u{1e}{trace}\u{1e}{kind}\u{1f}10\u{1f}{{}}");
        format!(
            "01{}{}",
            hex(&(packed.len() as u32).to_le_bytes()),
            hex(packed.as_bytes())
        )
    };
    assert!(
        records[0].contains(&spec_text(A, "a")),
        "step 1 keeps its own context: {}",
        records[0]
    );
    assert!(
        records[1].contains(&spec_text(C, "b")),
        "step 2 holds the context handed on: {}",
        records[1]
    );
    assert!(
        records[2].contains(&spec_text(A, "c")),
        "step 3 inherited step 1's at enqueue: {}",
        records[2]
    );
    assert_eq!(records, TRACED_GOLDEN.map(String::from));
}

/// Jobs 1 to 3 of the traced chain: succeeded, available with input, pending.
const TRACED_GOLDEN: [&str; 3] = [
    // 1 succeeded, handing C on
    "030100000000007960902818430000796090281843000079609028184300007960902818430000000001320005666d742f7402000000716101400000001e30302d30616637363531393136636434336464383434386562323131633830333139632d623761643662373136393230333333312d30311e611f31301f7b7d000000000001010000003100000000000000000000",
    // 2 available with input, continuing C
    "010000000000007960902818430000796090281843000000000000000000000000000000000000000001330005666d742f7402000000716201400000001e30302d30616637363531393136636434336464383434386562323131633830333139632d353339393563336634326364386164382d30311e621f31301f7b7d010100000031000000000000000000000000000000",
    // 3 pending, continuing A
    "0000000000000079609028184300007960902818430000000000000000000000000000000000000000000005666d742f7402000000716301400000001e30302d30616637363531393136636434336464383434386562323131633830333139632d623761643662373136393230333333312d30311e631f31301f7b7d0000000000000000000000000000000000000000",
];
