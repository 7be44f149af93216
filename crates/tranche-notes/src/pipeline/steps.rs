//! The four handlers. Failures are sorted by whether trying again can help: input and
//! template problems, a refused signature and a 5xx mail reply end the client's chain
//! at once with the reason; store and mail-server hiccups are retried with backoff; a
//! full store pauses the steps that write to it (see [`super::space`]).

use std::sync::Arc;
use std::time::Duration;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use tranche_core::{Backoff, EffectError, JobContext, Registry, TaskOptions};
use tranche_mail::{Attachment, Mail, MailError};
use tranche_sign::Protection;
use tranche_storage::{StorageError, StoreKey};
use tranche_types::Outcome;

use super::plan::{entity, ProcessArgs, StepArgs};
use super::space::SNOOZE_WHEN_FULL;
use super::submit::mail_effect_key;
use super::{
    artifact_key, Night, NightSource, Step, AUDIT_KIND, DATA_KIND, MAIL, PROCESS, RENDER, SIGN,
    SIGNED_PDF_KIND, TMP_PDF_KIND,
};
use crate::note::{ClientBlock, NoteData};
use crate::render::evict_cache;
use crate::render::helper::HelperError;

/// What `process` stores: the note's data and where it goes.
#[derive(Serialize, Deserialize)]
struct NoteArtifact {
    email: String,
    note: NoteData,
}

/// The part of [`NoteArtifact`] the later steps need, read without building the rest.
#[derive(Deserialize)]
struct Delivery {
    email: String,
    note: NoteHead,
}

