//! Independent checks of NACHA files: moov-io's `achcli`, and counts and totals
//! recomputed from the lines without the library that wrote them.

use std::path::Path;
use std::process::Command;

/// moov-io's achcli verdict on a file (`achcli -reformat=ach`, the only mode that
/// runs its file-level validation): `Some(Ok)` when it reads it as valid, `Some(Err)`
/// with its output when not, `None` when achcli is not installed (a skip, said on
/// stderr) — or a panic when tools are required (`TRANCHE_REQUIRE_TOOLS=1`, `CI`).
pub fn achcli(path: &Path) -> Option<Result<(), String>> {
    let out = match Command::new("achcli")
        .arg("-reformat=ach")
        .arg(path)
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            crate::missing_tool("achcli (moov-io/ach v1.63.3; .ci/run builds it)");
            return None;
        }
        Err(e) => panic!("cannot run achcli: {e}"),
    };
    if out.status.success() {
        Some(Ok(()))
    } else {
        let mut msg = String::from_utf8_lossy(&out.stderr).into_owned();
        msg.push_str(&String::from_utf8_lossy(&out.stdout));
        Some(Err(msg.chars().take(2000).collect()))
    }
}

/// Counts and totals of a file, recomputed from its lines.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recount {
    /// Batch header records.
    pub batches: u64,
    /// Entry detail records (from the file control: entries and addenda together).
    pub entries: u64,
    /// Addenda records.
    pub addenda: u64,
    /// The entry hash: the sum of the RDFI identifications, last ten digits.
    pub hash: u64,
    /// Debits, in cents.
    pub debits: u64,
    /// Credits, in cents.
    pub credits: u64,
    /// Lines (from the file control: the block count times ten).
    pub lines: u64,
}

/// Recount a file's lines (each must be 94 characters).
pub fn recount(bytes: &[u8]) -> Recount {
    let text = std::str::from_utf8(bytes).expect("a NACHA file is ASCII");
    let mut r = Recount::default();
    for line in text.lines() {
        assert_eq!(line.len(), 94, "{line:?}");
        r.lines += 1;
        match &line[..1] {
            "5" => r.batches += 1,
            "6" => {
                r.entries += 1;
                r.hash += line[3..11].parse::<u64>().expect("an RDFI identification");
                let amount: u64 = line[29..39].parse().expect("an amount");
                let code: u8 = line[1..3].parse().expect("a transaction code");
                if code % 10 >= 6 {
                    r.debits += amount;
                } else {
                    r.credits += amount;
                }
            }
            "7" => r.addenda += 1,
            _ => {}
        }
    }
    r.hash %= 10_000_000_000;
    r
}

/// The fields of the file control record (type 9, not padding) as numbers; `entries`
/// holds its entry-and-addenda count.
pub fn file_control(bytes: &[u8]) -> Recount {
    let text = std::str::from_utf8(bytes).expect("a NACHA file is ASCII");
    let fc = text
        .lines()
        .find(|l| l.starts_with('9') && !l.bytes().all(|b| b == b'9'))
        .expect("a file control record");
    let n = |a: usize, b: usize| fc[a - 1..b].parse::<u64>().expect("a number");
    Recount {
        batches: n(2, 7),
        entries: n(14, 21),
        addenda: 0,
        hash: n(22, 31),
        debits: n(32, 43),
        credits: n(44, 55),
        lines: n(8, 13) * 10,
    }
}

/// Check a file three ways, panicking with `what` on any disagreement: its own control
/// record against an independent recount, and moov-io's achcli (when installed).
pub fn assert_file_checks_out(what: &str, bytes: &[u8]) {
    let r = recount(bytes);
    let fc = file_control(bytes);
    assert_eq!(
        (fc.batches, fc.entries, fc.hash, fc.debits, fc.credits, fc.lines),
        (
            r.batches,
            r.entries + r.addenda,
            r.hash,
            r.debits,
            r.credits,
            r.lines
        ),
        "{what}: the file control disagrees with a recount of its lines"
    );
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("file.ach");
    std::fs::write(&path, bytes).expect("write the file for achcli");
    if let Some(Err(e)) = achcli(&path) {
        panic!("{what}: achcli -reformat=ach refuses it: {e}");
    }
}
