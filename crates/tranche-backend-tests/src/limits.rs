//! Rate limits and running caps: a queue's or a kind's start rate is a strict sliding
//! window (checked to the microsecond at its boundary, on the manual clock), a running
//! cap follows every way a job leaves running, jobs of a kind at its limit are skipped
//! without blocking other kinds behind them, and limits are the backend's: another
//! handle on the same store (another process, or a reopen) sees and enforces them.

use std::time::Duration;

use tranche_types::{
    BackendError, CancelTarget, EnqueueItem, JobSpec, Limit, LimitScope, Resolution, StartRate,
};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    declare_list_and_delete(make).await;
    a_start_rate_is_a_strict_sliding_window(make).await;
    retries_count_as_starts(make).await;
    a_running_cap_follows_every_way_out_of_running(make).await;
    a_kind_at_its_limit_does_not_block_other_kinds(make).await;
    a_kind_start_rate_spans_queues(make).await;
    jobs_running_when_a_limit_is_declared_count(make).await;
}

fn queue_limit(queue: &str, starts: Option<(u32, u64)>, running: Option<u32>) -> Limit {
    Limit {
        scope: LimitScope::Queue(queue.to_string()),
        starts: starts.map(|(count, per_ms)| StartRate { count, per_ms }),
        running,
    }
}

fn kind_limit(kind: &str, starts: Option<(u32, u64)>, running: Option<u32>) -> Limit {
    Limit {
        scope: LimitScope::Kind(kind.to_string()),
        ..queue_limit("unused", starts, running)
    }
}

fn jobs_in(queue: &str, kinds: &[&str]) -> Vec<EnqueueItem> {
    kinds
        .iter()
        .enumerate()
        .map(|(i, k)| EnqueueItem::Job(job(k, &i.to_string()).queue(queue)))
        .collect()
}

const US: Duration = Duration::from_micros(1);

async fn declare_list_and_delete(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let bank = queue_limit("bank", Some((1, 15_000)), None);
    let smtp = kind_limit("smtp", Some((200, 1_000)), Some(20));
    assert!(b.put_limit(&bank).await.unwrap(), "new");
    assert!(b.put_limit(&smtp).await.unwrap(), "new");
    assert!(!b.put_limit(&bank).await.unwrap(), "a repeat replaces it");
    let listed = b.limits().await.unwrap();
    let limits: Vec<_> = listed.iter().map(|s| s.limit.clone()).collect();
    assert_eq!(
        limits,
        [bank.clone(), smtp.clone()],
        "queues first, then kinds"
    );
    assert!(listed
        .iter()
        .all(|s| s.running_now == 0 && s.starts_in_window == 0));

    // Replacing a limit changes it in place.
    let raised = queue_limit("bank", None, Some(3));
    assert!(!b.put_limit(&raised).await.unwrap());
    assert_eq!(b.limits().await.unwrap()[0].limit, raised);

    assert!(b.delete_limit(&bank.scope).await.unwrap());
    assert!(!b.delete_limit(&bank.scope).await.unwrap(), "a repeat");
    assert!(b.delete_limit(&smtp.scope).await.unwrap());
    assert!(b.limits().await.unwrap().is_empty());

    for (bad, field) in [
        (queue_limit("q", None, None), "limit"),
        (queue_limit("q", Some((0, 1000)), None), "starts.count"),
        (queue_limit("q", Some((1, 0)), None), "starts.per_ms"),
        (queue_limit("q", None, Some(0)), "running"),
        (queue_limit("", None, Some(1)), "queue"),
        (
            kind_limit(&"k".repeat(JobSpec::MAX_KIND_LEN + 1), None, Some(1)),
            "kind",
        ),
    ] {
        match b.put_limit(&bad).await {
            Err(BackendError::Invalid { field: f, .. }) => assert_eq!(f, field, "{bad:?}"),
            other => panic!("{bad:?}: expected Invalid {field}, got {other:?}"),
        }
    }
    match b.delete_limit(&LimitScope::Queue(String::new())).await {
        Err(BackendError::Invalid { field, .. }) => assert_eq!(field, "queue"),
        other => panic!("expected Invalid queue, got {other:?}"),
    }
    assert!(b.limits().await.unwrap().is_empty(), "nothing stored");
}

