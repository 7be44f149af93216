//! A day of payment files on real parts (embedded engine, SQLite ledger, local store,
//! outboxes): every eligible entry in exactly one submitted file, every file valid by
//! our validator, an independent recount and moov-io's achcli, and the ledger, the
//! manifests and the delivered bytes agreeing.

use crate::support;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tranche_ach::validate;
use tranche_ach_delivery::sha256_hex;
use tranche_ach_ledger::{FileState, State};
use tranche_ach_pipeline::naming::file_key;
use tranche_ach_pipeline::Manifest;
use tranche_test_support::nacha::assert_file_checks_out;

use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_goes_out_in_valid_files_each_entry_once() {
    let h = Harness::embedded(400, HashMap::new()).await;
    let all = entries("E", 3_000);
    let mut broken = entry("BAD-1", "first", false, 1);
    broken.amount_cents = 0;
    let mut day_entries = all.clone();
    day_entries.push(broken);
    h.ledger.import(day_entries).await.unwrap();
    h.ledger
        .cancel("E000010", "the customer asked")
        .await
        .unwrap();

    // 07:00: sd1 is packaging (from 06:30), not yet submitting (08:30).
    let tick = h.tick(at(7, 0)).await;
    let scopes: Vec<String> = tick.scopes.iter().map(|s| s.run.clone()).collect();
    assert_eq!(scopes, vec!["ach/first/sd1/2026-03-03"]);
    let packaged = h.files(Some(FileState::Packaged)).await;
    let same_day: Vec<&tranche_ach::Entry> = all
        .iter()
        .filter(|e| e.same_day && e.entry_id != "E000010")
        .collect();
    assert_eq!(
        packaged.iter().map(|f| f.entries).sum::<u64>(),
        same_day.len() as u64,
        "every same-day entry but the cancelled one is packaged"
    );
    assert!(packaged
        .iter()
        .all(|f| f.entries <= 400 && f.file.window == "sd1"));
    assert!(
        h.files(Some(FileState::Submitted)).await.is_empty(),
        "nothing is submitted before 08:30"
    );
    assert!(outbox_files(&h.outbox("first")).is_empty());

    // 08:30: sd1 submits; 17:30: nd packages and submits for both banks.
    h.tick(at(8, 30)).await;
    h.tick(at(17, 30)).await;

    let submitted = h.submitted_entries().await;
    let want: BTreeSet<String> = all
        .iter()
        .filter(|e| e.entry_id != "E000010")
        .map(|e| e.entry_id.clone())
        .collect();
    let got: BTreeSet<String> = submitted.keys().cloned().collect();
    assert_eq!(
        got, want,
        "every valid uncancelled entry is in exactly one submitted file"
    );
    assert_eq!(h.state("E000010").await, State::Cancelled);
    assert_eq!(h.state("BAD-1").await, State::Rejected);
    assert!(h.files(Some(FileState::Packaged)).await.is_empty());

    // What reached each bank is what the ledger recorded, byte for byte, and holds
    // exactly the ledger's entries of that file.
    let mut delivered = 0;
    for bank in ["first", "second"] {
        for (name, bytes) in outbox_files(&h.outbox(bank)) {
            delivered += 1;
            let file_id = name.trim_end_matches(".ach");
            let detail = h.ledger.file(file_id).await.unwrap().unwrap();
            assert_eq!(detail.record.state, FileState::Submitted);
            assert_eq!(sha256_hex(&bytes), detail.record.file.hash, "{name}");
            let report = validate(&bytes);
            assert!(report.is_valid(), "{name}: {:?}", report.findings);
            assert_file_checks_out(&name, &bytes);
            let ids: BTreeSet<String> = detail_records(&bytes)
                .into_iter()
                .map(|(id, _, _)| id)
                .collect();
            let ledger_ids: BTreeSet<String> = detail.entry_ids.iter().cloned().collect();
            assert_eq!(
                ids, ledger_ids,
                "{name}: its records are the ledger's entries"
            );
            let credits: u64 = report.credit_cents;
            assert_eq!(credits, detail.record.credit_cents, "{name}");
            assert_eq!(report.debit_cents, detail.record.debit_cents, "{name}");
        }
    }
    assert_eq!(delivered, h.files(Some(FileState::Submitted)).await.len());

    // Trace numbers are unique across each bank's day.
    for bank in ["first", "second"] {
        let mut traces = BTreeSet::new();
        for (_, bytes) in outbox_files(&h.outbox(bank)) {
            for (_, _, trace) in detail_records(&bytes) {
                assert!(
                    traces.insert(trace.clone()),
                    "trace {trace} twice in {bank}'s day"
                );
            }
        }
    }

    // Every manifest agrees with the ledger, and together they list every file.
    let manifests = manifests(&h).await;
    let mut listed = BTreeMap::new();
    for m in &manifests {
        for f in &m.files {
            let detail = h.ledger.file(&f.file_id).await.unwrap().unwrap();
            assert_eq!(
                (
                    f.entries,
                    f.credit_cents,
                    f.debit_cents,
                    f.hash.as_str(),
                    m.window.as_str()
                ),
                (
                    detail.record.entries,
                    detail.record.credit_cents,
                    detail.record.debit_cents,
                    detail.record.file.hash.as_str(),
                    detail.record.file.window.as_str()
                ),
                "manifest of pass {} disagrees with the ledger on {}",
                m.pass,
                f.file_id
            );
            let key = file_key(detail.record.file.submission_date, &f.file_id, &f.hash).unwrap();
            assert_eq!(key.to_string(), f.key);
            listed.insert(f.file_id.clone(), m.pass);
        }
    }
    assert_eq!(listed.len(), delivered, "every file is in one manifest");
    h.stop().await;
}

