//! What a process needs to do contract-note steps — the store, the template, the
//! signing key, the mailer and the passwords — checked and loaded before any job runs.
//! Shared by `notes run`, `notes demo`, `bench notes` and `worker`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use rand::RngExt as _;
use tranche_mail::{Mailer, OutboxMailer, SmtpConfig, SmtpMailer};
use tranche_notes::pipeline::{NightSource, PasswordRule, Workers};
use tranche_notes::render::helper::RenderHelpers;
use tranche_notes::render::Renderer;
use tranche_sign::{Cipher, Pkcs12Signer, SignatureInfo, Signer};
use tranche_storage::{LocalStore, Storage};

use crate::cli::{CipherArg, StepOptions};
use crate::output::server_address;
use crate::secrets;

/// The variables the signing key store's password and the PDFs' owner password come
/// from (or `…_FILE`, naming a file that holds it).
pub const P12_PASSWORD_VAR: &str = "TRANCHE_SIGN_P12_PASSWORD";
pub const OWNER_PASSWORD_VAR: &str = "TRANCHE_OWNER_PASSWORD";

/// How this process does the steps, with defaults under `out`.
pub struct RunOptions {
    /// Holds report.csv (for `notes run`), and by default store/, outbox/,
    /// demo-signer/ and owner-password.
    pub out: PathBuf,
    pub store: Option<String>,
    pub smtp: Option<String>,
    pub smtp_connections: u32,
    pub sign_p12: Option<PathBuf>,
    pub template: Option<PathBuf>,
    pub password_rule: String,
    pub cipher: Cipher,
    pub workers: Workers,
    /// Helper processes rendering notes; 0: render in this process.
    pub render_processes: usize,
}

impl RunOptions {
    pub fn new(out: &Path, a: &StepOptions, queues: Vec<String>) -> Self {
        RunOptions {
            out: out.to_path_buf(),
            store: a.store.clone(),
            smtp: a.smtp.clone(),
            smtp_connections: a.smtp_connections,
            sign_p12: a.sign_p12.clone(),
            template: a.template.clone(),
            password_rule: a.password_rule.clone(),
            cipher: match a.cipher {
                CipherArg::Aes256 => Cipher::Aes256,
                CipherArg::Aes128 => Cipher::Aes128,
            },
            workers: Workers {
                cpu: a.concurrency.unwrap_or(Workers::default().cpu),
                mail: (a.smtp_connections as usize * 2).max(1),
                queues,
            },
            render_processes: a.render_processes.unwrap_or(Workers::default().cpu),
        }
    }

    /// Defaults for a night on this machine: outbox, demo key, AES-256.
    pub fn local(out: &Path, smtp: Option<String>) -> Self {
        RunOptions {
            out: out.to_path_buf(),
            store: None,
            smtp,
            smtp_connections: 4,
            sign_p12: None,
            template: None,
            password_rule: "{pan}".to_string(),
            cipher: Cipher::Aes256,
            workers: Workers::default(),
            render_processes: Workers::default().cpu,
        }
    }
}

/// Everything the steps need, and what to tell the user about it.
pub struct StepSetup {
    /// Holds the mailer, closed when the process is done with it.
    pub source: Arc<NightSource>,
    pub mail_to: String,
    pub signer_note: String,
}

/// The artifact store: `--store` (a directory or s3://…), else OUT/store.
pub fn open_store(options: &RunOptions) -> Result<Arc<dyn Storage>> {
    match &options.store {
        Some(s) => tranche_storage::open_store(s).context("--store"),
        None => Ok(Arc::new(LocalStore::new(options.out.join("store")))),
    }
}

