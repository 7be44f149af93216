//! ach.toml read and checked: the example whole, each problem at its line and field
//! with its hint, and a file of many mistakes reported in one pass.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use chrono::NaiveTime;
use tranche_ach::Grouping;
use tranche_ach_rules::{Delivery, Eligible, Problem, Rules, RulesError, EXAMPLE};
use tranche_test_support::ach_rules::Bank;

fn time(s: &str) -> NaiveTime {
    NaiveTime::parse_from_str(s, "%H:%M").unwrap()
}

#[test]
fn the_example_reads_as_documented() {
    let r = Rules::parse(EXAMPLE, Path::new("/srv/ach/ach.toml")).unwrap();
    assert_eq!(r.engine.tick, Duration::from_secs(300));
    assert_eq!(r.engine.claim_ttl, Duration::from_secs(600));
    assert_eq!(r.banks.len(), 2);

    let first = r.bank("first").unwrap();
    assert_eq!(first.profile.odfi.as_str(), "021000021");
    assert_eq!(first.profile.immediate_destination_name, "FIRST NATIONAL");
    assert_eq!(first.time_zone, chrono_tz::America::New_York);
    assert_eq!(first.max_entries_per_file, 25_000);
    assert_eq!(first.pacing, Duration::from_secs(15));
    assert_eq!(first.grouping, Grouping::Separate);
    assert_eq!(
        first.delivery,
        Delivery::Outbox {
            dir: PathBuf::from("/srv/ach/outbox/first")
        }
    );
    // The Same Day ACH deadlines and their settlements, Eastern time.
    let same_day: Vec<(NaiveTime, Option<NaiveTime>)> = first
        .windows
        .iter()
        .filter(|w| w.same_day())
        .map(|w| (w.submission_end, w.settlement))
        .collect();
    assert_eq!(
        same_day,
        [
            (time("10:30"), Some(time("13:00"))),
            (time("14:45"), Some(time("17:00"))),
            (time("16:45"), Some(time("18:00"))),
        ]
    );
    let night = first.window("nd-night").unwrap();
    assert_eq!(night.eligible, Eligible::NextDay);
    assert!(night.crosses_midnight());
    assert_eq!(night.lead, Duration::from_secs(3600));

    let second = r.bank("second").unwrap();
    assert_eq!(second.time_zone, chrono_tz::America::Chicago);
    assert_eq!(second.grouping, Grouping::Mixed);
    assert_eq!(second.windows.len(), 3);
    assert_eq!(
        second.window("sd2").unwrap().lead,
        Duration::from_secs(7200)
    ); // default
    assert!(r.bank("third").is_none());
}

#[test]
fn defaults_fill_what_is_left_out() {
    let r = Rules::parse(&BASE, Path::new("rules/ach.toml")).unwrap();
    assert_eq!(r.engine, Default::default());
    let b = &r.banks[0];
    assert_eq!(b.time_zone, chrono_tz::America::New_York);
    assert_eq!(b.max_entries_per_file, 5000);
    assert_eq!(b.pacing, Duration::from_secs(15));
    assert_eq!(b.grouping, Grouping::Separate);
    assert_eq!(b.profile.reference_code, "");
    assert_eq!(
        b.delivery,
        Delivery::Outbox {
            dir: PathBuf::from("rules/outbox/first")
        }
    );
    assert_eq!(b.windows[0].lead, Duration::from_secs(7200));
    assert_eq!(b.windows[0].settlement, None);
}

#[test]
fn sftp_delivery_resolves_its_files_against_the_rules_directory() {
    let text = BASE.replace(
        "[[bank.window]]",
        "[bank.delivery]\nkind = \"sftp\"\nhost = \"sftp.first.example\"\nuser = \"acme\"\n\
         key_file = \"keys/id_ed25519\"\nknown_hosts = \"/etc/ssh/known_hosts\"\n\n[[bank.window]]",
    );
    let r = Rules::parse(&text, Path::new("/srv/ach/ach.toml")).unwrap();
    assert_eq!(
        r.banks[0].delivery,
        Delivery::Sftp {
            host: "sftp.first.example".into(),
            port: 22,
            user: "acme".into(),
            key_file: PathBuf::from("/srv/ach/keys/id_ed25519"),
            known_hosts: PathBuf::from("/etc/ssh/known_hosts"),
            remote_dir: ".".into(),
        }
    );
}