#[derive(Deserialize)]
struct NoteHead {
    note_number: String,
    #[serde(default)]
    replaces: Option<String>,
    client: ClientBlock,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Processed {
    pub client_code: String,
    pub net_amount: Decimal,
    pub trades: usize,
    /// What the audit record keeps once the note's personal data is gone.
    #[serde(default)]
    pub note_number: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    #[serde(default)]
    pub input_digest: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rendered {
    #[serde(flatten)]
    pub processed: Processed,
    pub pages: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Signed {
    #[serde(flatten)]
    pub rendered: Rendered,
    pub bytes: usize,
    /// SHA-256 of the signed PDF, hex.
    #[serde(default)]
    pub sha256: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mailed {
    #[serde(flatten)]
    pub signed: Signed,
    pub message_id: String,
}

fn options(step: Step, concurrency: usize) -> TaskOptions {
    TaskOptions::default()
        .queue(step.queue)
        .max_attempts(step.max_attempts)
        .concurrency(concurrency)
        .backoff(Backoff {
            base: Duration::from_secs(2),
            max: Duration::from_secs(300),
            ..Backoff::default()
        })
}

/// Register the four steps, serving any night `source` can load. `cpu` bounds the
/// CPU-bound steps in this process (process, render, sign); `mail_connections` the
/// mails in flight.
pub fn register(
    registry: &mut Registry,
    source: Arc<NightSource>,
    cpu: usize,
    mail_connections: usize,
) {
    let s = source.clone();
    registry.register_blocking(
        PROCESS.kind,
        options(PROCESS, cpu),
        move |ctx, args: ProcessArgs| match ctx.block_on(s.night(args.date)) {
            Ok(night) => process(&night, &ctx, args),
            Err(o) => reoutcome(o),
        },
    );
    let s = source.clone();
    // Typst memoises in one cache per process: a second render thread adds no
    // throughput (measured: 33 notes/s with one, 34 with two; examples/render_many)
    // and only takes a core from signing. More render throughput = more processes:
    // one note at a time per helper process.
    let renders = source.helpers.as_ref().map_or(1, |h| h.size());
    registry.register_blocking(
        RENDER.kind,
        options(RENDER, renders),
        move |ctx, args: StepArgs| match ctx.block_on(s.night(args.date)) {
            Ok(night) => render(&night, &ctx, args),
            Err(o) => reoutcome(o),
        },
    );
    let s = source.clone();
    registry.register_blocking(
        SIGN.kind,
        options(SIGN, cpu),
        move |ctx, args: StepArgs| match ctx.block_on(s.night(args.date)) {
            Ok(night) => sign(&night, &ctx, args),
            Err(o) => reoutcome(o),
        },
    );
    let s = source;
    registry.register(
        MAIL.kind,
        options(MAIL, mail_connections).timeout(Duration::from_secs(300)),
        move |ctx, args: StepArgs| {
            let s = s.clone();
            async move {
                match s.night(args.date).await {
                    Ok(night) => mail(&night, &ctx, args).await,
                    Err(o) => reoutcome(o),
                }
            }
        },
    );
}

fn key(night: &Night, kind: &str, client: &str) -> Result<StoreKey, String> {
    artifact_key(kind, night.date, client)
}

/// A store failure is worth retrying; a missing artifact is not (its step must run
/// again first — a retry of the run does that); a full store is waited for, without
/// using up an attempt.
fn store_outcome<T>(step: &str, client: &str, e: StorageError) -> Outcome<T> {
    match e {
        StorageError::NotFound { key } => Outcome::discard(format!(
            "client {client}: {step}: {key} is missing from the store"
        )),
        StorageError::Full { .. } => Outcome::Snooze(SNOOZE_WHEN_FULL),
        other => Outcome::retry(format!("client {client}: {step}: {other}")),
    }
}

/// While the store is full, a step that writes to it waits before doing its work
/// (rendering a note only to find it cannot be stored wastes a core); `Some` gives the
/// job back for later.
fn paused_for_space<T>(night: &Night, ctx: &JobContext) -> Option<Outcome<T>> {
    let go = ctx.block_on(night.space.wait_for_room(ctx));
    (!go).then_some(Outcome::Snooze(SNOOZE_WHEN_FULL))
}

fn predecessor<T: serde::de::DeserializeOwned>(
    ctx: &JobContext,
    client: &str,
) -> Result<T, String> {
    match ctx.input::<T>() {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(format!("client {client}: no result from the previous step")),
        Err(e) => Err(format!("client {client}: the previous step's result: {e}")),
    }
}

fn process(night: &Night, ctx: &JobContext, args: ProcessArgs) -> Outcome<Processed> {
    if let Some(o) = paused_for_space(night, ctx) {
        return o;
    }
    let code = &args.client_code;
    let (note, client) = match (args.note(&night.broker), &args.client) {
        (Ok(n), Some(c)) => (n, c),
        (Err(e), _) => return Outcome::discard(format!("client {code}: {e}")),
        (Ok(_), None) => {
            return Outcome::discard(format!("client {code}: not in the client master"))
        }
    };
    let processed = Processed {
        client_code: code.clone(),
        net_amount: note.net_amount,
        trades: args.trades.len(),
        note_number: note.note_number.clone(),
        replaces: note.replaces.clone(),
        input_digest: args.digest(),
    };
    let artifact = NoteArtifact {
        email: client.email.clone(),
        note,
    };
    let bytes = match serde_json::to_vec(&artifact) {
        Ok(b) => b,
        Err(e) => {
            return Outcome::discard(format!("client {code}: could not encode the note: {e}"))
        }
    };
    let k = match key(night, DATA_KIND, &entity(code, args.version)) {
        Ok(k) => k,
        Err(e) => return Outcome::discard(format!("client {code}: {e}")),
    };
    match ctx.block_on(night.store.put(&k, bytes)) {
        Ok(()) => Outcome::Complete(processed),
        Err(e) => store_outcome("process", code, e),
    }
}

fn render(night: &Night, ctx: &JobContext, args: StepArgs) -> Outcome<Rendered> {
    if let Some(o) = paused_for_space(night, ctx) {
        return o;
    }
    let code = &args.client_code;
    let processed: Processed = match predecessor(ctx, code) {
        Ok(p) => p,
        Err(e) => return Outcome::discard(e),
    };
    let at = args.entity();
    let (data_key, pdf_key) = match (key(night, DATA_KIND, &at), key(night, TMP_PDF_KIND, &at)) {
        (Ok(d), Ok(p)) => (d, p),
        (Err(e), _) | (_, Err(e)) => return Outcome::discard(format!("client {code}: {e}")),
    };
    let data = match ctx.block_on(night.store.get(&data_key)) {
        Ok(d) => d,
        Err(e) => return store_outcome("render", code, e),
    };
    let pdf = match &night.helpers {
        Some(helpers) => match helpers.render(&data) {
            Ok(p) => p,
            Err(HelperError::Render(e)) => {
                return Outcome::discard(format!("client {code}: render: {e}"))
            }
            Err(e @ HelperError::Lost(_)) => {
                return Outcome::retry(format!("client {code}: render: {e}"))
            }
        },
        None => {
            let artifact: NoteArtifact = match serde_json::from_slice(&data) {
                Ok(a) => a,
                Err(e) => {
                    return Outcome::discard(format!(
                        "client {code}: render: the stored note data: {e}"
                    ))
                }
            };
            drop(data);
            let pdf = night.renderer.render(&artifact.note);
            evict_cache();
            match pdf {
                Ok(p) => p,
                Err(e) => return Outcome::discard(format!("client {code}: render: {e}")),
            }
        }
    };
    let pages = pdf.pages;
    match ctx.block_on(night.store.put(&pdf_key, pdf.bytes)) {
        Ok(()) => Outcome::Complete(Rendered { processed, pages }),
        Err(e) => store_outcome("render", code, e),
    }
}

fn read_delivery(
    night: &Night,
    ctx: &JobContext,
    code: &str,
    at: &str,
) -> Result<Delivery, Outcome<()>> {
    let k = key(night, DATA_KIND, at).map_err(Outcome::discard)?;
    let data = ctx
        .block_on(night.store.get(&k))
        .map_err(|e| store_outcome("sign", code, e))?;
    serde_json::from_slice(&data)
        .map_err(|e| Outcome::discard(format!("client {code}: the stored note data: {e}")))
}

fn sign(night: &Night, ctx: &JobContext, args: StepArgs) -> Outcome<Signed> {
    if let Some(o) = paused_for_space(night, ctx) {
        return o;
    }
    let code = &args.client_code;
    let rendered: Rendered = match predecessor(ctx, code) {
        Ok(p) => p,
        Err(e) => return Outcome::discard(e),
    };
    let at = args.entity();
    let (tmp_key, signed_key) = match (
        key(night, TMP_PDF_KIND, &at),
        key(night, SIGNED_PDF_KIND, &at),
    ) {
        (Ok(t), Ok(s)) => (t, s),
        (Err(e), _) | (_, Err(e)) => return Outcome::discard(format!("client {code}: {e}")),
    };
    let pdf = match ctx.block_on(night.store.get(&tmp_key)) {
        Ok(p) => p,
        // An earlier attempt signed, stored and cleaned up, then lost its lease.
        Err(StorageError::NotFound { .. }) => {
            return match ctx.block_on(night.store.get(&signed_key)) {
                Ok(done) => Outcome::Complete(Signed {
                    rendered,
                    bytes: done.len(),
                    sha256: sha256_hex(&done),
                }),
                Err(e) => store_outcome("sign", code, e),
            }
        }
        Err(e) => return store_outcome("sign", code, e),
    };
    let delivery = match read_delivery(night, ctx, code, &at) {
        Ok(d) => d,
        Err(o) => return reoutcome(o),
    };
    let protection = Protection {
        user_password: night.password_rule.password(&delivery.note.client),
        owner_password: night.owner_password.clone(),
        cipher: night.cipher,
    };
    let signed = match night.signer.protect(&pdf, &protection) {
        Ok(s) => s,
        Err(e) => return Outcome::discard(format!("client {code}: sign: {e}")),
    };
    let bytes = signed.len();
    let sha256 = sha256_hex(&signed);
    if let Err(e) = ctx.block_on(night.store.put(&signed_key, signed)) {
        return store_outcome("sign", code, e);
    }
    // The unencrypted PDF shows the client's PAN: it does not outlive its signed copy.
    match ctx.block_on(night.store.delete(&tmp_key)) {
        Ok(()) | Err(StorageError::NotFound { .. }) => {}
        Err(e) => return store_outcome("sign", code, e),
    }
    Outcome::Complete(Signed {
        rendered,
        bytes,
        sha256,
    })
}

/// An outcome of `()` (an early exit) as one of another type: results never carry it.
fn reoutcome<T>(o: Outcome<()>) -> Outcome<T> {
    match o {
        Outcome::Complete(()) => Outcome::discard("internal: an early exit without an error"),
        Outcome::Retry { error, after } => Outcome::Retry { error, after },
        Outcome::Snooze(d) => Outcome::Snooze(d),
        Outcome::Cancel(r) => Outcome::Cancel(r),
        Outcome::Discard(e) => Outcome::Discard(e),
    }
}

/// What stays of a mailed note once its personal data (PAN, e-mail, address, trades)
/// is removed from the store: what an audit needs to tie the mail to its input and
/// its signed PDF.
#[derive(Serialize)]
struct AuditRecord {
    client_code: String,
    trade_date: chrono::NaiveDate,
    version: u32,
    note_number: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    replaces: Option<String>,
    input_digest: String,
    signed_pdf_sha256: String,
    message_id: String,
}

/// Write the audit record, then remove the note data: in that order, so a retry after
/// a crash between the two still finds one of them, and repeating both is harmless.
async fn forget_personal_data(
    night: &Night,
    audit: &AuditRecord,
    audit_key: &StoreKey,
    data_key: &StoreKey,
) -> Result<(), StorageError> {
    let bytes = serde_json::to_vec(audit).expect("an audit record serialises");
    night.store.put(audit_key, bytes).await?;
    match night.store.delete(data_key).await {
        Ok(()) | Err(StorageError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Why the mail effect was not performed.
#[derive(Debug, thiserror::Error)]
enum MailStepError {
    #[error("{0}")]
    Store(StorageError),
    #[error("the stored note data: {0}")]
    Data(serde_json::Error),
    #[error("{0}")]
    Mail(MailError),
}

/// The Message-ID of a client's note of a day: the same on every attempt, so a copy
/// that does get through twice is recognisably one message.
pub fn message_id(night: &Night, note_number: &str) -> String {
    format!(
        "{note_number}.{}@{}",
        night.date,
        night.broker.mail_domain()
    )
}

async fn mail(night: &Night, ctx: &JobContext, args: StepArgs) -> Outcome<Mailed> {
    let code = &args.client_code;
    let signed: Signed = match predecessor(ctx, code) {
        Ok(p) => p,
        Err(e) => return Outcome::discard(e),
    };
    let at = args.entity();
    let (data_key, pdf_key, audit_key) = match (
        key(night, DATA_KIND, &at),
        key(night, SIGNED_PDF_KIND, &at),
        key(night, AUDIT_KIND, &at),
    ) {
        (Ok(d), Ok(p), Ok(a)) => (d, p, a),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            return Outcome::discard(format!("client {code}: {e}"))
        }
    };
    let effect = mail_effect_key(ctx.run(), code, args.version);
    let sent = ctx
        .once(&effect, || async {
            let data = night.store.get(&data_key).await.map_err(MailStepError::Store)?;
            let delivery: Delivery = serde_json::from_slice(&data).map_err(MailStepError::Data)?;
            let pdf = night.store.get(&pdf_key).await.map_err(MailStepError::Store)?;
            let number = &delivery.note.note_number;
            let (subject, corrects) = match &delivery.note.replaces {
                None => (format!("Contract note {number} for trades of {}", night.date), String::new()),
                Some(old) => (
                    format!("Corrected contract note {number} for trades of {} (replaces {old})", night.date),
                    format!("\r\nIt replaces contract note {old}, which was sent to you with incorrect details: please disregard that one.\r\n"),
                ),
            };
            let mail = Mail {
                message_id: message_id(night, number),
                from: night.broker.sender(),
                to: delivery.email,
                subject,
                text: format!(
                    "Dear {},\r\n\r\nPlease find attached your contract note cum tax invoice {number} for your trades of {}.\r\n{corrects}The PDF is digitally signed by {} and protected with a password (as notified to you).\r\n\r\nThis is an automated message.\r\n",
                    delivery.note.client.name, night.date, night.broker.name
                ),
                attachments: vec![Attachment {
                    // A note number has slashes (CN/20261120/0000003); some mail
                    // clients cut a file name at the last one, others refuse it.
                    filename: format!("{}.pdf", number.replace(['/', '\\'], "-")),
                    content_type: "application/pdf".to_string(),
                    bytes: pdf,
                }],
            };
            night
                .mailer
                .send(&mail)
                .await
                .map(|s| s.message_id)
                .map_err(MailStepError::Mail)
        })
        .await;
    match sent {
        Ok(message_id) => {
            let audit = AuditRecord {
                client_code: code.clone(),
                trade_date: night.date,
                version: args.version,
                note_number: signed.rendered.processed.note_number.clone(),
                replaces: signed.rendered.processed.replaces.clone(),
                input_digest: signed.rendered.processed.input_digest.clone(),
                signed_pdf_sha256: signed.sha256.clone(),
                message_id: message_id.clone(),
            };
            match forget_personal_data(night, &audit, &audit_key, &data_key).await {
                Ok(()) => Outcome::Complete(Mailed { signed, message_id }),
                Err(e) => store_outcome("mail", code, e),
            }
        }
        Err(EffectError::Cancelled) => Outcome::cancel("cancelled before the mail was sent"),
        Err(EffectError::Backend(e)) => Outcome::retry(format!("client {code}: mail: {e}")),
        Err(EffectError::Effect(MailStepError::Store(e))) => store_outcome("mail", code, e),
        Err(EffectError::Effect(MailStepError::Mail(MailError::Temporary(m)))) => {
            Outcome::retry(format!("client {code}: mail: {m}"))
        }
        // Nothing was sent: wait for space like the other steps, without an attempt.
        Err(EffectError::Effect(MailStepError::Mail(MailError::Full(_)))) => {
            Outcome::Snooze(SNOOZE_WHEN_FULL)
        }
        Err(EffectError::Effect(e)) => Outcome::discard(format!("client {code}: mail: {e}")),
    }
}
