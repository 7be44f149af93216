//! Trace contexts (docs/traces.md): a job's W3C `traceparent` is kept as given through
//! enqueue, reserve and its record; a chain step without one continues the step's
//! before it; a traced success hands the attempt's own context to the next step; a
//! retry keeps it; a job without one costs and shows nothing.

use tranche_types::{
    BackendError, EnqueueItem, JobFilter, JobRecord, JobSpec, JobState, Resolution,
};

use crate::*;

const A: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const B: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const C: &str = "00-0af7651916cd43dd8448eb211c80319c-53995c3f42cd8ad8-01";

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    a_trace_context_round_trips(make).await;
    chain_steps_inherit_the_context_before_them(make).await;
    a_traced_success_hands_its_context_to_the_next_step(make).await;
    a_retry_keeps_the_context(make).await;
    a_malformed_context_is_refused(make).await;
}

async fn record(b: &dyn Backend, id: tranche_types::JobId) -> JobRecord {
    b.job(id).await.expect("read job").expect("job exists")
}

async fn a_trace_context_round_trips(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let ids = enqueue(
        &*b,
        "trace/round",
        vec![
            EnqueueItem::Job(job("traced", "1").queue("t").trace(A)),
            EnqueueItem::Job(job("plain", "2").queue("t")),
            EnqueueItem::Job(job("unique", "3").queue("t").unique_key("k").trace(B)),
        ],
    )
    .await;
    let jobs = take(&*b, "t", 10).await;
    let traces: Vec<_> = jobs
        .iter()
        .map(|j| (j.kind.as_str(), j.trace.as_deref()))
        .collect();
    assert_eq!(
        traces,
        [("traced", Some(A)), ("plain", None), ("unique", Some(B))],
        "reserve returns each job's context as enqueued"
    );
    assert_eq!(record(&*b, ids[0].ids[0]).await.trace.as_deref(), Some(A));
    assert_eq!(record(&*b, ids[1].ids[0]).await.trace, None);
    assert_eq!(record(&*b, ids[2].ids[0]).await.trace.as_deref(), Some(B));
    for j in &jobs {
        assert_eq!(
            resolve(&*b, j.lease(), ok("null")).await,
            CompletionAck::Applied
        );
    }
    assert_eq!(
        record(&*b, ids[0].ids[0]).await.trace.as_deref(),
        Some(A),
        "an ended job keeps its context"
    );
    // A traced job is listed by its kind like any other.
    let page = b
        .list_jobs(
            &JobFilter {
                kind: Some("traced".into()),
                ..JobFilter::default()
            },
            None,
            10,
        )
        .await
        .expect("list jobs");
    assert_eq!(page.jobs.len(), 1, "listed by kind: {page:?}");
    assert_eq!(page.jobs[0].kind, "traced");
}

async fn chain_steps_inherit_the_context_before_them(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let steps = vec![
        job("s1", "1").queue("c").trace(A),
        job("s2", "2").queue("c"),
        job("s3", "3").queue("c").trace(B),
        job("s4", "4").queue("c"),
    ];
    // Bulk (no unique key) and one at a time (a unique key on the first step).
    let mut with_key = steps.clone();
    with_key[0] = with_key[0].clone().unique_key("chain");
    let added = enqueue(
        &*b,
        "trace/chain",
        vec![EnqueueItem::Chain(steps), EnqueueItem::Chain(with_key)],
    )
    .await;
    for chain in &added {
        let mut got = Vec::new();
        for id in &chain.ids {
            got.push(record(&*b, *id).await.trace);
        }
        assert_eq!(
            got,
            [
                Some(A.into()),
                Some(A.into()),
                Some(B.into()),
                Some(B.into())
            ],
            "a step without a context continues the step's before it"
        );
    }
    // An untraced chain stays untraced; a group's jobs keep their own.
    let added = enqueue(
        &*b,
        "trace/chain",
        vec![
            EnqueueItem::Chain(vec![job("u1", "1"), job("u2", "2")]),
            EnqueueItem::Group {
                members: vec![job("m1", "1").trace(A), job("m2", "2")],
                callback: job("cb", "3").trace(B),
            },
        ],
    )
    .await;
    for id in &added[0].ids {
        assert_eq!(record(&*b, *id).await.trace, None);
    }
    let group: Vec<_> = traces_of(&*b, &added[1].ids).await;
    assert_eq!(group, [Some(A.into()), None, Some(B.into())]);

    // Step 2 is reserved with step 1's context after a plain success.
    let first = take(&*b, "c", 1).await.remove(0);
    assert_eq!(first.trace.as_deref(), Some(A));
    resolve(&*b, first.lease(), ok("\"one\"")).await;
    let mut next = take(&*b, "c", 10).await;
    next.retain(|j| j.kind == "s2");
    assert_eq!(next.len(), 1, "step 2 is available");
    assert_eq!(next[0].trace.as_deref(), Some(A));
    assert_eq!(next[0].input.as_deref(), Some("\"one\""));
}

