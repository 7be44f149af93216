//! Planning a night: every input row is accounted for, and each client fails for the
//! reasons it has, no more.

use std::path::Path;

use tranche_notes::generate::{generate, GenerateOptions};
use tranche_notes::input::{load_broker, read_clients, read_trades, TRADE_COLUMNS};
use tranche_notes::pipeline::{plan_night, Day, RowAccount};

const DATE: &str = "2026-11-20";

fn day_of(dir: &Path, trades: &str, clients: &str) -> Day {
    generate(
        dir,
        &GenerateOptions {
            clients: 1,
            date: DATE.parse().unwrap(),
            seed: 1,
            heavy_trades: None,
        },
    )
    .unwrap();
    std::fs::write(dir.join("trades.csv"), trades).unwrap();
    std::fs::write(dir.join("clients.csv"), clients).unwrap();
    Day {
        date: DATE.parse().unwrap(),
        trades_file: "trades.csv".into(),
        clients_file: "clients.csv".into(),
        broker: load_broker(&dir.join("broker.toml")).unwrap(),
        clients: read_clients(&dir.join("clients.csv")).unwrap(),
        trades: read_trades(&dir.join("trades.csv")).unwrap(),
    }
}

fn trades(rows: &[&str]) -> String {
    let mut lines = vec![TRADE_COLUMNS.join(",")];
    lines.extend(rows.iter().map(|r| r.to_string()));
    lines.join("\n")
}

const CLIENTS: &str = "client_code,name,pan,email,address,state\n\
    C1,Asha Rao,ABCDE1234F,asha@example.in,Pune,Maharashtra\n\
    C2,Ravi Iyer,ABCD1234G,ravi@example.in,Chennai,Tamil Nadu\n\
    C3,Sita Nair,ABCDE1234H,sita@example.in,Kochi,Kerala\n\
    ../../etc,Evil,ABCDE1234J,evil@example.in,Pune,Maharashtra\n";

#[test]
fn every_row_is_in_a_note_not_needed_or_rejected_and_each_client_gets_its_own_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let day = day_of(
        dir.path(),
        &trades(&[
            "T1,O1,09:15:00,09:15:01,C1,NSE,EQ,INFY,INE009A01021,EQ,CNC,B,10,1500.50",
            "T2,O2,09:15:00,09:15:01,C1,NSE,EQ,INFY,INE009A01021,EQ,CNC,S,10,1501",
            "T3,O3,09:16:00,09:16:01,C2,NSE,EQ,INFY,INE009A01021,EQ,CNC,B,5,1500",
            "T4,O4,09:16:00,09:16:01,C9,NSE,EQ,INFY,INE009A01021,EQ,CNC,B,5,1500",
            "T5,O5,09:16:00,09:16:01,../../etc,NSE,EQ,INFY,INE009A01021,EQ,CNC,B,5,1500",
            "T6,O6,09:16:00,09:16:01,,NSE,EQ,INFY,INE009A01021,EQ,CNC,B,5,1500",
        ]),
        CLIENTS,
    );
    let plan = plan_night(day).unwrap();
    let chain = |code: &str| {
        plan.chains
            .iter()
            .find(|c| c.client_code == code)
            .unwrap_or_else(|| panic!("no chain for {code}"))
    };
    assert!(chain("C1").process.problems.is_empty());
    assert_eq!(chain("C1").process.trades.len(), 2);
    // A refused PAN is the one reason: the client is not also "missing from the master".
    let c2 = &chain("C2").process.problems;
    assert_eq!(c2.len(), 1, "{c2:?}");
    assert!(c2[0].contains("field pan"), "{c2:?}");
    assert!(chain("C9").process.problems[0].contains("expected a client in the client master"));
    let evil = &chain("../../etc").process.problems;
    assert_eq!(evil.len(), 1, "{evil:?}");
    assert!(
        evil[0]
            .starts_with("trades.csv:6: field client_code: expected a code that can name a file"),
        "{evil:?}"
    );
    assert_eq!(plan.unattributed.len(), 1, "{:?}", plan.unattributed);
    assert_eq!(
        plan.accounts,
        [
            RowAccount {
                file: "trades.csv".into(),
                read: 6,
                in_notes: 5,
                not_needed: 0,
                rejected: 1,
            },
            RowAccount {
                file: "clients.csv".into(),
                read: 4,
                in_notes: 2,
                not_needed: 1,
                rejected: 1,
            },
        ]
    );
}

#[test]
fn a_day_without_trades_plans_nothing_and_adds_up() {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan_night(day_of(dir.path(), &trades(&[]), CLIENTS)).unwrap();
    assert!(plan.chains.is_empty() && plan.unattributed.is_empty());
    assert!(plan.accounts.iter().all(RowAccount::balances));
    assert_eq!(plan.accounts[1].not_needed, 3);
}

#[test]
fn rows_lost_between_reading_and_planning_stop_the_night() {
    let dir = tempfile::tempdir().unwrap();
    let mut day = day_of(
        dir.path(),
        &trades(&["T1,O1,09:15:00,09:15:01,C1,NSE,EQ,INFY,INE009A01021,EQ,CNC,B,10,1500.50"]),
        CLIENTS,
    );
    // As if a reader had counted a row it then dropped.
    day.trades.rows_read += 1;
    let err = plan_night(day).unwrap_err().to_string();
    assert_eq!(
        err,
        "the input does not add up, so nothing was submitted: trades.csv: 2 rows read = 1 in notes + 0 not needed + 0 rejected"
    );
}
