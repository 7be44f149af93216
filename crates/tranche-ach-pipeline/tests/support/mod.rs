//! A pipeline on real parts for tests: the embedded engine, the SQLite ledger, a local
//! store and outbox deliveries, all in a temporary directory, with a worker running.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use tokio_util::sync::CancellationToken as Stop;
use tranche_ach::{AccountKind, AccountNumber, Direction, Entry, SecCode, TransactionCode};
use tranche_ach_delivery::Delivery;
use tranche_ach_ledger::{FileFilter, FileState, Ledger, SqliteLedger, State};
use tranche_ach_pipeline::{Payments, Tick};
use tranche_ach_rules::Rules;
use tranche_core::{Client, Engine, WorkerConfig};
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_storage::{LocalStore, Storage};
use tranche_test_support::ach_rules::Bank;

/// Two banks; `first` takes separate batches, `second` mixed ones; small files so a
/// few thousand entries make several; no pacing (tests do not wait 15 s per file).
pub fn rules_text(cap: u32) -> String {
    let small = |bank: Bank| {
        bank.with(&format!("max_entries_per_file = {cap}"))
            .with("pacing = \"0s\"")
    };
    let first = small(Bank::first())
        .outbox("outbox/first")
        .same_day_morning()
        .window("sd2", "same-day", "12:45", "14:45")
        .window("nd", "next-day", "17:30", "20:00");
    let second = small(Bank::second())
        .with("grouping = \"mixed\"")
        .outbox("outbox/second")
        .window("nd", "next-day", "17:30", "20:00");
    format!("[engine]\ntick = \"5m\"\nclaim_ttl = \"10m\"\n\n{first}\n{second}")
}

/// The submission date the tests use (a Tuesday).
pub fn day() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 3, 3).unwrap()
}

/// `hh:mm` on the test day, New York time.
pub fn at(hh: u32, mm: u32) -> DateTime<Utc> {
    chrono_tz::America::New_York
        .from_local_datetime(&day().and_hms_opt(hh, mm, 0).unwrap())
        .single()
        .unwrap()
        .with_timezone(&Utc)
}

/// A valid entry whose individual id is its entry id (so a delivered file says which
/// entries it holds). `i` varies the company, direction and amount.
pub fn entry(id: &str, bank: &str, same_day: bool, i: u64) -> Entry {
    let date = day();
    let companies = ["ACME PAYROLL", "GLOBEX", "INITECH"];
    let direction = if i % 5 == 4 {
        Direction::Debit
    } else {
        Direction::Credit
    };
    Entry {
        entry_id: id.into(),
        bank: bank.into(),
        company_name: companies[(i % 3) as usize].into(),
        company_id: format!("12345678{:02}", i % 3),
        sec_code: if direction == Direction::Debit {
            SecCode::Web
        } else {
            SecCode::Ppd
        },
        transaction_code: TransactionCode::new(
            if i.is_multiple_of(7) {
                AccountKind::Savings
            } else {
                AccountKind::Checking
            },
            direction,
        ),
        rdfi_routing: ["021000021", "026009593", "011000015"][(i % 3) as usize]
            .parse()
            .unwrap(),
        account_number: AccountNumber::new(format!("{:012}", 1_000_000 + i * 7919)),
        amount_cents: 1_000 + (i * 7_717) % 900_000,
        individual_id: id.into(),
        individual_name: "JANE DOE".into(),
        entry_description: "PAYROLL".into(),
        descriptive_date: String::new(),
        effective_date: if same_day {
            date
        } else {
            date.succ_opt().unwrap()
        },
        submission_date: date,
        same_day,
        addenda: (i.is_multiple_of(11) && direction == Direction::Credit)
            .then(|| format!("INVOICE {i}")),
    }
}

/// `n` entries spread over both banks and both kinds of window.
pub fn entries(prefix: &str, n: u64) -> Vec<Entry> {
    (0..n)
        .map(|i| {
            let bank = if i % 4 == 3 { "second" } else { "first" };
            let same_day = bank == "first" && i % 3 == 0;
            entry(&format!("{prefix}{i:06}"), bank, same_day, i)
        })
        .collect()
}

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub client: Client,
    pub ledger: Arc<dyn Ledger>,
    pub store: Arc<dyn Storage>,
    pub payments: Payments,
    stop: Stop,
    worker: Option<tokio::task::JoinHandle<()>>,
}

impl Harness {
    /// Everything embedded, with `deliveries` instead of the rules' outboxes for the
    /// banks they name.
    pub async fn embedded(cap: u32, deliveries: HashMap<String, Arc<dyn Delivery>>) -> Harness {
        Self::with_rules(rules_text(cap), deliveries).await
    }

