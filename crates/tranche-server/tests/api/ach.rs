//! `/v1/ach/entries`: import (per-entry results, field errors at `entries[i].field`,
//! idempotent), read one (account masked unless `pii`), cancel one; and a server
//! without a ledger answering `no_ledger`. What is sent is bounded on its way in: a
//! key that is no field is refused, a 50 MB field is answered and stored as an
//! excerpt, a value of the wrong type is never said back, an entry of a bank the
//! rules do not have is rejected.

use serde_json::{json, Value};
use tranche_server::{ServerConfig, Tokens};

use crate::live::{expect, start, start_with_ledger};

pub fn entry(id: &str, account: &str, cents: u64) -> Value {
    json!({
        "entry_id": id, "bank": "first", "company_name": "ACME PAYROLL",
        "company_id": "1234567890", "sec_code": "PPD", "transaction_code": "22",
        "rdfi_routing": "026009593", "account_number": account, "amount_cents": cents,
        "individual_id": "EMP1", "individual_name": "JANE DOE",
        "entry_description": "PAYROLL", "effective_date": "2026-03-03",
        "submission_date": "2026-03-02",
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_read_and_cancel_entries() {
    let s = start_with_ledger(ServerConfig::default()).await;
    let body = json!({"entries": [
        entry("E1", "4001234567", 1000),
        entry("E2", "4001234568", 0),
        entry("E3", "4001234569", 3000),
    ]});
    let out = s.post_ok("/v1/ach/entries", &body, 200).await;
    let r = out["results"].as_array().unwrap();
    assert_eq!(r.len(), 3);
    assert_eq!(
        r[0],
        json!({"entry_id": "E1", "outcome": "new", "state": "accepted"})
    );
    assert_eq!(
        r[1],
        json!({"entry_id": "E2", "outcome": "new", "state": "rejected", "errors": [
            {"field": "entries[1].amount_cents", "expected": "more than 0", "got": "0 cents"}
        ]})
    );
    assert_eq!(r[2]["state"], "accepted");

    // The same again: nothing written, each answered existing with its state.
    let again = s.post_ok("/v1/ach/entries", &body, 200).await;
    let r = again["results"].as_array().unwrap();
    assert_eq!(
        r[0],
        json!({"entry_id": "E1", "outcome": "existing", "state": "accepted"})
    );
    assert_eq!(r[1]["outcome"], "existing");
    assert_eq!(r[1]["state"], "rejected");
    assert_eq!(r[1]["errors"][0]["field"], "entries[1].amount_cents");

    // Another payload under a known id: a conflict, the stored one kept.
    let changed = json!({"entries": [entry("E1", "4001234567", 1001)]});
    let out = s.post_ok("/v1/ach/entries", &changed, 200).await;
    assert_eq!(out["results"][0]["outcome"], "conflict");

    let e1 = s.get_ok("/v1/ach/entries/E1").await;
    assert_eq!(e1["state"], "accepted");
    assert_eq!(e1["account_number"], "******4567");
    assert_eq!(e1["amount_cents"], 1000);
    let e2 = s.get_ok("/v1/ach/entries/E2").await;
    assert_eq!(e2["state"], "rejected");
    assert!(
        e2["rejection"].as_str().unwrap().contains("amount_cents"),
        "{e2}"
    );

    let c = s
        .post_ok(
            "/v1/ach/entries/E1/cancel",
            &json!({"reason": "duplicate"}),
            200,
        )
        .await;
    assert_eq!(
        c,
        json!({"entry_id": "E1", "cancelled_now": true, "known": true, "reason": "duplicate"})
    );
    let c = s
        .post_ok("/v1/ach/entries/E1/cancel", &Value::Null, 200)
        .await;
    assert_eq!(c["cancelled_now"], false);
    assert_eq!(c["reason"], "duplicate");
    let e1 = s.get_ok("/v1/ach/entries/E1").await;
    assert_eq!(e1["state"], "cancelled");
    assert_eq!(e1["cancellation"]["reason"], "duplicate");

    let missing = expect(s.get("/v1/ach/entries/nope").await, 404).await;
    assert_eq!(missing["error"]["code"], "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_is_not_entries_names_the_field_and_stores_nothing() {
    let s = start_with_ledger(ServerConfig::default()).await;
    let mut bad = entry("B2", "4001234567", 1000);
    bad["rdfi_routing"] = json!("026009594");
    let body = json!({"entries": [entry("B1", "4001234567", 1000), bad]});
    let err = expect(s.post("/v1/ach/entries", &body).await, 400).await;
    assert_eq!(err["error"]["code"], "invalid_json");
    assert_eq!(err["error"]["field"], "entries[1].rdfi_routing");
    expect(s.get("/v1/ach/entries/B1").await, 404).await;

    let too_many: Vec<Value> = (0..10_001)
        .map(|i| entry(&format!("M{i}"), "4001234567", 1))
        .collect();
    let err = expect(
        s.post("/v1/ach/entries", &json!({"entries": too_many}))
            .await,
        400,
    )
    .await;
    assert_eq!(err["error"]["field"], "entries");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn account_numbers_are_shown_only_to_a_pii_token() {
    let mut s = start_with_ledger(ServerConfig {
        tokens: Tokens::parse("ops-1\nauditor-2 pii\nfleet-3 worker\n", "tokens").unwrap(),
        ..ServerConfig::default()
    })
    .await;
    s.token = Some("ops-1".into());
    let body = json!({"entries": [entry("P1", "4001234567", 1000)]});
    s.post_ok("/v1/ach/entries", &body, 200).await;
    assert_eq!(
        s.get_ok("/v1/ach/entries/P1").await["account_number"],
        "******4567"
    );
    s.token = Some("auditor-2".into());
    assert_eq!(
        s.get_ok("/v1/ach/entries/P1").await["account_number"],
        "4001234567"
    );
    s.token = Some("fleet-3".into());
    expect(s.get("/v1/ach/entries/P1").await, 403).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_ledger_the_routes_answer_no_ledger() {
    let s = start().await;
    for resp in [
        s.post("/v1/ach/entries", &json!({"entries": [entry("X", "1", 1)]}))
            .await,
        s.get("/v1/ach/entries/X").await,
        s.post("/v1/ach/entries/X/cancel", &Value::Null).await,
    ] {
        let err = expect(resp, 404).await;
        assert_eq!(err["error"]["code"], "no_ledger", "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_is_no_field_is_refused_and_nothing_stored() {
    let s = start_with_ledger(ServerConfig::default()).await;
    let mut e = entry("K1", "4001234567", 1000);
    // Misspelt: ignored, the entry would go out as a next-day one.
    e["sameday"] = json!(true);
    let err = expect(
        s.post("/v1/ach/entries", &json!({"entries": [e]})).await,
        400,
    )
    .await;
    assert_eq!(err["error"]["code"], "invalid_json");
    assert_eq!(err["error"]["field"], "entries[0].sameday");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("unknown field `sameday`"),
        "{err}"
    );
    expect(s.get("/v1/ach/entries/K1").await, 404).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_of_the_wrong_type_is_never_said_back() {
    let s = start_with_ledger(ServerConfig::default()).await;
    let mut e = entry("T1", "4001234567", 1000);
    e["account_number"] = json!(4001234567u64);
    let err = expect(
        s.post("/v1/ach/entries", &json!({"entries": [e]})).await,
        400,
    )
    .await;
    assert_eq!(err["error"]["field"], "entries[0].account_number");
    let text = err.to_string();
    assert!(!text.contains("4001234567"), "{text}");
    assert!(
        text.contains("invalid type: integer, expected a string"),
        "{text}"
    );
}

/// A 50 MB name is answered in a line and stored as its first 64 bytes: the ledger
/// grows by kilobytes, and no answer holds the name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_field_is_answered_and_stored_as_an_excerpt() {
    let s = start_with_ledger(ServerConfig::default()).await;
    let before = s.ledger_bytes();
    let name = tranche_ach_ledger::conformance::noise(11, 50 << 20);
    let mut e = entry("H1", "4001234567", 1000);
    e["individual_name"] = json!(name);
    let out = s
        .post_ok("/v1/ach/entries", &json!({"entries": [e]}), 200)
        .await;
    assert_eq!(
        out["results"][0],
        json!({"entry_id": "H1", "outcome": "new", "state": "rejected", "errors": [{
            "field": "entries[0].individual_name",
            "expected": "at most 22 characters",
            "got": "52428800 characters",
        }]})
    );
    let stored = s.get_ok("/v1/ach/entries/H1").await;
    assert_eq!(stored["individual_name"], name[..64]);
    let reason = stored["rejection"].as_str().unwrap();
    assert!(
        reason.contains("individual_name: stored as its first 64 bytes of 52428800"),
        "{reason}"
    );
    assert!(!reason.contains(&name[..16]), "{reason}");
    let grown = s.ledger_bytes() - before;
    assert!(grown < 1 << 20, "the ledger grew by {grown} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_rules_an_entry_of_another_bank_is_rejected() {
    let rules = tranche_ach_rules::Rules::parse(
        &tranche_ach_rules::example_for(&["first", "second"]),
        std::path::Path::new("ach.toml"),
    )
    .unwrap();
    let s = start_with_ledger(ServerConfig {
        ach_rules: Some(std::sync::Arc::new(rules)),
        ..ServerConfig::default()
    })
    .await;
    let mut other = entry("U1", "4001234567", 1000);
    other["bank"] = json!("third");
    let body = json!({"entries": [entry("U0", "4001234567", 1000), other]});
    for outcome in ["new", "existing"] {
        let out = s.post_ok("/v1/ach/entries", &body, 200).await;
        assert_eq!(out["results"][0]["state"], "accepted");
        assert_eq!(
            out["results"][1],
            json!({"entry_id": "U1", "outcome": outcome, "state": "rejected", "errors": [{
                "field": "entries[1].bank",
                "expected": "a bank of the rules (first, second)",
                "got": "\"third\"",
            }]})
        );
    }
    let stored = s.get_ok("/v1/ach/entries/U1").await;
    assert_eq!(
        stored["rejection"],
        "bank: expected a bank of the rules (first, second), got \"third\""
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_of_an_id_no_entry_can_have_or_of_a_huge_reason_is_refused() {
    let s = start_with_ledger(ServerConfig::default()).await;
    let long = "L".repeat(65);
    let err = expect(
        s.post(&format!("/v1/ach/entries/{long}/cancel"), &Value::Null)
            .await,
        400,
    )
    .await;
    assert_eq!(err["error"]["field"], "id");
    let err = expect(
        s.post(
            "/v1/ach/entries/C1/cancel",
            &json!({"reason": "R".repeat(501)}),
        )
        .await,
        400,
    )
    .await;
    assert_eq!(err["error"]["field"], "reason");
    assert_eq!(
        err["error"]["message"],
        "expected at most 500 characters, got 501 characters"
    );
    // Nothing was recorded: the id imports as new.
    let out = s
        .post_ok(
            "/v1/ach/entries",
            &json!({"entries": [entry("C1", "4001234567", 1)]}),
            200,
        )
        .await;
    assert_eq!(out["results"][0]["state"], "accepted");
}
