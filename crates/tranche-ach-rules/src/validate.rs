//! Reading ach.toml into [`Rules`]: every key, type, value and rule across values
//! checked, every problem kept, sorted into the order of the file.
//!
//! Each table is read field by field, each field to an `Option` (`None` once its
//! problem is recorded), and the table's value is built only when all are there; so a
//! bad value never hides the problems after it, and [`Rules`] exist only valid.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use chrono::{NaiveTime, Timelike};
use chrono_tz::Tz;
use toml_edit::{ImDocument, Value};
use tranche_ach::{BankProfile, Grouping, RoutingNumber};

use crate::duration::{
    format_duration, parse_duration, parse_time, Hm, DURATION_EXPECTED, TIME_EXPECTED,
};
use crate::problem::Problem;
use crate::rules::{BankRules, Delivery, EngineSettings, Rules};
use crate::suggest::did_you_mean;
use crate::toml_shape::{string, At, Bad, Reader, Span, Table};
use crate::window::{Eligible, Window};

const ROOT_KEYS: [&str; 2] = ["engine", "bank"];
const ENGINE_KEYS: [&str; 2] = ["tick", "claim_ttl"];
const BANK_KEYS: [&str; 13] = [
    "name",
    "odfi",
    "immediate_destination",
    "immediate_destination_name",
    "immediate_origin",
    "immediate_origin_name",
    "reference_code",
    "time_zone",
    "max_entries_per_file",
    "pacing",
    "grouping",
    "delivery",
    "window",
];
const OUTBOX_KEYS: [&str; 2] = ["kind", "dir"];
const SFTP_KEYS: [&str; 7] = [
    "kind",
    "host",
    "port",
    "user",
    "key_file",
    "known_hosts",
    "remote_dir",
];
const WINDOW_KEYS: [&str; 6] = [
    "name",
    "eligible",
    "submission_begin",
    "submission_end",
    "settlement",
    "lead",
];
const KINDS: [&str; 2] = ["outbox", "sftp"];
const GROUPINGS: [&str; 2] = ["separate", "mixed"];

const DAY: i64 = 24 * 3600;

/// Where a key that is unknown in one table belongs, when another table knows it.
fn belongs(key: &str, here: &str) -> Option<String> {
    let tables: [(&str, &[&str]); 5] = [
        ("[engine]", &ENGINE_KEYS),
        ("[[bank]]", &BANK_KEYS),
        ("[[bank.window]]", &WINDOW_KEYS),
        ("[bank.delivery] with kind = \"outbox\"", &OUTBOX_KEYS),
        ("[bank.delivery] with kind = \"sftp\"", &SFTP_KEYS),
    ];
    tables
        .iter()
        .find(|(name, keys)| !name.starts_with(here) && keys.contains(&key))
        .map(|(name, _)| format!("{key:?} is a key of {name}"))
}

/// Read and check the whole file: the rules, or every problem in it.
pub(crate) fn read(text: &str, source: &Path) -> Result<Rules, Vec<Problem>> {
    let mut r = Reader::new(text, source);
    let doc = match ImDocument::parse(text) {
        Ok(doc) => doc,
        Err(e) => {
            r.syntax(&e);
            return Err(r.problems);
        }
    };
    let root = Table::root(doc.as_table());
    root.unknown_keys(&mut r, &ROOT_KEYS, |k| belongs(k, "the top"));
    let engine = match root.table(&mut r, "engine") {
        Some(t) => engine(&mut r, &t),
        None => EngineSettings::default(),
    };
    let base = source.parent().unwrap_or(Path::new(""));
    let before = r.problems.len();
    let tables = root.tables(&mut r, "bank");
    // None at all, or an empty array (`bank = []`); a `bank` of the wrong type is
    // reported by `tables` already.
    if tables.is_empty() && r.problems.len() == before {
        r.problem(
            &root.span,
            "bank",
            "at least one [[bank]] table",
            "none",
            None,
        );
    }
    let banks: Vec<ReadBank> = tables.iter().map(|t| bank(&mut r, t, base)).collect();
    unique(
        &mut r,
        banks.iter().filter_map(|b| b.name.as_ref()),
        "a bank name no other [[bank]] has",
    );
    if !r.problems.is_empty() {
        let mut problems = r.problems;
        problems.sort_by_key(|p| (p.line, p.column));
        return Err(problems);
    }
    Ok(Rules {
        engine,
        banks: banks
            .into_iter()
            .map(|b| b.rules.expect("a bank without problems is read whole"))
            .collect(),
    })
}

