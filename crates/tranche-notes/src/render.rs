//! Rendering a note to PDF with Typst, in-process. Fonts and the parsed template are
//! loaded once per [`Renderer`] and shared by every note it renders; each note's data
//! reaches the template as the virtual file `/note.json`, so Typst's memoisation can
//! reuse the template's work across notes. Time comes from the note (its trade date),
//! never from the clock: the same note renders to the same bytes.

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

/// The built-in template: the exchange format of a contract note cum tax invoice.
pub const DEFAULT_TEMPLATE: &str = include_str!("../templates/contract-note.typ");

/// Embedded so notes never depend on the machine's fonts: DejaVu Sans has the ₹ sign.
const FONTS: [&[u8]; 2] = [
    include_bytes!("../fonts/DejaVuSansCondensed.ttf"),
    include_bytes!("../fonts/DejaVuSansCondensed-Bold.ttf"),
];

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("could not read the template {path}: {message}")]
    Template { path: String, message: String },
    /// A Typst error, located in the template where possible.
    #[error("{location}: {message}")]
    Typst { location: String, message: String },
    #[error("could not encode the note data: {0}")]
    Data(#[from] serde_json::Error),
}

/// A rendered note.
#[derive(Debug, Clone)]
pub struct Pdf {
    pub bytes: Vec<u8>,
    pub pages: usize,
}

pub struct Renderer {
    library: LazyHash<Library>,
    book: LazyHash<FontBook>,
    fonts: Vec<Font>,
    template_name: String,
    template: Source,
    data_id: FileId,
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

    pub fn with_template(name: &str, text: String) -> Self {
        let fonts: Vec<Font> = FONTS
            .iter()
            .flat_map(|f| Font::iter(Bytes::new(*f)))
            .collect();
        Renderer {
            library: LazyHash::new(Library::default()),
            book: LazyHash::new(FontBook::from_fonts(&fonts)),
            fonts,
            template_name: name.to_string(),
            template: Source::new(file_id("/contract-note.typ"), text),
            data_id: file_id("/note.json"),
            tagged: false,
        }
    }

    /// Render one note. Typst errors name the template line.
    pub fn render(&self, note: &NoteData) -> Result<Pdf, RenderError> {
        let data = Bytes::new(serde_json::to_vec(note)?);
        let today = Datetime::from_ymd(
            note.trade_date.year(),
            note.trade_date.month() as u8,
            note.trade_date.day() as u8,
        );
        let world = NoteWorld {
            renderer: self,
            data,
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

/// Drop Typst's memoised results older than a few renders: the cache is global to the
/// process and would otherwise grow by megabytes per note.
pub fn evict_cache() {
    comemo::evict(10);
}
