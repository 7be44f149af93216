//! Joining the PDFs of a note's parts into one document with lopdf: the first part's
//! catalog, information and metadata are kept, every part's pages hang from its page
//! tree, and objects that came out byte-identical in several parts (a font subset, a
//! graphics state) are kept once.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};

use lopdf::{Document, Object, ObjectId, Writer};

/// One PDF from the parts' PDFs, in order. `pages` is the total page count, written
/// into the XMP metadata, which the first part wrote with its own count.
pub(crate) fn join(parts: &[Vec<u8>], pages: usize) -> Result<Vec<u8>, lopdf::Error> {
    let Some((first, rest)) = parts.split_first() else {
        return Err(lopdf::Error::PageNumberNotFound(0));
    };
    let mut doc = Document::load_mem(first)?;
    let root = doc.catalog()?.get(b"Pages")?.as_reference()?;
    let mut kids = Vec::with_capacity(pages);
    adopt_pages(&mut doc, root, &mut kids)?;
    for bytes in rest {
        let mut part = Document::load_mem(bytes)?;
        part.renumber_objects_with(doc.max_id + 1);
        adopt_pages(&mut part, root, &mut kids)?;
        // The part's own catalog and page tree root are left behind; what only they
        // referenced (its information dictionary, its metadata) is pruned below.
        let catalog = part.trailer.get(b"Root")?.as_reference()?;
        let part_root = part.catalog()?.get(b"Pages")?.as_reference()?;
        doc.max_id = doc.max_id.max(part.max_id);
        for (id, object) in part.objects {
            if id != catalog && id != part_root {
                doc.objects.insert(id, object);
            }
        }
    }
    let tree = doc.get_dictionary_mut(root)?;
    tree.set("Count", kids.len() as i64);
    tree.set("Kids", kids);
    set_metadata_pages(&mut doc, pages)?;
    doc.prune_objects();
    keep_one_of_each(&mut doc);
    // Dense object numbers: the trailer's /Size must be one more than the highest.
    doc.renumber_objects();
    let mut out = Vec::new();
    doc.save_to(&mut out)?;
    Ok(out)
}

/// Hang every page of `doc` directly from the page tree node `root`, in order.
fn adopt_pages(
    doc: &mut Document,
    root: ObjectId,
    kids: &mut Vec<Object>,
) -> Result<(), lopdf::Error> {
    for page in doc.page_iter().collect::<Vec<_>>() {
        doc.get_dictionary_mut(page)?.set("Parent", root);
        kids.push(Object::Reference(page));
    }
    Ok(())
}

/// Typst records the page count in the XMP packet (`xmpTPg:NPages`).
fn set_metadata_pages(doc: &mut Document, pages: usize) -> Result<(), lopdf::Error> {
    let Ok(id) = doc
        .catalog()?
        .get(b"Metadata")
        .and_then(Object::as_reference)
    else {
        return Ok(());
    };
    let stream = doc.get_object_mut(id)?.as_stream_mut()?;
    let xml = match stream.decompressed_content() {
        Ok(content) => content,
        Err(_) => stream.content.clone(),
    };
    let Ok(xml) = String::from_utf8(xml) else {
        return Ok(());
    };
    let (open, close) = ("<xmpTPg:NPages>", "</xmpTPg:NPages>");
    if let (Some(start), Some(end)) = (xml.find(open), xml.find(close)) {
        let xml = format!(
            "{}{open}{pages}{close}{}",
            &xml[..start],
            &xml[end + close.len()..]
        );
        stream.dict.remove(b"Filter");
        stream.set_content(xml.into_bytes());
    }
    Ok(())
}

/// Keep one of each set of identical objects. Runs to a fixed point, as objects become
/// identical once the objects they reference have been merged (a font descriptor once
/// its font files are). Page contents are unique and large, so they are left out.
fn keep_one_of_each(doc: &mut Document) {
    let contents: BTreeSet<ObjectId> = doc
        .page_iter()
        .collect::<Vec<_>>()
        .into_iter()
        .flat_map(|page| doc.get_page_contents(page))
        .collect();
    loop {
        let mut seen: HashMap<u64, Vec<ObjectId>> = HashMap::new();
        let mut replace: BTreeMap<ObjectId, ObjectId> = BTreeMap::new();
        for (id, object) in &doc.objects {
            if contents.contains(id)
                || matches!(object, Object::Dictionary(d) if d.has_type(b"Page"))
            {
                continue;
            }
            let mut bytes = Vec::new();
            if Writer::write_object(&mut bytes, object).is_err() {
                continue;
            }
            let mut hasher = DefaultHasher::new();
            bytes.hash(&mut hasher);
            let same = seen.entry(hasher.finish()).or_default();
            match same
                .iter()
                .find(|other| doc.objects.get(other) == Some(object))
            {
                Some(other) => {
                    replace.insert(*id, *other);
                }
                None => same.push(*id),
            }
        }
        if replace.is_empty() {
            return;
        }
        for id in replace.keys() {
            doc.objects.remove(id);
        }
        for object in doc.objects.values_mut() {
            redirect(object, &replace);
        }
        doc.trailer
            .iter_mut()
            .for_each(|(_, o)| redirect(o, &replace));
    }
}

fn redirect(object: &mut Object, replace: &BTreeMap<ObjectId, ObjectId>) {
    match object {
        Object::Reference(id) => {
            if let Some(new) = replace.get(id) {
                *id = *new;
            }
        }
        Object::Array(items) => items.iter_mut().for_each(|o| redirect(o, replace)),
        Object::Dictionary(dict) => dict.iter_mut().for_each(|(_, o)| redirect(o, replace)),
        Object::Stream(stream) => stream
            .dict
            .iter_mut()
            .for_each(|(_, o)| redirect(o, replace)),
        _ => {}
    }
}
