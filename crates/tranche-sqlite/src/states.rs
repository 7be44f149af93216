//! How a job's state is stored in the `state` columns of `jobs` and `events`: its
//! [`JobState`] code. The numbers are on disk and in the partial indexes' `WHERE`
//! clauses, so they never change:
//!
//! | state       | stored |
//! |-------------|--------|
//! | `pending`   | 0      |
//! | `available` | 1      |
//! | `running`   | 2      |
//! | `succeeded` | 3      |
//! | `failed`    | 4      |
//! | `cancelled` | 5      |
//!
//! SQL names them through these constants, spliced into its text at compile time
//! (`formatcp!`) rather than bound: SQLite uses a partial index only for a query whose
//! `WHERE` clause repeats the index's literal.

use tranche_types::JobState;

pub const PENDING: i64 = JobState::Pending as i64;
pub const AVAILABLE: i64 = JobState::Available as i64;
pub const RUNNING: i64 = JobState::Running as i64;
pub const SUCCEEDED: i64 = JobState::Succeeded as i64;
pub const FAILED: i64 = JobState::Failed as i64;
pub const CANCELLED: i64 = JobState::Cancelled as i64;

#[cfg(test)]
mod tests {
    use super::*;

    /// Existing database files hold these numbers: the table above must stay true.
    #[test]
    fn stored_numbers_match_the_table() {
        assert_eq!(
            [PENDING, AVAILABLE, RUNNING, SUCCEEDED, FAILED, CANCELLED],
            [0, 1, 2, 3, 4, 5]
        );
    }
}
