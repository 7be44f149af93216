//! `/v1/ach/status`: a submission date's entries by state and files by window, read
//! from a real SQLite ledger set up through the `Ledger` trait (imports, a cancel, a
//! rejected entry, a file packaged and submitted, one packaged, one released), with
//! and without ACH rules; the date parameter, the default date on the server's clock,
//! a server without a ledger, and who may read it.

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, NaiveDate};
use serde_json::{json, Value};
use tranche_ach_ledger::{
    BeginOutcome, CancelOutcome, ImportOutcome, Ledger, NewFile, PackageOutcome, ReleaseOutcome,
    State, Submission, SubmitOutcome,
};
use tranche_ach_rules::Rules;
use tranche_server::{ServerConfig, Tokens};
use tranche_types::{ManualClock, Timestamp};

use tranche_test_support::ach_rules::Bank;

use crate::live::{expect, start, start_with_ledger, start_with_ledger_on, Live};

/// The day the scenario's entries are submitted on.
pub const DAY: &str = "2026-03-02";

/// Bank `first` in New York (UTC-5 on the day) with a same-day window and a night
/// window that closes the next day. Bank `second` is not in them.
fn rules_text() -> String {
    Bank::first()
        .with("time_zone = \"America/New_York\"")
        .same_day_morning()
        .window("nd-night", "next-day", "21:00", "02:15")
        .to_string()
}

pub fn rules() -> Arc<Rules> {
    Arc::new(Rules::parse(&rules_text(), Path::new("ach.toml")).expect("valid rules"))
}

/// Microseconds since the epoch of an RFC 3339 instant, as the API gives times.
fn at(instant: &str) -> i64 {
    DateTime::parse_from_rfc3339(instant)
        .expect("an instant")
        .timestamp_micros()
}

fn day() -> NaiveDate {
    DAY.parse().expect("a date")
}

/// An entry of `bank` on `date` (effective the next day, not same-day); `debit` makes
/// it a checking debit (27) instead of a credit (22).
fn entry(id: &str, bank: &str, date: &str, cents: u64, debit: bool) -> tranche_ach::Entry {
    let mut e = crate::ach::entry(id, "4001234567", cents);
    e["bank"] = json!(bank);
    e["submission_date"] = json!(date);
    let effective = date.parse::<NaiveDate>().unwrap().succ_opt().unwrap();
    e["effective_date"] = json!(effective.to_string());
    if debit {
        e["transaction_code"] = json!("27");
    }
    serde_json::from_value(e).expect("an entry")
}

fn file(id: &str, window: &str) -> NewFile {
    NewFile {
        file_id: id.into(),
        bank: "first".into(),
        submission_date: day(),
        same_day: false,
        window: window.into(),
        name: format!("{id}.ach"),
        hash: format!("hash-{id}"),
    }
}

async fn package(ledger: &dyn Ledger, f: NewFile, ids: &[&str]) {
    let ids = ids.iter().map(|s| s.to_string()).collect();
    let out = ledger.package(f, ids).await.expect("package");
    assert!(matches!(out, PackageOutcome::Packaged(_)), "{out:?}");
}

/// The day: on bank `first`, E1 and E2 (credits, 1000 and 2500) and E3 (a debit, 400)
/// in file F1 of window nd-night, submitted; E6 (300) in F2 of window `late` (in no
/// rules), packaged; E8 (10) in F3 of nd-night, cancelled, so F3 released; E4 (700)
/// cancelled; E5 (0 cents) rejected; E7 (50) accepted. On bank `second`, S1 (a debit,
/// 900) accepted. D1, the next day's, counts on no day asked here.
pub async fn set_up_the_day(s: &Live) {
    let ledger = &**s.ledger.as_ref().expect("a server with a ledger");
    let entries = vec![
        entry("E1", "first", DAY, 1000, false),
        entry("E2", "first", DAY, 2500, false),
        entry("E3", "first", DAY, 400, true),
        entry("E4", "first", DAY, 700, false),
        entry("E5", "first", DAY, 0, false),
        entry("E6", "first", DAY, 300, false),
        entry("E7", "first", DAY, 50, false),
        entry("E8", "first", DAY, 10, false),
        entry("S1", "second", DAY, 900, true),
        entry("D1", "first", "2026-03-03", 5000, false),
    ];
    let imported = ledger.import(entries).await.expect("import");
    let outcomes: Vec<_> = imported.iter().map(|i| i.outcome.clone()).collect();
    let mut expected = vec![ImportOutcome::New(State::Accepted); 10];
    expected[4] = ImportOutcome::New(State::Rejected);
    assert_eq!(outcomes, expected);

    let f1 = file("F1", "nd-night");
    package(ledger, f1.clone(), &["E1", "E2", "E3"]).await;
    let begun = ledger
        .begin_submission("F1", "sftp://first/inbound")
        .await
        .expect("begin");
    assert!(matches!(begun, BeginOutcome::Started { .. }), "{begun:?}");
    let submission = Submission {
        at: Timestamp(at("2026-03-03T02:05:00Z")),
        destination: "sftp://first/inbound".into(),
        hash: f1.hash,
    };
    let done = ledger.mark_submitted("F1", submission).await.expect("mark");
    assert_eq!(done, SubmitOutcome::Submitted);
    package(ledger, file("F2", "late"), &["E6"]).await;
    package(ledger, file("F3", "nd-night"), &["E8"]).await;

    for id in ["E4", "E8"] {
        let out = ledger.cancel(id, "duplicate").await.expect("cancel");
        assert!(matches!(out, CancelOutcome::Cancelled { .. }), "{out:?}");
    }
    let released = ledger.release_file("F3").await.expect("release");
    assert!(
        matches!(released, ReleaseOutcome::Released { .. }),
        "{released:?}"
    );
}