#[test]
fn load_reads_a_file_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ach.toml");
    std::fs::write(&path, EXAMPLE).unwrap();
    let r = Rules::load(&path).unwrap();
    assert_eq!(
        r.banks[1].delivery,
        Delivery::Outbox {
            dir: dir.path().join("outbox/second")
        }
    );
    let missing = dir.path().join("nope.toml");
    let e = Rules::load(&missing).unwrap_err();
    assert!(matches!(e, RulesError::Read { .. }), "{e}");
    assert!(e.to_string().contains("nope.toml"), "{e}");
    assert!(std::error::Error::source(&e).is_some());

    std::fs::write(&path, "[engine]\ntick = 5\n").unwrap();
    let e = Rules::load(&path).unwrap_err();
    assert_eq!(e.problems().len(), 2, "{e}");
    assert!(e.problems().iter().all(|p| p.file == path));
    let tick = format!("{}:2:8: engine.tick: expected a duration", path.display());
    assert!(e.to_string().lines().any(|l| l.starts_with(&tick)), "{e}");
}

/// A valid file of one bank and one window, to break one line of at a time.
static BASE: LazyLock<String> = LazyLock::new(|| Bank::first().same_day_morning().to_string());

fn problems(text: &str) -> Vec<Problem> {
    match Rules::parse(text, Path::new("ach.toml")) {
        Ok(_) => panic!("expected problems in:\n{text}"),
        Err(e) => e.problems().to_vec(),
    }
}

/// The only problem of BASE with `from` replaced by `to`.
fn only(from: &str, to: &str) -> Problem {
    assert!(BASE.contains(from), "{from}");
    let text = BASE.replacen(from, to, 1);
    let mut all = problems(&text);
    assert_eq!(all.len(), 1, "{all:#?}");
    all.remove(0)
}

fn hint(p: &Problem) -> Option<&str> {
    p.hint.as_deref()
}

#[test]
fn syntax_errors_are_placed() {
    let p = only("\"08:30\"", "08:30");
    assert_eq!((p.line, p.field.as_str()), (12, ""));
    assert!(p.got.contains("invalid time"), "{p}");
    assert!(hint(&p).unwrap().contains("quoted"), "{p}");
    assert!(p.to_string().starts_with("ach.toml:12:"), "{p}");
}

#[test]
fn unknown_keys_suggest_the_key_meant() {
    // The misspelt key is unknown and submission_end is then missing: two problems.
    let all = problems(&BASE.replace("submission_end", "submision_end"));
    assert_eq!(all.len(), 2, "{all:#?}");
    let unknown = &all
        .iter()
        .find(|p| p.field.ends_with("submision_end"))
        .unwrap();
    assert_eq!(unknown.field, "bank[0].window[0].submision_end");
    assert_eq!((unknown.line, unknown.column), (13, 1));
    assert_eq!(hint(unknown), Some("did you mean \"submission_end\"?"));
    let missing = &all
        .iter()
        .find(|p| p.field.ends_with(".submission_end"))
        .unwrap();
    assert_eq!((missing.line, missing.got.as_str()), (9, "nothing"));

    let p = only("name = \"sd1\"", "name = \"sd1\"\nleed = \"1h\"");
    assert_eq!(hint(&p), Some("did you mean \"lead\"?"));
    let p = only(
        "immediate_origin_name = \"ACME PAYROLL\"",
        "immediate_origin_name = \"ACME PAYROLL\"\nlead = \"2h\"",
    );
    assert_eq!(p.field, "bank[0].lead");
    assert_eq!(hint(&p), Some("\"lead\" is a key of [[bank.window]]"));
}

