//! A night submitted again after its input changed: a fixed row reaches the run, a
//! mailed client's changed trades are reported and never silently resent, and a
//! corrected note goes out only when decided — with a number of its own.

use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use mail_parser::MessageParser;
use support::*;

/// Set `field` on the first trade row of `client`; returns the line number (1-based).
fn edit_trade(trades: &Path, client: &str, field: &str, value: &str) -> usize {
    let mut all = lines(trades);
    let header: Vec<String> = all[0].split(',').map(str::to_string).collect();
    let col = |n: &str| header.iter().position(|h| h == n).unwrap();
    let at = all
        .iter()
        .position(|l| l.split(',').nth(col("client_code")) == Some(client))
        .unwrap();
    let mut fields: Vec<String> = all[at].split(',').map(str::to_string).collect();
    fields[col(field)] = value.to_string();
    all[at] = fields.join(",");
    std::fs::write(trades, all.join("\n") + "\n").unwrap();
    at + 1
}

fn field_of(trades: &Path, client: &str, field: &str) -> String {
    let all = lines(trades);
    let header: Vec<&str> = all[0].split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    all.iter()
        .find(|l| l.split(',').nth(col("client_code")) == Some(client))
        .map(|l| l.split(',').nth(col(field)).unwrap().to_string())
        .unwrap()
}

/// Subject → attachment of every message in the outbox.
fn outbox(out: &Path) -> Vec<(String, Vec<u8>)> {
    walk(&out.join("outbox"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "eml"))
        .map(|p| {
            let raw = std::fs::read(p).unwrap();
            let m = MessageParser::default().parse(&raw).unwrap();
            let pdf = m.attachment(0).unwrap().contents().to_vec();
            (m.subject().unwrap().to_string(), pdf)
        })
        .collect()
}

fn night(tmp: &Path, input: &Path, out: &Path, extra: &[&str]) -> Output {
    tranche()
        .arg("--data")
        .arg(tmp.join("state"))
        .args(run_args(input, out))
        .args(["--render-processes", "0"])
        .args(extra)
        .env("TRANCHE_OWNER_PASSWORD", "rerun-owner")
        .output()
        .unwrap()
}

