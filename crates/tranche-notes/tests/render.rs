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
