//! `tranche notes run` end to end, as a broker runs it: a generated day with a bad row,
//! a real SMTP server (aiosmtpd) that refuses one recipient, real verifiers (pdfsig,
//! qpdf) on what was mailed; then a retry that re-runs only the failed clients, and a
//! night killed with SIGKILL half way that resumes without mailing anyone twice.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

#[test]
fn a_night_by_smtp_with_a_bad_row_and_a_refused_recipient_then_retry() {
    if !have("python3", &["-c", "import aiosmtpd"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    let out = tmp.path().join("out");
    let data = tmp.path().join("state");
    generate(&input, 24);
    let traders = traders(&input);
    let clients = clients(&input);
    assert!(traders.len() >= 20, "{traders:?}");

    // One client's trade gets a bad quantity: that client's note fails with file, line
    // and field; another client's mailbox refuses mail (550).
    let bad_client = traders[3].clone();
    let refused_client = traders[5].clone();
    let trades_csv = std::fs::read_to_string(input.join("trades.csv")).unwrap();
    let mut lines: Vec<String> = trades_csv.lines().map(str::to_string).collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    let qty = header.iter().position(|h| *h == "quantity").unwrap();
    let code_col = header.iter().position(|h| *h == "client_code").unwrap();
    let bad_line = lines
        .iter()
        .position(|l| l.split(',').nth(code_col) == Some(bad_client.as_str()))
        .unwrap();
    let mut fields: Vec<String> = lines[bad_line].split(',').map(str::to_string).collect();
    fields[qty] = "12x".to_string();
    lines[bad_line] = fields.join(",");
    std::fs::write(input.join("trades.csv"), lines.join("\n") + "\n").unwrap();

    let sink_dir = tmp.path().join("sink");
    let sink = Sink::start(&sink_dir);
    let refused_email = clients[&refused_client].1.clone();
    sink.reject(&[&refused_email]);

    let started = Instant::now();
    let first = tranche()
        .arg("--data")
        .arg(&data)
        .args(run_args(&input, &out))
        .args(["--smtp", &sink.url()])
        .output()
        .unwrap();
    eprintln!("first run: {:.1} s", started.elapsed().as_secs_f64());
    assert_eq!(first.status.code(), Some(2), "{}", text(&first));

    // Nothing personal in what the operator sees.
    let shown = text(&first);
    for (pan, email) in clients.values() {
        assert!(
            !shown.contains(pan.as_str()),
            "a PAN in the output:\n{shown}"
        );
        assert!(
            !shown.contains(email.as_str()),
            "an address in the output:\n{shown}"
        );
    }

    let rows = report(&out);
    assert_eq!(rows.len(), traders.len(), "{rows:?}");
    let bad = &rows[&bad_client];
    assert_eq!(bad[0], "failed");
    let expected = format!("trades.csv:{}: field quantity", bad_line + 1);
    assert!(bad[5].contains(&expected), "{bad:?} lacks {expected}");
    let refused = &rows[&refused_client];
    assert_eq!(refused[0], "failed");
    assert!(refused[5].starts_with("mail: "), "{refused:?}");
    assert!(
        refused[5].contains("550"),
        "the server's reply: {refused:?}"
    );
    assert!(!refused[5].contains(&refused_email), "{refused:?}");
    // It got as far as signing: pages and bytes are known.
    assert!(refused[1].parse::<usize>().unwrap() >= 1);

    let messages = sink.messages();
    let mailed: Vec<&String> = traders
        .iter()
        .filter(|c| **c != bad_client && **c != refused_client)
        .collect();
    assert_eq!(messages.len(), mailed.len());
    for code in &mailed {
        let row = &rows[*code];
        assert_eq!(row[0], "mailed", "{code}: {row:?}");
        let (pan, email) = &clients[*code];
        let got: Vec<_> = messages.iter().filter(|m| &m.0 == email).collect();
        assert_eq!(got.len(), 1, "{code} got {} messages", got.len());
        let (_, id, subject, pdf) = got[0];
        assert_eq!(id, &row[4], "message id in the report");
        assert!(subject.starts_with("Contract note "), "{subject}");
        assert!(subject.contains(DATE), "{subject}");
        assert_eq!(
            pdf,
            &stored_pdf(&out.join("store"), code),
            "{code}: attachment = stored PDF"
        );
        assert_eq!(row[3], pdf.len().to_string());
        assert!(row[2].parse::<rust_decimal::Decimal>().is_ok(), "{row:?}");
        // The unencrypted render does not outlive its signed copy (it shows the PAN).
        assert!(pdf.starts_with(b"%PDF-"));
        let _ = pan;
    }

    // What was mailed passes the real verifiers, opened with the client's PAN.
    let code = mailed[0];
    let (pan, _) = &clients[code];
    let signed = tmp.path().join("signed.pdf");
    std::fs::write(&signed, stored_pdf(&out.join("store"), code)).unwrap();
    if have("qpdf", &["--version"]) {
        let o = Command::new("qpdf")
            .arg("--check")
            .arg(format!("--password={}", pan.to_uppercase()))
            .arg(&signed)
            .output()
            .unwrap();
        assert!(o.status.success(), "qpdf: {}", text(&o));
        let o = Command::new("qpdf")
            .args(["--check", "--password=WRONGPASS1"])
            .arg(&signed)
            .output()
            .unwrap();
        assert!(!o.status.success(), "opens with a wrong password");
    }
    if have("pdfsig", &["-v"]) {
        let o = Command::new("pdfsig")
            .args(["-upw", &pan.to_uppercase()])
            .arg(&signed)
            .output()
            .unwrap();
        let t = text(&o);
        assert!(t.contains("Signature is Valid"), "{t}");
        assert!(t.contains("Total document signed"), "{t}");
    }
    let leftover: Vec<_> = walk(&out.join("store"))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("-tmp-pdf"))
        .filter(|p| p.is_file())
        .collect();
    assert!(leftover.is_empty(), "unencrypted PDFs left: {leftover:?}");

    // The operator sees the failures, re-runs only them: the refused client's mailbox
    // now accepts; the bad row still fails (the input was not fixed).
    let status = tranche()
        .arg("--data")
        .arg(&data)
        .args(["status", RUN])
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(2), "{}", text(&status));
    assert!(
        text(&status).contains("field quantity"),
        "{}",
        text(&status)
    );
    sink.reject(&[]);
    let retry = tranche()
        .arg("--data")
        .arg(&data)
        .args(["retry", RUN])
        .output()
        .unwrap();
    assert!(retry.status.success(), "{}", text(&retry));
    // The refused client's mail step, and the bad client's four steps.
    assert!(
        text(&retry).contains("re-enqueued 5 job(s)"),
        "{}",
        text(&retry)
    );
    let second = tranche()
        .arg("--data")
        .arg(&data)
        .args(run_args(&input, &out))
        .args(["--smtp", &sink.url()])
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(2), "{}", text(&second));
    let rows = report(&out);
    assert_eq!(rows[&refused_client][0], "mailed");
    assert_eq!(rows[&bad_client][0], "failed");
    let messages = sink.messages();
    assert_eq!(
        messages.len(),
        mailed.len() + 1,
        "only the refused client again"
    );
    assert_eq!(messages.iter().filter(|m| m.0 == refused_email).count(), 1);
}

