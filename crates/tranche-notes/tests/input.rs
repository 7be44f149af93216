//! The day's files as a broker would hand them over: generated, and broken on purpose.

use std::path::Path;

use tranche_notes::generate::{generate, GenerateOptions};
use tranche_notes::input::{load_broker, read_clients, read_trades, InputError, TRADE_COLUMNS};
use tranche_notes::note::build;

fn options(clients: usize, seed: u64) -> GenerateOptions {
    GenerateOptions {
        clients,
        date: "2026-11-20".parse().unwrap(),
        seed,
        heavy_trades: None,
    }
}

#[test]
fn a_generated_day_reads_back_clean_and_every_note_builds() {
    let dir = tempfile::tempdir().unwrap();
    let g = generate(dir.path(), &options(300, 7)).unwrap();
    let trades = read_trades(&dir.path().join("trades.csv")).unwrap();
    let clients = read_clients(&dir.path().join("clients.csv")).unwrap();
    let broker = load_broker(&dir.path().join("broker.toml")).unwrap();
    assert!(
        trades.errors.is_empty(),
        "{:?}",
        &trades.errors[..trades.errors.len().min(3)]
    );
    assert!(clients.errors.is_empty(), "{:?}", clients.errors);
    assert_eq!(trades.count(), g.trades);
    assert_eq!(clients.by_code.len(), 300);
    let mut categories = std::collections::BTreeSet::new();
    for (code, ts) in &trades.by_client {
        let client = &clients.by_code[code];
        let note = build(&broker, client, ts, "2026-11-20".parse().unwrap(), 1).unwrap();
        assert_eq!(note.annexure.len(), ts.len());
        assert!(!note.lines.is_empty());
        categories.extend(ts.iter().map(|t| (t.exchange, t.category())));
    }
    assert_eq!(
        categories.len(),
        8,
        "delivery, intraday, futures and options on both exchanges: {categories:?}"
    );
}

#[test]
fn generation_is_deterministic_and_heavy_traders_are_possible() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    generate(a.path(), &options(50, 42)).unwrap();
    generate(b.path(), &options(50, 42)).unwrap();
    for f in ["trades.csv", "clients.csv", "broker.toml"] {
        assert_eq!(
            std::fs::read(a.path().join(f)).unwrap(),
            std::fs::read(b.path().join(f)).unwrap(),
            "{f}"
        );
    }
    let c = tempfile::tempdir().unwrap();
    let g = generate(
        c.path(),
        &GenerateOptions {
            heavy_trades: Some(5000),
            ..options(10, 1)
        },
    )
    .unwrap();
    let trades = read_trades(&c.path().join("trades.csv")).unwrap();
    let heaviest = trades.by_client.values().map(Vec::len).max().unwrap();
    assert!(heaviest >= 5000, "{heaviest}");
    assert_eq!(g.clients, 11);
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn bad_trade_rows_name_file_line_and_field_and_fail_only_their_client() {
    let dir = tempfile::tempdir().unwrap();
    let header = TRADE_COLUMNS.join(",");
    let good = "T1,O1,09:15:00,09:15:01,C1,NSE,EQ,INFY,INE009A01021,EQ,CNC,B,10,1500.50";
    let text = [
        header.as_str(),
        good,
        "T2,O2,09:16:00,09:16:01,C2,NSE,EQ,INFY,INE009A01021,EQ,CNC,B,1O,1500",
        "T3,O3,09:16:00,09:16:01,C3,XNSE,EQ,INFY,INE009A01021,EQ,CNC,B,10,1500",
        "T4,O4,09:16:00,09:16:01,C4,NSE,EQ,INFY,,EQ,CNC,B,10,1500",
        "T1,O5,09:17:00,09:17:01,C5,NSE,FO,NIFTY 27NOV2026 FUT,,FUT,NRML,S,75,24000",
        "T6,O6,9am,09:17:01,C6,NSE,FO,NIFTY 27NOV2026 FUT,,FUT,NRML,S,75,24000",
        "T7,O7,09:18:00,09:18:01,C7,NSE,FO,NIFTY 27NOV2026 FUT,,FUT,CNC,S,75,-1",
        "T8,O8,09:18:00,09:18:01,,NSE,FO,NIFTY 27NOV2026 FUT,,FUT,NRML,S,75,24000",
    ]
    .join("\n");
    let path = write(dir.path(), "trades.csv", &text);
    let trades = read_trades(&path).unwrap();
    assert_eq!(trades.count(), 1);
    let shown: Vec<String> = trades
        .errors
        .iter()
        .map(|e| {
            e.to_string()
                .replace(&format!("{}", path.display()), "trades.csv")
        })
        .collect();
    assert_eq!(
        shown,
        [
            "trades.csv:3: field quantity: expected a positive whole number, got \"1O\"",
            "trades.csv:4: field exchange: expected one of NSE|BSE, got \"XNSE\"",
            "trades.csv:5: field isin: expected an ISIN for an equity trade, got nothing",
            "trades.csv:6: field trade_id: expected a unique trade id, got \"T1\" again (first on line 2)",
            "trades.csv:7: field order_time: expected a time HH:MM:SS, got \"9am\"",
            "trades.csv:8: field product: expected NRML or MIS for F&O, got CNC",
            "trades.csv:9: field client_code: expected a value, got nothing",
        ]
    );
    let clients: Vec<Option<&str>> = trades.errors.iter().map(|e| e.client.as_deref()).collect();
    assert_eq!(
        clients,
        [
            Some("C2"),
            Some("C3"),
            Some("C4"),
            Some("C5"),
            Some("C6"),
            Some("C7"),
            None
        ]
    );
}