/// The owner password: from the environment, else the one this output directory was
/// given before, else a fresh random one kept in `OUT/owner-password` (owner-only).
fn owner_password(out: &Path) -> Result<String> {
    if let Some(p) = secrets::from_env(OWNER_PASSWORD_VAR)? {
        return Ok(p);
    }
    let path = out.join("owner-password");
    match std::fs::read_to_string(&path) {
        Ok(p) if !p.trim().is_empty() => return Ok(p.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
    // A secret: from the thread's ChaCha generator, seeded by the OS (fastrand is
    // predictable from a few outputs).
    let password: String = rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(32)
        .map(char::from)
        .collect();
    secrets::write_private(&path, &password)?;
    Ok(password)
}

fn signer(options: &RunOptions) -> Result<(Arc<dyn Signer>, String)> {
    let info = SignatureInfo {
        reason: "Contract note cum tax invoice".to_string(),
        location: String::new(),
        contact: None,
    };
    match &options.sign_p12 {
        Some(path) => {
            let password = secrets::from_env(P12_PASSWORD_VAR)?.unwrap_or_default();
            let der = std::fs::read(path)
                .with_context(|| format!("cannot read the signing key {}", path.display()))?;
            let signer = Pkcs12Signer::from_pkcs12(&der, &password, info).with_context(|| {
                format!(
                    "{}: cannot use it as a signing key (password from {P12_PASSWORD_VAR} or {P12_PASSWORD_VAR}_FILE)",
                    path.display()
                )
            })?;
            Ok((Arc::new(signer), format!("signed with {}", path.display())))
        }
        None => {
            let dir = options.out.join("demo-signer");
            // The demo key store's password only guards a throwaway key.
            let signer = Pkcs12Signer::demo_in(&dir, "demo", info).with_context(|| {
                format!("cannot make the demo signing key in {}", dir.display())
            })?;
            Ok((
                Arc::new(signer),
                format!(
                    "signed with a SELF-SIGNED DEMO certificate ({}; pass --sign-p12 for a real key)",
                    dir.join("demo-signer.pem").display()
                ),
            ))
        }
    }
}

/// Validate the options and load what every job shares (template, key, mailer).
pub fn setup(options: &RunOptions, store: Arc<dyn Storage>) -> Result<StepSetup> {
    let password_rule = PasswordRule::parse(&options.password_rule)
        .map_err(|e| anyhow::anyhow!("--password-rule: {e}"))?;
    std::fs::create_dir_all(&options.out)
        .with_context(|| format!("cannot create {}", options.out.display()))?;
    let renderer = match &options.template {
        Some(path) => Renderer::from_file(path)?,
        None => Renderer::new(),
    };
    let (signer, signer_note) = signer(options)?;
    let (mailer, mail_to) = match &options.smtp {
        Some(url) => {
            let mut config = SmtpConfig::from_env(url.clone())?;
            config.pool_size = options.smtp_connections.max(1);
            let mailer = SmtpMailer::new(config).with_context(|| "--smtp")?;
            let default_port = if url.starts_with("smtps:") { 465 } else { 25 };
            let shown = server_address(url, default_port);
            (
                Arc::new(mailer) as Arc<dyn Mailer>,
                format!("mail via {shown}"),
            )
        }
        None => {
            let dir = options.out.join("outbox");
            let mailer = OutboxMailer::new(&dir)
                .with_context(|| format!("cannot create the outbox {}", dir.display()))?;
            (
                Arc::new(mailer) as Arc<dyn Mailer>,
                format!(
                    "mail written as .eml files to {} (no --smtp)",
                    dir.display()
                ),
            )
        }
    };
    let mut source = NightSource::new(
        store,
        renderer,
        signer,
        mailer,
        password_rule,
        owner_password(&options.out)?,
        options.cipher,
    );
    if options.render_processes > 0 {
        source = source.with_helpers(render_helpers(options)?);
    }
    Ok(StepSetup {
        source: Arc::new(source),
        mail_to,
        signer_note,
    })
}

/// This binary started again as `notes render-helper`, as many times as asked.
fn render_helpers(options: &RunOptions) -> Result<RenderHelpers> {
    let exe = std::env::current_exe()
        .context("cannot find this program to start render helpers (--render-processes 0 renders in this process)")?;
    let template = options.template.clone();
    Ok(RenderHelpers::new(options.render_processes, move || {
        let mut command = std::process::Command::new(&exe);
        command.args(["notes", "render-helper"]);
        if let Some(t) = &template {
            command.arg("--template").arg(t);
        }
        command
    }))
}