fn engine(r: &mut Reader<'_>, t: &Table<'_>) -> EngineSettings {
    t.unknown_keys(r, &ENGINE_KEYS, |k| belongs(k, "[engine]"));
    let defaults = EngineSettings::default();
    let positive = |d: Duration| {
        if d.is_zero() {
            Err(Bad::expected(format!(
                "a duration above 0s, such as {:?}",
                format_duration(defaults.tick)
            )))
        } else {
            Ok(d)
        }
    };
    let tick = duration(r, t, "tick", positive);
    let claim_ttl = duration(r, t, "claim_ttl", positive);
    EngineSettings {
        tick: tick.map_or(defaults.tick, |d| d.value),
        claim_ttl: claim_ttl.map_or(defaults.claim_ttl, |d| d.value),
    }
}

/// A bank as read: its name (for the duplicate check, even when the rest is bad) and
/// its rules when they are whole.
struct ReadBank {
    name: Option<At<String>>,
    rules: Option<BankRules>,
}

fn bank(r: &mut Reader<'_>, t: &Table<'_>, base: &Path) -> ReadBank {
    t.unknown_keys(r, &BANK_KEYS, |k| belongs(k, "[[bank]]"));
    let name = t.get(
        r,
        "name",
        true,
        "a bank name of lowercase letters, digits, - and _ (what entries name in their bank column)",
        |v| {
            let s = string(v)?;
            let ok = !s.is_empty()
                && s.len() <= 32
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
            if ok {
                Ok(s.to_string())
            } else {
                let lower = s.to_ascii_lowercase().replace(' ', "-");
                Err(Bad::hint(
                    (lower != s && !lower.is_empty()).then(|| format!("did you mean {lower:?}?")),
                ))
            }
        },
    );
    let odfi = routing(r, t, "odfi");
    let destination = routing(r, t, "immediate_destination");
    let profile = profile(r, t, name.as_ref(), odfi, destination);
    let time_zone = t
        .get(
            r,
            "time_zone",
            false,
            "an IANA time zone such as \"America/New_York\"",
            |v| {
                let s = string(v)?;
                Tz::from_str(s).map_err(|_| {
                    Bad::hint(did_you_mean(
                        s,
                        chrono_tz::TZ_VARIANTS.iter().map(|z| z.name()),
                    ))
                })
            },
        )
        .map(|z| z.value)
        .or((!t.has("time_zone")).then_some(BankRules::DEFAULT_TIME_ZONE));
    let max_entries_per_file = integer(
        r,
        t,
        "max_entries_per_file",
        1,
        i64::from(BankRules::MAX_ENTRIES_PER_FILE),
    )
    .map(|n| u32::try_from(n).expect("in range"))
    .or((!t.has("max_entries_per_file")).then_some(BankRules::DEFAULT_MAX_ENTRIES_PER_FILE));
    let pacing = duration(r, t, "pacing", Ok)
        .map(|d| d.value)
        .or((!t.has("pacing")).then_some(BankRules::DEFAULT_PACING));
    let grouping = t
        .get(
            r,
            "grouping",
            false,
            "one of \"separate\", \"mixed\"",
            |v| match string(v)? {
                "separate" => Ok(Grouping::Separate),
                "mixed" => Ok(Grouping::Mixed),
                s => Err(Bad::hint(did_you_mean(s, GROUPINGS))),
            },
        )
        .map(|g| g.value)
        .or((!t.has("grouping")).then_some(Grouping::Separate));
    let bank_name = name.as_ref().map(|n| n.value.as_str());
    let delivery = match t.table(r, "delivery") {
        Some(d) => delivery(r, &d, base, bank_name),
        None if t.has("delivery") => None,
        None => bank_name.map(|n| Delivery::Outbox {
            dir: base.join("outbox").join(n),
        }),
    };
    let before = r.problems.len();
    let window_tables = t.tables(r, "window");
    if window_tables.is_empty() && r.problems.len() == before {
        r.problem(
            &t.span,
            t.field("window"),
            "at least one [[bank.window]] table",
            "none",
            None,
        );
    }
    let read: Vec<ReadWindow> = window_tables.iter().map(|w| window(r, w)).collect();
    unique(
        r,
        read.iter().filter_map(|w| w.name.as_ref()),
        &format!("a window name no other window of {} has", t.path),
    );
    overlaps(r, &read);
    let windows: Option<Vec<Window>> = read.into_iter().map(|w| w.window).collect();
    let rules = (|| {
        Some(BankRules {
            profile: profile?,
            time_zone: time_zone?,
            max_entries_per_file: max_entries_per_file?,
            pacing: pacing?,
            grouping: grouping?,
            delivery: delivery?,
            windows: windows?,
        })
    })();
    ReadBank { name, rules }
}