#[test]
fn missing_required_keys_are_named_at_their_table() {
    let p = only("odfi = \"021000021\"\n", "");
    assert_eq!((p.line, p.column), (1, 1));
    assert_eq!(p.field, "bank[0].odfi");
    assert_eq!(p.got, "nothing");
    let p = only("eligible = \"same-day\"\n", "");
    assert_eq!(
        (p.line, p.field.as_str()),
        (9, "bank[0].window[0].eligible")
    );
}

#[test]
fn values_of_the_wrong_type_say_what_was_written() {
    let p = only(
        "immediate_destination = \"021000021\"",
        "immediate_destination = 21000021",
    );
    assert_eq!(p.line, 4);
    assert_eq!(p.column, 25);
    assert_eq!(p.got, "21000021");
    assert_eq!(hint(&p), Some("quote it: \"21000021\""));
    let p = only(
        "immediate_origin_name = \"ACME PAYROLL\"",
        "immediate_origin_name = \"ACME PAYROLL\"\nmax_entries_per_file = \"5000\"",
    );
    assert_eq!(p.field, "bank[0].max_entries_per_file");
    assert_eq!(hint(&p), Some("write it without quotes: 5000"));
    // A TOML local time is taken as the time it is.
    let r = Rules::parse(&BASE.replace("\"08:30\"", "08:30:00"), Path::new("a")).unwrap();
    assert_eq!(r.banks[0].windows[0].submission_begin, time("08:30"));
}

#[test]
fn routing_numbers_have_their_check_digit_verified() {
    let p = only("odfi = \"021000021\"", "odfi = \"021000022\"");
    assert_eq!(
        p.to_string(),
        "ach.toml:3:8: bank[0].odfi: expected check digit 1 (3-7-1 weights over the first 8 \
         digits), got \"021000022\""
    );
    let p = only("odfi = \"021000021\"", "odfi = \"02100002\"");
    assert_eq!(p.expected, "9 digits");
}

#[test]
fn bank_profile_errors_are_placed_at_their_keys() {
    let p = only("\"1234567890\"", "\"12345\"");
    assert_eq!((p.line, p.field.as_str()), (6, "bank[0].immediate_origin"));
    assert_eq!(
        p.expected,
        "9 digits or 10 letters and digits, not all zeros"
    );
    // Zeros are no one: the validator (and achcli) refuse a file from them.
    let p = only("\"1234567890\"", "\"0000000000\"");
    assert_eq!(p.field, "bank[0].immediate_origin");
    let p = only("\"ACME PAYROLL\"", "\"ACME PAYROLL AND SONS OF BOSTON\"");
    assert_eq!(p.field, "bank[0].immediate_origin_name");
    assert_eq!(p.got, "\"ACME PAYROLL AND SONS OF BOSTON\" (31 characters)");
    let p = only("\"ACME PAYROLL\"", "\"ACMÉ\"");
    assert!(p.expected.contains("NACHA"), "{p}");
    let p = only("\"FIRST NATIONAL\"", "\"  \"");
    assert_eq!(p.expected, "a name, not blank");
    let p = only(
        "immediate_origin_name = \"ACME PAYROLL\"",
        "immediate_origin_name = \"ACME PAYROLL\"\nreference_code = \"TOO LONG REF\"",
    );
    assert_eq!((p.line, p.field.as_str()), (8, "bank[0].reference_code"));
}

