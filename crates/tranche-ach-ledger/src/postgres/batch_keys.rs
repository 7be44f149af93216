//! A grouper's read of batch keys on PostgreSQL: each entry's key as one stored hash,
//! and the key's columns read once per distinct hash.
//!
//! The map step reads every entry of a night once, a thousand at a time, for its batch
//! key alone. Sent as the key's nine columns per entry, that read cost PostgreSQL about
//! 4 ms a thousand (a column is a buffer allocated and copied per row) and the worker
//! as much again decoding a dozen strings per entry, a thousand times a night on two
//! cores shared with everything else. `entries.batch_key` (schema 4) is a hash of those
//! columns that PostgreSQL computes once, at import (a stored generated column): the
//! read sends four narrow columns per entry, then the key columns of one entry per
//! distinct hash.
//!
//! The hash takes the raw transaction code, finer than the key's service class, so it
//! never gives two keys one hash by design; keys equal under different hashes
//! (checking and savings credits) are merged here. Two keys colliding in 64 bits would
//! share the first one's key: their entries would go to the same files' grouping, and
//! the file writer, which makes batches from the entries themselves, would still write
//! them in batches of their own.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use tranche_ach::BatchKey;

use super::runs::{self, Runs, ENTRIES_IN_RUNS};
use super::{corrupt, state, R};
use crate::columns::KeyColumns;
use crate::types::{SeqKeys, State};

/// The generated column (schema 4). Every part is immutable, as PostgreSQL requires:
/// dates enter as day numbers, not as text (whose form depends on the session).
pub(super) const BATCH_KEY_COLUMN: &str = "ALTER TABLE entries ADD COLUMN batch_key bigint \
    GENERATED ALWAYS AS (hashtextextended(bank || E'\\x1f' || company_name || E'\\x1f' \
    || company_id || E'\\x1f' || sec_code || E'\\x1f' || entry_description || E'\\x1f' \
    || descriptive_date, transaction_code::bigint * 1000003 \
    + (effective_date - DATE '2000-01-01') * 2 + same_day::int)) STORED;";

/// The batch keys of the entries of `runs`, in seq order (see the module's doc).
pub(super) async fn batch_keys_in<C: GenericClient>(tx: &C, runs: &Runs) -> R<SeqKeys> {
    runs::by_index(tx).await?;
    let read = tx
        .prepare_cached(&format!(
            "SELECT e.seq, e.state, c.entry_id IS NOT NULL, e.submission_date, e.batch_key \
             FROM {ENTRIES_IN_RUNS} \
             LEFT JOIN cancellations c ON c.entry_id = e.entry_id"
        ))
        .await?;
    let rows = super::by_seq(tx.query(&read, &[&runs.lo, &runs.hi]).await?, 0)?;
    let held = runs::held(tx, runs).await?;

    let mut hashes = Vec::with_capacity(rows.len());
    let mut first_of: HashMap<i64, i64> = HashMap::new();
    for r in &rows {
        let seq: i64 = r.try_get(0)?;
        let hash: i64 = r.try_get(4)?;
        first_of.entry(hash).or_insert(seq);
        hashes.push(hash);
    }
    let keys = keys_of(tx, &first_of).await?;

    let mut out = SeqKeys::default();
    for (r, hash) in rows.iter().zip(hashes) {
        let seq: i64 = r.try_get(0)?;
        let state = if r.try_get::<_, bool>(2)? {
            State::Cancelled
        } else {
            state(held.recorded(seq, r.try_get(1)?), "entries.state")?
        };
        let key = &keys[&hash];
        out.push(
            seq,
            state,
            r.try_get(3)?,
            |last| last == key,
            || key.clone(),
        );
    }
    Ok(out)
}

/// Each hash's key, from the columns of its first entry (`first_of`: hash -> seq).
async fn keys_of<C: GenericClient>(
    tx: &C,
    first_of: &HashMap<i64, i64>,
) -> R<HashMap<i64, BatchKey>> {
    let read = tx
        .prepare_cached(
            "SELECT seq, batch_key, bank, company_name, company_id, sec_code, \
             transaction_code, entry_description, descriptive_date, effective_date, same_day \
             FROM entries WHERE seq = ANY($1)",
        )
        .await?;
    let seqs: Vec<i64> = first_of.values().copied().collect();
    let mut keys = HashMap::with_capacity(seqs.len());
    for r in tx.query(&read, &[&seqs]).await? {
        let seq: i64 = r.try_get(0)?;
        let code = i64::from(r.try_get::<_, i16>(6)?);
        let (sec_code, service_class) =
            KeyColumns::read_codes(r.try_get(5)?, code).map_err(|(col, expected, got)| {
                corrupt(format!("entries.{col} of seq {seq}"), expected, got)
            })?;
        let columns = KeyColumns {
            bank: r.try_get(2)?,
            company_name: r.try_get(3)?,
            company_id: r.try_get(4)?,
            sec_code,
            service_class,
            entry_description: r.try_get(7)?,
            descriptive_date: r.try_get(8)?,
            effective_date: r.try_get(9)?,
            same_day: r.try_get(10)?,
        };
        keys.insert(r.try_get::<_, i64>(1)?, columns.to_key());
    }
    if let Some((hash, seq)) = first_of.iter().find(|(h, _)| !keys.contains_key(*h)) {
        return Err(corrupt(
            format!("entries.batch_key of seq {seq}"),
            "the entry read again in the same snapshot",
            format!("no entry with batch_key {hash}"),
        ));
    }
    Ok(keys)
}
