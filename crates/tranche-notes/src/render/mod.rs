//! Rendering a note to PDF with Typst, in-process. Fonts and the parsed template are
//! loaded once per [`Renderer`] and shared by every note it renders; each note's data
//! reaches the template as the virtual file `/note.json`, so Typst's memoisation can
//! reuse the template's work across notes. Time comes from the note (its trade date),
//! never from the clock: the same note renders to the same bytes.
//!
//! A long note (a heavy trader's thousands of trades) is not laid out as one Typst
//! document, whose time and memory grow faster than its pages: it is cut into parts
//! of a few dozen pages (module `plan`), each rendered on its own with Typst's cache emptied
//! after it, and the parts' PDFs are joined into one (module `join`). The template learns
//! from `/part.json` which part it renders and how to number its pages; page counts of
//! all but the first part are fixed in advance, so "Page X of Y" is right without a
//! second layout (one is done, once, if a part ever comes out longer than planned).

pub mod helper;
mod join;
mod plan;

use std::path::Path;

use chrono::Datelike;
use typst::diag::{FileError, FileResult, Severity, SourceDiagnostic};
use typst::foundations::{Bytes, Datetime};
use typst::syntax::{FileId, RootedPath, Source, VirtualPath, VirtualRoot};
use typst::text::{Font, FontBook};
use typst::utils::LazyHash;
use typst::{Library, LibraryExt, World, WorldExt};
use typst_layout::PagedDocument;

use crate::note::NoteData;
use plan::Part;

/// The built-in template: the exchange format of a contract note cum tax invoice.
pub(crate) const DEFAULT_TEMPLATE: &str = include_str!("../../templates/contract-note.typ");

/// Embedded so notes never depend on the machine's fonts: DejaVu Sans has the ₹ sign.
pub const FONT_FILES: [(&str, &[u8]); 2] = [
    (
        "DejaVuSansCondensed.ttf",
        include_bytes!("../../fonts/DejaVuSansCondensed.ttf"),
    ),
    (
        "DejaVuSansCondensed-Bold.ttf",
        include_bytes!("../../fonts/DejaVuSansCondensed-Bold.ttf"),
    ),
];

/// Why a note could not be rendered. None of these is helped by trying again.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The user's template file could not be read.
    #[error("could not read the template {path}: {message}")]
    Template {
        /// The template file.
        path: String,
        /// Why not.
        message: String,
    },
    /// A Typst error, located in the template where possible.
    #[error("{location}: {message}")]
    Typst {
        /// `template:line:column`, the template's name, or `note data`.
        location: String,
        /// Typst's message, with its hints.
        message: String,
    },
    /// The note could not be handed to the template as JSON.
    #[error("could not encode the note data: {0}")]
    Data(#[from] serde_json::Error),
    /// The parts of a long note could not be put together.
    #[error("could not join the parts of note {note}: {message}")]
    Parts {
        /// The note's number.
        note: String,
        /// What went wrong.
        message: String,
    },
}

/// A rendered note.
#[derive(Debug, Clone)]
pub struct Pdf {
    /// The PDF file, unencrypted and unsigned.
    pub bytes: Vec<u8>,
    /// Page count.
    pub pages: usize,
}

/// Renders notes with one template; cheap to share across threads (`Arc`), though
/// Typst's caches make a second render thread in one process add little.
pub struct Renderer {
    library: LazyHash<Library>,
    book: LazyHash<FontBook>,
    fonts: Vec<Font>,
    template_name: String,
    template: Source,
    data_id: FileId,
    part_id: FileId,
    /// Whether the template reads `/part.json`, so long notes can be rendered in parts.
    parts: bool,
    /// PDF tags make files five times larger; contract notes go without.
    tagged: bool,
}

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer")
            .field("template", &self.template_name)
            .finish()
    }
}

fn file_id(path: &str) -> FileId {
    let vpath = VirtualPath::new(path).expect("a valid virtual path");
    FileId::new(RootedPath::new(VirtualRoot::Project, vpath))
}

impl Renderer {
    /// A renderer for the built-in template.
    pub fn new() -> Self {
        Self::with_template("contract-note.typ", DEFAULT_TEMPLATE.to_string())
    }

