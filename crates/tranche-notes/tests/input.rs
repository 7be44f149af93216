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

#[test]
fn a_stray_quote_fails_only_its_row_and_every_later_row_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let header = TRADE_COLUMNS.join(",");
    let text = [
        header.as_str(),
        "T1,O1,09:15:00,09:15:01,C1,NSE,EQ,INFY,INE009A01021,EQ,CNC,B,10,1500.50",
        "T2,O2,09:16:00,09:16:01,C2,NSE,EQ,\"RELIANCE,INE002A01018,EQ,CNC,B,5,2400",
        "T3,O3,09:16:00,09:16:01,C3,NSE,EQ,INFY,INE009A01021,EQ,CNC,S,10,1500",
        "T4,O4,09:17:00,09:17:01,C4,NSE,EQ,\"TATA STEEL\",INE081A01020,EQ,CNC,B,1,150",
        "T5,O5,09:17:00,09:17:01,C5,NSE,EQ,TCS,INE467B01029,EQ,CNC,B,1,4000",
    ]
    .join("\n");
    let trades = read_trades(&write(dir.path(), "trades.csv", &text)).unwrap();
    let codes: Vec<&String> = trades.by_client.keys().collect();
    assert_eq!(codes, ["C1", "C3", "C4", "C5"]);
    assert_eq!(trades.by_client["C4"][0].instrument, "TATA STEEL");
    assert_eq!(trades.errors.len(), 1, "{:?}", trades.errors);
    let e = &trades.errors[0];
    assert_eq!((e.line, e.field.as_str()), (3, "instrument"));
    assert!(e.message.contains("closing double quote"), "{e}");
    assert_eq!(e.client.as_deref(), Some("C2"));
    assert_eq!(trades.rows_read, 5);
}

#[test]
fn a_row_with_more_or_fewer_fields_than_the_header_is_refused_with_the_counts() {
    let dir = tempfile::tempdir().unwrap();
    let text = "client_code,name,pan,email,address,state\n\
                C1,Asha Rao,ABCDE1234F,asha@example.in,1 MG Road, Pune,Maharashtra\n\
                C2,Ravi Iyer,ABCDE1234G,ravi@example.in,Chennai\n\
                C3,Sita Nair,ABCDE1234H,sita@example.in,\"Kochi, Ernakulam\",Kerala\n";
    let path = write(dir.path(), "clients.csv", text);
    let clients = read_clients(&path).unwrap();
    assert_eq!(clients.by_code.keys().collect::<Vec<_>>(), ["C3"]);
    let shown: Vec<String> = clients.errors.iter().map(|e| e.to_string()).collect();
    let file = path.display();
    assert_eq!(
        shown,
        [
            format!("{file}:2: expected 6 fields as in the header, got 7 (a comma in a value must be inside double quotes)"),
            format!("{file}:3: expected 6 fields as in the header, got 5 (a comma in a value must be inside double quotes)"),
        ]
    );
    let who: Vec<Option<&str>> = clients.errors.iter().map(|e| e.client.as_deref()).collect();
    assert_eq!(who, [Some("C1"), Some("C2")]);
    assert_eq!(clients.rows_read, 3);
}

#[test]
fn a_byte_that_is_not_utf8_fails_its_row_and_names_the_column_without_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = b"client_code,name,pan,email,address,state\n".to_vec();
    text.extend_from_slice(b"C1,Ren\xE9e Das,ABCDE1234F,renee@example.in,Pune,Maharashtra\n");
    text.extend_from_slice(b"C2,Ravi Iyer,ABCDE1234G,ravi@example.in,Chennai,Tamil Nadu\n");
    let p = dir.path().join("clients.csv");
    std::fs::write(&p, text).unwrap();
    let clients = read_clients(&p).unwrap();
    assert_eq!(clients.by_code.keys().collect::<Vec<_>>(), ["C2"]);
    let e = &clients.errors[0];
    assert_eq!(
        (e.line, e.field.as_str(), e.client.as_deref()),
        (2, "name", Some("C1"))
    );
    assert!(e.message.starts_with("expected UTF-8 text"), "{e}");
    assert!(!e.message.contains("Ren"), "{e}");
}

#[test]
fn quantities_and_values_beyond_any_real_trade_are_row_errors() {
    let dir = tempfile::tempdir().unwrap();
    let header = TRADE_COLUMNS.join(",");
    let text = [
        header.as_str(),
        "T1,O1,09:15:00,09:15:01,C1,NSE,EQ,INFY,INE009A01021,EQ,CNC,B,18446744073709551615,1",
        "T2,O2,09:15:00,09:15:01,C2,NSE,EQ,INFY,INE009A01021,EQ,CNC,B,1000000000000,99999999999999",
        "T3,O3,09:15:00,09:15:01,C3,NSE,EQ,INFY,INE009A01021,EQ,CNC,B,10,1500",
    ]
    .join("\n");
    let trades = read_trades(&write(dir.path(), "trades.csv", &text)).unwrap();
    assert_eq!(trades.count(), 1);
    let fields: Vec<(u64, &str)> = trades
        .errors
        .iter()
        .map(|e| (e.line, e.field.as_str()))
        .collect();
    assert_eq!(fields, [(2, "quantity"), (3, "price")]);
}

#[test]
fn a_bom_and_blank_lines_are_not_rows() {
    let dir = tempfile::tempdir().unwrap();
    let text = "\u{feff}client_code,name,pan,email,address,state\n\n\
                C1,Asha Rao,ABCDE1234F,asha@example.in,Pune,Maharashtra\r\n   \n";
    let clients = read_clients(&write(dir.path(), "clients.csv", text)).unwrap();
    assert!(clients.errors.is_empty(), "{:?}", clients.errors);
    assert_eq!((clients.by_code.len(), clients.rows_read), (1, 1));
    assert_eq!(clients.by_code["C1"].line, 3);
}
