//! What the `tranche` binary's tests share: running it, a real SMTP server (aiosmtpd
//! with `tests/smtp_sink.py`), Redis and S3 servers on free loopback ports, and
//! readers of what a night wrote.

#![allow(dead_code)] // each test file uses a part

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use mail_parser::{MessageParser, MimeHeaders};
#[allow(unused_imports)] // each test file uses a part
pub use tranche_test_support::{
    free_port, redis, tools_required, wait_listening, Server, SmallDisk,
};

pub const DATE: &str = "2026-11-20";
pub const RUN: &str = "contract-notes/2026-11-20";

pub fn tranche() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tranche"));
    c.env_remove("TRANCHE_DATA")
        .env_remove("TRANCHE_SMTP")
        .env_remove("TRANCHE_BROKER")
        .env_remove("TRANCHE_LEDGER")
        .env_remove("TRANCHE_STORE")
        .env_remove("TRANCHE_REDIS_PREFIX")
        .env_remove("TRANCHE_OWNER_PASSWORD")
        .env_remove("TRANCHE_OWNER_PASSWORD_FILE");
    c
}

/// `tranche --data DATA ARGS…`, run to its end: the steer and inspect commands.
pub fn tranche_on(data: &Path, args: &[&str]) -> Output {
    tranche()
        .arg("--data")
        .arg(data)
        .args(args)
        .output()
        .expect("run tranche")
}

/// A finished command's stdout and stderr, as text.
pub fn streams(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Whether a tool is here; missing is a failure under CI, a skip otherwise.
pub fn have(program: &str, probe: &[&str]) -> bool {
    let ok = Command::new(program)
        .args(probe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            !tools_required(),
            "{program} is required (TRANCHE_REQUIRE_TOOLS=1 or CI is set; .ci/run installs it)"
        );
        eprintln!("SKIPPED: {program} is not installed");
    }
    ok
}

/// The SMTP server the notes are mailed to: aiosmtpd with `tests/smtp_sink.py`, which
/// refuses (550) the addresses in `reject.txt` and keeps each message in `new/`.
pub struct Sink {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl Sink {
    pub fn start(dir: &Path) -> Sink {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/smtp_sink.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .arg(dir)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the SMTP sink");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "the SMTP sink did not start");
        Sink {
            child,
            port,
            dir: dir.to_path_buf(),
        }
    }

    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    pub fn reject(&self, addresses: &[&str]) {
        std::fs::write(self.dir.join("reject.txt"), addresses.join("\n")).unwrap();
    }

    /// While held, messages wait before they are accepted.
    pub fn hold(&self, held: bool) {
        let flag = self.dir.join("hold");
        if held {
            std::fs::write(flag, "").unwrap();
        } else {
            std::fs::remove_file(flag).unwrap();
        }
    }

    /// Every message received so far: recipient → (message id, subject, attachment).
    pub fn messages(&self) -> Vec<(String, String, String, Vec<u8>)> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(self.dir.join("new")).unwrap() {
            let raw = std::fs::read(entry.unwrap().path()).unwrap();
            let m = MessageParser::default()
                .parse(&raw)
                .expect("a parsable mail");
            let to = m.header_raw("X-RcptTo").unwrap().trim().to_string();
            let id = m.message_id().unwrap().to_string();
            let subject = m.subject().unwrap_or("").to_string();
            let pdf = m
                .attachments()
                .find(|a| a.content_type().is_some_and(|c| c.subtype() == Some("pdf")))
                .map(|a| a.contents().to_vec())
                .unwrap_or_default();
            out.push((to, id, subject, pdf));
        }
        out
    }

