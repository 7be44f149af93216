//! ACH entries over HTTP: import into the entry ledger, read one, cancel one.
//!
//! The ledger ([`tranche_ach_ledger::Ledger`]) is optional: a server started without
//! one answers every `/v1/ach/*` route 404 with the code `no_ledger`. Import is per
//! entry: each gets its result, in order (new or existing with its current state, a
//! conflict, and the field errors of an invalid one — which is stored `rejected`).
//! A body that is not entries at all (a field of the wrong type, a routing number
//! with a bad check digit, a key that is no field) is refused whole, 400, naming
//! `entries[i].field` and never saying the value back. With the server's ACH rules
//! (`--ach-rules`), an entry of a bank they do not have is stored, then rejected.
//! What a rejected entry keeps is bounded by the ledger (`Entry::bounded`).
//! Account numbers are masked in answers unless the request may see personal data.
//! A submission date's figures (`/v1/ach/status`) are counts and amounts per bank and
//! window, so any token that may read entries may read them.

use std::fmt;
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use chrono::{DateTime, NaiveDate};
use serde::{Deserialize, Serialize};
use tranche_ach::{excerpt, is_bank_name, Entry, FieldError, MAX_ENTRY_ID};
use tranche_ach_ledger::{
    CancelOutcome, ImportOutcome, Ledger, LedgerError, RejectOutcome, State as LedgerState,
    StoredEntry,
};
use tranche_types::Timestamp;
use utoipa::{IntoParams, ToSchema};

use crate::body::Json;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::personal_data::PersonalData;
use crate::runs::query;
use crate::state::AppState;
use crate::wire::{DayStatusOut, Reason};

/// The ledger a server holds (a `Debug` that says only that it is there).
#[derive(Clone)]
pub struct LedgerHandle(pub Arc<dyn Ledger>);

impl fmt::Debug for LedgerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LedgerHandle(..)")
    }
}

impl From<LedgerError> for ApiError {
    fn from(e: LedgerError) -> Self {
        match e {
            LedgerError::Unavailable { .. } => ApiError::server(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Unavailable,
                "ledger unavailable",
                e,
            ),
            _ => ApiError::server(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorCode::Internal,
                "ledger failed",
                e,
            ),
        }
    }
}

fn ledger(app: &AppState) -> Result<Arc<dyn Ledger>, ApiError> {
    match &app.config().ledger {
        Some(l) => Ok(l.0.clone()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NoLedger,
            "this server has no ACH entry ledger (start it without --broker for the SQLite \
             ledger in --data, or with --ledger postgres://…)",
        )),
    }
}

/// An entry's effective state.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EntryState {
    /// Valid, waiting to be packaged.
    Accepted,
    /// In a file not submitted yet.
    Packaged,
    /// In a submitted file.
    Submitted,
    /// Refused (invalid, or by a rule): see `rejection`.
    Rejected,
    /// Cancelled: never submitted.
    Cancelled,
}

impl EntryState {
    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        LedgerState::from(self).as_str()
    }
}

impl From<EntryState> for LedgerState {
    fn from(s: EntryState) -> Self {
        match s {
            EntryState::Accepted => LedgerState::Accepted,
            EntryState::Packaged => LedgerState::Packaged,
            EntryState::Submitted => LedgerState::Submitted,
            EntryState::Rejected => LedgerState::Rejected,
            EntryState::Cancelled => LedgerState::Cancelled,
        }
    }
}

impl From<LedgerState> for EntryState {
    fn from(s: LedgerState) -> Self {
        match s {
            LedgerState::Accepted => EntryState::Accepted,
            LedgerState::Packaged => EntryState::Packaged,
            LedgerState::Submitted => EntryState::Submitted,
            LedgerState::Rejected => EntryState::Rejected,
            LedgerState::Cancelled => EntryState::Cancelled,
        }
    }
}

