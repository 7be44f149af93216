//! A full disk is not a hiccup: retrying a write a few seconds later fails the same
//! way, and burning a job's attempts on it fails every remaining client. So it is told
//! apart ([`StorageError::Full`](crate::StorageError::Full)), and a caller that can wait
//! asks [`free_space`] whether waiting is over.

use std::path::Path;

/// ENOSPC and EDQUOT: the disk, or this user's quota on it, is full. Checked by number
/// too: the `ErrorKind`s for them are recent and not every error is built through them.
pub fn is_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    ) || matches!(e.raw_os_error(), Some(28 | 122))
}

/// Bytes an unprivileged writer may still use on the filesystem holding `path` (or,
/// for a path not made yet, its nearest existing ancestor); `None` when it cannot be
/// told.
pub fn free_space(path: &Path) -> Option<u64> {
    let existing = path.ancestors().find(|p| p.exists())?;
    let fs = rustix::fs::statvfs(existing).ok()?;
    Some(fs.f_bavail.saturating_mul(fs.f_frsize))
}

/// "1.5 MB", "312 kB", "0 B": sizes for people.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 || value >= 100.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enospc_and_edquot_are_full_other_errors_are_not() {
        assert!(is_full(&std::io::Error::from_raw_os_error(28)));
        assert!(is_full(&std::io::Error::from_raw_os_error(122)));
        assert!(is_full(&std::io::Error::from(
            std::io::ErrorKind::StorageFull
        )));
        assert!(!is_full(&std::io::Error::from_raw_os_error(13)));
        assert!(!is_full(&std::io::Error::from(
            std::io::ErrorKind::NotFound
        )));
    }

    #[test]
    fn free_space_of_a_path_not_made_yet_is_its_disks() {
        let dir = tempfile::tempdir().unwrap();
        let later = dir.path().join("not/made/yet");
        assert_eq!(
            free_space(&later).is_some(),
            free_space(dir.path()).is_some()
        );
        assert!(free_space(dir.path()).is_some());
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1_500), "1.5 kB");
        assert_eq!(human_bytes(312_000), "312 kB");
        assert_eq!(human_bytes(2_340_000_000), "2.3 GB");
    }
}