#[test]
fn bad_client_rows_never_echo_personal_data() {
    let dir = tempfile::tempdir().unwrap();
    let text = "client_code,name,pan,email,address,state\n\
                C1,Asha Rao,ABCDE1234F,asha@example.in,\"1 MG Road, Pune\",Maharashtra\n\
                C2,Ravi Iyer,ABCD1234F,ravi@example.in,Chennai,Tamil Nadu\n\
                C3,Sita Nair,ABCDE1234G,sita-at-example.in,Kochi,Kerala\n\
                C1,Asha Again,ABCDE1234F,asha@example.in,Pune,Maharashtra\n";
    let clients = read_clients(&write(dir.path(), "clients.csv", text)).unwrap();
    assert_eq!(clients.by_code.len(), 1);
    assert_eq!(clients.by_code["C1"].address, "1 MG Road, Pune");
    let msgs: Vec<String> = clients
        .errors
        .iter()
        .map(|e| format!("{}:{}:{}", e.line, e.field, e.message))
        .collect();
    assert!(msgs[0].starts_with("3:pan:expected a PAN"), "{msgs:?}");
    assert!(
        msgs[1].starts_with("4:email:expected an e-mail"),
        "{msgs:?}"
    );
    assert!(
        msgs[2].starts_with("5:client_code:expected a unique client code"),
        "{msgs:?}"
    );
    let all = msgs.join(" ");
    assert!(
        !all.contains("ABCD1234F") && !all.contains("sita-at-example.in"),
        "no PAN or e-mail in errors: {all}"
    );
}

#[test]
fn unusable_files_say_where() {
    let dir = tempfile::tempdir().unwrap();
    let err = read_trades(&dir.path().join("missing.csv")).unwrap_err();
    assert!(
        matches!(err, InputError::File { .. })
            && err.to_string().contains("missing.csv: could not open"),
        "{err}"
    );
    let err = read_trades(&write(dir.path(), "t.csv", "trade_id,order_id\nT1,O1\n")).unwrap_err();
    assert!(
        err.to_string()
            .contains("t.csv:1: expected columns trade_id,order_id,order_time"),
        "{err}"
    );
    assert!(
        err.to_string().contains("missing order_time,trade_time"),
        "{err}"
    );
    let broker = "name = \"X\"\nsebi_registration = \"INZ1\"\naddress = \"A\"\ngstin = \"G\"\ngst_state = \"MH\"\nnote_prefix = \"CN\"\nmember_codes = { NSE = \"1\" }\n[compliance_officer]\nname = \"N\"\nemail = \"e@x.in\"\nphone = 12\n";
    let err = load_broker(&write(dir.path(), "broker.toml", broker)).unwrap_err();
    assert!(err.to_string().contains("broker.toml:11:"), "{err}");
}