/// An ACH entry as submitted (the fields of `tranche_ach::Entry`). Documentation only:
/// the body is read into that type.
#[allow(dead_code)]
#[derive(Deserialize, ToSchema)]
#[schema(as = AchEntryInput)]
struct EntryInput {
    /// The caller's unique id of the entry.
    entry_id: String,
    /// The originating bank (ODFI) key.
    bank: String,
    /// Originator name (up to 16).
    company_name: String,
    /// Originator identification (up to 10).
    company_id: String,
    /// Standard Entry Class code: `PPD`, `CCD`, `WEB`, `TEL`, …
    sec_code: String,
    /// Two-digit transaction code, e.g. `"22"` (checking credit).
    transaction_code: String,
    /// The receiving bank's nine-digit routing number (check digit verified).
    rdfi_routing: String,
    /// The receiver's account number (up to 17).
    account_number: String,
    /// Amount in cents (0 only for prenotes).
    amount_cents: u64,
    /// Receiver's identification (up to 15, may be blank).
    individual_id: String,
    /// Receiver's name (up to 22).
    individual_name: String,
    /// Entry description (up to 10), e.g. `PAYROLL`.
    entry_description: String,
    /// Company descriptive date (up to 6); blank when absent.
    #[serde(default)]
    descriptive_date: String,
    /// Effective entry date, `YYYY-MM-DD`.
    #[schema(format = Date)]
    effective_date: String,
    /// Submission date, `YYYY-MM-DD`.
    #[schema(format = Date)]
    submission_date: String,
    /// Same Day ACH.
    #[serde(default)]
    same_day: bool,
    /// Addenda (05) text, up to 80.
    #[serde(default)]
    addenda: Option<String>,
}

/// Entries to import.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = AchImport)]
pub struct ImportBody {
    /// Up to 10,000 entries.
    #[schema(value_type = Vec<EntryInput>)]
    pub entries: Vec<Entry>,
}

/// What an import did with one entry.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ImportKind {
    /// Stored now (accepted, or rejected when invalid, or cancelled when a cancel
    /// came first).
    New,
    /// Stored already with the same payload: nothing written.
    Existing,
    /// Stored already with a different payload: the stored entry is kept.
    Conflict,
    /// Cannot be stored (e.g. an amount beyond a signed 64-bit number).
    Unstorable,
}

/// A field of an entry that is not what it must be.
#[derive(Debug, Serialize, ToSchema)]
pub struct FieldProblem {
    /// Where, in the request: `entries[3].amount_cents`.
    pub field: String,
    /// What it must be.
    pub expected: String,
    /// What it was (account numbers masked).
    pub got: String,
}