fn routing(r: &mut Reader<'_>, t: &Table<'_>, key: &'static str) -> Option<RoutingNumber> {
    t.get(
        r,
        key,
        true,
        "a routing number of 9 digits in quotes",
        |v| RoutingNumber::parse_field(key, string(v)?).map_err(|e| Bad::expected(e.expected)),
    )
    .map(|n| n.value)
}

/// The file header fields, checked by [`BankProfile::validate`] with each of its
/// errors placed at its key.
fn profile(
    r: &mut Reader<'_>,
    t: &Table<'_>,
    name: Option<&At<String>>,
    odfi: Option<RoutingNumber>,
    destination: Option<RoutingNumber>,
) -> Option<BankProfile> {
    let text = |r: &mut Reader<'_>, key, required, expected| t.string(r, key, required, expected);
    let destination_name = text(
        r,
        "immediate_destination_name",
        true,
        "the bank's name (up to 23 characters)",
    );
    let origin = text(
        r,
        "immediate_origin",
        true,
        "our identification at the bank: 9 digits or 10 letters and digits (often 1 + EIN)",
    );
    let origin_name = text(
        r,
        "immediate_origin_name",
        true,
        "our name (up to 23 characters)",
    );
    let reference = text(r, "reference_code", false, "up to 8 characters");
    let value = |a: &Option<At<String>>| a.as_ref().map_or(String::new(), |a| a.value.clone());
    // A placeholder stands in for a routing number already reported, so the other
    // fields are still checked; the profile is not kept then.
    let placeholder: RoutingNumber = "021000021".parse().expect("a valid routing number");
    let candidate = BankProfile {
        bank: name.map_or_else(|| "placeholder".into(), |n| n.value.clone()),
        odfi: odfi.unwrap_or(placeholder),
        immediate_destination: destination.unwrap_or(placeholder),
        immediate_destination_name: value(&destination_name),
        immediate_origin: value(&origin),
        immediate_origin_name: value(&origin_name),
        reference_code: value(&reference),
    };
    let mut wrong = Vec::new();
    if let Err(errors) = candidate.validate() {
        for e in errors {
            let key = if e.field == "bank" { "name" } else { e.field };
            wrong.push(key);
            if !t.has(key) || key == "name" {
                continue; // Missing keys are reported already, bad names by their own check.
            }
            let span = t.span_of(key);
            let raw = r.raw(&span);
            let got = if e.got.starts_with('"') {
                raw
            } else {
                format!("{raw} ({})", e.got)
            };
            r.problem(&span, t.field(key), e.expected, got, None);
        }
    }
    for (key, a) in [
        ("immediate_destination_name", &destination_name),
        ("immediate_origin_name", &origin_name),
    ] {
        if let Some(a) = a.as_ref().filter(|a| a.value.trim().is_empty()) {
            if !wrong.contains(&key) {
                let got = r.raw(&a.span);
                r.problem(&a.span, a.field.clone(), "a name, not blank", got, None);
                wrong.push(key);
            }
        }
    }
    let whole = name.is_some()
        && odfi.is_some()
        && destination.is_some()
        && destination_name.is_some()
        && origin.is_some()
        && origin_name.is_some()
        && (reference.is_some() || !t.has("reference_code"))
        && wrong.is_empty();
    whole.then_some(candidate)
}

