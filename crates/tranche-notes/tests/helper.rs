//! The render helper's protocol: a helper serves notes until its input ends, answers a
//! bad request with an error and goes on, and a helper that dies is reported as lost
//! (the engine retries the note) and replaced on the next render.

use std::io::{Read, Write};
use std::process::Command;

use tranche_notes::generate::{generate, GenerateOptions};
use tranche_notes::input::{load_broker, read_clients, read_trades};
use tranche_notes::note::{build, NoteData};
use tranche_notes::render::helper::{serve, HelperError, RenderHelpers};
use tranche_notes::render::Renderer;

fn a_note() -> NoteData {
    let dir = tempfile::tempdir().unwrap();
    let date = "2026-11-20".parse().unwrap();
    let options = GenerateOptions {
        clients: 2,
        date,
        seed: 5,
        heavy_trades: None,
    };
    generate(dir.path(), &options).unwrap();
    let broker = load_broker(&dir.path().join("broker.toml")).unwrap();
    let clients = read_clients(&dir.path().join("clients.csv")).unwrap();
    let trades = read_trades(&dir.path().join("trades.csv")).unwrap();
    let (code, ts) = trades.by_client.iter().next().unwrap();
    build(&broker, &clients.by_code[code], ts, date, 1).unwrap()
}

fn frame(bytes: &[u8]) -> Vec<u8> {
    let mut f = (bytes.len() as u64).to_le_bytes().to_vec();
    f.extend_from_slice(bytes);
    f
}

fn read_u64(r: &mut impl Read) -> u64 {
    let mut b = [0u8; 8];
    r.read_exact(&mut b).unwrap();
    u64::from_le_bytes(b)
}

#[test]
fn a_helper_renders_notes_reports_bad_ones_and_ends_with_its_input() {
    let note = a_note();
    let request = serde_json::to_vec(&serde_json::json!({
        "email": "someone@example.com",
        "note": note,
    }))
    .unwrap();
    let (requests, mut to_helper) = std::io::pipe().unwrap();
    let (mut from_helper, replies) = std::io::pipe().unwrap();
    let server = std::thread::spawn(move || serve(&Renderer::new(), requests, replies));

    to_helper.write_all(&frame(b"{\"note\": 1}")).unwrap();
    to_helper.write_all(&frame(&request)).unwrap();
    drop(to_helper);

    let mut tag = [0u8];
    from_helper.read_exact(&mut tag).unwrap();
    assert_eq!(tag[0], 1, "a bad request is answered with an error");
    let len = read_u64(&mut from_helper);
    let mut message = vec![0u8; len as usize];
    from_helper.read_exact(&mut message).unwrap();
    assert!(String::from_utf8(message).unwrap().contains("note data"));

    from_helper.read_exact(&mut tag).unwrap();
    assert_eq!(tag[0], 0, "the next note still renders");
    let pages = read_u64(&mut from_helper);
    let len = read_u64(&mut from_helper);
    let mut pdf = vec![0u8; len as usize];
    from_helper.read_exact(&mut pdf).unwrap();
    assert!(pdf.starts_with(b"%PDF-"));
    assert_eq!(pages as usize, Renderer::new().render(&note).unwrap().pages);

    server
        .join()
        .unwrap()
        .expect("the helper ends cleanly with its input");
}

#[test]
fn a_helper_that_dies_is_lost_and_replaced() {
    // `true` exits at once without answering: every render finds its helper gone.
    let helpers = RenderHelpers::new(2, || Command::new("true"));
    for _ in 0..3 {
        match helpers.render(b"{}") {
            Err(HelperError::Lost(_)) => {}
            other => panic!("expected a lost helper, got {other:?}"),
        }
    }
}