/// One entry's result.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AchImportResult)]
pub struct ImportResult {
    /// The entry's id.
    pub entry_id: String,
    /// What the import did.
    pub outcome: ImportKind,
    /// Its current state (absent when unstorable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<EntryState>,
    /// Why it is invalid (its state is then `rejected`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldProblem>,
    /// Why it cannot be stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Every entry's result, in the order given.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AchImportAnswer)]
pub struct ImportAnswer {
    /// One per entry, in order.
    pub results: Vec<ImportResult>,
}

/// Import entries into the ledger: each is validated; a valid one is stored
/// `accepted`, an invalid one `rejected` with its field errors (each field over its
/// limit stored as its first 64 bytes; errors never show a receiver's name, id or
/// addenda). With the server's ACH rules, an entry of a bank they do not have is
/// stored `rejected` too. Idempotent per entry id: posting the same entries again
/// answers them `existing`.
#[utoipa::path(
    post,
    path = "/v1/ach/entries",
    operation_id = "import_ach_entries",
    tag = "ach",
    request_body = ImportBody,
    responses(
        (status = 200, description = "Each entry's result, in order", body = ImportAnswer),
        (status = 400, description = "Not entries (`field` names `entries[i].field`; a key that is no field of an entry is refused, and no value is said back), or more than 10,000", body = ErrorBody),
        (status = 404, description = "No ACH ledger configured (code `no_ledger`)", body = ErrorBody),
    )
)]
pub async fn import(
    State(app): State<AppState>,
    Json(body): Json<ImportBody>,
) -> Result<axum::Json<ImportAnswer>, ApiError> {
    let ledger = ledger(&app)?;
    let max = app.config().max_jobs_per_request;
    if body.entries.len() > max {
        return Err(ApiError::invalid(
            "entries",
            format!("at most {max} entries, got {}", body.entries.len()),
        ));
    }
    let rules = app.config().ach_rules.clone();
    let mut errors: Vec<Vec<FieldProblem>> = Vec::with_capacity(body.entries.len());
    // The entries whose bank the server's rules do not have, with why: stored, then
    // rejected (an entry no window is ever due for would wait accepted for ever).
    let mut refused: Vec<(usize, String)> = Vec::new();
    for (i, e) in body.entries.iter().enumerate() {
        let mut problems: Vec<FieldError> = e.validate().err().unwrap_or_default();
        if let Some(fe) = rules
            .as_deref()
            .filter(|_| is_bank_name(&e.bank))
            .and_then(|r| r.unknown_bank(&e.bank))
        {
            refused.push((i, fe.to_string()));
            problems.push(fe);
        }
        errors.push(
            problems
                .into_iter()
                .map(|fe| FieldProblem {
                    field: format!("entries[{i}].{}", fe.field),
                    expected: fe.expected,
                    got: fe.got,
                })
                .collect(),
        );
    }
    let mut imported = ledger.import(body.entries).await?;
    for (i, why) in refused {
        let imp = &mut imported[i];
        let (ImportOutcome::New(LedgerState::Accepted)
        | ImportOutcome::Existing(LedgerState::Accepted)) = imp.outcome
        else {
            continue;
        };
        if ledger.reject(&imp.entry_id, &why).await? == RejectOutcome::Rejected {
            imp.outcome = match imp.outcome {
                ImportOutcome::New(_) => ImportOutcome::New(LedgerState::Rejected),
                _ => ImportOutcome::Existing(LedgerState::Rejected),
            };
        }
    }
    let results = imported
        .into_iter()
        .zip(errors)
        .map(|(imp, errors)| {
            let (outcome, state, message) = match imp.outcome {
                ImportOutcome::New(s) => (ImportKind::New, Some(s.into()), None),
                ImportOutcome::Existing(s) => (ImportKind::Existing, Some(s.into()), None),
                ImportOutcome::Conflict(s) => (ImportKind::Conflict, Some(s.into()), None),
                ImportOutcome::Unstorable(why) => (ImportKind::Unstorable, None, Some(why)),
            };
            ImportResult {
                entry_id: imp.entry_id,
                outcome,
                state,
                errors,
                message,
            }
        })
        .collect();
    Ok(axum::Json(ImportAnswer { results }))
}

/// A cancellation.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AchCancellation)]
pub struct CancellationView {
    /// The reason given.
    pub reason: String,
    /// When.
    pub at: Timestamp,
}

/// An entry as the ledger holds it. `account_number` is masked (`*****6789`) unless
/// the request may see personal data.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AchEntry)]
pub struct EntryView {
    /// The entry's id.
    pub entry_id: String,
    /// Its effective state.
    pub state: EntryState,
    /// The file it is in, when packaged or submitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
    /// Why it was rejected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejection: Option<String>,
    /// Its cancellation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancellation: Option<CancellationView>,
    /// When it was imported.
    pub imported_at: Timestamp,
    /// When it was packaged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packaged_at: Option<Timestamp>,
    /// When its file was submitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submitted_at: Option<Timestamp>,
    /// The originating bank.
    pub bank: String,
    /// Originator name.
    pub company_name: String,
    /// Originator identification.
    pub company_id: String,
    /// SEC code.
    pub sec_code: String,
    /// Transaction code.
    pub transaction_code: String,
    /// Receiving bank routing number.
    pub rdfi_routing: String,
    /// Account number, masked unless personal data may be shown.
    pub account_number: String,
    /// Amount in cents.
    pub amount_cents: u64,
    /// Receiver's identification.
    pub individual_id: String,
    /// Receiver's name.
    pub individual_name: String,
    /// Entry description.
    pub entry_description: String,
    /// Company descriptive date.
    pub descriptive_date: String,
    /// Effective entry date.
    #[schema(format = Date)]
    pub effective_date: String,
    /// Submission date.
    #[schema(format = Date)]
    pub submission_date: String,
    /// Same Day ACH.
    pub same_day: bool,
    /// Addenda text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addenda: Option<String>,
}

