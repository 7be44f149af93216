//! The signature as an incremental update: new and changed objects appended after the
//! file's last `%%EOF`, with their own cross-reference section pointing back (`/Prev`) at
//! the previous one. The previous bytes are never touched, so this works on a file that
//! was just encrypted without reading it back.

use std::io::Write as _;
use std::time::SystemTime;

use lopdf::encryption::encrypt_object;
use lopdf::xref::XrefType;
use lopdf::{Dictionary, Document, EncryptionState, Object, ObjectId, Writer};
use sha2::{Digest, Sha256};

use crate::cades::CmsSigner;
use crate::{SignError, SignatureInfo};

/// Reads a plain PDF.
pub(crate) fn parse(pdf: &[u8]) -> Result<Document, SignError> {
    Document::load_mem(pdf).map_err(SignError::Pdf)
}

/// A complete PDF file and what is known about it, to append a revision to.
pub(crate) struct Base<'a> {
    pub bytes: Vec<u8>,
    /// The objects as they are in `bytes` (encrypted, when `state` is given).
    pub doc: &'a Document,
    pub state: Option<&'a EncryptionState>,
    /// The kind of cross-reference section `bytes` ends with; the update uses the same.
    pub xref: XrefType,
    /// The first object number not used in `bytes`.
    pub next_id: u32,
}

/// `ByteRange [0 a b c]` is written as a fixed-width placeholder and filled in place.
const BYTE_RANGE_WIDTH: usize = 40;

/// Appends an invisible signature field on the first page and its signature to `base`.
pub(crate) fn append_signature(
    base: Base<'_>,
    signer: &CmsSigner,
    info: &SignatureInfo,
    now: SystemTime,
) -> Result<Vec<u8>, SignError> {
    let Base {
        mut bytes,
        doc,
        state,
        xref,
        next_id,
    } = base;
    let prev_xref = last_startxref(&bytes)?;
    let root_id = doc
        .trailer
        .get(b"Root")
        .and_then(Object::as_reference)
        .map_err(|_| SignError::Structure("the trailer has no /Root".into()))?;
    let page_id = *doc.get_pages().values().next().ok_or(SignError::NoPage)?;
    let sig_id: ObjectId = (next_id, 0);
    let field_id: ObjectId = (next_id + 1, 0);

    let mut objects: Vec<(ObjectId, Object)> = Vec::with_capacity(4);

    // The catalog gains an /AcroForm (or its existing one a field) with SigFlags
    // SignaturesExist | AppendOnly.
    let mut catalog = dict_of(doc, root_id)?.clone();
    let (acroform_id, mut acroform) = match catalog.get(b"AcroForm") {
        Ok(Object::Reference(id)) => (Some(*id), dict_of(doc, *id)?.clone()),
        Ok(Object::Dictionary(d)) => (None, d.clone()),
        _ => (None, Dictionary::new()),
    };
    let mut fields = resolved_array(doc, acroform.get(b"Fields").ok())?;
    let field_name = format!("Signature{}", fields.len() + 1);
    fields.push(Object::Reference(field_id));
    acroform.set("Fields", Object::Array(fields));
    acroform.set("SigFlags", 3);
    match acroform_id {
        Some(id) => objects.push((id, Object::Dictionary(acroform))),
        None => catalog.set("AcroForm", Object::Dictionary(acroform)),
    }
    objects.push((root_id, Object::Dictionary(catalog)));

    let mut page = dict_of(doc, page_id)?.clone();
    let mut annots = resolved_array(doc, page.get(b"Annots").ok())?;
    annots.push(Object::Reference(field_id));
    page.set("Annots", Object::Array(annots));
    objects.push((page_id, Object::Dictionary(page)));

    // Field and widget in one dictionary; zero-sized and flagged Print | Locked, i.e.
    // an invisible signature.
    let mut field = Dictionary::new();
    field.set("Type", Object::Name(b"Annot".to_vec()));
    field.set("Subtype", Object::Name(b"Widget".to_vec()));
    field.set("FT", Object::Name(b"Sig".to_vec()));
    field.set("T", Object::string_literal(field_name));
    field.set("V", Object::Reference(sig_id));
    field.set("F", 132);
    field.set(
        "Rect",
        Object::Array(vec![0.into(), 0.into(), 0.into(), 0.into()]),
    );
    field.set("P", Object::Reference(page_id));
    let mut field = Object::Dictionary(field);
    encrypt_new(state, field_id, &mut field)?;
    objects.push((field_id, field));

    if !matches!(bytes.last(), Some(b'\n' | b'\r')) {
        bytes.push(b'\n');
    }
    let mut offsets: Vec<(ObjectId, usize)> = Vec::with_capacity(objects.len() + 2);
    for (id, object) in &objects {
        offsets.push((*id, bytes.len()));
        write_indirect(&mut bytes, *id, object);
    }

    offsets.push((sig_id, bytes.len()));
    let placeholders = write_signature_dict(&mut bytes, sig_id, state, signer, info, now)?;

    let size = next_id + 2 + u32::from(matches!(xref, XrefType::CrossReferenceStream));
    let trailer = update_trailer(doc, size, prev_xref);
    match xref {
        XrefType::CrossReferenceTable => write_xref_table(&mut bytes, offsets, trailer),
        XrefType::CrossReferenceStream => {
            write_xref_stream(&mut bytes, offsets, trailer, (next_id + 2, 0))
        }
    }

    sign_in_place(&mut bytes, placeholders, signer, now)?;
    Ok(bytes)
}