fn delivery(
    r: &mut Reader<'_>,
    t: &Table<'_>,
    base: &Path,
    bank: Option<&str>,
) -> Option<Delivery> {
    let kind = t
        .get(r, "kind", false, "one of \"outbox\", \"sftp\"", |v| {
            let s = string(v)?;
            if KINDS.contains(&s) {
                Ok(s.to_string())
            } else {
                Err(Bad::hint(did_you_mean(s, KINDS)))
            }
        })
        .map(|k| k.value)
        .or((!t.has("kind")).then(|| "outbox".to_string()));
    let path = |r: &mut Reader<'_>, key, required, expected| {
        t.get(r, key, required, expected, |v| {
            let s = string(v)?;
            if s.trim().is_empty() {
                Err(Bad::default())
            } else {
                Ok(base.join(s))
            }
        })
        .map(|p| p.value)
    };
    match kind.as_deref() {
        Some("outbox") => {
            t.unknown_keys(r, &OUTBOX_KEYS, |k| {
                belongs(k, "[bank.delivery] with kind = \"outbox\"")
            });
            let dir = path(r, "dir", false, "a directory (relative to this file's)");
            let dir = match dir {
                Some(dir) => dir,
                None if t.has("dir") => return None,
                None => base.join("outbox").join(bank?),
            };
            Some(Delivery::Outbox { dir })
        }
        Some("sftp") => {
            t.unknown_keys(r, &SFTP_KEYS, |k| {
                belongs(k, "[bank.delivery] with kind = \"sftp\"")
            });
            let word = |r: &mut Reader<'_>, key, required, expected| {
                t.get(r, key, required, expected, |v| {
                    let s = string(v)?;
                    if s.is_empty() || s.contains(char::is_whitespace) {
                        Err(Bad::default())
                    } else {
                        Ok(s.to_string())
                    }
                })
                .map(|w| w.value)
            };
            let host = word(r, "host", true, "the SFTP host name, without spaces");
            let port = integer(r, t, "port", 1, 65_535)
                .map(|p| u16::try_from(p).expect("in range"))
                .or((!t.has("port")).then_some(22));
            let user = word(r, "user", true, "the SFTP user name, without spaces");
            let key_file = path(r, "key_file", true, "the path of the private key file");
            let known_hosts = path(r, "known_hosts", true, "the path of a known_hosts file");
            let remote_dir = t
                .string(r, "remote_dir", false, "the directory on the host")
                .map(|d| d.value)
                .or((!t.has("remote_dir")).then(|| ".".to_string()));
            Some(Delivery::Sftp {
                host: host?,
                port: port?,
                user: user?,
                key_file: key_file?,
                known_hosts: known_hosts?,
                remote_dir: remote_dir?,
            })
        }
        _ => {
            let all: Vec<&str> = OUTBOX_KEYS.iter().chain(&SFTP_KEYS).copied().collect();
            t.unknown_keys(r, &all, |k| belongs(k, "[bank.delivery]"));
            None
        }
    }
}

/// A window as read: its name and the spans the checks across windows point at, and
/// the window when it is whole.
struct ReadWindow {
    name: Option<At<String>>,
    /// Where to point at when the window's phase is wrong: its lead, or its begin.
    phase_at: (String, Span),
    window: Option<Window>,
}