async fn a_start_rate_is_a_strict_sliding_window(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    // A bank's "one upload per 15 s".
    b.put_limit(&queue_limit("bank", Some((1, 15_000)), None))
        .await
        .unwrap();
    enqueue(&*b, "limits/bank", jobs_in("bank", &["upload"; 3])).await;
    let first = take(&*b, "bank", 10).await;
    assert_eq!(first.len(), 1, "one start per window, however many asked");
    resolve(&*b, first[0].lease(), ok("null")).await;
    assert!(
        take(&*b, "bank", 10).await.is_empty(),
        "a finished job's start still counts"
    );
    clock.advance(Duration::from_secs(15) - US);
    assert!(
        take(&*b, "bank", 10).await.is_empty(),
        "14.999999 s after a start is inside the window"
    );
    clock.advance(US);
    assert_eq!(
        take(&*b, "bank", 10).await.len(),
        1,
        "exactly 15 s after it, the next may start"
    );
    assert!(take(&*b, "bank", 10).await.is_empty());

    // Three per 10 s: starts at 0 s (2) and 4 s (1); room again at 10 s for two
    // (those of 0 s age out) and at 14 s for one.
    b.put_limit(&queue_limit("three", Some((3, 10_000)), None))
        .await
        .unwrap();
    enqueue(&*b, "limits/three", jobs_in("three", &["x"; 8])).await;
    assert_eq!(take(&*b, "three", 2).await.len(), 2);
    clock.advance(Duration::from_secs(4));
    assert_eq!(
        take(&*b, "three", 10).await.len(),
        1,
        "the third of the window"
    );
    clock.advance(Duration::from_secs(6) - US);
    assert!(take(&*b, "three", 10).await.is_empty());
    clock.advance(US);
    assert_eq!(
        take(&*b, "three", 10).await.len(),
        2,
        "the 0 s starts aged out"
    );
    clock.advance(Duration::from_secs(4) - US);
    assert!(take(&*b, "three", 10).await.is_empty());
    clock.advance(US);
    assert_eq!(
        take(&*b, "three", 10).await.len(),
        1,
        "the 4 s start aged out"
    );
    let status = b.limits().await.unwrap();
    let three = status
        .iter()
        .find(|s| s.limit.scope == LimitScope::Queue("three".into()))
        .unwrap();
    assert_eq!(three.starts_in_window, 3, "{status:?}");
    // Six started; the two of 0 s had 10 s leases, recovered by the reserve at 14 s.
    assert_eq!(three.running_now, 4, "{status:?}");

    // A queue without a limit is untouched by the others'.
    enqueue(&*b, "limits/free", jobs_in("free", &["x"; 5])).await;
    assert_eq!(take(&*b, "free", 10).await.len(), 5);

    // Deleting the limit frees the queue at once.
    assert!(b
        .delete_limit(&LimitScope::Queue("three".into()))
        .await
        .unwrap());
    // The two never started and the two recovered.
    assert_eq!(take(&*b, "three", 10).await.len(), 4);
}

async fn retries_count_as_starts(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    b.put_limit(&queue_limit("flaky", Some((1, 1_000)), None))
        .await
        .unwrap();
    let mut spec = job("x", "1").queue("flaky");
    spec.max_attempts = 3;
    enqueue(&*b, "limits/retry", vec![EnqueueItem::Job(spec)]).await;
    let first = take(&*b, "flaky", 1).await;
    assert_eq!(first.len(), 1);
    let retry = Resolution::Retry {
        error: "busy".into(),
        at: clock.now(),
    };
    resolve(&*b, first[0].lease(), retry).await;
    assert!(
        take(&*b, "flaky", 1).await.is_empty(),
        "the retry is a start of its own: the window is full"
    );
    clock.advance(Duration::from_secs(1));
    let second = take(&*b, "flaky", 1).await;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].attempt, 2);
    // A release hands the attempt back, not the start.
    assert_eq!(b.release(vec![second[0].lease()]).await.unwrap(), 1);
    assert!(take(&*b, "flaky", 1).await.is_empty());
}