/// Byte positions of the placeholders in the signature dictionary.
struct Placeholders {
    byte_range: usize,
    /// The `<` that opens `/Contents`.
    contents_start: usize,
    /// One past its `>`.
    contents_end: usize,
}

fn write_signature_dict(
    out: &mut Vec<u8>,
    id: ObjectId,
    state: Option<&EncryptionState>,
    signer: &CmsSigner,
    info: &SignatureInfo,
    now: SystemTime,
) -> Result<Placeholders, SignError> {
    let mut dict = Dictionary::new();
    dict.set("Type", Object::Name(b"Sig".to_vec()));
    dict.set("Filter", Object::Name(b"Adobe.PPKLite".to_vec()));
    dict.set(
        "SubFilter",
        Object::Name(signer.sub_filter().pdf_name().to_vec()),
    );
    dict.set("M", Object::string_literal(pdf_date(now)));
    for (key, value) in [
        ("Reason", Some(&info.reason)),
        ("Location", Some(&info.location)),
        ("ContactInfo", info.contact.as_ref()),
    ] {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            dict.set(key, lopdf::text_string(value));
        }
    }
    // Every string here is encrypted like any other; /Contents is added below, outside
    // the dictionary lopdf sees, because the standard keeps it in clear.
    let mut dict = Object::Dictionary(dict);
    encrypt_new(state, id, &mut dict)?;
    let mut body = Vec::with_capacity(256);
    Writer::write_object(&mut body, &dict).expect("writing to a Vec cannot fail");
    debug_assert!(body.ends_with(b">>"));
    body.truncate(body.len() - 2);

    writeln!(out, "{} {} obj", id.0, id.1).expect("writing to a Vec cannot fail");
    out.extend_from_slice(&body);
    out.extend_from_slice(b"/ByteRange ");
    let byte_range = out.len();
    out.extend(std::iter::repeat_n(b' ', BYTE_RANGE_WIDTH));
    out.extend_from_slice(b"/Contents ");
    let contents_start = out.len();
    out.push(b'<');
    out.extend(std::iter::repeat_n(b'0', signer.max_len() * 2));
    out.push(b'>');
    let contents_end = out.len();
    out.extend_from_slice(b">>\nendobj\n");
    Ok(Placeholders {
        byte_range,
        contents_start,
        contents_end,
    })
}