impl EntryView {
    /// The view of a stored entry, its account number masked or shown.
    pub fn new(stored: StoredEntry, show_account: bool) -> EntryView {
        let e = stored.entry;
        EntryView {
            entry_id: e.entry_id,
            state: stored.state.into(),
            file_id: stored.file_id,
            rejection: stored.rejection,
            cancellation: stored.cancellation.map(|c| CancellationView {
                reason: c.reason,
                at: c.at,
            }),
            imported_at: stored.imported_at,
            packaged_at: stored.packaged_at,
            submitted_at: stored.submitted_at,
            bank: e.bank,
            company_name: e.company_name,
            company_id: e.company_id,
            sec_code: e.sec_code.to_string(),
            transaction_code: e.transaction_code.code().to_string(),
            rdfi_routing: e.rdfi_routing.to_string(),
            account_number: if show_account {
                e.account_number.expose().to_string()
            } else {
                e.account_number.masked()
            },
            amount_cents: e.amount_cents,
            individual_id: e.individual_id,
            individual_name: e.individual_name,
            entry_description: e.entry_description,
            descriptive_date: e.descriptive_date,
            effective_date: e.effective_date.to_string(),
            submission_date: e.submission_date.to_string(),
            same_day: e.same_day,
            addenda: e.addenda,
        }
    }
}

/// An entry id in a path.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct EntryPath {
    /// The entry's id.
    id: String,
}

/// One entry with its state, file, rejection and cancellation.
#[utoipa::path(
    get,
    path = "/v1/ach/entries/{id}",
    operation_id = "ach_entry",
    tag = "ach",
    params(EntryPath),
    responses(
        (status = 200, description = "OK", body = EntryView),
        (status = 404, description = "No such entry (code `not_found`), or no ACH ledger configured (code `no_ledger`)", body = ErrorBody),
    )
)]
pub async fn entry(
    State(app): State<AppState>,
    Path(EntryPath { id }): Path<EntryPath>,
    personal: PersonalData,
) -> Result<axum::Json<EntryView>, ApiError> {
    let ledger = ledger(&app)?;
    match ledger.entry(&id).await? {
        Some(stored) => Ok(axum::Json(EntryView::new(
            stored,
            personal == PersonalData::Shown,
        ))),
        None => Err(ApiError::not_found(format!(
            "ACH entry {} not found",
            excerpt(&id)
        ))),
    }
}

/// What a cancel did.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AchCancelAnswer)]
pub struct CancelAnswer {
    /// The entry's id.
    pub entry_id: String,
    /// Whether this call cancelled it (false: it was cancelled already).
    pub cancelled_now: bool,
    /// Whether the entry was imported (an id not imported yet is cancelled too, and
    /// is stored cancelled when it comes).
    pub known: bool,
    /// The reason recorded (the first one, when it was cancelled already).
    pub reason: String,
    /// The unsubmitted file holding the entry, which will be rebuilt without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
}

/// The longest reason a cancel records, in bytes.
pub const MAX_CANCEL_REASON: usize = 500;