    pub fn count(&self) -> usize {
        std::fs::read_dir(self.dir.join("new"))
            .map(|d| d.count())
            .unwrap_or(0)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn generate(dir: &Path, clients: usize) {
    let out = tranche()
        .args(["notes", "generate", "--clients", &clients.to_string()])
        .args(["--date", DATE, "--seed", "7", "--out"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

pub fn run_args(input: &Path, out: &Path) -> Vec<String> {
    let p = |f: &str| input.join(f).display().to_string();
    vec![
        "notes".into(),
        "run".into(),
        "--trades".into(),
        p("trades.csv"),
        "--clients".into(),
        p("clients.csv"),
        "--broker-file".into(),
        p("broker.toml"),
        "--date".into(),
        DATE.into(),
        "--out".into(),
        out.display().to_string(),
    ]
}

/// report.csv as client → (status, pages, net_amount, bytes, message_id, error,
/// trade_rows, rejected_rows, remark).
pub fn report(out: &Path) -> BTreeMap<String, Vec<String>> {
    let mut r = csv::Reader::from_path(out.join("report.csv")).unwrap();
    assert_eq!(
        r.headers().unwrap().iter().collect::<Vec<_>>(),
        [
            "client_code",
            "status",
            "pages",
            "net_amount",
            "bytes",
            "message_id",
            "error",
            "trade_rows",
            "rejected_rows",
            "remark"
        ]
    );
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            let v: Vec<String> = rec.iter().map(str::to_string).collect();
            (v[0].clone(), v[1..].to_vec())
        })
        .collect()
}

/// The first line a started `tranche server` prints, and the base URL in it
/// (`http://127.0.0.1:PORT`).
/// `tranche server` on `data`, listening on `listen` (`127.0.0.1:0` for a free port),
/// without tokens; killed when dropped. Returns it and its base URL.
pub fn tranche_server(data: &Path, listen: &str) -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tranche"))
        .arg("--data")
        .arg(data)
        .args(["server", "--listen", listen])
        .env_remove("TRANCHE_TOKENS")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start tranche server");
    let (base, _) = server_address(&mut child);
    (Server(child), base)
}

pub fn server_address(child: &mut Child) -> (String, String) {
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout piped"))
        .read_line(&mut line)
        .unwrap();
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (base, line)
}

/// The `tcp://` address (HOST:PORT) in the first line `tranche feed serve --tcp`
/// prints.
pub fn tcp_address(line: &str) -> String {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("tcp://"))
        .unwrap_or_else(|| panic!("no tcp:// address in {line:?}"))
        .to_string()
}

/// A process a test started, killed if the test ends (or fails) before it does.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A text file's lines.
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// client code → (pan, email) from the generated client master.
pub fn clients(input: &Path) -> BTreeMap<String, (String, String)> {
    let mut r = csv::Reader::from_path(input.join("clients.csv")).unwrap();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            (rec[0].to_string(), (rec[2].to_string(), rec[3].to_string()))
        })
        .collect()
}

/// The codes of clients who traded, in file order of their first trade.
pub fn traders(input: &Path) -> Vec<String> {
    let mut r = csv::Reader::from_path(input.join("trades.csv")).unwrap();
    let col = r
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == "client_code")
        .unwrap();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for rec in r.records() {
        let code = rec.unwrap()[col].to_string();
        if seen.insert(code.clone()) {
            out.push(code);
        }
    }
    out
}

/// The signed PDF of `client` in a store directory.
pub fn stored_pdf(store: &Path, client: &str) -> Vec<u8> {
    for entry in std::fs::read_dir(store).unwrap() {
        let dir = entry.unwrap().path();
        if dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .ends_with("-signed-pdf")
        {
            let f = dir.join(DATE).join(format!("{client}.pdf"));
            if f.exists() {
                return std::fs::read(f).unwrap();
            }
        }
    }
    panic!("no signed PDF of {client} in {}", store.display());
}

pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

pub const S3_KEY: &str = "tranche-test-key";
pub const S3_SECRET: &str = "tranche-test-secret";

/// An s3s-fs server (a real S3 API over a directory) on a free port, objects under
/// `dir/<bucket>/`.
pub fn s3s_fs(dir: &Path) -> (Server, u16) {
    let port = free_port();
    let child = Command::new("s3s-fs")
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--access-key", S3_KEY, "--secret-key", S3_SECRET])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start s3s-fs");
    wait_listening(port, "s3s-fs");
    (Server(child), port)
}