#[test]
fn names_must_be_well_formed_and_unique() {
    let p = only("name = \"first\"", "name = \"First Bank\"");
    assert_eq!(hint(&p), Some("did you mean \"first-bank\"?"));
    let p = only("name = \"sd1\"", "name = \"SD_1\"");
    assert_eq!(hint(&p), Some("did you mean \"sd-1\"?"));

    let two = format!(
        "{}\n{}",
        *BASE,
        BASE.replace("\"021000021\"", "\"026009593\"")
    );
    let all = problems(&two);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!((all[0].line, all[0].field.as_str()), (16, "bank[1].name"));
    assert_eq!(hint(&all[0]), Some("bank[0] is \"first\" too"));

    let windows = BASE.replace(
        "[[bank.window]]",
        "[[bank.window]]\nname = \"sd1\"\neligible = \"next-day\"\nsubmission_begin = \"18:00\"\n\
         submission_end = \"19:00\"\n\n[[bank.window]]",
    );
    let all = problems(&windows);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].field, "bank[0].window[1].name");
    assert_eq!(hint(&all[0]), Some("bank[0].window[0] is \"sd1\" too"));
}

#[test]
fn a_bank_needs_a_window_and_rules_need_a_bank() {
    let cut = BASE.find("[[bank.window]]").unwrap();
    let all = problems(&BASE[..cut]);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!((all[0].line, all[0].field.as_str()), (1, "bank[0].window"));
    assert_eq!(all[0].got, "none");
    let all = problems(&format!("{}window = []\n", &BASE[..cut]));
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].field, "bank[0].window");
    let all = problems("[engine]\ntick = \"5m\"\n");
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].field, "bank");
    let all = problems("bank = []\n");
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].got, "none");
    let p = only("[[bank]]", "[bank]");
    assert_eq!(hint(&p), Some("write [[bank]]"));
}

#[test]
fn times_and_durations() {
    let p = only("\"10:30\"", "\"25:00\"");
    assert_eq!(
        p.to_string(),
        "ach.toml:13:18: bank[0].window[0].submission_end: expected a time HH:MM, got \"25:00\""
    );
    let p = only("\"10:30\"", "\"10:30:00\"");
    assert_eq!(hint(&p), Some("did you mean \"10:30\"?"));
    let p = only("\"10:30\"", "\"08:30\"");
    assert!(p.expected.contains("other than submission_begin"), "{p}");
    let p = only("\"10:30\"", "\"10:30\"\nlead = \"2 hours\"");
    assert_eq!((p.line, p.field.as_str()), (14, "bank[0].window[0].lead"));
    assert_eq!(hint(&p), Some("did you mean \"2h\"?"));
    let p = only("\"10:30\"", "\"10:30\"\nlead = \"25h\"");
    assert_eq!(p.expected, "a lead of at most 24h");
    let p = only("\"10:30\"", "\"10:30\"\nsettlement = \"1pm\"");
    assert_eq!(p.field, "bank[0].window[0].settlement");
    let p = only("[[bank]]", "[engine]\ntick = \"0s\"\n[[bank]]");
    assert_eq!(p.field, "engine.tick");
}

#[test]
fn values_from_fixed_sets_suggest_the_one_meant() {
    let p = only("\"same-day\"", "\"sameday\"");
    assert_eq!(hint(&p), Some("did you mean \"same-day\"?"));
    let extra = |line: &str| only("[[bank.window]]", &format!("{line}\n[[bank.window]]"));
    let p = extra("grouping = \"seperate\"");
    assert_eq!(hint(&p), Some("did you mean \"separate\"?"));
    let p = extra("time_zone = \"America/New_Yrok\"");
    assert_eq!(hint(&p), Some("did you mean \"America/New_York\"?"));
    let p = extra("time_zone = \"europe/london\"");
    assert_eq!(hint(&p), Some("did you mean \"Europe/London\"?"));
    let p = extra("[bank.delivery]\nkind = \"sfpt\"");
    assert_eq!(hint(&p), Some("did you mean \"sftp\"?"));
    let p = extra("max_entries_per_file = 0");
    assert_eq!(p.expected, "a whole number from 1 to 270000");
    let p = extra("max_entries_per_file = 270001");
    assert_eq!(p.got, "270001");
    let r = Rules::parse(
        &BASE.replace(
            "[[bank.window]]",
            "max_entries_per_file = 270000\n[[bank.window]]",
        ),
        Path::new("a"),
    )
    .unwrap();
    assert_eq!(r.banks[0].max_entries_per_file, 270_000);
}

