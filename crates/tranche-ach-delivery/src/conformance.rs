//! The suite every [`Delivery`] passes, run unchanged against each implementation.
//!
//! `dir` is where the delivered files appear on this machine, empty at the start: the
//! outbox's directory, or the directory a loopback SFTP server writes into. The suite
//! reads files back from it (not only through [`Delivery::find`]), and plants in it
//! the leftovers a crash mid-upload leaves.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use futures::future::join_all;

use crate::{name, sha256_hex, Delivery, DeliveryError};

/// A stand-in for a NACHA file of about `len` bytes: 94-character records, each
/// different (so a shifted or repeated chunk shows), newline-terminated.
pub fn sample_file(seed: u32, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9) | 1;
    let mut out = Vec::with_capacity(len + 95);
    let mut n = 0u64;
    while out.len() < len {
        n += 1;
        let mut record = format!("6{n:08}");
        while record.len() < 94 {
            // xorshift: digits no transfer could get right by luck.
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            record.push(char::from(b'0' + (x % 10) as u8));
        }
        out.extend_from_slice(record.as_bytes());
        out.push(b'\n');
    }
    out
}

/// `len` bytes holding every byte value in no pattern: what a text-mode transfer, a
/// line-ending conversion or a truncation would change.
pub fn sample_bytes(seed: u32, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x2545_f491) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

/// Runs every check against `delivery`, whose files appear in `dir` (see above);
/// panics at the first failure.
pub async fn exercise(delivery: &dyn Delivery, dir: &Path) {
    assert!(
        listing(dir).is_empty(),
        "the suite needs an empty directory, {} is not",
        dir.display()
    );
    let location = delivery.location();
    assert!(
        location.starts_with("outbox:/") || location.starts_with("sftp://"),
        "location {location:?}"
    );
    delivered_then_found_by_its_hash(delivery, dir).await;
    a_missing_name_is_none(delivery).await;
    a_leftover_temporary_is_not_found_and_blocks_nothing(delivery, dir).await;
    the_same_bytes_twice_is_a_success(delivery, dir).await;
    other_bytes_under_a_taken_name_are_refused_and_the_file_kept(delivery, dir).await;
    bad_names_are_refused_before_any_io(delivery, dir).await;
    many_files_at_once_all_arrive_intact(delivery, dir).await;
    racing_deliveries_of_one_name_never_overwrite(delivery, dir).await;
    five_megabytes_round_trip(delivery, dir).await;
    no_temporaries_are_left(dir);
}

/// Names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Hidden files in `dir` that the suite did not plant.
fn temporaries(dir: &Path) -> Vec<String> {
    listing(dir)
        .into_iter()
        .filter(|n| n.starts_with('.') && !n.contains("planted"))
        .collect()
}

fn no_temporaries_are_left(dir: &Path) {
    assert_eq!(
        temporaries(dir),
        Vec::<String>::new(),
        "temporary files left in {}",
        dir.display()
    );
}

async fn deliver_ok(delivery: &dyn Delivery, name: &str, bytes: &[u8]) {
    delivery
        .deliver(name, bytes)
        .await
        .unwrap_or_else(|e| panic!("delivering {name} to {}: {e:?}", delivery.location()));
}

/// The file as it is on disk: all of `bytes`, owner-only.
fn assert_on_disk(dir: &Path, name: &str, bytes: &[u8]) {
    let path = dir.join(name);
    let got = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    assert!(
        got == bytes,
        "{name}: {} bytes on disk differ from the {} delivered",
        got.len(),
        bytes.len()
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o077,
        0,
        "{name} is readable by others (mode {:o}): it holds account numbers",
        mode & 0o777
    );
}

async fn delivered_then_found_by_its_hash(delivery: &dyn Delivery, dir: &Path) {
    let name = "ACH-20261120-021000021-1.ach";
    let bytes = sample_file(1, 10_000);
    deliver_ok(delivery, name, &bytes).await;
    assert_on_disk(dir, name, &bytes);
    assert_eq!(
        delivery.find(name).await.unwrap(),
        Some(sha256_hex(&bytes)),
        "find after deliver"
    );
    no_temporaries_are_left(dir);
}

async fn a_missing_name_is_none(delivery: &dyn Delivery) {
    assert_eq!(delivery.find("never-delivered.ach").await.unwrap(), None);
}

/// A crash mid-upload leaves part of the file under a temporary name.
async fn a_leftover_temporary_is_not_found_and_blocks_nothing(delivery: &dyn Delivery, dir: &Path) {
    let name = "crashed-1.ach";
    let bytes = sample_file(2, 50_000);
    // The shape of a real temporary, and a second one marked so the suite knows it.
    let real_shape = name::temporary(name);
    std::fs::write(dir.join(&real_shape), &bytes[..20_000]).unwrap();
    let planted = format!(".{name}.planted.part");
    std::fs::write(dir.join(&planted), &bytes[..1_000]).unwrap();

    assert_eq!(
        delivery.find(name).await.unwrap(),
        None,
        "a partial temporary counts as delivered"
    );
    deliver_ok(delivery, name, &bytes).await;
    assert_on_disk(dir, name, &bytes);
    assert_eq!(delivery.find(name).await.unwrap(), Some(sha256_hex(&bytes)));
    // The leftovers are not the suite's to judge further: take them away.
    std::fs::remove_file(dir.join(real_shape)).unwrap();
    std::fs::remove_file(dir.join(planted)).unwrap();
}

