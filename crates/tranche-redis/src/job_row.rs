//! Jobs as `scripts/read_jobs.lua` returns them: their records are fields of bucket
//! hashes that only the scripts decode, so the API's reads of a job go through it.

use crate::RedisBackend;

/// The values of a row, at their index in the script's order. Priority (6) and group
/// (8) are returned too but not read here.
#[derive(Clone, Copy)]
pub(crate) enum Column {
    /// JobState's stored number.
    State = 0,
    Attempt = 1,
    AvailableAt = 2,
    CreatedAt = 3,
    StartedAt = 4,
    FinishedAt = 5,
    NextStep = 7,
    Run = 9,
    Queue = 10,
    /// Kind, max attempts and args, packed (see `packed.rs`).
    Spec = 11,
    Input = 12,
    Result = 13,
    Error = 14,
    UniqueKey = 15,
}

const ROW_LEN: usize = Column::UniqueKey as usize + 1;

/// One job: None where a value is unset (every value: no such job).
pub(crate) struct JobRow(Vec<Option<String>>);

impl JobRow {
    pub(crate) fn text(&self, column: Column) -> Option<&str> {
        self.0.get(column as usize)?.as_deref()
    }

    pub(crate) fn owned(&self, column: Column) -> Option<String> {
        self.text(column).map(str::to_string)
    }

    pub(crate) fn num(&self, column: Column) -> Option<i64> {
        self.text(column)?.parse().ok()
    }
}

/// Jobs by id, in one script call.
pub(crate) async fn read_jobs(b: &RedisBackend, ids: &[i64]) -> redis::RedisResult<Vec<JobRow>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut inv = b.invoke(&b.scripts.read_jobs);
    for id in ids {
        inv.arg(*id);
    }
    let flat: Vec<Option<String>> = inv.invoke_async(&mut b.conn()).await?;
    Ok(flat
        .chunks(ROW_LEN)
        .map(|row| JobRow(row.to_vec()))
        .collect())
}