/// Fills `/ByteRange`, hashes everything but `/Contents` and writes the signature there.
fn sign_in_place(
    bytes: &mut [u8],
    at: Placeholders,
    signer: &CmsSigner,
    now: SystemTime,
) -> Result<(), SignError> {
    let after = bytes.len() - at.contents_end;
    let range = format!("[0 {} {} {}]", at.contents_start, at.contents_end, after);
    if range.len() > BYTE_RANGE_WIDTH {
        return Err(SignError::Structure(
            "the file is too large for the /ByteRange placeholder".into(),
        ));
    }
    bytes[at.byte_range..at.byte_range + range.len()].copy_from_slice(range.as_bytes());

    let mut hasher = Sha256::new();
    hasher.update(&bytes[..at.contents_start]);
    hasher.update(&bytes[at.contents_end..]);
    let digest: [u8; 32] = hasher.finalize().into();
    let cms = signer.sign_digest(&digest, now)?;
    let hex = &mut bytes[at.contents_start + 1..at.contents_end - 1];
    if cms.len() * 2 > hex.len() {
        return Err(SignError::SignatureTooLarge {
            len: cms.len(),
            reserved: hex.len() / 2,
        });
    }
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for (i, byte) in cms.iter().enumerate() {
        hex[2 * i] = HEX[usize::from(byte >> 4)];
        hex[2 * i + 1] = HEX[usize::from(byte & 0xf)];
    }
    Ok(())
}

fn encrypt_new(
    state: Option<&EncryptionState>,
    id: ObjectId,
    object: &mut Object,
) -> Result<(), SignError> {
    match state {
        Some(state) => encrypt_object(state, id, object).map_err(|e| SignError::Encrypt(e.into())),
        None => Ok(()),
    }
}

fn dict_of(doc: &Document, id: ObjectId) -> Result<&Dictionary, SignError> {
    doc.get_object(id)
        .and_then(Object::as_dict)
        .map_err(|_| SignError::Structure(format!("object {} {} is not a dictionary", id.0, id.1)))
}

/// An array that may be given directly or by reference.
fn resolved_array(doc: &Document, object: Option<&Object>) -> Result<Vec<Object>, SignError> {
    match object {
        None => Ok(Vec::new()),
        Some(Object::Array(items)) => Ok(items.clone()),
        Some(Object::Reference(id)) => match doc.get_object(*id) {
            Ok(Object::Array(items)) => Ok(items.clone()),
            _ => Err(SignError::Structure(format!(
                "object {} {} is not an array",
                id.0, id.1
            ))),
        },
        Some(_) => Err(SignError::Structure(
            "/Annots or /Fields is not an array".into(),
        )),
    }
}

fn write_indirect(out: &mut Vec<u8>, id: ObjectId, object: &Object) {
    writeln!(out, "{} {} obj", id.0, id.1).expect("writing to a Vec cannot fail");
    Writer::write_object(out, object).expect("writing to a Vec cannot fail");
    out.extend_from_slice(b"\nendobj\n");
}

/// The entries an update's trailer repeats from the previous one, plus its own.
fn update_trailer(doc: &Document, size: u32, prev: u64) -> Dictionary {
    let mut trailer = Dictionary::new();
    trailer.set("Size", i64::from(size));
    for key in [&b"Root"[..], b"Info", b"ID", b"Encrypt"] {
        if let Ok(value) = doc.trailer.get(key) {
            trailer.set(key, value.clone());
        }
    }
    trailer.set("Prev", prev as i64);
    trailer
}

/// Object numbers in ascending order, grouped into runs of consecutive numbers.
fn subsections(mut offsets: Vec<(ObjectId, usize)>) -> Vec<Vec<(ObjectId, usize)>> {
    offsets.sort_by_key(|((num, _), _)| *num);
    let mut runs: Vec<Vec<(ObjectId, usize)>> = Vec::new();
    for entry in offsets {
        match runs.last_mut() {
            Some(run) if run.last().is_some_and(|((n, _), _)| *n + 1 == entry.0 .0) => {
                run.push(entry)
            }
            _ => runs.push(vec![entry]),
        }
    }
    runs
}