    /// A renderer for a template file of the user's.
    pub fn from_file(path: &Path) -> Result<Self, RenderError> {
        let text = std::fs::read_to_string(path).map_err(|e| RenderError::Template {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Ok(Self::with_template(&path.display().to_string(), text))
    }

    /// A renderer for template source `text`; `name` is what errors call it. A template
    /// that reads `/part.json` can render long notes in parts.
    pub fn with_template(name: &str, text: String) -> Self {
        let fonts: Vec<Font> = FONT_FILES
            .iter()
            .flat_map(|(_, f)| Font::iter(Bytes::new(*f)))
            .collect();
        Renderer {
            library: LazyHash::new(Library::default()),
            book: LazyHash::new(FontBook::from_fonts(&fonts)),
            fonts,
            template_name: name.to_string(),
            parts: text.contains("/part.json"),
            template: Source::new(file_id("/contract-note.typ"), text),
            data_id: file_id("/note.json"),
            part_id: file_id("/part.json"),
            tagged: false,
        }
    }

    /// Render one note. Typst errors name the template line. Long notes are rendered in
    /// parts and joined (when the template reads `/part.json`, as the built-in one does).
    pub fn render(&self, note: &NoteData) -> Result<Pdf, RenderError> {
        if self.parts && plan::needs_parts(note) {
            return self.render_in_parts(note);
        }
        let data = Bytes::new(serde_json::to_vec(note)?);
        self.render_part(note, data, &Part::whole(note)?)
    }

    fn render_in_parts(&self, note: &NoteData) -> Result<Pdf, RenderError> {
        let mut parts = plan::parts(note)?;
        // Every part carries the note's blocks but only its own lines and trades.
        let blocks = serde_json::to_value(NoteData {
            lines: Vec::new(),
            annexure: Vec::new(),
            ..note.clone()
        })?;
        let data = |part: &Part| -> Result<Bytes, RenderError> {
            let mut value = blocks.clone();
            value["lines"] = serde_json::to_value(&note.lines[part.line_rows.clone()])?;
            value["annexure"] = serde_json::to_value(&note.annexure[part.trade_rows.clone()])?;
            Ok(Bytes::new(serde_json::to_vec(&value)?))
        };
        let render = |part: &Part| -> Result<Pdf, RenderError> {
            let pdf = self.render_part(note, data(part)?, part);
            // Nothing of one part's layout serves the next; without this the cache
            // keeps every page laid out so far.
            comemo::evict(1);
            pdf
        };

        // The front part first: the template counts its pages and adds those after it.
        parts[0].pages_after = parts[1..].iter().filter_map(|p| p.pages).sum();
        let front = render(&parts[0])?;
        parts[0].pages = Some(front.pages);
        number(&mut parts);
        let mut pdfs = vec![front];
        pdfs.extend(render_all(&parts[1..], &render)?);

        // A part longer than planned (rows that wrapped) shifts the numbers of every
        // page: render them all again, now that every part's length is known.
        if pdfs
            .iter()
            .zip(&parts)
            .any(|(pdf, part)| Some(pdf.pages) != part.pages)
        {
            for (part, pdf) in parts.iter_mut().zip(&pdfs) {
                part.pages = Some(pdf.pages);
            }
            number(&mut parts);
            pdfs.clear();
            for part in &parts {
                let pdf = render(part)?;
                if Some(pdf.pages) != part.pages {
                    return Err(RenderError::Parts {
                        note: note.note_number.clone(),
                        message: format!(
                            "a part laid out twice came out {} and then {} pages long",
                            part.pages.unwrap_or(0),
                            pdf.pages
                        ),
                    });
                }
                pdfs.push(pdf);
            }
        }

        let pages = pdfs.iter().map(|p| p.pages).sum();
        let bytes: Vec<Vec<u8>> = pdfs.into_iter().map(|p| p.bytes).collect();
        let bytes = join::join(&bytes, pages).map_err(|e| RenderError::Parts {
            note: note.note_number.clone(),
            message: e.to_string(),
        })?;
        Ok(Pdf { bytes, pages })
    }

    /// Lay out and export one document: the whole note or one part of it.
    fn render_part(&self, note: &NoteData, data: Bytes, part: &Part) -> Result<Pdf, RenderError> {
        let today = Datetime::from_ymd(
            note.trade_date.year(),
            note.trade_date.month() as u8,
            note.trade_date.day() as u8,
        );
        let world = NoteWorld {
            renderer: self,
            data,
            part: Bytes::new(serde_json::to_vec(part)?),
            today,
        };
        let document: PagedDocument = typst::compile(&world)
            .output
            .map_err(|errors| self.describe(&world, &errors))?;
        let options = typst_pdf::PdfOptions {
            ident: typst::foundations::Smart::Custom(note.note_number.clone()),
            timestamp: today.map(typst_pdf::Timestamp::new_utc),
            tagged: self.tagged,
            ..Default::default()
        };
        let bytes =
            typst_pdf::pdf(&document, &options).map_err(|errors| self.describe(&world, &errors))?;
        Ok(Pdf {
            bytes,
            pages: document.pages().len(),
        })
    }

    fn describe(&self, world: &NoteWorld<'_>, errors: &[SourceDiagnostic]) -> RenderError {
        let first = errors
            .iter()
            .find(|e| e.severity == Severity::Error)
            .or(errors.first());
        let Some(e) = first else {
            return RenderError::Typst {
                location: self.template_name.clone(),
                message: "unknown Typst error".into(),
            };
        };
        let location = match (e.span.id(), world.range(e.span)) {
            (Some(id), Some(range)) if id == self.template.id() => {
                match self.template.lines().byte_to_line_column(range.start) {
                    Some((line, col)) => format!("{}:{}:{}", self.template_name, line + 1, col + 1),
                    None => self.template_name.clone(),
                }
            }
            (Some(id), _) if id == self.data_id => "note data".to_string(),
            _ => self.template_name.clone(),
        };
        let mut message = e.message.to_string();
        for hint in &e.hints {
            message.push_str(&format!(" (hint: {})", hint.v));
        }
        RenderError::Typst { location, message }
    }
}

impl Default for Renderer {
    fn default() -> Self {
        Self::new()
    }
}

/// The only door between Typst and the outside world for one note.
struct NoteWorld<'a> {
    renderer: &'a Renderer,
    data: Bytes,
    part: Bytes,
    today: Option<Datetime>,
}

impl World for NoteWorld<'_> {
    fn library(&self) -> &LazyHash<Library> {
        &self.renderer.library
    }