async fn a_running_cap_follows_every_way_out_of_running(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    b.put_limit(&queue_limit("smtp", None, Some(2)))
        .await
        .unwrap();
    enqueue(&*b, "limits/cap", jobs_in("smtp", &["send"; 8])).await;
    let running = take(&*b, "smtp", 10).await;
    assert_eq!(running.len(), 2, "two at once");
    assert!(take(&*b, "smtp", 10).await.is_empty(), "the cap is reached");

    // Completed: a slot frees.
    resolve(&*b, running[0].lease(), ok("null")).await;
    let third = take(&*b, "smtp", 10).await;
    assert_eq!(third.len(), 1);
    assert!(take(&*b, "smtp", 10).await.is_empty());

    // Released.
    assert_eq!(b.release(vec![third[0].lease()]).await.unwrap(), 1);
    let again = take(&*b, "smtp", 10).await;
    assert_eq!(again.len(), 1);
    assert!(take(&*b, "smtp", 10).await.is_empty());

    // Cancelled while running.
    assert_eq!(
        b.cancel(CancelTarget::Job(again[0].id), "no longer wanted")
            .await
            .unwrap(),
        1
    );
    let fourth = take(&*b, "smtp", 10).await;
    assert_eq!(fourth.len(), 1);

    // Failed for good.
    let fail = Resolution::Failed {
        error: "rejected".into(),
    };
    resolve(&*b, fourth[0].lease(), fail).await;
    let fifth = take(&*b, "smtp", 10).await;
    assert_eq!(fifth.len(), 1);
    let status = &b.limits().await.unwrap()[0];
    assert_eq!(status.running_now, 2, "{status:?}");

    // A worker killed with its two jobs: its slots are held until the leases expire,
    // then the jobs are recovered and the cap lets two start again.
    assert!(take(&*b, "smtp", 10).await.is_empty());
    clock.advance(LEASE + Duration::from_secs(1));
    let after_expiry = take(&*b, "smtp", 10).await;
    assert_eq!(
        after_expiry.len(),
        2,
        "the expired leases freed their slots"
    );
    assert!(take(&*b, "smtp", 10).await.is_empty());
    assert_eq!(b.limits().await.unwrap()[0].running_now, 2);
}

async fn a_kind_at_its_limit_does_not_block_other_kinds(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    b.put_limit(&kind_limit("render", None, Some(1)))
        .await
        .unwrap();
    // The limited kind's jobs come first in the queue.
    enqueue(
        &*b,
        "limits/kinds",
        jobs_in("mixed", &["render", "render", "render", "mail", "mail"]),
    )
    .await;
    let got = take(&*b, "mixed", 10).await;
    let kinds: Vec<_> = got.iter().map(|j| j.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["render", "mail", "mail"],
        "one render, and the mails behind the others"
    );
    assert!(take(&*b, "mixed", 10).await.is_empty());
    // The kind's limit holds in every queue.
    enqueue(&*b, "limits/kinds", jobs_in("other", &["render", "mail"])).await;
    let other = take(&*b, "other", 10).await;
    assert_eq!(other.len(), 1);
    assert_eq!(other[0].kind, "mail");

    resolve(&*b, got[0].lease(), ok("null")).await;
    let next = take(&*b, "mixed", 10).await;
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].kind, "render");
    assert_eq!(next[0].attempt, 1, "skipping used no attempt");
    let status = b.limits().await.unwrap();
    assert_eq!(status[0].running_now, 1, "{status:?}");

    // Many of the limited kind ahead of the others, taken a few at a time: a reserve
    // looks past all of them (its scan is paged), and takes no more than asked.
    let mut kinds = vec!["render"; 150];
    kinds.extend(["mail"; 6]);
    enqueue(&*b, "limits/kinds", jobs_in("deep", &kinds)).await;
    let mut mails = 0;
    for _ in 0..3 {
        let got = take(&*b, "deep", 2).await;
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got.iter().all(|j| j.kind == "mail"), "{got:?}");
        mails += got.len();
    }
    assert_eq!(mails, 6);
    assert!(
        take(&*b, "deep", 2).await.is_empty(),
        "the kind is still at its limit"
    );
}

