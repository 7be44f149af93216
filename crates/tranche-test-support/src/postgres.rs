//! A real PostgreSQL server for a test: a fresh cluster in a temporary directory,
//! listening on a free loopback port, stopped and removed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A running PostgreSQL server with one superuser, `tranche`, trusted on loopback.
#[derive(Debug)]
pub struct Postgres {
    bin: PathBuf,
    /// Holds the cluster (`db/`), its log and its socket; removed when dropped.
    dir: tempfile::TempDir,
    port: u16,
    /// Run the server's commands as this user (`postgres` when the test runs as root,
    /// which `initdb` refuses).
    run_as: Option<&'static str>,
}

impl Postgres {
    /// Start a server. `None` when PostgreSQL is not installed (the test is skipped,
    /// saying why), or a failure when [`tools_required`](crate::tools_required).
    pub fn start() -> Option<Postgres> {
        let Some(bin) = bin_dir() else {
            crate::missing_tool("PostgreSQL (initdb, pg_ctl: apt-get install postgresql)");
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("tranche-pg-")
            .tempdir()
            .expect("a temporary directory");
        let run_as = is_root().then_some("postgres");
        if let Some(user) = run_as {
            let chown = Command::new("chown")
                .args([user, &dir.path().display().to_string()])
                .output()
                .expect("run chown");
            assert!(chown.status.success(), "chown: {}", stderr(&chown));
        }
        let pg = Postgres {
            bin,
            dir,
            port: free_port(),
            run_as,
        };
        let db = pg.dir.path().join("db");
        let init = pg.run(
            "initdb",
            &[
                "-D",
                &db.display().to_string(),
                "-U",
                "tranche",
                "--auth=trust",
                "--no-sync",
            ],
        );
        assert!(init.status.success(), "initdb: {}", stderr(&init));
        pg.pg_ctl_start();
        Some(pg)
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A connection URL for `database` as the superuser `tranche` (no password: the
    /// cluster trusts loopback).
    pub fn url(&self, database: &str) -> String {
        format!("postgres://tranche@127.0.0.1:{}/{database}", self.port)
    }

    /// Create a database (each test its own, so tests sharing a server stay apart).
    pub fn create_database(&self, name: &str) {
        let out = self.psql("postgres", &format!("CREATE DATABASE \"{name}\""));
        assert!(out.status.success(), "create database: {}", stderr(&out));
    }

    /// Run one SQL command with `psql` in `database`.
    pub fn psql(&self, database: &str, sql: &str) -> Output {
        Command::new("psql")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "tranche", "-d", database, "-v", "ON_ERROR_STOP=1"])
            .args(["-tAc", sql])
            .output()
            .expect("run psql")
    }

    /// Stop the server at once, as a crash or a power cut would (`-m immediate`), to
    /// test what survives; [`restart`](Self::restart) brings it back on the same port.
    pub fn kill(&self) {
        let db = self.dir.path().join("db");
        let out = self.run(
            "pg_ctl",
            &[
                "-D",
                &db.display().to_string(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
        );
        assert!(out.status.success(), "pg_ctl stop: {}", stderr(&out));
    }

    /// Start the server again after [`kill`](Self::kill).
    pub fn restart(&self) {
        self.pg_ctl_start();
    }

    /// Start the cluster on its port and wait until it answers.
    fn pg_ctl_start(&self) {
        let db = self.dir.path().join("db");
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("log");
        let out = self.run(
            "pg_ctl",
            &[
                "-D",
                &db.display().to_string(),
                "-o",
                &options,
                "-l",
                &log.display().to_string(),
                "-w",
                "start",
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl start: {}\n{}",
            stderr(&out),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        self.wait_ready(Duration::from_secs(30));
    }

    fn wait_ready(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if self.psql("postgres", "SELECT 1").status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "PostgreSQL did not answer within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Run one of the server's programs, as `run_as` when set.
    fn run(&self, program: &str, args: &[&str]) -> Output {
        let path = self.bin.join(program);
        match self.run_as {
            None => Command::new(&path).args(args).output(),
            Some(user) => Command::new("runuser")
                .args(["-u", user, "--"])
                .arg(&path)
                .args(args)
                .output(),
        }
        .unwrap_or_else(|e| panic!("run {}: {e}", path.display()))
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let db = self.dir.path().join("db");
        // Best effort: a server already killed by the test answers an error here.
        let _ = self.run(
            "pg_ctl",
            &["-D", &db.display().to_string(), "-m", "immediate", "stop"],
        );
    }
}

/// Where `initdb` and `pg_ctl` are: on the PATH, or Debian's versioned directory.
fn bin_dir() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .find(|p| p.join("initdb").is_file() && p.join("pg_ctl").is_file())
    });
    if let Some(dir) = on_path {
        // Debian links them into /usr/local/bin; the server wants its own directory.
        return std::fs::canonicalize(dir.join("initdb"))
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf));
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    versions.sort();
    versions.pop()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
