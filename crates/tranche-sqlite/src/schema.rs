//! The database layout (see [`migrations`](crate::migrations) for its tables). Run
//! counters live on the run row and move with every state change; partial indexes
//! cover only the rows a hot query needs (ready jobs, leased jobs, failed jobs), so
//! finished jobs cost nothing on the hot path.

use rusqlite::{Connection, TransactionBehavior};
use rusqlite_migration::SchemaVersion;

use crate::migrations::{MIGRATIONS, VERSION};

/// Why a database file could not be brought to this version's schema.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("expected a database of schema version {known} or older, got {found}: it was written by a newer tranche")]
    Newer { found: usize, known: usize },
    #[error("{0}")]
    Migration(#[source] rusqlite_migration::Error),
}

/// Connection settings: WAL so readers (`tranche status`) never block the writer;
/// `synchronous=NORMAL` is durable against a killed process (the WAL is in the OS page
/// cache), though not against power loss (use `Durability::Full` for that).
pub fn configure(conn: &Connection, full_sync: bool) -> rusqlite::Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(
        None,
        "synchronous",
        if full_sync { "FULL" } else { "NORMAL" },
    )?;
    conn.pragma_update(None, "cache_size", -65536)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok(())
}

/// Apply the migrations a file has not had yet, all in one transaction.
pub fn migrate(conn: &mut Connection) -> Result<(), SchemaError> {
    if let SchemaVersion::Outside(found) = MIGRATIONS
        .current_version(conn)
        .map_err(SchemaError::Migration)?
    {
        return Err(SchemaError::Newer {
            found: found.get(),
            known: VERSION,
        });
    }
    // Immediate: another process migrating the same file makes this one wait for its
    // write lock rather than fail on a stale read snapshot.
    conn.set_transaction_behavior(TransactionBehavior::Immediate);
    let migrated = MIGRATIONS.to_latest(conn).map_err(SchemaError::Migration);
    conn.set_transaction_behavior(TransactionBehavior::Deferred);
    migrated
}
