//! Rendering in helper processes. Typst memoises in caches global to a process, behind
//! locks: a second render thread in one process adds no throughput (see
//! `examples/render_many`), a second process does. A worker therefore keeps a few
//! helpers — its own binary started again as a render server — and hands each one note
//! at a time over its stdin, reading the PDF back from its stdout.
//!
//! A request is a length-prefixed JSON document with a `note` field (the stored note
//! data, passed on as it is: the helper ignores the other fields). A reply is a tag byte
//! and either the page count and the PDF, or the render error's text. A helper that
//! dies or speaks out of turn is killed and replaced by a new one on the next render;
//! the note it had is retried by the engine like any lost step. A helper whose parent
//! dies reads the end of its input and exits.

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use serde::Deserialize;

use super::{evict_cache, Pdf, Renderer};
use crate::note::NoteData;

const OK: u8 = 0;
const FAILED: u8 = 1;
/// A request or reply longer than this is a broken stream, not a note.
const MAX_FRAME: u64 = 1 << 31;

#[derive(Deserialize)]
struct Request {
    note: NoteData,
}

/// Serve render requests from `input` until it ends: the helper side.
pub fn serve(renderer: &Renderer, input: impl Read, output: impl Write) -> io::Result<()> {
    let mut input = BufReader::new(input);
    let mut output = BufWriter::new(output);
    while let Some(request) = read_frame(&mut input)? {
        let rendered = serde_json::from_slice::<Request>(&request)
            .map_err(|e| format!("the note data: {e}"))
            .and_then(|r| renderer.render(&r.note).map_err(|e| e.to_string()));
        drop(request);
        evict_cache();
        match rendered {
            Ok(pdf) => {
                output.write_all(&[OK])?;
                output.write_all(&(pdf.pages as u64).to_le_bytes())?;
                write_frame(&mut output, &pdf.bytes)?;
            }
            Err(message) => {
                output.write_all(&[FAILED])?;
                write_frame(&mut output, message.as_bytes())?;
            }
        }
        output.flush()?;
    }
    Ok(())
}

/// Why a helper did not render a note.
#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    /// The note cannot be rendered (a template or data error): trying again won't help.
    #[error("{0}")]
    Render(String),
    /// The helper could not be started or was lost mid-note: worth another attempt.
    #[error("render helper: {0}")]
    Lost(io::Error),
}

/// Up to `size` helper processes, started on first use, each rendering one note at a
/// time. Callers bound themselves to `size` renders at once (the render step's
/// concurrency); one more would start an extra helper for the time it runs.
pub struct RenderHelpers {
    command: Box<dyn Fn() -> Command + Send + Sync>,
    size: usize,
    idle: Mutex<Vec<Helper>>,
}

impl std::fmt::Debug for RenderHelpers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderHelpers")
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl RenderHelpers {
    /// `command` starts one helper: a process that runs [`serve`] on its stdin and
    /// stdout.
    pub fn new(size: usize, command: impl Fn() -> Command + Send + Sync + 'static) -> Self {
        RenderHelpers {
            command: Box::new(command),
            size: size.max(1),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// How many helpers it keeps at most: the render step's concurrency.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Render the note in `request` (JSON with a `note` field) in a helper.
    pub fn render(&self, request: &[u8]) -> Result<Pdf, HelperError> {
        let idle = self.idle.lock().expect("idle helpers").pop();
        let mut helper = match idle {
            Some(h) => h,
            None => Helper::start(&mut (self.command)()).map_err(HelperError::Lost)?,
        };
        match helper.render(request) {
            Ok(reply) => {
                self.idle.lock().expect("idle helpers").push(helper);
                reply.map_err(HelperError::Render)
            }
            // Dropping it kills it: a helper out of step is not reused.
            Err(e) => Err(HelperError::Lost(e)),
        }
    }
}

struct Helper {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Helper {
    fn start(command: &mut Command) -> io::Result<Helper> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other("no pipes to the helper"));
        };
        Ok(Helper {
            child,
            stdin: BufWriter::new(stdin),
            stdout: BufReader::new(stdout),
        })
    }

    /// The outer error: the helper is lost; the inner one: the note failed to render.
    fn render(&mut self, request: &[u8]) -> io::Result<Result<Pdf, String>> {
        write_frame(&mut self.stdin, request)?;
        self.stdin.flush()?;
        let mut tag = [0u8];
        self.stdout.read_exact(&mut tag)?;
        match tag[0] {
            OK => {
                let mut pages = [0u8; 8];
                self.stdout.read_exact(&mut pages)?;
                let bytes = read_frame(&mut self.stdout)?.ok_or_else(ended)?;
                Ok(Ok(Pdf {
                    bytes,
                    pages: u64::from_le_bytes(pages) as usize,
                }))
            }
            FAILED => {
                let message = read_frame(&mut self.stdout)?.ok_or_else(ended)?;
                Ok(Err(String::from_utf8_lossy(&message).into_owned()))
            }
            other => Err(io::Error::other(format!("an unknown reply tag {other}"))),
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ended() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "the helper's output ended")
}

fn write_frame(w: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    w.write_all(&(bytes.len() as u64).to_le_bytes())?;
    w.write_all(bytes)
}

/// The next frame, or None where the stream ends cleanly before one.
fn read_frame(r: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 8];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u64::from_le_bytes(len);
    if len > MAX_FRAME {
        return Err(io::Error::other(format!("a frame of {len} bytes")));
    }
    let mut bytes = vec![0u8; len as usize];
    r.read_exact(&mut bytes)?;
    Ok(Some(bytes))
}