fn window(r: &mut Reader<'_>, t: &Table<'_>) -> ReadWindow {
    t.unknown_keys(r, &WINDOW_KEYS, |k| belongs(k, "[[bank.window]]"));
    let name = t.get(
        r,
        "name",
        true,
        "a window name of lowercase letters, digits and - (such as \"sd1\")",
        |v| {
            let s = string(v)?;
            let ok = !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if ok {
                Ok(s.to_string())
            } else {
                let lower = s.to_ascii_lowercase().replace([' ', '_'], "-");
                Err(Bad::hint(
                    (lower != s && !lower.is_empty()).then(|| format!("did you mean {lower:?}?")),
                ))
            }
        },
    );
    let eligible = t
        .get(
            r,
            "eligible",
            true,
            "one of \"same-day\", \"next-day\"",
            |v| {
                let s = string(v)?;
                Eligible::from_name(s).ok_or_else(|| Bad::hint(did_you_mean(s, Eligible::NAMES)))
            },
        )
        .map(|e| e.value);
    let begin = time(r, t, "submission_begin", true);
    let end = time(r, t, "submission_end", true);
    if let (Some(b), Some(e)) = (&begin, &end) {
        if b.value == e.value {
            let got = r.raw(&e.span);
            r.problem(
                &e.span,
                e.field.clone(),
                "a time other than submission_begin (the window would be empty)",
                got,
                None,
            );
        }
    }
    let settlement = time(r, t, "settlement", false);
    let lead = duration(r, t, "lead", |d| {
        if d > Window::MAX_LEAD {
            Err(Bad::expected(format!(
                "a lead of at most {}",
                format_duration(Window::MAX_LEAD)
            )))
        } else {
            Ok(d)
        }
    });
    let phase_at = if t.has("lead") {
        (t.field("lead"), t.span_of("lead"))
    } else {
        (t.field("submission_begin"), t.span_of("submission_begin"))
    };
    let whole = (|| {
        let (begin, end) = (begin?.value, end?.value);
        if begin == end || (t.has("settlement") && settlement.is_none()) {
            return None;
        }
        Some(Window {
            name: name.as_ref()?.value.clone(),
            eligible: eligible?,
            submission_begin: begin,
            submission_end: end,
            settlement: settlement.map(|s| s.value),
            lead: match lead {
                Some(l) => l.value,
                None if t.has("lead") => return None,
                None => Window::DEFAULT_LEAD,
            },
        })
    })();
    ReadWindow {
        name,
        phase_at,
        window: whole,
    }
}

/// A window's phase, packaging to end, in seconds from its submission date's
/// midnight (read on a day without a clock change).
fn phase(w: &Window) -> (i64, i64) {
    let secs = |t: NaiveTime| i64::from(t.num_seconds_from_midnight());
    let lead = i64::try_from(w.lead.as_secs()).unwrap_or(DAY);
    let end = secs(w.submission_end) + if w.crosses_midnight() { DAY } else { 0 };
    (secs(w.submission_begin) - lead, end)
}

fn clock(secs: i64) -> String {
    let s = secs.rem_euclid(DAY);
    format!("{:02}:{:02}", s / 3600, s / 60 % 60)
}

fn describe(w: &Window) -> String {
    let (from, _) = phase(w);
    format!(
        "packaging from {}, submission {}-{}",
        clock(from),
        Hm(w.submission_begin),
        Hm(w.submission_end)
    )
}

/// Two windows of one eligibility must not both be packaging at once: an entry must
/// have one window to go in. Windows repeat daily, so each is compared with the
/// other's phases of the dates around; and a phase over 24 h overlaps its own next.
///
/// Compared as wall-clock times of a day without a clock change. On a change day a
/// lead, being real time, can reach an hour further or less far back across the
/// change (between 01:00 and 03:00): windows that merely touch there may both be
/// packaging for up to that hour, once a year.
fn overlaps(r: &mut Reader<'_>, windows: &[ReadWindow]) {
    let whole: Vec<(&ReadWindow, &Window)> = windows
        .iter()
        .filter_map(|rw| rw.window.as_ref().map(|w| (rw, w)))
        .collect();
    for (rw, w) in &whole {
        let (from, to) = phase(w);
        if to - from > DAY && w.lead <= Window::MAX_LEAD {
            let (field, span) = &rw.phase_at;
            r.problem(
                span,
                field.clone(),
                "a lead and window together of at most 24h (one date's phase would overlap the next's)",
                format!(
                    "lead {} + window {}",
                    format_duration(w.lead),
                    format_duration(Duration::from_secs(
                        u64::try_from(to - from).unwrap_or(0) - w.lead.as_secs()
                    ))
                ),
                None,
            );
        }
    }
    for (j, (rb, b)) in whole.iter().enumerate() {
        for (_, a) in &whole[..j] {
            if a.eligible != b.eligible {
                continue;
            }
            let (a0, a1) = phase(a);
            let (b0, b1) = phase(b);
            let clash = (-2..=2)
                .map(|k| k * DAY)
                .find(|&shift| a0 + shift < b1 && b0 < a1 + shift);
            let Some(shift) = clash else { continue };
            let (from, to) = ((a0 + shift).max(b0), (a1 + shift).min(b1));
            let (field, span) = &rb.phase_at;
            r.problem(
                span,
                field.clone(),
                format!(
                    "a phase (packaging to end) apart from {} window {:?}'s ({})",
                    a.eligible,
                    a.name,
                    describe(a)
                ),
                format!(
                    "{:?} {}: both hold {}-{}",
                    b.name,
                    describe(b),
                    clock(from),
                    clock(to)
                ),
                Some(format!(
                    "an entry must have one window to go in: shorten a lead or move {} or {}",
                    a.name, b.name
                )),
            );
        }
    }
}

