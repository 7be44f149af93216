//! The four handlers. Failures are sorted by whether trying again can help (see
//! [`StepError`]): input and template problems, a refused signature and a 5xx mail
//! reply end the client's chain at once with the reason; store and mail-server hiccups
//! are retried with backoff; a full store pauses the steps that write to it (see
//! [`super::space`]).

use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tranche_core::{Backoff, EffectError, JobContext, Registry, TaskOptions};
use tranche_mail::{Attachment, Mail};
use tranche_sign::Protection;
use tranche_storage::{StorageError, StoreKey};

use super::mail_text::NoteMail;
use super::plan::{ProcessArgs, StepArgs};
use super::step_error::{settle, StepError, StepResult};
use super::submit::mail_effect_key;
use super::{Artifacts, Night, NightSource, Step, MAIL, PROCESS, RENDER, SIGN};
use crate::note::{ClientBlock, NoteData};
use crate::render::evict_cache;

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
pub(crate) struct Processed {
    pub(crate) client_code: String,
    pub(crate) net_amount: Decimal,
    pub(crate) trades: usize,
    /// What the audit record keeps once the note's personal data is gone.
    #[serde(default)]
    pub(crate) note_number: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) replaces: Option<String>,
    #[serde(default)]
    pub(crate) input_digest: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Rendered {
    #[serde(flatten)]
    pub(crate) processed: Processed,
    pub(crate) pages: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Signed {
    #[serde(flatten)]
    pub(crate) rendered: Rendered,
    pub(crate) bytes: usize,
    /// SHA-256 of the signed PDF, hex.
    #[serde(default)]
    pub(crate) sha256: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Mailed {
    #[serde(flatten)]
    pub(crate) signed: Signed,
    pub(crate) message_id: String,
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
pub(crate) fn register(
    registry: &mut Registry,
    source: Arc<NightSource>,
    cpu: usize,
    mail_connections: usize,
) {
    register_cpu_bound(registry, PROCESS, cpu, source.clone(), process);
    // Typst memoises in one cache per process: a second render thread adds no
    // throughput (measured: 33 notes/s with one, 34 with two; examples/render_many)
    // and only takes a core from signing. More render throughput = more processes:
    // one note at a time per helper process.
    let renders = source.helpers.as_ref().map_or(1, |h| h.size());
    register_cpu_bound(registry, RENDER, renders, source.clone(), render);
    register_cpu_bound(registry, SIGN, cpu, source.clone(), sign);
    registry.register(
        MAIL.kind,
        options(MAIL, mail_connections).timeout(Duration::from_secs(300)),
        move |ctx, args: StepArgs| {
            let source = source.clone();
            async move {
                let client = args.client_code.clone();
                let done = match source.night(args.date).await {
                    Ok(night) => mail(&night, &ctx, args).await,
                    Err(e) => Err(e.into()),
                };
                settle(done, &client)
            }
        },
    );
}

/// What every step's arguments name: the night and the client.
trait ChainArgs {
    fn date(&self) -> NaiveDate;
    fn client_code(&self) -> &str;
}

impl ChainArgs for ProcessArgs {
    fn date(&self) -> NaiveDate {
        self.date
    }
    fn client_code(&self) -> &str {
        &self.client_code
    }
}

impl ChainArgs for StepArgs {
    fn date(&self) -> NaiveDate {
        self.date
    }
    fn client_code(&self) -> &str {
        &self.client_code
    }
}

/// A step that runs on a blocking thread, with its night loaded and its result turned
/// into the engine's decision about its client's job.
fn register_cpu_bound<A, T>(
    registry: &mut Registry,
    step: Step,
    concurrency: usize,
    source: Arc<NightSource>,
    run: fn(&Night, &JobContext, A) -> Result<T, StepError>,
) where
    A: ChainArgs + DeserializeOwned + Send + 'static,
    T: Serialize + 'static,
{
    registry.register_blocking(
        step.kind,
        options(step, concurrency),
        move |ctx, args: A| {
            let client = args.client_code().to_string();
            let done = ctx
                .block_on(source.night(args.date()))
                .map_err(StepError::from)
                .and_then(|night| run(&night, &ctx, args));
            settle(done, &client)
        },
    );
}

/// The note's data as `process` stores it and the later steps read it.
#[derive(Debug, thiserror::Error)]
enum NoteDataError {
    #[error("could not encode the note: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("the stored note data: {0}")]
    Decode(#[source] serde_json::Error),
}

/// The previous step's result, which this step carries forward.
#[derive(Debug, thiserror::Error)]
enum PredecessorError {
    #[error("no result from the previous step")]
    Missing,
    #[error("the previous step's result: {0}")]
    Unreadable(#[source] serde_json::Error),
}

/// While the store is full, a step that writes to it waits before doing its work
/// (rendering a note only to find it cannot be stored wastes a core); the job is given
/// back for later if the wait runs out.
fn wait_for_space(night: &Night, ctx: &JobContext) -> Result<(), StepError> {
    if ctx.block_on(night.space.wait_for_room(ctx)) {
        Ok(())
    } else {
        Err(StepError::snooze(
            // Offered again after this, it then waits at the gate for room.
            tranche_types::SNOOZE_WHEN_FULL,
            "the store is full: waiting for room",
        ))
    }
}

fn predecessor<T: DeserializeOwned>(ctx: &JobContext) -> Result<T, StepError> {
    let input = ctx
        .input::<T>()
        .map_err(PredecessorError::Unreadable)
        .permanent()?;
    input.ok_or(PredecessorError::Missing).permanent()
}

fn process(night: &Night, ctx: &JobContext, args: ProcessArgs) -> Result<Processed, StepError> {
    wait_for_space(night, ctx)?;
    let note = args.note(&night.broker).permanent()?;
    let client = args
        .client
        .as_ref()
        .ok_or("not in the client master")
        .permanent()?;
    let processed = Processed {
        client_code: args.client_code.clone(),
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
    let bytes = serde_json::to_vec(&artifact)
        .map_err(NoteDataError::Encode)
        .permanent()?;
    let keys = args.artifacts().permanent()?;
    ctx.block_on(night.store.put(&keys.data, bytes))
        .at("process")?;
    Ok(processed)
}

fn render(night: &Night, ctx: &JobContext, args: StepArgs) -> Result<Rendered, StepError> {
    wait_for_space(night, ctx)?;
    let processed: Processed = predecessor(ctx)?;
    let keys = args.artifacts().permanent()?;
    let data = ctx.block_on(night.store.get(&keys.data)).at("render")?;
    let pdf = match &night.helpers {
        Some(helpers) => helpers.render(&data).at("render")?,
        None => {
            let artifact: NoteArtifact = serde_json::from_slice(&data)
                .map_err(NoteDataError::Decode)
                .permanent()
                .at("render")?;
            drop(data);
            let pdf = night.renderer.render(&artifact.note);
            evict_cache();
            pdf.permanent().at("render")?
        }
    };
    let pages = pdf.pages;
    ctx.block_on(night.store.put(&keys.tmp_pdf, pdf.bytes))
        .at("render")?;
    Ok(Rendered { processed, pages })
}

fn read_delivery(night: &Night, ctx: &JobContext, keys: &Artifacts) -> Result<Delivery, StepError> {
    let data = ctx.block_on(night.store.get(&keys.data)).at("sign")?;
    serde_json::from_slice(&data)
        .map_err(NoteDataError::Decode)
        .permanent()
}

fn sign(night: &Night, ctx: &JobContext, args: StepArgs) -> Result<Signed, StepError> {
    wait_for_space(night, ctx)?;
    let rendered: Rendered = predecessor(ctx)?;
    let keys = args.artifacts().permanent()?;
    let pdf = match ctx.block_on(night.store.get(&keys.tmp_pdf)) {
        Ok(p) => p,
        // An earlier attempt signed, stored and cleaned up, then lost its lease.
        Err(StorageError::NotFound { .. }) => {
            let done = ctx.block_on(night.store.get(&keys.signed_pdf)).at("sign")?;
            return Ok(Signed {
                rendered,
                bytes: done.len(),
                sha256: sha256_hex(&done),
            });
        }
        Err(e) => return Err(StepError::from(e).at("sign")),
    };
    let delivery = read_delivery(night, ctx, &keys)?;
    let protection = Protection {
        user_password: night.password_rule.password(&delivery.note.client),
        owner_password: night.owner_password.clone(),
        cipher: night.cipher,
    };
    let signed = night
        .signer
        .protect(&pdf, &protection)
        .permanent()
        .at("sign")?;
    let bytes = signed.len();
    let sha256 = sha256_hex(&signed);
    ctx.block_on(night.store.put(&keys.signed_pdf, signed))
        .at("sign")?;
    // The unencrypted PDF shows the client's PAN: it does not outlive its signed copy.
    match ctx.block_on(night.store.delete(&keys.tmp_pdf)) {
        Ok(()) | Err(StorageError::NotFound { .. }) => {}
        Err(e) => return Err(StepError::from(e).at("sign")),
    }
    Ok(Signed {
        rendered,
        bytes,
        sha256,
    })
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

/// The Message-ID of a client's note of a day: the same on every attempt, so a copy
/// that does get through twice is recognisably one message.
pub(crate) fn message_id(night: &Night, note_number: &str) -> String {
    format!(
        "{note_number}.{}@{}",
        night.date,
        night.broker.mail_domain()
    )
}

/// Send the client's note: read its address and signed PDF, and hand the mail over.
/// What fails says so itself ("the stored note data: …"); the caller adds the stage.
async fn send_note(night: &Night, keys: &Artifacts) -> Result<String, StepError> {
    let data = night.store.get(&keys.data).await?;
    let delivery: Delivery = serde_json::from_slice(&data)
        .map_err(NoteDataError::Decode)
        .permanent()?;
    let pdf = night.store.get(&keys.signed_pdf).await?;
    let number = &delivery.note.note_number;
    let text = NoteMail {
        number,
        date: night.date,
        client_name: &delivery.note.client.name,
        broker_name: &night.broker.name,
        replaces: delivery.note.replaces.as_deref(),
    }
    .text();
    let mail = Mail {
        message_id: message_id(night, number),
        from: night.broker.sender(),
        to: delivery.email,
        subject: text.subject,
        text: text.body,
        attachments: vec![Attachment {
            // A note number has slashes (CN/20261120/0000003); some mail
            // clients cut a file name at the last one, others refuse it.
            filename: format!("{}.pdf", number.replace(['/', '\\'], "-")),
            content_type: "application/pdf".to_string(),
            bytes: pdf,
        }],
    };
    Ok(night.mailer.send(&mail).await?.message_id)
}

async fn mail(night: &Night, ctx: &JobContext, args: StepArgs) -> Result<Mailed, StepError> {
    let signed: Signed = predecessor(ctx)?;
    let keys = args.artifacts().permanent()?;
    let effect = mail_effect_key(ctx.run(), &args.client_code, args.version);
    let message_id = match ctx.once(&effect, || send_note(night, &keys)).await {
        Ok(id) => id,
        Err(EffectError::Cancelled) => {
            return Err(StepError::cancelled("cancelled before the mail was sent"))
        }
        Err(EffectError::Backend(e)) => return Err(StepError::from(e).at("mail")),
        Err(EffectError::Effect(e)) => return Err(e.at("mail")),
    };
    let processed = &signed.rendered.processed;
    let audit = AuditRecord {
        client_code: args.client_code.clone(),
        trade_date: night.date,
        version: args.version,
        note_number: processed.note_number.clone(),
        replaces: processed.replaces.clone(),
        input_digest: processed.input_digest.clone(),
        signed_pdf_sha256: signed.sha256.clone(),
        message_id: message_id.clone(),
    };
    forget_personal_data(night, &audit, &keys.audit, &keys.data)
        .await
        .at("mail")?;
    Ok(Mailed { signed, message_id })
}