/// Cancel an entry: it will never be submitted. Idempotent. Refused (409 `too_late`)
/// once its file's submission has begun.
#[utoipa::path(
    post,
    path = "/v1/ach/entries/{id}/cancel",
    operation_id = "cancel_ach_entry",
    tag = "ach",
    params(EntryPath),
    request_body(content = Option<Reason>, description = "Optional: absent, blank or `null` cancels with a default reason"),
    responses(
        (status = 200, description = "Cancelled (now or before)", body = CancelAnswer),
        (status = 400, description = "An id longer than any entry's (64), or a reason over 500 characters (`field` names which)", body = ErrorBody),
        (status = 404, description = "No ACH ledger configured (code `no_ledger`)", body = ErrorBody),
        (status = 409, description = "Too late: its file's submission has begun (code `too_late`)", body = ErrorBody),
    )
)]
pub async fn cancel(
    State(app): State<AppState>,
    Path(EntryPath { id }): Path<EntryPath>,
    body: Option<Json<Reason>>,
) -> Result<axum::Json<CancelAnswer>, ApiError> {
    let ledger = ledger(&app)?;
    // A cancel is stored even before its entry comes: never one of an id no entry can
    // have, nor a reason of megabytes.
    if id.len() > MAX_ENTRY_ID {
        return Err(ApiError::invalid(
            "id",
            format!(
                "expected an entry id of at most {MAX_ENTRY_ID} characters, got {} characters",
                id.chars().count()
            ),
        ));
    }
    let reason = body
        .and_then(|Json(r)| r.reason)
        .filter(|r| !r.trim().is_empty())
        .unwrap_or_else(|| "cancelled through the API".to_string());
    if reason.len() > MAX_CANCEL_REASON {
        return Err(ApiError::invalid(
            "reason",
            format!(
                "expected at most {MAX_CANCEL_REASON} characters, got {} characters",
                reason.chars().count()
            ),
        ));
    }
    let answer = match ledger.cancel(&id, &reason).await? {
        CancelOutcome::Cancelled { known, file_id } => CancelAnswer {
            entry_id: id,
            cancelled_now: true,
            known,
            reason,
            file_id,
        },
        CancelOutcome::AlreadyCancelled(first) => {
            let known = ledger.entry(&id).await?;
            CancelAnswer {
                file_id: known.as_ref().and_then(|s| s.file_id.clone()),
                known: known.is_some(),
                entry_id: id,
                cancelled_now: false,
                reason: first.reason,
            }
        }
        CancelOutcome::TooLate {
            file_id,
            file_state,
        } => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::TooLate,
                format!("ACH entry {id} cannot be cancelled: its file {file_id} is {file_state}"),
            ))
        }
    };
    Ok(axum::Json(answer))
}

/// The submission date of `/v1/ach/status`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StatusQuery {
    /// The submission date, `YYYY-MM-DD`; today (UTC, on the server's clock) when
    /// absent.
    #[param(value_type = Option<String>, format = Date)]
    date: Option<String>,
}

/// `YYYY-MM-DD` exactly: chrono alone would also take `2026-3-2`.
fn parse_date(text: &str) -> Result<NaiveDate, ApiError> {
    let b = text.as_bytes();
    match NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        Ok(date) if b.len() == 10 && b[4] == b'-' && b[7] == b'-' => Ok(date),
        _ => Err(ApiError::invalid(
            "date",
            format!("expected a date as YYYY-MM-DD, got {text:?}"),
        )),
    }
}

/// A submission date's figures per bank: entries by effective state (counts and
/// cents) and per window the files by state with their entries, debits and credits,
/// and the window's times when the server has ACH rules.
#[utoipa::path(
    get,
    path = "/v1/ach/status",
    operation_id = "ach_status",
    tag = "ach",
    params(StatusQuery),
    responses(
        (status = 200, description = "The day's figures", body = DayStatusOut),
        (status = 400, description = "`date` is not a date as YYYY-MM-DD, or another parameter was given (`field` names it)", body = ErrorBody),
        (status = 404, description = "No ACH ledger configured (code `no_ledger`)", body = ErrorBody),
    )
)]
pub async fn status(
    State(app): State<AppState>,
    q: Result<Query<StatusQuery>, QueryRejection>,
) -> Result<axum::Json<DayStatusOut>, ApiError> {
    let ledger = ledger(&app)?;
    let date = match query(q)?.date {
        Some(text) => parse_date(&text)?,
        // The backend's clock, not the system's: the one time every handler reads.
        None => DateTime::from_timestamp_micros(app.backend().clock().now().micros())
            .unwrap_or_default()
            .date_naive(),
    };
    let rules = app.config().ach_rules.as_deref();
    let status = tranche_ach_pipeline::day_status(&*ledger, rules, date).await?;
    Ok(axum::Json(status.into()))
}