    /// Everything embedded, under `rules` (an ach.toml's text).
    pub async fn with_rules(
        rules: String,
        deliveries: HashMap<String, Arc<dyn Delivery>>,
    ) -> Harness {
        Self::with_ledger(rules, deliveries, |ledger| ledger).await
    }

    /// As [`with_rules`](Self::with_rules), the pipeline's ledger being what `wrap`
    /// makes of the SQLite one (a `FaultyLedger`).
    pub async fn with_ledger(
        rules: String,
        deliveries: HashMap<String, Arc<dyn Delivery>>,
        wrap: impl FnOnce(Arc<dyn Ledger>) -> Arc<dyn Ledger>,
    ) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let client = Client::new(
            SqliteBackend::open(dir.path().join("state"), SqliteOptions::default()).unwrap(),
        );
        let ledger: Arc<dyn Ledger> = wrap(Arc::new(
            SqliteLedger::open(&dir.path().join("ach")).unwrap(),
        ));
        let rules_file = dir.path().join("ach.toml");
        std::fs::write(&rules_file, rules).unwrap();
        let rules = Rules::load(&rules_file).unwrap();
        let store: Arc<dyn Storage> = Arc::new(LocalStore::new(dir.path().join("store")));
        let payments = Payments::with_deliveries(
            client.clone(),
            ledger.clone(),
            store.clone(),
            rules,
            deliveries,
        );
        payments.apply_pacing().await.unwrap();
        let mut h = Harness {
            dir,
            client,
            ledger,
            store,
            payments,
            stop: Stop::new(),
            worker: None,
        };
        h.start_worker();
        h
    }

    fn start_worker(&mut self) {
        let engine = Engine::new(self.client.clone(), self.payments.registry());
        let worker = engine
            .worker(WorkerConfig {
                queues: vec![(tranche_ach_pipeline::tasks::QUEUE.to_string(), 16)],
                reserve_wait: Duration::from_millis(200),
                lease: Duration::from_secs(5),
                heartbeat: Duration::from_millis(1_500),
                ..WorkerConfig::default()
            })
            .unwrap();
        let stop = self.stop.clone();
        self.worker = Some(tokio::spawn(async move {
            worker.run(stop).await.unwrap();
        }));
    }

    pub fn outbox(&self, bank: &str) -> PathBuf {
        self.dir.path().join("outbox").join(bank)
    }

    /// Tick at `at`, then wait until every run it touched has finished.
    pub async fn tick(&self, at: DateTime<Utc>) -> Tick {
        let tick = self.payments.tick(at).await.unwrap();
        self.settle(&tick).await;
        tick
    }

    pub async fn settle(&self, tick: &Tick) {
        for run in tick.runs() {
            let progress = self
                .client
                .wait_finished(
                    &run,
                    Duration::from_millis(50),
                    Some(Duration::from_secs(120)),
                    |_| {},
                )
                .await
                .unwrap_or_else(|e| panic!("run {run} did not finish: {e}"));
            let failed = progress.failed;
            if failed > 0 {
                let failures = self.client.run_failures(&run, None, 10).await.unwrap();
                panic!("run {run}: {failed} jobs failed: {failures:?}");
            }
        }
    }

    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(w) = self.worker.take() {
            w.await.unwrap();
        }
    }

    /// Every file of the test day, by state.
    pub async fn files(&self, state: Option<FileState>) -> Vec<tranche_ach_ledger::FileRecord> {
        self.ledger
            .files(&FileFilter {
                submission_date: Some(day()),
                state,
                ..FileFilter::default()
            })
            .await
            .unwrap()
    }

    /// Each entry id with the submitted file it is in (from the ledger).
    pub async fn submitted_entries(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for f in self.files(Some(FileState::Submitted)).await {
            let detail = self.ledger.file(&f.file.file_id).await.unwrap().unwrap();
            for id in detail.entry_ids {
                assert!(
                    out.insert(id.clone(), f.file.file_id.clone()).is_none(),
                    "{id} is in two submitted files"
                );
            }
        }
        out
    }

    pub async fn state(&self, id: &str) -> State {
        self.ledger.entry(id).await.unwrap().unwrap().state
    }
}

/// The entry-detail records of a NACHA file: (individual id, amount in cents, trace).
pub fn detail_records(bytes: &[u8]) -> Vec<(String, u64, String)> {
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| l.first() == Some(&b'6'))
        .map(|l| {
            let s = std::str::from_utf8(l).unwrap();
            (
                s[39..54].trim().to_string(),
                s[29..39].parse().unwrap(),
                s[79..94].to_string(),
            )
        })
        .collect()
}

/// The files in an outbox directory, by name.
pub fn outbox_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    read.map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".ach"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}