#[test]
fn sftp_needs_its_fields() {
    let sftp = |lines: &str| {
        problems(&BASE.replace(
            "[[bank.window]]",
            &format!("[bank.delivery]\nkind = \"sftp\"\n{lines}\n[[bank.window]]"),
        ))
    };
    let all = sftp("port = 0\ndir = \"x\"");
    let fields: Vec<(u32, &str, Option<&str>)> = all
        .iter()
        .map(|p| (p.line, p.field.as_str(), p.hint.as_deref()))
        .collect();
    assert_eq!(
        fields,
        [
            (9, "bank[0].delivery.host", None),
            (9, "bank[0].delivery.user", None),
            (9, "bank[0].delivery.key_file", None),
            (9, "bank[0].delivery.known_hosts", None),
            (11, "bank[0].delivery.port", None),
            (
                12,
                "bank[0].delivery.dir",
                Some("\"dir\" is a key of [bank.delivery] with kind = \"outbox\"")
            ),
        ]
    );
    assert_eq!(all[4].expected, "a whole number from 1 to 65535");
    let all =
        sftp("host = \"h\"\nuser = \"u\"\nport = 65536\nkey_file = \"\"\nknown_hosts = \"k\"");
    let fields: Vec<&str> = all.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        ["bank[0].delivery.port", "bank[0].delivery.key_file"]
    );
}

#[test]
fn windows_of_one_kind_may_not_package_at_once() {
    let second = |begin: &str, end: &str, lead: &str| {
        BASE.to_string()
            + &format!(
                "\n[[bank.window]]\nname = \"sd2\"\neligible = \"same-day\"\n\
                 submission_begin = \"{begin}\"\nsubmission_end = \"{end}\"\nlead = \"{lead}\"\n"
            )
    };
    // sd1 packages from 06:30 and closes 10:30; sd2 packages from 10:00.
    let all = problems(&second("12:00", "14:00", "2h"));
    assert_eq!(all.len(), 1, "{all:#?}");
    let p = &all[0];
    assert_eq!((p.line, p.field.as_str()), (20, "bank[0].window[1].lead"));
    assert_eq!(
        p.to_string(),
        "ach.toml:20:8: bank[0].window[1].lead: expected a phase (packaging to end) apart from \
         same-day window \"sd1\"'s (packaging from 06:30, submission 08:30-10:30), got \"sd2\" \
         packaging from 10:00, submission 12:00-14:00: both hold 10:00-10:30 (an entry must \
         have one window to go in: shorten a lead or move sd1 or sd2)"
    );
    // Touching is not overlapping.
    Rules::parse(&second("12:30", "14:00", "2h"), Path::new("a")).unwrap();
    // A night window packaging into the next morning's.
    let all = problems(&second("22:00", "07:00", "1h"));
    assert_eq!(all.len(), 1, "{all:#?}");
    assert!(all[0].got.contains("both hold 06:30-07:00"), "{}", all[0]);
    // Windows of different kinds may overlap.
    let other_kind = second("09:00", "10:00", "0s").replace(
        "name = \"sd2\"\neligible = \"same-day\"",
        "name = \"nd\"\neligible = \"next-day\"",
    );
    Rules::parse(&other_kind, Path::new("a")).unwrap();
    // A lead and window over a day overlap the window's own next date.
    let p = only("\"10:30\"", "\"10:30\"\nlead = \"23h\"");
    assert_eq!(p.got, "lead 23h + window 2h");
}

/// A file with a mistake of most kinds; every one is reported, in file order.
const MANY_MISTAKES: &str = r#"[engine]
tick = "5 min"
claim_tl = "10m"

[[bank]]
name = "First"
odfi = "021000022"
immediate_destination = 21000021
immediate_destination_name = "FIRST NATIONAL BANK OF EVERYWHERE"
immediate_origin = "12345"
reference_code = "CAFÉ"
time_zone = "America/New_Yrok"
max_entries_per_file = 300000
grouping = "seperate"
lead = "2h"