    fn book(&self) -> &LazyHash<FontBook> {
        &self.renderer.book
    }

    fn main(&self) -> FileId {
        self.renderer.template.id()
    }

    fn source(&self, id: FileId) -> FileResult<Source> {
        if id == self.renderer.template.id() {
            Ok(self.renderer.template.clone())
        } else {
            Err(FileError::NotFound(id.vpath().get_without_slash().into()))
        }
    }

    fn file(&self, id: FileId) -> FileResult<Bytes> {
        if id == self.renderer.data_id {
            Ok(self.data.clone())
        } else if id == self.renderer.part_id {
            Ok(self.part.clone())
        } else if id == self.renderer.template.id() {
            Ok(Bytes::from_string(self.renderer.template.clone()))
        } else {
            Err(FileError::NotFound(id.vpath().get_without_slash().into()))
        }
    }

    fn font(&self, index: usize) -> Option<Font> {
        self.renderer.fonts.get(index).cloned()
    }

    fn today(&self, _offset: Option<typst::foundations::Duration>) -> Option<Datetime> {
        self.today
    }
}

/// The files the `typst` CLI needs to compile a note as one document, as this crate
/// does: the built-in template and the note's `/note.json` and `/part.json`.
#[derive(Debug)]
pub struct TypstSources {
    /// File name (relative to the compile root) and contents.
    pub files: Vec<(&'static str, Vec<u8>)>,
}

/// A note's Typst sources, or None for a note long enough to be rendered in parts
/// (which no single `typst compile` reproduces).
pub fn typst_sources(note: &NoteData) -> Result<Option<TypstSources>, RenderError> {
    if plan::needs_parts(note) {
        return Ok(None);
    }
    Ok(Some(TypstSources {
        files: vec![
            ("contract-note.typ", DEFAULT_TEMPLATE.as_bytes().to_vec()),
            ("note.json", serde_json::to_vec(note)?),
            ("part.json", serde_json::to_vec(&Part::whole(note)?)?),
        ],
    }))
}

/// Empty Typst's memoisation cache (global to the process) after a note. Nothing of
/// one note's layout serves the next, and keeping results for a few notes made every
/// note slower, not faster: 973 short notes on one thread took 35.1 ms each with
/// results kept for ten notes, 24.9 ms with the cache emptied after each
/// (`examples/render_many 1 1000`, RAYON_NUM_THREADS=1), and the process stays at
/// ~50 MB instead of ~170 MB.
pub fn evict_cache() {
    comemo::evict(0);
}

/// Render parts on two threads (each part is independent once its page numbers are
/// known), keeping their order. Typst lays out a part's pages in parallel already, but
/// a part's start and end (evaluation, PDF writing) use one core.
fn render_all<F>(parts: &[Part], render: &F) -> Result<Vec<Pdf>, RenderError>
where
    F: Fn(&Part) -> Result<Pdf, RenderError> + Sync,
{
    const THREADS: usize = 2;
    let mut slots: Vec<Option<Result<Pdf, RenderError>>> = Vec::new();
    slots.resize_with(parts.len(), || None);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|k| {
                scope.spawn(move || {
                    parts
                        .iter()
                        .enumerate()
                        .skip(k)
                        .step_by(THREADS)
                        .map(|(i, part)| (i, render(part)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (i, pdf) in h.join().expect("a render thread panicked") {
                slots[i] = Some(pdf);
            }
        }
    });
    slots
        .into_iter()
        .map(|p| p.expect("every part rendered"))
        .collect()
}

/// Number the parts' pages in order, all of them known.
fn number(parts: &mut [Part]) {
    let total = parts.iter().filter_map(|p| p.pages).sum();
    let mut first = 1;
    for part in parts {
        part.first_page = first;
        part.total_pages = Some(total);
        first += part.pages.unwrap_or(0);
    }
}
