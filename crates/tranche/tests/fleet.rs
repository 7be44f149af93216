//! Fleet mode as it is deployed: processes that share only a Redis server and an S3
//! store (s3s-fs, a real S3 API). A control process submits a night of 2,000 clients
//! (`notes run --no-work`) and watches; three `tranche worker` processes with
//! different queue roles do the steps; one of them is killed with SIGKILL half way.
//! Every client must be mailed exactly once, the report complete, no job lost.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::*;

/// Enough for every worker to hold notes at every step when one is killed (a fifth of
/// the way in) and for the others to take over its leases; the fleet's throughput is
/// `tranche bench notes`'s to measure, not this test's. (2,000 took 100 s here, half of
/// it the SMTP server's 40 messages a second.)
const CLIENTS: usize = 400;

fn fleet_env(cmd: &mut Command, redis: u16, s3: u16) {
    cmd.env("TRANCHE_BROKER", format!("redis://127.0.0.1:{redis}"))
        .env("TRANCHE_REDIS_PREFIX", "{fleet-test}:")
        .env("TRANCHE_STORE", "s3://notes/night")
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{s3}"))
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", S3_KEY)
        .env("AWS_SECRET_ACCESS_KEY", S3_SECRET)
        .env("TRANCHE_OWNER_PASSWORD", "fleet-owner-secret");
}

fn worker(dir: &Path, name: &str, queues: &str, redis: u16, s3: u16, smtp: &str) -> Child {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    let mut cmd = tranche();
    fleet_env(&mut cmd, redis, s3);
    cmd.args(["worker", "--queues", queues, "--out"])
        .arg(dir.join(name))
        .args(["--smtp", smtp, "--concurrency", "2"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

#[test]
fn a_fleet_night_with_a_worker_killed_mails_every_client_once() {
    if !have("redis-server", &["--version"])
        || !have("s3s-fs", &["--help"])
        || !have("python3", &["-c", "import aiosmtpd"])
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_redis, redis_port) = redis(dir);
    std::fs::create_dir_all(dir.join("s3/notes")).unwrap();
    let (_s3, s3_port) = s3s_fs(&dir.join("s3"));
    let sink = Sink::start(&dir.join("sink"));
    let input = dir.join("input");
    generate(&input, CLIENTS);
    let traders = traders(&input);
    let clients = clients(&input);

    // One signer (one certificate) in the fleet; process and render run on two
    // machines, so killing one of them leaves the other to finish its work.
    let smtp = sink.url();
    let mut killed = worker(
        dir,
        "w-render-1",
        "process,render",
        redis_port,
        s3_port,
        &smtp,
    );
    let mut w2 = worker(
        dir,
        "w-render-2",
        "process,render,sign",
        redis_port,
        s3_port,
        &smtp,
    );
    let mut w3 = worker(dir, "w-mail", "mail", redis_port, s3_port, &smtp);

    let out = dir.join("control");
    let mut submit = tranche();
    fleet_env(&mut submit, redis_port, s3_port);
    let control = submit
        .args(run_args(&input, &out))
        .arg("--no-work")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // Kill a render machine once a fifth of the notes are out.
    tranche_test_support::eventually(
        "a fifth of the notes mailed before the kill",
        Duration::from_secs(900),
        || {
            assert!(killed.try_wait().unwrap().is_none(), "worker 1 died early");
            sink.count() >= traders.len() / 5
        },
    );
    killed.kill().unwrap(); // SIGKILL
    killed.wait().unwrap();

    let done = control.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", text(&done));

    let rows = report(&out);
    assert_eq!(rows.len(), traders.len());
    let not_mailed: Vec<_> = rows.iter().filter(|(_, r)| r[0] != "mailed").collect();
    assert!(not_mailed.is_empty(), "{not_mailed:?}");

    // Exactly once: the killed machine sent no mail, so nothing may repeat.
    let messages = sink.messages();
    assert_eq!(messages.len(), traders.len(), "one message per client");
    let mut by_recipient: BTreeMap<&str, usize> = BTreeMap::new();
    for m in &messages {
        *by_recipient.entry(m.0.as_str()).or_default() += 1;
    }
    let objects = dir.join("s3/notes/night");
    for code in traders.iter().step_by(97) {
        let email = clients[code].1.as_str();
        assert_eq!(by_recipient.get(email), Some(&1), "{code}");
        let sent = messages.iter().find(|m| m.0 == email).unwrap();
        assert_eq!(
            sent.3,
            stored_pdf(&objects, code),
            "{code}: attachment = stored PDF"
        );
    }

    // Any machine sees the run through the broker.
    let mut status = tranche();
    fleet_env(&mut status, redis_port, s3_port);
    let status = status.args(["status", RUN]).output().unwrap();
    assert!(status.status.success(), "{}", text(&status));
    assert!(
        text(&status).contains(&format!("succeeded {:>9}", traders.len() * 4)),
        "{}",
        text(&status)
    );

    for w in [&mut w2, &mut w3] {
        // SIGTERM: a graceful stop.
        let _ = Command::new("kill")
            .args(["-TERM", &w.id().to_string()])
            .status();
        let status = w.wait().unwrap();
        assert!(
            status.success(),
            "a worker did not stop cleanly: {status:?}"
        );
    }
}
