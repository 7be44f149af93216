//! Notes rendered with the built-in template, read back with poppler's pdftotext.

use std::process::Command;

use tranche_notes::generate::{generate, GenerateOptions};
use tranche_notes::input::{load_broker, read_clients, read_trades};
use tranche_notes::note::{build, NoteData};
use tranche_notes::render::{RenderError, Renderer};

fn notes(clients: usize, heavy: Option<usize>) -> Vec<NoteData> {
    let dir = tempfile::tempdir().unwrap();
    let date = "2026-11-20".parse().unwrap();
    generate(
        dir.path(),
        &GenerateOptions {
            clients,
            date,
            seed: 3,
            heavy_trades: heavy,
        },
    )
    .unwrap();
    let broker = load_broker(&dir.path().join("broker.toml")).unwrap();
    let clients = read_clients(&dir.path().join("clients.csv")).unwrap();
    let trades = read_trades(&dir.path().join("trades.csv")).unwrap();
    trades
        .by_client
        .iter()
        .enumerate()
        .map(|(i, (code, ts))| {
            build(&broker, &clients.by_code[code], ts, date, i as u32 + 1).unwrap()
        })
        .collect()
}

/// Text of each page, via poppler (apt-get install poppler-utils).
fn pages_text(pdf: &[u8]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("note.pdf");
    std::fs::write(&path, pdf).unwrap();
    let out = Command::new("pdftotext")
        .args(["-layout", path.to_str().unwrap(), "-"])
        .output()
        .expect("pdftotext runs (install poppler-utils)");
    assert!(
        out.status.success(),
        "pdftotext: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split('\u{c}')
        .map(str::to_string)
        .filter(|p| !p.trim().is_empty())
        .collect()
}

#[test]
fn notes_render_every_block_and_the_rupee_sign() {
    if !have("pdftotext", "poppler-utils") {
        return;
    }
    let renderer = Renderer::new();
    let notes = notes(5, None);
    for note in &notes {
        let pdf = renderer.render(note).unwrap();
        assert!(pdf.bytes.starts_with(b"%PDF-"));
        let pages = pages_text(&pdf.bytes);
        assert_eq!(pages.len(), pdf.pages);
        let all = pages.join("\n");
        for expected in [
            "CONTRACT NOTE CUM TAX INVOICE",
            note.broker.name.as_str(),
            note.broker.sebi_registration.as_str(),
            note.client.name.as_str(),
            note.client.pan.as_str(),
            note.client.code.as_str(),
            note.note_number.as_str(),
            "WAP (₹)",
            "Securities transaction tax (STT)",
            "Stamp duty",
            "Annexure: trades",
            &format!("Page 1 of {}", pdf.pages),
        ] {
            assert!(
                all.contains(expected),
                "{expected:?} missing from note {}:\n{all}",
                note.note_number
            );
        }
        let gst = if note.gst_kind == "IGST" {
            "IGST (18%)"
        } else {
            "CGST (9%)"
        };
        assert!(all.contains(gst), "{gst}");
        for t in &note.annexure {
            assert!(
                all.contains(&t.trade_id),
                "trade {} in the annexure",
                t.trade_id
            );
        }
    }
}

#[test]
fn same_note_same_bytes() {
    let renderer = Renderer::new();
    let note = &notes(1, None)[0];
    let a = renderer.render(note).unwrap();
    let b = Renderer::new().render(note).unwrap();
    assert_eq!(a.bytes, b.bytes, "rendering is deterministic");
}

#[test]
fn long_annexures_repeat_their_header_and_number_pages() {
    if !have("pdftotext", "poppler-utils") {
        return;
    }
    let renderer = Renderer::new();
    let heavy = notes(0, Some(600)).remove(0);
    let pdf = renderer.render(&heavy).unwrap();
    assert!(pdf.pages >= 5, "{} pages", pdf.pages);
    let pages = pages_text(&pdf.bytes);
    let last = pages.last().unwrap();
    assert!(
        last.contains(&format!("Page {} of {}", pdf.pages, pdf.pages)),
        "{last}"
    );
    assert!(
        last.contains("Order no.") && last.contains("Trade time"),
        "header repeats:\n{last}"
    );
}

/// Whether an external verifier is installed. Missing, the test fails on CI (or with
/// TRANCHE_REQUIRE_TOOLS=1) and is skipped with a reason elsewhere.
fn have(tool: &str, package: &str) -> bool {
    let found = Command::new(tool).arg("--version").output().is_ok();
    let required = std::env::var_os("CI").is_some_and(|v| !v.is_empty())
        || std::env::var("TRANCHE_REQUIRE_TOOLS").as_deref() == Ok("1");
    assert!(
        found || !required,
        "{tool} is required: apt-get install {package}"
    );
    if !found {
        eprintln!("skipped: {tool} not installed (apt-get install {package})");
    }
    found
}

fn qpdf_check(pdf: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("note.pdf");
    std::fs::write(&path, pdf).unwrap();
    let out = Command::new("qpdf")
        .arg("--check")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "qpdf --check: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The "Page X of Y" stamps of each page, in page order.
fn stamps(pages: &[String]) -> Vec<Vec<(usize, usize)>> {
    pages
        .iter()
        .map(|text| {
            let words: Vec<&str> = text.split_whitespace().collect();
            words
                .windows(4)
                .filter(|w| w[0] == "Page" && w[2] == "of")
                .filter_map(|w| Some((w[1].parse().ok()?, w[3].parse().ok()?)))
                .collect()
        })
        .collect()
}

/// A rendered note's pages are numbered 1 to N once each, N its page count, and pass
/// qpdf's check. Returns the pages' text.
fn assert_whole_document(pdf: &tranche_notes::render::Pdf) -> Vec<String> {
    qpdf_check(&pdf.bytes);
    let pages = pages_text(&pdf.bytes);
    assert_eq!(pages.len(), pdf.pages, "pages pdftotext sees");
    for (i, stamps) in stamps(&pages).into_iter().enumerate() {
        assert_eq!(
            stamps,
            vec![(i + 1, pdf.pages)],
            "page {}:\n{}",
            i + 1,
            pages[i]
        );
    }
    pages
}

fn assert_annexure(note: &NoteData, pages: &[String]) {
    let start = pages
        .iter()
        .position(|p| p.contains("Annexure: trades"))
        .expect("an annexure");
    for (i, page) in pages.iter().enumerate().skip(start) {
        assert!(
            page.contains("Order no.") && page.contains("Trade time") && page.contains("Price (₹)"),
            "annexure header on page {}:\n{page}",
            i + 1
        );
    }
    let annexure = pages[start..].join("\n");
    let mut at = 0;
    for t in &note.annexure {
        // In execution order, each once.
        let found = annexure[at..].find(&t.trade_id);
        assert!(
            found.is_some(),
            "trade {} in order in the annexure",
            t.trade_id
        );
        at += found.unwrap() + t.trade_id.len();
    }
    assert_eq!(
        pages
            .iter()
            .filter(|p| p.contains("Annexure: trades"))
            .count(),
        1,
        "one annexure title"
    );
}

#[test]
fn heavy_notes_render_in_parts_joined_into_one_numbered_pdf() {
    if !have("pdftotext", "poppler-utils") || !have("qpdf", "qpdf") {
        return;
    }
    let renderer = Renderer::new();
    let heavy = notes(0, Some(3000)).remove(0);
    let pdf = renderer.render(&heavy).unwrap();
    assert!(pdf.pages >= 40, "{} pages", pdf.pages);
    let pages = assert_whole_document(&pdf);
    assert_annexure(&heavy, &pages);
    let all = pages.join("\n");
    for expected in [
        "CONTRACT NOTE CUM TAX INVOICE",
        heavy.client.pan.as_str(),
        "Securities transaction tax (STT)",
    ] {
        assert_eq!(all.matches(expected).count(), 1, "{expected} once");
    }
    for line in &heavy.lines {
        assert!(all.contains(&line.instrument), "{}", line.instrument);
    }
    // The parts' fonts are embedded per part, but not per page.
    let per_page = pdf.bytes.len() / pdf.pages;
    assert!(per_page < 12_000, "{per_page} bytes a page");
    let again = Renderer::new().render(&heavy).unwrap();
    assert_eq!(
        pdf.bytes, again.bytes,
        "rendering in parts is deterministic"
    );
}

#[test]
fn many_lines_flow_onto_pages_of_their_own_before_the_charges() {
    if !have("pdftotext", "poppler-utils") || !have("qpdf", "qpdf") {
        return;
    }
    let mut note = notes(0, Some(400)).remove(0);
    // A trader in hundreds of contracts: one line per contract and side.
    let template = note.lines[0].clone();
    note.lines = (0..700)
        .map(|i| tranche_notes::note::NoteLine {
            instrument: format!("CONTRACT{i:04}"),
            ..template.clone()
        })
        .collect();
    let pdf = Renderer::new().render(&note).unwrap();
    let pages = assert_whole_document(&pdf);
    let all = pages.join("\n");
    let mut at = 0;
    for line in &note.lines {
        let found = all[at..].find(&line.instrument);
        assert!(found.is_some(), "{} in order", line.instrument);
        at += found.unwrap();
    }
    let charges = all.find("Securities transaction tax (STT)").unwrap();
    assert!(charges > at, "charges after the last line");
    for (i, page) in pages.iter().enumerate() {
        if page.contains("CONTRACT0") && !page.contains("CONTRACT NOTE") {
            assert!(page.contains("WAP (₹)"), "lines header on page {}", i + 1);
        }
    }
    assert_annexure(&note, &pages);
}

#[test]
fn rows_longer_than_planned_still_number_every_page() {
    if !have("pdftotext", "poppler-utils") || !have("qpdf", "qpdf") {
        return;
    }
    let mut note = notes(0, Some(2000)).remove(0);
    // Securities whose names wrap: pages hold fewer rows than the plan assumed.
    for t in note.annexure.iter_mut().step_by(5) {
        t.instrument = format!(
            "{} WITH A VERY LONG NAME THAT WRAPS ONTO A SECOND LINE",
            t.instrument
        );
    }
    let pdf = Renderer::new().render(&note).unwrap();
    let pages = assert_whole_document(&pdf);
    assert_annexure(&note, &pages);
}

#[test]
fn template_errors_name_the_line() {
    let note = &notes(1, None)[0];
    let broken = "#let note = json(\"/note.json\")\n\n#note.no_such_field\n".to_string();
    let err = Renderer::with_template("mine.typ", broken)
        .render(note)
        .unwrap_err();
    assert!(matches!(err, RenderError::Typst { .. }));
    assert!(err.to_string().starts_with("mine.typ:3:"), "{err}");
    assert!(err.to_string().contains("no_such_field"), "{err}");
}
