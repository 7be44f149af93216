//! The one way tests wait: a check reached returns its value, one that is not fails
//! naming what was awaited and what was seen last.

use std::time::Duration;

use tranche_test_support::{eventually, exit_within, poll_until_async};

#[test]
fn a_check_reached_gives_its_value() {
    let mut tries = 0;
    let value = eventually("the third try", Duration::from_secs(5), || {
        tries += 1;
        (tries == 3).then_some(tries * 10)
    });
    assert_eq!(value, 30);
}

#[test]
#[should_panic(expected = "not reached in 20ms: a count of 5\nseen last: 2")]
fn a_check_never_reached_fails_naming_what_and_what_was_seen() {
    eventually("a count of 5", Duration::from_millis(20), || {
        Err::<(), _>("2".to_string())
    });
}

#[tokio::test]
#[should_panic(expected = "not reached in 20ms: an answer")]
async fn an_async_check_never_reached_fails_too() {
    poll_until_async("an answer", Duration::from_millis(20), async || false).await;
}

#[test]
fn a_child_still_running_is_none_and_one_that_ended_its_status() {
    let mut sleeper = std::process::Command::new("sleep")
        .arg("5")
        .spawn()
        .unwrap();
    assert!(exit_within(&mut sleeper, Duration::from_millis(20)).is_none());
    sleeper.kill().unwrap();
    let status = exit_within(&mut sleeper, Duration::from_secs(5)).expect("ended once killed");
    assert!(!status.success());
}