async fn traces_of(b: &dyn Backend, ids: &[tranche_types::JobId]) -> Vec<Option<String>> {
    let mut out = Vec::new();
    for id in ids {
        out.push(record(b, *id).await.trace);
    }
    out
}

async fn a_traced_success_hands_its_context_to_the_next_step(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let added = enqueue(
        &*b,
        "trace/hand-on",
        vec![
            EnqueueItem::Chain(vec![
                job("h1", "1").queue("h").trace(A),
                job("h2", "2").queue("h2"),
                job("h3", "3").queue("h3"),
            ]),
            // An untraced chain gets the context its step hands on.
            EnqueueItem::Chain(vec![job("p1", "1").queue("p"), job("p2", "2").queue("p2")]),
            // A lone job has no one to hand it to.
            EnqueueItem::Job(job("lone", "1").queue("l").trace(A)),
        ],
    )
    .await;
    let traced_ok = |result: &str, trace: &str| Resolution::SucceededTraced {
        result: result.into(),
        trace: trace.into(),
    };
    let h1 = take(&*b, "h", 1).await.remove(0);
    assert_eq!(
        resolve(&*b, h1.lease(), traced_ok("\"r1\"", C)).await,
        CompletionAck::Applied
    );
    let h1_record = record(&*b, added[0].ids[0]).await;
    assert_eq!(h1_record.state, JobState::Succeeded);
    assert_eq!(h1_record.result.as_deref(), Some("\"r1\""));
    assert_eq!(
        h1_record.trace.as_deref(),
        Some(A),
        "its own context is kept"
    );
    let h2 = take(&*b, "h2", 1).await.remove(0);
    assert_eq!(
        h2.trace.as_deref(),
        Some(C),
        "the next step continues the attempt"
    );
    assert_eq!(h2.input.as_deref(), Some("\"r1\""));
    assert_eq!(record(&*b, added[0].ids[1]).await.trace.as_deref(), Some(C));
    assert_eq!(
        record(&*b, added[0].ids[2]).await.trace.as_deref(),
        Some(A),
        "steps further on keep theirs until their turn"
    );
    // A plain success passes nothing on: step 3 keeps what it was enqueued with.
    resolve(&*b, h2.lease(), ok("\"r2\"")).await;
    let h3 = take(&*b, "h3", 1).await.remove(0);
    assert_eq!(h3.trace.as_deref(), Some(A));

    let p1 = take(&*b, "p", 1).await.remove(0);
    assert_eq!(p1.trace, None);
    resolve(&*b, p1.lease(), traced_ok("null", B)).await;
    let p2 = take(&*b, "p2", 1).await.remove(0);
    assert_eq!(p2.trace.as_deref(), Some(B));

    let lone = take(&*b, "l", 1).await.remove(0);
    assert_eq!(
        resolve(&*b, lone.lease(), traced_ok("null", C)).await,
        CompletionAck::Applied
    );
    let lone = record(&*b, added[2].ids[0]).await;
    assert_eq!(lone.state, JobState::Succeeded);
    assert_eq!(lone.trace.as_deref(), Some(A));
    let p = progress(&*b, "trace/hand-on").await;
    assert_eq!(counts(&p), (0, 0, 2, 4, 0, 0), "{p:?}");
}

async fn a_retry_keeps_the_context(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    enqueue(
        &*b,
        "trace/retry",
        vec![EnqueueItem::Job(job("r", "1").queue("r").trace(A))],
    )
    .await;
    let first = take(&*b, "r", 1).await.remove(0);
    let again = clock.now();
    resolve(
        &*b,
        first.lease(),
        Resolution::Retry {
            error: "once more".into(),
            at: again,
        },
    )
    .await;
    let second = take(&*b, "r", 1).await.remove(0);
    assert_eq!(second.attempt, 2);
    assert_eq!(second.trace.as_deref(), Some(A));
}

async fn a_malformed_context_is_refused(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    for bad in [
        "",
        "00-has space-01",
        "\u{1e}x",
        &"0".repeat(JobSpec::MAX_TRACE_LEN + 1),
    ] {
        let e = b
            .enqueue(tranche_types::EnqueueRequest {
                run: run("trace/bad"),
                items: vec![EnqueueItem::Chain(vec![
                    job("ok", "1"),
                    job("x", "2").trace(bad),
                ])],
                on_done: None,
            })
            .await
            .expect_err("a malformed trace context is refused");
        assert!(
            matches!(e, BackendError::Invalid { field: "trace", .. }),
            "{bad:?}: {e:?}"
        );
    }
    assert!(
        b.run_progress(&run("trace/bad"))
            .await
            .unwrap()
            .is_none_or(|p| p.total == 0),
        "nothing was enqueued"
    );
}
