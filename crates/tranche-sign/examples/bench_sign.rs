//! Time tranche-sign on N copies of a Typst contract note: encrypt only, sign only and
//! both (what the pipeline does), one note at a time, then both on every core.
//!
//! `cargo run --release -p tranche-sign --example bench_sign -- [--dir DIR] [N] [NOTE.pdf]`
//!
//! N defaults to 200 and the note to the test fixture. Prints wall time and CPU time
//! per note (the latter is what matters on a machine shared with other work). With `--dir`, the demo identity
//! (`demo-signer.p12`, password from `BENCH_P12_PASSWORD`, default `bench-demo`), the note
//! and an R6-encrypted copy are written there for `bench/sign-pyhanko.py`.

use std::path::PathBuf;
use std::time::Instant;

use tranche_sign::conformance::{OWNER_PASSWORD, TYPST_NOTE, USER_PASSWORD};
use tranche_sign::{encrypt, Cipher, Pkcs12Signer, Protection, SignatureInfo, Signer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut dir: Option<PathBuf> = None;
    let mut positional = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--dir" {
            dir = Some(args.next().ok_or("--dir needs a directory")?.into());
        } else {
            positional.push(arg);
        }
    }
    let n: usize = positional
        .first()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(200);
    let note = match positional.get(1) {
        Some(path) => std::fs::read(path)?,
        None => TYPST_NOTE.to_vec(),
    };
    let info = SignatureInfo {
        reason: "Contract note".into(),
        ..SignatureInfo::default()
    };
    let signer = match &dir {
        Some(dir) => {
            let password =
                std::env::var("BENCH_P12_PASSWORD").unwrap_or_else(|_| "bench-demo".into());
            Pkcs12Signer::demo_in(dir, &password, info)?
        }
        None => Pkcs12Signer::demo(info)?,
    };
    let protection = |cipher| Protection {
        user_password: USER_PASSWORD.into(),
        owner_password: OWNER_PASSWORD.into(),
        cipher,
    };
    if let Some(dir) = &dir {
        std::fs::write(dir.join("note.pdf"), &note)?;
        std::fs::write(
            dir.join("note-r6.pdf"),
            encrypt(&note, &protection(Cipher::Aes256))?,
        )?;
    }

    println!(
        "tranche-sign, {n} notes of {} bytes, RSA-2048, one thread",
        note.len()
    );
    let time = |name: &str, work: &dyn Fn() -> Result<Vec<u8>, tranche_sign::SignError>| {
        work().expect("warm-up");
        let (started, cpu_started) = (Instant::now(), cpu_seconds());
        let mut bytes = 0;
        for _ in 0..n {
            bytes += work().expect("protecting a note").len();
        }
        let per_note = started.elapsed().as_secs_f64() * 1000.0 / n as f64;
        let cpu_per_note = (cpu_seconds() - cpu_started) * 1000.0 / n as f64;
        println!(
            "  {name:32} {per_note:8.2} ms/note wall {cpu_per_note:8.2} ms/note CPU  (output {} bytes)",
            bytes / n
        );
    };
    time("encrypt only, AES-256 R6", &|| {
        encrypt(&note, &protection(Cipher::Aes256))
    });
    time("encrypt only, AES-128 R4", &|| {
        encrypt(&note, &protection(Cipher::Aes128))
    });
    time("sign only (plain note)", &|| signer.sign(&note));
    time("encrypt R6 + sign (protect)", &|| {
        signer.protect(&note, &protection(Cipher::Aes256))
    });
    time("encrypt R4 + sign (protect)", &|| {
        signer.protect(&note, &protection(Cipher::Aes128))
    });

    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (signer, note) = (&signer, &note);
            scope.spawn(move || {
                for _ in (t..n).step_by(threads) {
                    signer
                        .protect(note, &protection(Cipher::Aes256))
                        .expect("protecting a note");
                }
            });
        }
    });
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "  protect R6 on {threads} threads: {:.0} notes/s ({:.2} ms/note per core)",
        n as f64 / elapsed,
        elapsed * 1000.0 * threads as f64 / n as f64
    );
    Ok(())
}

/// CPU time of this process (user + system), from /proc: on a shared machine the wall
/// time also counts other processes' turns on the cores. 0 where /proc is missing.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks: f64 = fields.get(11..13).map_or(0.0, |t| {
        t.iter().filter_map(|v| v.parse::<f64>().ok()).sum()
    });
    ticks / 100.0 // USER_HZ is 100 on Linux
}