#[test]
fn a_night_killed_half_way_resumes_and_mails_everyone_once() {
    if !have("python3", &["-c", "import aiosmtpd"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    let out = tmp.path().join("out");
    let data = tmp.path().join("state");
    generate(&input, 60);
    let traders = traders(&input);
    let clients = clients(&input);
    let sink = Sink::start(&tmp.path().join("sink"));

    let mut child = tranche()
        .arg("--data")
        .arg(&data)
        .args(run_args(&input, &out))
        .args(["--smtp", &sink.url(), "--smtp-connections", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    tranche_test_support::eventually(
        "a third of the notes mailed before the kill",
        Duration::from_secs(300),
        || {
            assert!(
                child.try_wait().unwrap().is_none(),
                "finished before the kill"
            );
            sink.count() >= traders.len() / 3
        },
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = sink.count();
    assert!(before < traders.len(), "killed too late to test anything");

    let resumed = tranche()
        .arg("--data")
        .arg(&data)
        .args(run_args(&input, &out))
        .args(["--smtp", &sink.url()])
        .output()
        .unwrap();
    assert!(resumed.status.success(), "{}", text(&resumed));
    // Not a silent "ETA 0 s": it says it waits for the killed worker's leases, and how
    // long that takes at most.
    let said = text(&resumed);
    assert!(
        said.contains("still leased by a worker that stopped"),
        "{said}"
    );
    assert!(said.contains("leases lapse within "), "{said}");
    let rows = report(&out);
    assert!(rows.values().all(|r| r[0] == "mailed"), "{rows:?}");

    let messages = sink.messages();
    let mut per_recipient: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for m in &messages {
        per_recipient.entry(&m.0).or_default().insert(&m.1);
    }
    for code in &traders {
        let email = &clients[code].1;
        let ids = per_recipient
            .get(email.as_str())
            .cloned()
            .unwrap_or_default();
        // One message per client: a copy sent in the instant of the kill, before it was
        // recorded, carries the same Message-ID.
        assert_eq!(ids.len(), 1, "{code}: {ids:?}");
    }
    let duplicates = messages.len() - traders.len();
    // Only mails in flight at the kill (at most the 2 connections) can repeat.
    assert!(duplicates <= 2, "{duplicates} duplicate deliveries");
}
