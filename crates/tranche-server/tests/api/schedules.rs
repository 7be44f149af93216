//! Schedules over HTTP: declared with PUT as a schedule file's table would be, listed
//! with their next due time as `tranche schedules` lists them (the same stored
//! schedules: the CLI's path sees what HTTP declared), removed with DELETE; bad
//! fields answered 400 naming the field, what was expected and what was sent; and
//! steering routes (a worker token may not use them).

use std::sync::Arc;

use serde_json::{json, Value};
use tranche_server::{ServerConfig, Tokens};
use tranche_types::{ManualClock, Timestamp};

use crate::live::{expect, start, start_on, start_with, Live};

/// Monday 4 May 2026, 00:00 UTC.
const MONDAY: i64 = 1_777_852_800_000_000;
/// The same day, 18:00 in Asia/Kolkata (12:30 UTC).
const MONDAY_1800_IST: i64 = 1_777_897_800_000_000;
/// 1 June 2026, 09:00 at +05:30.
const JUNE_FIRST_0900_IST: i64 = 1_780_284_600_000_000;

async fn put(s: &Live, name: &str, body: Value, status: u16) -> Value {
    expect(s.put(&format!("/v1/schedules/{name}"), &body).await, status).await
}

fn eod() -> Value {
    json!({
        "cron": "0 18 * * MON-FRI", "zone": "Asia/Kolkata",
        "kind": "report", "queue": "reports", "args": {"desk": "equity"}, "max_attempts": 3,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_are_declared_listed_with_their_next_due_time_and_deleted() {
    let clock = ManualClock::new(Timestamp(MONDAY));
    let s = start_on(ServerConfig::default(), Arc::new(clock)).await;
    assert_eq!(s.get_ok("/v1/schedules").await, json!({"schedules": []}));

    let out = put(&s, "eod-report", eod(), 200).await;
    assert_eq!(out, json!({"name": "eod-report", "fresh": true}));
    let once = json!({
        "name": "once", "at": "2026-06-01T09:00:00+05:30", "skip_missed": true, "kind": "ping",
    });
    assert_eq!(put(&s, "once", once, 200).await["fresh"], true);

    let listed = s.get_ok("/v1/schedules").await;
    assert_eq!(
        listed,
        json!({"schedules": [
            {
                "name": "eod-report",
                "schedule": {
                    "cron": "0 18 * * MON-FRI", "zone": "Asia/Kolkata", "skip_missed": false,
                    "kind": "report", "queue": "reports", "args": {"desk": "equity"},
                    "max_attempts": 3, "priority": 0, "run": "schedule:eod-report",
                },
                "next_due": MONDAY_1800_IST,
                "last_fired": null,
            },
            {
                "name": "once",
                "schedule": {
                    "at": JUNE_FIRST_0900_IST, "zone": "UTC", "skip_missed": true,
                    "kind": "ping", "queue": "default", "args": {},
                    "max_attempts": 10, "priority": 0, "run": "schedule:once",
                },
                "next_due": JUNE_FIRST_0900_IST,
                "last_fired": null,
            },
        ]})
    );
    // What HTTP declared is what the CLI's path reads.
    let cli: Vec<_> = tranche_schedule::list(&s.backend)
        .await
        .unwrap()
        .into_iter()
        .map(|l| (l.name, l.next_due.map(|t| t.micros())))
        .collect();
    assert_eq!(
        cli,
        [
            ("eod-report".to_string(), Some(MONDAY_1800_IST)),
            ("once".to_string(), Some(JUNE_FIRST_0900_IST)),
        ]
    );

    // The same timing with another job keeps what was fired; a new timing starts afresh.
    let mut changed_job = eod();
    changed_job["kind"] = json!("summary");
    assert_eq!(
        put(&s, "eod-report", changed_job, 200).await["fresh"],
        false
    );
    let mut changed_timing = eod();
    changed_timing["cron"] = json!("30 18 * * MON-FRI");
    assert_eq!(
        put(&s, "eod-report", changed_timing, 200).await["fresh"],
        true
    );
    let listed = s.get_ok("/v1/schedules").await;
    let eod = &listed["schedules"][0];
    assert_eq!(
        (eod["schedule"]["kind"].clone(), eod["next_due"].clone()),
        (
            json!("report"),
            json!(MONDAY_1800_IST + 30 * 60 * 1_000_000)
        )
    );

    let out = expect(s.delete("/v1/schedules/once").await, 200).await;
    assert_eq!(out, json!({"name": "once", "deleted": true}));
    let again = expect(s.delete("/v1/schedules/once").await, 404).await;
    assert_eq!(again["error"]["code"], "not_found");
    let names: Vec<Value> = s.get_ok("/v1/schedules").await["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].clone())
        .collect();
    assert_eq!(names, [json!("eod-report")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_declaration_is_answered_400_naming_the_field_expected_and_got() {
    let s = start().await;
    let with = |field: &str, value: Value| {
        let mut body = eod();
        body[field] = value;
        body
    };
    let mut neither = eod();
    neither.as_object_mut().unwrap().remove("cron");
    let cases = [
        (
            with("cron", json!("every day")),
            "cron",
            "a cron pattern",
            "\"every day\"",
        ),
        (
            with("zone", json!("Mars/Olympus")),
            "zone",
            "an IANA time zone",
            "\"Mars/Olympus\"",
        ),
        (
            with("at", json!("2026-06-01T09:00:00")),
            "cron",
            "exactly one of cron or at",
            "both",
        ),
        (neither, "cron", "exactly one of cron or at", "neither"),
        (
            with("max_attempts", json!(0)),
            "max_attempts",
            "an integer from 1",
            "0",
        ),
        (
            with("priority", json!(40000)),
            "priority",
            "an integer from -32768 to 32767",
            "40000",
        ),
        (
            with("queue", json!("")),
            "queue",
            "a queue name of 1 to 128 bytes",
            "\"\"",
        ),
        (
            with("name", json!("other")),
            "name",
            "the path's name \"eod-report\"",
            "\"other\"",
        ),
    ];
    for (body, field, expected, got) in cases {
        let err = put(&s, "eod-report", body.clone(), 400).await["error"].clone();
        let message = err["message"].as_str().unwrap();
        assert_eq!(
            (err["code"].as_str(), err["field"].as_str()),
            (Some("invalid_request"), Some(field)),
            "{body}: {err}"
        );
        assert!(
            message.starts_with(&format!("{field}: expected {expected}"))
                && message.contains(&format!("got {got}")),
            "{body}: {message}"
        );
    }
    let mut at = eod();
    at.as_object_mut().unwrap().remove("cron");
    at["at"] = json!("next tuesday");
    let err = put(&s, "eod-report", at, 400).await["error"].clone();
    assert_eq!(err["field"], "at", "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("got \"next tuesday\""),
        "{err}"
    );

    let err = put(&s, "bad name!", eod(), 400).await["error"].clone();
    assert_eq!(err["field"], "name", "{err}");

    // JSON of the wrong shape: the field's path, and serde's expected and got.
    let err = put(&s, "eod-report", with("kind", json!(5)), 400).await["error"].clone();
    assert_eq!(
        (err["code"].as_str(), err["field"].as_str()),
        (Some("invalid_json"), Some("kind"))
    );
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("expected a string"),
        "{err}"
    );
    let err = put(&s, "eod-report", with("crom", json!("* * * * *")), 400).await["error"].clone();
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `crom`"),
        "{err}"
    );

    assert_eq!(
        s.get_ok("/v1/schedules").await,
        json!({"schedules": []}),
        "nothing declared"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_need_a_full_token() {
    let mut s = start_with(ServerConfig {
        tokens: Tokens::parse("ops-token-1\nworker-token-2 worker\n", "tokens").unwrap(),
        ..ServerConfig::default()
    })
    .await;
    expect(s.get("/v1/schedules").await, 401).await;
    expect(s.put("/v1/schedules/eod", &eod()).await, 401).await;
    expect(s.delete("/v1/schedules/eod").await, 401).await;
    s.token = Some("worker-token-2".into());
    expect(s.get("/v1/schedules").await, 403).await;
    expect(s.put("/v1/schedules/eod", &eod()).await, 403).await;
    expect(s.delete("/v1/schedules/eod").await, 403).await;
    assert!(tranche_schedule::list(&s.backend).await.unwrap().is_empty());
    s.token = Some("ops-token-1".into());
    put(&s, "eod", eod(), 200).await;
    expect(s.delete("/v1/schedules/eod").await, 200).await;
}

/// A schedule's arguments are those of the jobs it enqueues: listed, they are masked
/// as those jobs' are (the dashboard shows this listing), and shown to a `pii` token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personal_data_in_a_schedules_args_is_masked_unless_the_token_may_see_it() {
    let mut s = start_with(ServerConfig {
        tokens: Tokens::parse("ops-1\nauditor-2 pii\n", "tokens").unwrap(),
        ..ServerConfig::default()
    })
    .await;
    s.token = Some("ops-1".into());
    let client = json!({"pan": "ABCDE1234F", "email": "r.sharma@example.com", "n": 7});
    let mut body = eod();
    body["args"] = json!({"client": client});
    put(&s, "notes", body, 200).await;

    let args = |listed: Value| listed["schedules"][0]["schedule"]["args"].clone();
    assert_eq!(
        args(s.get_ok("/v1/schedules").await),
        json!({"client": {"pan": "ABXXXXXX4F", "email": "r***@example.com", "n": 7}})
    );
    s.token = Some("auditor-2".into());
    assert_eq!(
        args(s.get_ok("/v1/schedules").await),
        json!({"client": client})
    );
}
