//! Pausing a queue: the check every backend makes on the queue name it is given.

use crate::{BackendError, JobSpec, TooLong};

/// A queue name a pause or resume may name: what an enqueue would accept (non-empty,
/// at most [`JobSpec::MAX_QUEUE_LEN`] bytes). A queue need not have jobs to be
/// paused: pausing one before its first enqueue holds that work from the start.
pub fn check_queue_name(queue: &str) -> Result<(), BackendError> {
    if queue.is_empty() {
        return Err(BackendError::Invalid {
            field: "queue",
            expected: "a non-empty queue name".into(),
            got: "\"\"".into(),
        });
    }
    if queue.len() > JobSpec::MAX_QUEUE_LEN {
        return Err(TooLong {
            field: "queue",
            max: JobSpec::MAX_QUEUE_LEN,
            got: queue.len(),
        }
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_overlong_names_are_refused_with_the_field() {
        assert!(check_queue_name("pdf").is_ok());
        assert!(check_queue_name(&"q".repeat(JobSpec::MAX_QUEUE_LEN)).is_ok());
        for bad in [String::new(), "q".repeat(JobSpec::MAX_QUEUE_LEN + 1)] {
            match check_queue_name(&bad) {
                Err(BackendError::Invalid { field, .. }) => assert_eq!(field, "queue"),
                other => panic!("expected an invalid queue for {bad:?}, got {other:?}"),
            }
        }
    }
}