/// Names that must be unique: each repeat is a problem at its name.
fn unique<'a>(r: &mut Reader<'_>, names: impl Iterator<Item = &'a At<String>>, expected: &str) {
    let mut seen: Vec<&At<String>> = Vec::new();
    for name in names {
        if let Some(first) = seen.iter().find(|s| s.value == name.value) {
            let hint = format!(
                "{} is {:?} too",
                first.field.trim_end_matches(".name"),
                first.value
            );
            let got = r.raw(&name.span);
            r.problem(&name.span, name.field.clone(), expected, got, Some(hint));
        } else {
            seen.push(name);
        }
    }
}

fn duration(
    r: &mut Reader<'_>,
    t: &Table<'_>,
    key: &str,
    check: impl FnOnce(Duration) -> Result<Duration, Bad>,
) -> Option<At<Duration>> {
    t.get(r, key, false, DURATION_EXPECTED, |v| {
        let d = parse_duration(string(v)?)
            .map_err(|bad| Bad::hint(bad.suggestion.map(|s| format!("did you mean {s:?}?"))))?;
        check(d)
    })
}

fn integer(r: &mut Reader<'_>, t: &Table<'_>, key: &str, min: i64, max: i64) -> Option<i64> {
    t.get(
        r,
        key,
        false,
        &format!("a whole number from {min} to {max}"),
        |v| {
            let n = match v {
                Value::Integer(n) => *n.value(),
                Value::String(s) => {
                    return Err(Bad::hint(
                        s.value()
                            .parse::<i64>()
                            .is_ok()
                            .then(|| format!("write it without quotes: {}", s.value())),
                    ))
                }
                _ => return Err(Bad::default()),
            };
            if (min..=max).contains(&n) {
                Ok(n)
            } else {
                Err(Bad::default())
            }
        },
    )
    .map(|n| n.value)
}

fn time(r: &mut Reader<'_>, t: &Table<'_>, key: &str, required: bool) -> Option<At<NaiveTime>> {
    t.get(r, key, required, TIME_EXPECTED, |v| match v {
        // A TOML local time (08:30:00, unquoted) is what was meant too.
        Value::Datetime(d) => {
            let d = d.value();
            match (d.date, d.time, d.offset) {
                (None, Some(t), None) if t.second == 0 && t.nanosecond == 0 => {
                    NaiveTime::from_hms_opt(t.hour.into(), t.minute.into(), 0)
                        .ok_or_else(Bad::default)
                }
                _ => Err(Bad::default()),
            }
        }
        Value::String(s) => {
            let s = s.value();
            parse_time(s).ok_or_else(|| {
                let hint = if s.starts_with("24:") {
                    Some("midnight is \"00:00\"".to_string())
                } else {
                    s.strip_suffix(":00")
                        .and_then(parse_time)
                        .map(|t| format!("did you mean {:?}?", Hm(t).to_string()))
                };
                Bad::hint(hint)
            })
        }
        _ => Err(Bad::default()),
    })
}