fn tallies(figures: [(u64, u64); 5]) -> Value {
    let states = ["accepted", "packaged", "submitted", "rejected", "cancelled"];
    Value::Array(
        states
            .iter()
            .zip(figures)
            .map(|(state, (entries, cents))| json!({"state": state, "entries": entries, "cents": cents}))
            .collect(),
    )
}

fn files(counts: [u64; 4]) -> Value {
    let states = ["packaged", "submitting", "submitted", "released"];
    Value::Array(
        states
            .iter()
            .zip(counts)
            .map(|(state, files)| json!({"state": state, "files": files}))
            .collect(),
    )
}

/// A window's figures: times (None without rules), files by state, then entries,
/// debits and credits of its files that are not released.
/// The day's file ID modifiers: held by files sent (or being sent) and by packaged
/// files; the rest free (a file released before it was sent holds none).
fn modifiers(sent: u64, waiting: u64) -> Value {
    json!({"sent": sent, "waiting": waiting, "free": 36 - sent - waiting})
}

fn window(name: &str, times: Option<(&str, &str)>, counts: [u64; 4], totals: [u64; 3]) -> Value {
    json!({
        "window": name,
        "begins": times.map(|t| at(t.0)),
        "ends": times.map(|t| at(t.1)),
        "files": files(counts),
        "entries": totals[0],
        "debit_cents": totals[1],
        "credit_cents": totals[2],
    })
}

fn first_entries() -> Value {
    tallies([(1, 50), (1, 300), (3, 3900), (1, 0), (2, 710)])
}