#[test]
fn changed_input_is_redone_before_mailing_and_corrected_only_by_decision_after() {
    let tmp = tempfile::tempdir().unwrap();
    let (input, out) = (tmp.path().join("input"), tmp.path().join("out"));
    generate(&input, 8);
    let trades_csv = input.join("trades.csv");
    let traders = traders(&input);
    let (fixed, mailed) = (traders[1].clone(), traders[4].clone());

    // First night: one client's row is bad.
    let good_quantity = field_of(&trades_csv, &fixed, "quantity");
    edit_trade(&trades_csv, &fixed, "quantity", "12x");
    let first = night(tmp.path(), &input, &out, &[]);
    assert_eq!(first.status.code(), Some(2), "{}", text(&first));
    assert_eq!(report(&out)[&fixed][0], "failed");
    assert_eq!(outbox(&out).len(), traders.len() - 1);

    // The row is fixed, and a mailed client's trade changes: the same command again.
    edit_trade(&trades_csv, &fixed, "quantity", &good_quantity);
    let price = field_of(&trades_csv, &mailed, "price");
    let new_price = format!("{}", price.parse::<f64>().unwrap() + 1.0);
    edit_trade(&trades_csv, &mailed, "price", &new_price);
    let second = night(tmp.path(), &input, &out, &[]);
    let shown = text(&second);
    assert_eq!(
        second.status.code(),
        Some(2),
        "a decision is needed: {shown}"
    );
    let rows = report(&out);
    assert_eq!(
        rows[&fixed][0], "mailed",
        "the fixed input reached the run: {rows:?}"
    );
    assert!(
        rows[&fixed][8].contains("made again from the new input"),
        "{rows:?}"
    );
    assert_eq!(rows[&mailed][0], "mailed");
    assert!(
        rows[&mailed][8].contains(
            "input changed after this note was mailed (trades: 0 added, 1 changed, 0 removed)"
        ),
        "{rows:?}"
    );
    assert!(
        shown.contains(&format!("--issue-corrections {mailed}")),
        "the way to decide is shown: {shown}"
    );
    assert_eq!(outbox(&out).len(), traders.len(), "nothing resent silently");

    // The decision: a corrected note, numbered after the night's notes.
    let third = night(tmp.path(), &input, &out, &["--issue-corrections", &mailed]);
    assert!(third.status.success(), "{}", text(&third));
    let mails = outbox(&out);
    assert_eq!(mails.len(), traders.len() + 1);
    let original = rows[&mailed][4].split('.').next().unwrap().to_string();
    let corrected: Vec<&(String, Vec<u8>)> = mails
        .iter()
        .filter(|(s, _)| s.starts_with("Corrected contract note"))
        .collect();
    assert_eq!(corrected.len(), 1, "{mails:?}");
    let subject = &corrected[0].0;
    let expected_number = format!("{:07}", traders.len() + 1);
    assert!(
        subject.contains(&expected_number) && subject.ends_with(&format!("(replaces {original})")),
        "{subject} (original {original})"
    );
    let rows = report(&out);
    assert!(rows[&mailed][8].starts_with("corrected note "), "{rows:?}");
    if have("qpdf", &["--version"]) && have("pdftotext", &["-v"]) {
        let pan = &clients(&input)[&mailed].0;
        let pdf = tmp.path().join("corrected.pdf");
        std::fs::write(&pdf, &corrected[0].1).unwrap();
        let plain = tmp.path().join("plain.pdf");
        let o = Command::new("qpdf")
            .arg(format!("--password={pan}"))
            .arg("--decrypt")
            .args([&pdf, &plain])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let o = Command::new("pdftotext")
            .args([&plain])
            .arg("-")
            .output()
            .unwrap();
        let page = String::from_utf8_lossy(&o.stdout);
        assert!(
            page.contains("CORRECTED NOTE") && page.contains(&original),
            "{page}"
        );
    }

    // Deciding again changes nothing.
    let fourth = night(tmp.path(), &input, &out, &["--issue-corrections", &mailed]);
    assert!(fourth.status.success(), "{}", text(&fourth));
    assert_eq!(outbox(&out).len(), traders.len() + 1);

    // A mailed client whose trades are all gone from the input: said, nothing sent.
    let gone = traders[6].clone();
    let col = lines(&trades_csv)[0]
        .split(',')
        .position(|h| h == "client_code")
        .unwrap();
    let kept: Vec<String> = lines(&trades_csv)
        .into_iter()
        .filter(|l| l.split(',').nth(col) != Some(gone.as_str()))
        .collect();
    std::fs::write(&trades_csv, kept.join("\n") + "\n").unwrap();
    let fifth = night(tmp.path(), &input, &out, &[]);
    let shown = text(&fifth);
    assert_eq!(fifth.status.code(), Some(2), "{shown}");
    assert!(
        shown.contains(&format!("client {gone}: note "))
            && shown.contains("no trades in the input any more"),
        "{shown}"
    );
    let rows = report(&out);
    assert_eq!(rows[&gone][0], "mailed");
    assert!(
        rows[&gone][8].contains("no longer in the input"),
        "{rows:?}"
    );
    assert_eq!(outbox(&out).len(), traders.len() + 1);

    // Once mailed, a note's personal data leaves the store; its audit record stays.
    let store = walk(&out.join("store"));
    let named = |kind: &str| {
        store
            .iter()
            .filter(|p| p.to_string_lossy().contains(kind))
            .count()
    };
    assert_eq!(named("-contract-notes-data/"), 0, "{store:?}");
    assert_eq!(named("-contract-notes-audit/"), traders.len() + 1);
    assert_eq!(named("-signed-pdf/"), traders.len() + 1);
}