[bank.delivery]
kind = "sftp"
port = 70000
host = "h"
dir = "x"

[[bank.window]]
name = "sd1"
eligible = "sameday"
submission_begin = "08:30"
submission_end = "25:00"
submision_end = "10:30"

[[bank.window]]
name = "sd1"
eligible = "same-day"
submission_begin = "09:00"
submission_end = "12:00"
lead = "25h"

[[bank.window]]
name = "sd3"
eligible = "same-day"
submission_begin = "11:00"
submission_end = "13:00"

[[bank.window]]
name = "sd4"
eligible = "same-day"
submission_begin = "12:00"
submission_end = "14:00"
lead = "30m"

[[bank]]
name = "second"
odfi = "026009593"
immediate_destination = "026009593"
immediate_destination_name = "SECOND"
immediate_origin = "1234567890"
immediate_origin_name = "ACME"
"#;

#[test]
fn every_mistake_of_a_file_is_reported_at_once() {
    let all = problems(MANY_MISTAKES);
    let got: Vec<(u32, &str, Option<&str>)> = all
        .iter()
        .map(|p| (p.line, p.field.as_str(), p.hint.as_deref()))
        .collect();
    let expected: Vec<(u32, &str, Option<&str>)> = vec![
        (2, "engine.tick", Some("did you mean \"5m\"?")),
        (3, "engine.claim_tl", Some("did you mean \"claim_ttl\"?")),
        (5, "bank[0].immediate_origin_name", None),
        (6, "bank[0].name", Some("did you mean \"first\"?")),
        (7, "bank[0].odfi", None),
        (
            8,
            "bank[0].immediate_destination",
            Some("quote it: \"21000021\""),
        ),
        (9, "bank[0].immediate_destination_name", None),
        (10, "bank[0].immediate_origin", None),
        (11, "bank[0].reference_code", None),
        (
            12,
            "bank[0].time_zone",
            Some("did you mean \"America/New_York\"?"),
        ),
        (13, "bank[0].max_entries_per_file", None),
        (14, "bank[0].grouping", Some("did you mean \"separate\"?")),
        (
            15,
            "bank[0].lead",
            Some("\"lead\" is a key of [[bank.window]]"),
        ),
        (17, "bank[0].delivery.user", None),
        (17, "bank[0].delivery.key_file", None),
        (17, "bank[0].delivery.known_hosts", None),
        (19, "bank[0].delivery.port", None),
        (
            21,
            "bank[0].delivery.dir",
            Some("\"dir\" is a key of [bank.delivery] with kind = \"outbox\""),
        ),
        (
            25,
            "bank[0].window[0].eligible",
            Some("did you mean \"same-day\"?"),
        ),
        (27, "bank[0].window[0].submission_end", None),
        (
            28,
            "bank[0].window[0].submision_end",
            Some("did you mean \"submission_end\"?"),
        ),
        (
            31,
            "bank[0].window[1].name",
            Some("bank[0].window[0] is \"sd1\" too"),
        ),
        (35, "bank[0].window[1].lead", None),
        (
            48,
            "bank[0].window[3].lead",
            Some("an entry must have one window to go in: shorten a lead or move sd3 or sd4"),
        ),
        (50, "bank[1].window", None),
    ];
    assert_eq!(got, expected, "{}", lines(&all));
    let text = RulesError::Invalid { problems: all }.to_string();
    assert_eq!(text.lines().count(), expected.len());
    assert!(text.contains(
        "ach.toml:27:18: bank[0].window[0].submission_end: expected a time HH:MM, got \"25:00\"\n"
    ));
    assert!(text.contains(
        "ach.toml:28:1: bank[0].window[0].submision_end: expected a key of [[bank.window]]: \
         name, eligible, submission_begin, submission_end, settlement, lead, got \
         \"submision_end\" (did you mean \"submission_end\"?)"
    ));
}

fn lines(all: &[Problem]) -> String {
    all.iter().map(|p| format!("{p}\n")).collect()
}