fn second() -> Value {
    json!({"bank": "second", "entries": tallies([(1, 900), (0, 0), (0, 0), (0, 0), (0, 0)]), "windows": [], "modifiers": modifiers(0, 0), "problems": []})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_rules_the_windows_are_the_files_and_have_no_times() {
    let s = start_with_ledger(ServerConfig::default()).await;
    set_up_the_day(&s).await;
    let got = s.get_ok(&format!("/v1/ach/status?date={DAY}")).await;
    let want = json!({"date": DAY, "banks": [
        {"bank": "first", "entries": first_entries(), "modifiers": modifiers(1, 1), "problems": [], "windows": [
            // F3 is released: counted among the files, not in the totals.
            window("nd-night", None, [0, 0, 1, 1], [3, 400, 3500]),
            window("late", None, [1, 0, 0, 0], [1, 0, 300]),
        ]},
        second(),
    ]});
    assert_eq!(got, want, "{got:#}");

    // The next day holds D1 only; a day without entries, no bank.
    let next = s.get_ok("/v1/ach/status?date=2026-03-03").await;
    let want = json!({"date": "2026-03-03", "banks": [
        {"bank": "first", "entries": tallies([(1, 5000), (0, 0), (0, 0), (0, 0), (0, 0)]), "windows": [], "modifiers": modifiers(0, 0), "problems": []},
    ]});
    assert_eq!(next, want, "{next:#}");
    let empty = s.get_ok("/v1/ach/status?date=2026-03-05").await;
    assert_eq!(empty, json!({"date": "2026-03-05", "banks": []}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_rules_the_banks_and_windows_are_the_rules_with_their_times() {
    let s = start_with_ledger(ServerConfig {
        ach_rules: Some(rules()),
        ..ServerConfig::default()
    })
    .await;
    set_up_the_day(&s).await;
    let got = s.get_ok(&format!("/v1/ach/status?date={DAY}")).await;
    // New York is UTC-5 on the day; nd-night closes the next morning. `late` is in no
    // rules: listed after them, without times.
    let want = json!({"date": DAY, "banks": [
        {"bank": "first", "entries": first_entries(), "modifiers": modifiers(1, 1), "problems": [], "windows": [
            window("sd1", Some(("2026-03-02T13:30:00Z", "2026-03-02T15:30:00Z")), [0; 4], [0; 3]),
            window(
                "nd-night",
                Some(("2026-03-03T02:00:00Z", "2026-03-03T07:15:00Z")),
                [0, 0, 1, 1],
                [3, 400, 3500],
            ),
            window("late", None, [1, 0, 0, 0], [1, 0, 300]),
        ]},
        second(),
    ]});
    assert_eq!(got, want, "{got:#}");

    // A bank of the rules is listed on a day it has nothing, with its windows' times
    // that day (after the clocks change: UTC-4).
    let later = s.get_ok("/v1/ach/status?date=2026-03-09").await;
    let want = json!({"date": "2026-03-09", "banks": [
        {"bank": "first", "entries": tallies([(0, 0); 5]), "modifiers": modifiers(0, 0), "problems": [], "windows": [
            window("sd1", Some(("2026-03-09T12:30:00Z", "2026-03-09T14:30:00Z")), [0; 4], [0; 3]),
            window("nd-night", Some(("2026-03-10T01:00:00Z", "2026-03-10T06:15:00Z")), [0; 4], [0; 3]),
        ]},
    ]});
    assert_eq!(later, want, "{later:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_date_it_is_today_in_utc_on_the_servers_clock() {
    // Late evening in New York, already the next day in UTC: the server's day is UTC's.
    let clock = ManualClock::new(Timestamp(at("2026-03-02T23:59:00Z")));
    let s = start_with_ledger_on(ServerConfig::default(), Arc::new(clock.clone())).await;
    set_up_the_day(&s).await;
    let today = s.get_ok("/v1/ach/status").await;
    assert_eq!(today, s.get_ok(&format!("/v1/ach/status?date={DAY}")).await);
    assert_eq!(today["date"], DAY);
    clock.advance(std::time::Duration::from_secs(60));
    let tomorrow = s.get_ok("/v1/ach/status").await;
    assert_eq!(tomorrow["date"], "2026-03-03", "{tomorrow}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_date_is_refused_naming_the_parameter() {
    let s = start_with_ledger(ServerConfig::default()).await;
    for (query, got) in [
        ("date=2026-02-30", "\"2026-02-30\""),
        ("date=yesterday", "\"yesterday\""),
        ("date=2026-3-2", "\"2026-3-2\""),
        ("date=02%2F03%2F2026", "\"02/03/2026\""),
        ("date=", "\"\""),
    ] {
        let err = expect(s.get(&format!("/v1/ach/status?{query}")).await, 400).await;
        assert_eq!(
            err,
            json!({"error": {"code": "invalid_request", "field": "date",
                "message": format!("expected a date as YYYY-MM-DD, got {got}")}}),
            "{query}"
        );
    }
    let err = expect(s.get("/v1/ach/status?day=2026-03-02").await, 400).await;
    assert_eq!(err["error"]["field"], "query", "{err}");
    assert!(
        err["error"]["message"].as_str().unwrap().contains("day"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_ledger_it_answers_no_ledger() {
    let s = start().await;
    for path in ["/v1/ach/status", "/v1/ach/status?date=2026-03-02"] {
        let err = expect(s.get(path).await, 404).await;
        assert_eq!(err["error"]["code"], "no_ledger", "{path}: {err}");
    }
}

/// Read access, as for `GET /v1/ach/entries/{id}`: any full token, with or without
/// `pii` (the figures hold no personal data, so both see the same); not a worker
/// token, not without a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_full_token_may_read_it() {
    let mut s = start_with_ledger(ServerConfig {
        tokens: Tokens::parse("ops-1\nauditor-2 pii\nfleet-3 worker\n", "tokens").unwrap(),
        ..ServerConfig::default()
    })
    .await;
    set_up_the_day(&s).await;
    let path = format!("/v1/ach/status?date={DAY}");
    let err = expect(s.get(&path).await, 401).await;
    assert_eq!(err["error"]["code"], "unauthorized");
    s.token = Some("wrong".into());
    expect(s.get(&path).await, 401).await;
    s.token = Some("fleet-3".into());
    let err = expect(s.get(&path).await, 403).await;
    assert_eq!(err["error"]["code"], "forbidden");
    s.token = Some("ops-1".into());
    let masked = s.get_ok(&path).await;
    assert_eq!(masked["banks"][0]["entries"], first_entries());
    s.token = Some("auditor-2".into());
    assert_eq!(s.get_ok(&path).await, masked);
}