async fn a_kind_start_rate_spans_queues(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    b.put_limit(&kind_limit("upload", Some((1, 5_000)), None))
        .await
        .unwrap();
    enqueue(&*b, "limits/rate", jobs_in("a", &["upload", "other"])).await;
    enqueue(&*b, "limits/rate", jobs_in("b", &["upload"])).await;
    assert_eq!(take(&*b, "a", 10).await.len(), 2);
    assert!(
        take(&*b, "b", 10).await.is_empty(),
        "the kind started in queue a"
    );
    clock.advance(Duration::from_secs(5));
    assert_eq!(take(&*b, "b", 10).await.len(), 1);
}

async fn jobs_running_when_a_limit_is_declared_count(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    enqueue(
        &*b,
        "limits/late",
        jobs_in("late", &["pdf", "pdf", "pdf", "pdf"]),
    )
    .await;
    let running = take(&*b, "late", 2).await;
    assert_eq!(running.len(), 2);
    b.put_limit(&kind_limit("pdf", None, Some(2)))
        .await
        .unwrap();
    b.put_limit(&queue_limit("late", None, Some(3)))
        .await
        .unwrap();
    let status = b.limits().await.unwrap();
    assert!(status.iter().all(|s| s.running_now == 2), "{status:?}");
    assert!(take(&*b, "late", 10).await.is_empty(), "both already full");
    resolve(&*b, running[0].lease(), ok("null")).await;
    assert_eq!(take(&*b, "late", 10).await.len(), 1);
}

/// Two handles on one store (two processes, or a reopen): a limit stored through one
/// holds for reserves through the other, starts through either count against the
/// same window, and a change through one is seen by the other at once.
pub async fn hold_across_handles(first: Arc<dyn Backend>, second: Arc<dyn Backend>) {
    first
        .put_limit(&queue_limit("shared", Some((2, 60_000)), Some(10)))
        .await
        .unwrap();
    enqueue(&*first, "limits/shared", jobs_in("shared", &["x"; 6])).await;
    assert_eq!(
        second.limits().await.unwrap().len(),
        1,
        "stored, not cached"
    );
    assert_eq!(take(&*second, "shared", 1).await.len(), 1);
    assert_eq!(take(&*first, "shared", 10).await.len(), 1);
    assert!(take(&*second, "shared", 10).await.is_empty());
    assert!(take(&*first, "shared", 10).await.is_empty());
    // Raised through one handle: the other serves more at once.
    first
        .put_limit(&queue_limit("shared", Some((3, 60_000)), None))
        .await
        .unwrap();
    assert_eq!(take(&*second, "shared", 10).await.len(), 1);
    second
        .delete_limit(&LimitScope::Queue("shared".into()))
        .await
        .unwrap();
    assert_eq!(take(&*first, "shared", 10).await.len(), 3);
}

/// `same` opens the same store each time: a limit and its window outlive the handle
/// that stored them.
pub async fn survive_a_reopen(same: &dyn MakeBackend) {
    let (first, clock) = manual(same).await;
    let limit = queue_limit("kept", Some((1, 60_000)), Some(5));
    first.put_limit(&limit).await.unwrap();
    enqueue(&*first, "limits/kept", jobs_in("kept", &["x"; 2])).await;
    assert_eq!(take(&*first, "kept", 10).await.len(), 1);
    drop(first);
    let again = same.make(Arc::new(clock.clone())).await;
    let status = again.limits().await.unwrap();
    assert_eq!(status.len(), 1);
    assert_eq!(status[0].limit, limit);
    assert_eq!(status[0].starts_in_window, 1, "the window is kept too");
    assert!(take(&*again, "kept", 10).await.is_empty());
    clock.advance(Duration::from_secs(60));
    assert_eq!(take(&*again, "kept", 10).await.len(), 1);
}