async fn the_same_bytes_twice_is_a_success(delivery: &dyn Delivery, dir: &Path) {
    let name = "twice.ach";
    let bytes = sample_file(3, 3_000);
    deliver_ok(delivery, name, &bytes).await;
    deliver_ok(delivery, name, &bytes).await;
    assert_on_disk(dir, name, &bytes);
    assert_eq!(delivery.find(name).await.unwrap(), Some(sha256_hex(&bytes)));
    no_temporaries_are_left(dir);
}

async fn other_bytes_under_a_taken_name_are_refused_and_the_file_kept(
    delivery: &dyn Delivery,
    dir: &Path,
) {
    let name = "taken.ach";
    let first = sample_file(4, 3_000);
    let other = sample_file(5, 3_000);
    deliver_ok(delivery, name, &first).await;
    match delivery.deliver(name, &other).await {
        Err(e @ DeliveryError::Exists { .. }) => {
            assert!(!e.is_transient(), "Exists is not transient");
            let message = e.to_string();
            assert!(message.contains(name), "names the file: {message}");
            assert!(
                message.contains(&delivery.location()),
                "names the destination: {message}"
            );
            assert!(message.contains(&sha256_hex(&first)), "{message}");
            let record = String::from_utf8_lossy(&first[..40]).into_owned();
            assert!(!message.contains(&record), "quotes the file: {message}");
        }
        other => panic!("other bytes under {name}: expected Exists, got {other:?}"),
    }
    assert_on_disk(dir, name, &first);
    assert_eq!(delivery.find(name).await.unwrap(), Some(sha256_hex(&first)));
    // A file the bank put there, not delivered by us, is as safe.
    std::fs::write(dir.join("theirs.ach"), b"the bank's own").unwrap();
    assert!(matches!(
        delivery.deliver("theirs.ach", &other).await,
        Err(DeliveryError::Exists { .. })
    ));
    assert_eq!(
        std::fs::read(dir.join("theirs.ach")).unwrap(),
        b"the bank's own"
    );
    no_temporaries_are_left(dir);
}

async fn bad_names_are_refused_before_any_io(delivery: &dyn Delivery, dir: &Path) {
    let before = listing(dir);
    for bad in [
        "",
        ".",
        "..",
        ".hidden.ach",
        "../escape.ach",
        "sub/dir.ach",
        "/etc/passwd",
        "a b.ach",
        "naïve.ach",
        "line\nbreak",
        &"n".repeat(name::MAX_NAME_LEN + 1),
    ] {
        match delivery.deliver(bad, b"x").await {
            Err(e @ DeliveryError::BadName { .. }) => assert!(!e.is_transient()),
            other => panic!("deliver {bad:?}: expected BadName, got {other:?}"),
        }
        match delivery.find(bad).await {
            Err(DeliveryError::BadName { .. }) => {}
            other => panic!("find {bad:?}: expected BadName, got {other:?}"),
        }
    }
    assert_eq!(listing(dir), before, "a bad name changed the directory");
    assert!(
        !dir.parent().unwrap().join("escape.ach").exists(),
        "a file escaped the directory"
    );
}

async fn many_files_at_once_all_arrive_intact(delivery: &dyn Delivery, dir: &Path) {
    let files: Vec<(String, Vec<u8>)> = (0..24u32)
        .map(|i| {
            let len = 1 + (i as usize * 37_000) % 200_000;
            (format!("many-{i:02}.ach"), sample_bytes(100 + i, len))
        })
        .collect();
    join_all(files.iter().map(|(n, b)| deliver_ok(delivery, n, b))).await;
    let found = join_all(files.iter().map(|(n, _)| delivery.find(n))).await;
    for ((name, bytes), found) in files.iter().zip(found) {
        assert_on_disk(dir, name, bytes);
        assert_eq!(found.unwrap(), Some(sha256_hex(bytes)), "{name}");
    }
    no_temporaries_are_left(dir);
}

/// Submitters racing for one name: with the same bytes all succeed; with different
/// bytes exactly one does and the file is its bytes.
async fn racing_deliveries_of_one_name_never_overwrite(delivery: &dyn Delivery, dir: &Path) {
    let same = sample_file(6, 80_000);
    let results = join_all((0..6).map(|_| delivery.deliver("race-same.ach", &same))).await;
    for r in results {
        r.unwrap_or_else(|e| panic!("the same bytes racing: {e:?}"));
    }
    assert_on_disk(dir, "race-same.ach", &same);

    let versions: Vec<Vec<u8>> = (0..6).map(|i| sample_file(200 + i, 80_000)).collect();
    let results = join_all(
        versions
            .iter()
            .map(|b| delivery.deliver("race-other.ach", b)),
    )
    .await;
    let mut winners = vec![];
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok(()) => winners.push(i),
            Err(DeliveryError::Exists { .. }) => {}
            Err(e) => panic!("different bytes racing: expected Ok or Exists, got {e:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    assert_on_disk(dir, "race-other.ach", &versions[winners[0]]);
    no_temporaries_are_left(dir);
}

async fn five_megabytes_round_trip(delivery: &dyn Delivery, dir: &Path) {
    let bytes = sample_bytes(7, 5 * 1024 * 1024);
    deliver_ok(delivery, "big.ach", &bytes).await;
    assert_on_disk(dir, "big.ach", &bytes);
    assert_eq!(
        delivery.find("big.ach").await.unwrap(),
        Some(sha256_hex(&bytes))
    );
}