/// Work the jobs of `queue` (kind `k`, any arguments) with the engine's own worker in
/// this process, beside whatever else serves the backend, until `run` has finished.
pub async fn work_beside(backend: tranche_core::Client, queue: &str, run: &str) {
    use tranche_core::{Engine, JobContext, Registry, TaskOptions, WorkerConfig};
    let mut reg = Registry::new();
    reg.register(
        "k",
        TaskOptions::default(),
        |_: JobContext, _: serde_json::Value| async { Ok::<_, String>(()) },
    );
    let config = WorkerConfig {
        reserve_wait: Duration::from_millis(100),
        ..WorkerConfig::default()
    }
    .queues([queue], 8);
    let worker = Engine::new(backend.clone(), reg).worker(config).unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn({
        let stop = stop.clone();
        async move { worker.run(stop).await }
    });
    let run = tranche_types::RunName::new(run).unwrap();
    let limit = Some(Duration::from_secs(60));
    backend
        .wait_finished(&run, Duration::from_millis(20), limit, |_| {})
        .await
        .unwrap();
    stop.cancel();
    running.await.unwrap().unwrap();
}

/// A redis-server that can be restarted on the same port and keeps its data across
/// restarts: an append-only file synced on every write, in `dir`.
pub struct RestartableRedis {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
}

impl RestartableRedis {
    pub fn start(dir: &Path) -> RestartableRedis {
        let mut redis = RestartableRedis {
            child: None,
            port: free_port(),
            dir: dir.to_path_buf(),
        };
        redis.launch();
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn launch(&mut self) {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .arg("--dir")
            .arg(&self.dir)
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        wait_listening(self.port, "redis-server");
    }

    /// Stop as a service manager would (SIGTERM: the server syncs its file and exits)
    /// and wait until it has exited.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }

    /// Start again on the same port with the same data.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "redis-server is already running");
        self.launch();
    }
}

impl Drop for RestartableRedis {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A child process whose stderr goes to a file, so a test can watch what it says.
pub struct Watched {
    pub child: Child,
    pub log: PathBuf,
    pub name: String,
}

impl Watched {
    pub fn spawn(mut cmd: Command, log: PathBuf, name: &str) -> Watched {
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        Watched {
            child,
            log,
            name: name.to_string(),
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until its stderr contains `what`; fails if it exits first or `within` passes.
    /// The first line that says it.
    pub fn wait_for(&mut self, what: &str, within: Duration) -> String {
        self.wait_for_nth(what, 1, within);
        let said = self.stderr();
        said.lines()
            .find(|l| l.contains(what))
            .unwrap_or_default()
            .to_string()
    }

    /// Wait until its stderr contains `what` `n` times.
    pub fn wait_for_nth(&mut self, what: &str, n: usize, within: Duration) {
        let saying = format!("{} says {what:?}", self.name);
        tranche_test_support::eventually(&saying, within, || {
            let said = self.stderr();
            if said.matches(what).count() >= n {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "{} exited ({status}) before saying {what:?}; stderr:\n{said}",
                    self.name
                );
            }
            Err(format!("stderr:\n{said}"))
        });
    }

    /// Wait for it to exit (at most `within`): its status, its stdout, and a text of
    /// both its stdout and stderr for messages.
    pub fn finish(mut self, within: Duration) -> (std::process::ExitStatus, String, String) {
        // On a timeout the panic drops `self`, which kills the child.
        let finishing = format!("{} finishes", self.name);
        let status = tranche_test_support::eventually(&finishing, within, || {
            self.child
                .try_wait()
                .unwrap()
                .ok_or_else(|| format!("stderr:\n{}", self.stderr()))
        });
        let mut stdout = String::new();
        if let Some(mut out) = self.child.stdout.take() {
            std::io::Read::read_to_string(&mut out, &mut stdout).unwrap();
        }
        let all = format!(
            "{} exited {status}\n--- stdout\n{stdout}--- stderr\n{}",
            self.name,
            self.stderr()
        );
        (status, stdout, all)
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The JSON answer to `request`: sent, answered and parsed, or the test fails.
pub async fn json_of(request: reqwest::RequestBuilder) -> serde_json::Value {
    request.send().await.unwrap().json().await.unwrap()
}