/// Every manifest in the local store's directory.
async fn manifests(h: &Harness) -> Vec<Manifest> {
    let mut out = Vec::new();
    let root = h.dir.path().join("store");
    for d in std::fs::read_dir(&root).unwrap().flatten() {
        if !d.file_name().to_string_lossy().ends_with("-ach-manifest") {
            continue;
        }
        for date in std::fs::read_dir(d.path()).unwrap().flatten() {
            for m in std::fs::read_dir(date.path()).unwrap().flatten() {
                let bytes = std::fs::read(m.path()).unwrap();
                out.push(serde_json::from_slice(&bytes).unwrap());
            }
        }
    }
    out
}

/// A bank reached over SFTP (a real OpenSSH server on loopback, as the rules configure
/// it): its files arrive whole in its drop box, each once, as the ledger recorded them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bank_on_sftp_receives_its_files() {
    let Some(sshd) = tranche_test_support::Sshd::start() else {
        return;
    };
    let drop_box = sshd.remote_dir();
    let sftp = format!(
        "[bank.delivery]\nkind = \"sftp\"\nhost = \"127.0.0.1\"\nport = {}\nuser = \"{}\"\nkey_file = \"{}\"\nknown_hosts = \"{}\"\nremote_dir = \"{}\"\n",
        sshd.port(),
        sshd.user(),
        sshd.client_key().display(),
        sshd.known_hosts().display(),
        drop_box.display()
    );
    let rules = rules_text(300).replacen(
        "[bank.delivery]\nkind = \"outbox\"\ndir = \"outbox/first\"\n",
        &sftp,
        1,
    );
    assert!(rules.contains("kind = \"sftp\""));
    let h = Harness::with_rules(rules, HashMap::new()).await;
    let day: Vec<_> = (0..1_000)
        .map(|i| entry(&format!("F{i:05}"), "first", false, i))
        .collect();
    h.ledger.import(day).await.unwrap();
    h.tick(at(17, 30)).await;

    let submitted = h.files(Some(FileState::Submitted)).await;
    let first: Vec<_> = submitted
        .iter()
        .filter(|f| f.file.bank == "first")
        .collect();
    assert_eq!(first.iter().map(|f| f.entries).sum::<u64>(), 1_000);
    let arrived = outbox_files(&drop_box);
    assert_eq!(
        arrived.len(),
        first.len(),
        "each file arrived once: {:?}",
        arrived.keys()
    );
    for f in first {
        let bytes = &arrived[&f.file.name];
        assert_eq!(sha256_hex(bytes), f.file.hash, "{}", f.file.name);
        assert!(validate(bytes).is_valid());
        let destination = f
            .submission
            .as_ref()
            .map(|s| s.destination.clone())
            .unwrap_or_default();
        assert!(destination.starts_with("sftp://"), "{destination}");
    }
    h.stop().await;
}