fn write_xref_table(out: &mut Vec<u8>, offsets: Vec<(ObjectId, usize)>, trailer: Dictionary) {
    let xref_offset = out.len();
    out.extend_from_slice(b"xref\n");
    for run in subsections(offsets) {
        writeln!(out, "{} {}", run[0].0 .0, run.len()).expect("writing to a Vec cannot fail");
        for ((_, generation), offset) in run {
            write!(out, "{offset:010} {generation:05} n\r\n")
                .expect("writing to a Vec cannot fail");
        }
    }
    out.extend_from_slice(b"trailer\n");
    Writer::write_object(out, &Object::Dictionary(trailer)).expect("writing to a Vec cannot fail");
    write!(out, "\nstartxref\n{xref_offset}\n%%EOF\n").expect("writing to a Vec cannot fail");
}

fn write_xref_stream(
    out: &mut Vec<u8>,
    mut offsets: Vec<(ObjectId, usize)>,
    mut dict: Dictionary,
    id: ObjectId,
) {
    let xref_offset = out.len();
    offsets.push((id, xref_offset));
    let runs = subsections(offsets);
    let mut index = Vec::new();
    let mut data = Vec::new();
    for run in &runs {
        index.push(Object::Integer(i64::from(run[0].0 .0)));
        index.push(Object::Integer(run.len() as i64));
        for ((_, generation), offset) in run {
            data.push(1u8);
            data.extend_from_slice(&(*offset as u32).to_be_bytes());
            data.extend_from_slice(&generation.to_be_bytes());
        }
    }
    dict.set("Type", Object::Name(b"XRef".to_vec()));
    dict.set("W", Object::Array(vec![1.into(), 4.into(), 2.into()]));
    dict.set("Index", Object::Array(index));
    dict.set("Length", data.len() as i64);
    writeln!(out, "{} {} obj", id.0, id.1).expect("writing to a Vec cannot fail");
    Writer::write_object(out, &Object::Dictionary(dict)).expect("writing to a Vec cannot fail");
    out.extend_from_slice(b"\nstream\n");
    out.extend_from_slice(&data);
    write!(
        out,
        "\nendstream\nendobj\nstartxref\n{xref_offset}\n%%EOF\n"
    )
    .expect("writing to a Vec cannot fail");
}

/// The offset after the file's last `startxref`: where its newest cross-reference section is.
pub(crate) fn last_startxref(bytes: &[u8]) -> Result<u64, SignError> {
    let tail = &bytes[bytes.len().saturating_sub(1024)..];
    let at = tail
        .windows(9)
        .rposition(|w| w == b"startxref")
        .ok_or_else(|| SignError::Structure("no startxref at the end of the file".into()))?;
    let digits: String = tail[at + 9..]
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .take_while(|b| b.is_ascii_digit())
        .map(|&b| char::from(b))
        .collect();
    digits
        .parse()
        .map_err(|_| SignError::Structure("startxref is not followed by an offset".into()))
}

/// A PDF date (`D:YYYYMMDDHHmmSSZ`) in UTC.
fn pdf_date(time: SystemTime) -> String {
    match der::DateTime::from_system_time(time) {
        Ok(t) => format!(
            "D:{:04}{:02}{:02}{:02}{:02}{:02}Z",
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minutes(),
            t.seconds()
        ),
        Err(_) => "D:19700101000000Z".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subsections_group_consecutive_numbers() {
        let runs = subsections(vec![((7, 0), 70), ((3, 0), 30), ((8, 0), 80), ((4, 1), 40)]);
        let numbers: Vec<Vec<u32>> = runs
            .iter()
            .map(|r| r.iter().map(|((n, _), _)| *n).collect())
            .collect();
        assert_eq!(numbers, vec![vec![3, 4], vec![7, 8]]);
    }

    #[test]
    fn startxref_is_read_from_the_tail() {
        assert_eq!(
            last_startxref(b"...startxref\n123\n%%EOF\nstartxref\r\n4567\r\n%%EOF").unwrap(),
            4567
        );
        assert!(last_startxref(b"%PDF-1.7 nothing").is_err());
    }

    #[test]
    fn pdf_dates_are_utc() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        assert_eq!(pdf_date(t), "D:20010909014640Z");
    }
}
