//! The files: log segments of checksummed records, and snapshots. A fixed binary
//! layout, little-endian, written by hand (see the crate docs for why).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::cursor::Cursor;
use crate::error::StoreError;
use crate::model::{BrokerId, FirmId, InstrumentId, Order, OrderId, Side, Status};
use crate::validate::Marks;
use crate::zeroing::{self, Zeroer};

/// Bytes of one order on disk.
pub(crate) const ORDER_BYTES: usize = 78;
const LOG_MAGIC: &[u8; 8] = b"TRFEEDLG";
const SNAP_MAGIC: &[u8; 8] = b"TRFEEDSN";
const FORMAT_VERSION: u32 = 1;
pub(crate) const FILE_HEADER: usize = 16;
/// Length and checksum before each record's payload.
pub(crate) const RECORD_HEADER: usize = 8;
/// The largest payload a record may have (a larger length is damage).
pub(crate) const MAX_PAYLOAD: usize = 256 << 20;
const KIND_ORDERS: u8 = 1;
const KIND_FLOOR: u8 = 2;

fn file_header(magic: &[u8; 8]) -> [u8; FILE_HEADER] {
    let mut header = [0u8; FILE_HEADER];
    header[..8].copy_from_slice(magic);
    header[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    header
}

/// Appends `order`'s 78 bytes to `out`.
pub(crate) fn encode_order(order: &Order, out: &mut Vec<u8>) {
    out.extend_from_slice(&order.id.0.to_le_bytes());
    out.extend_from_slice(&order.firm.0.to_le_bytes());
    out.extend_from_slice(&order.broker.0.to_le_bytes());
    out.extend_from_slice(&order.instrument.0.to_le_bytes());
    out.push(order.side.code());
    out.push(order.status.code());
    out.extend_from_slice(&order.price.to_le_bytes());
    out.extend_from_slice(&order.quantity.to_le_bytes());
    out.extend_from_slice(&order.filled.to_le_bytes());
    out.extend_from_slice(&order.created_at.to_le_bytes());
    out.extend_from_slice(&order.updated_at.to_le_bytes());
    out.extend_from_slice(&order.seq.to_le_bytes());
    out.extend_from_slice(&order.rec.to_le_bytes());
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// Reads 78 bytes back; `None` for an unknown side or status code.
pub(crate) fn decode_order(b: &[u8]) -> Option<Order> {
    Some(Order {
        id: OrderId(u64_at(b, 0)),
        firm: FirmId(u32_at(b, 8)),
        broker: BrokerId(u32_at(b, 12)),
        instrument: InstrumentId(u32_at(b, 16)),
        side: Side::from_code(b[20])?,
        status: Status::from_code(b[21])?,
        price: u64_at(b, 22) as i64,
        quantity: u64_at(b, 30),
        filled: u64_at(b, 38),
        created_at: u64_at(b, 46),
        updated_at: u64_at(b, 54),
        seq: u64_at(b, 62),
        rec: u64_at(b, 70),
    })
}

/// Appends one record (length, CRC-32, payload) holding `orders` to `out`.
pub(crate) fn encode_orders_record(orders: &[Order], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0u8; RECORD_HEADER]);
    out.push(KIND_ORDERS);
    out.extend_from_slice(&(orders.len() as u32).to_le_bytes());
    for order in orders {
        encode_order(order, out);
    }
    seal(out, start);
}

/// Appends one record moving the eviction floor to `floor`.
pub(crate) fn encode_floor_record(floor: Cursor, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0u8; RECORD_HEADER]);
    out.push(KIND_FLOOR);
    out.extend_from_slice(&floor.seq.to_le_bytes());
    out.extend_from_slice(&floor.rec.to_le_bytes());
    seal(out, start);
}

fn seal(out: &mut [u8], start: usize) {
    let payload = &out[start + RECORD_HEADER..];
    let len = payload.len() as u32;
    let crc = crc32fast::hash(payload);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// What a log record says.
pub(crate) enum Entry<'a> {
    /// One applied batch: the versions of the orders it made, in order.
    Orders(&'a [u8]),
    /// Terminal orders at or before this cursor were evicted.
    Floor(Cursor),
}

/// Iterates the orders of an [`Entry::Orders`].
pub(crate) fn orders_of(payload: &[u8]) -> impl Iterator<Item = Option<Order>> + '_ {
    payload.chunks_exact(ORDER_BYTES).map(decode_order)
}

pub(crate) fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io {
        action,
        path,
        source,
    }
}

fn corrupt(path: &Path, offset: u64, problem: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        path: path.to_path_buf(),
        offset,
        problem: problem.into(),
    }
}

/// Reads as many bytes as there are, up to `buf.len()`; returns how many.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The result of reading a log segment.
pub(crate) struct Replayed {
    /// Where the intact records end (the segment is truncated there if it had a torn
    /// tail).
    pub valid_len: u64,
    /// Bytes after `valid_len` that were a torn tail.
    pub torn: u64,
    /// Bytes after `valid_len` that were zeros written ahead (see [`crate::zeroing`]).
    pub zeroed: u64,
}

/// Reads the log segment at `path`, handing each intact record to `apply`.
///
/// In the `last` segment, an incomplete tail or a final record whose checksum fails is
/// a torn write (a crash mid-append: the batch was never acknowledged), and a
/// zero-filled tail is zeros written ahead or a write that never reached the disk;
/// either ends the replay; anywhere else damage is
/// [`StoreError::Corrupt`] naming the file and offset.
pub(crate) fn replay_segment(
    path: &Path,
    last: bool,
    mut apply: impl FnMut(u64, Entry<'_>) -> Result<(), StoreError>,
) -> Result<Replayed, StoreError> {
    let file = File::open(path).map_err(io_error("open", path))?;
    let file_len = file.metadata().map_err(io_error("stat", path))?.len();
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let read_error = io_error("read", path);
    let mut header = [0u8; FILE_HEADER];
    let got = read_full(&mut reader, &mut header).map_err(read_error)?;
    if got < FILE_HEADER {
        if last {
            return Ok(Replayed {
                valid_len: 0,
                torn: got as u64,
                zeroed: 0,
            });
        }
        return Err(corrupt(
            path,
            got as u64,
            "expected a 16-byte header, got the end of the file",
        ));
    }
    if header != file_header(LOG_MAGIC) {
        return Err(corrupt(
            path,
            0,
            "expected a tranche-feed log header (TRFEEDLG, version 1)",
        ));
    }
    let mut offset = FILE_HEADER as u64;
    let mut payload = Vec::new();
    loop {
        let torn = |offset: u64| Replayed {
            valid_len: offset,
            torn: file_len - offset,
            zeroed: 0,
        };
        let mut head = [0u8; RECORD_HEADER];
        let got = read_full(&mut reader, &mut head).map_err(io_error("read", path))?;
        if got == 0 {
            return Ok(Replayed {
                valid_len: offset,
                torn: 0,
                zeroed: 0,
            });
        }
        let len = u32_at(&head, 0) as usize;
        let crc = u32_at(&head, 4);
        let end = offset + (RECORD_HEADER + len) as u64;
        if got < RECORD_HEADER || end > file_len {
            if last {
                return Ok(torn(offset));
            }
            return Err(corrupt(
                path,
                offset,
                format!("expected a record of {len} bytes, got the end of the file"),
            ));
        }
        if len == 0 || len > MAX_PAYLOAD {
            if last && rest_is_zero(&mut reader).map_err(io_error("read", path))? && head == [0; 8]
            {
                // Zeros written ahead of the writer, or space allocated whose data
                // never reached the disk (an unacknowledged write): nothing to keep.
                return Ok(Replayed {
                    valid_len: offset,
                    torn: 0,
                    zeroed: file_len - offset,
                });
            }
            return Err(corrupt(
                path,
                offset,
                format!("expected a record length of 1 to {MAX_PAYLOAD} bytes, got {len}"),
            ));
        }
        payload.resize(len, 0);
        reader
            .read_exact(&mut payload)
            .map_err(io_error("read", path))?;
        if crc32fast::hash(&payload) != crc {
            if last && end == file_len {
                return Ok(torn(offset));
            }
            return Err(corrupt(
                path,
                offset,
                format!("record checksum mismatch ({len} bytes)"),
            ));
        }
        let entry = match payload[0] {
            KIND_ORDERS if len >= 5 => {
                let count = u32_at(&payload, 1) as usize;
                if len != 5 + count * ORDER_BYTES {
                    return Err(corrupt(
                        path,
                        offset,
                        format!(
                            "expected {} bytes for {count} orders, got {len}",
                            5 + count * ORDER_BYTES
                        ),
                    ));
                }
                Entry::Orders(&payload[5..])
            }
            KIND_FLOOR if len == 17 => {
                Entry::Floor(Cursor::new(u64_at(&payload, 1), u64_at(&payload, 9)))
            }
            kind => {
                return Err(corrupt(
                    path,
                    offset,
                    format!("expected an orders or floor record, got kind {kind} of {len} bytes"),
                ))
            }
        };
        apply(offset, entry)?;
        offset = end;
    }
}

fn rest_is_zero(reader: &mut impl Read) -> io::Result<bool> {
    let mut buf = [0u8; 8192];
    loop {
        let n = read_full(reader, &mut buf)?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        if n < buf.len() {
            return Ok(true);
        }
    }
}

/// The log segment being appended to.
pub(crate) struct Segment {
    pub file: File,
    pub path: PathBuf,
    /// The lowest sequence number it may hold (in its name).
    pub start: u64,
    /// Its length in bytes (the file may be longer: zeros written ahead).
    pub len: u64,
    /// Writes zeros ahead of `len` (see [`crate::zeroing`]), if asked for.
    zeroer: Option<Zeroer>,
}

pub(crate) fn segment_name(start: u64) -> String {
    format!("log-{start:020}.log")
}

pub(crate) fn snapshot_name(seq: u64) -> String {
    format!("snapshot-{seq:020}.snap")
}

/// Parses `log-N.log` or `snapshot-N.snap`.
pub(crate) fn parse_name(name: &str) -> Option<(bool, u64)> {
    if let Some(n) = name
        .strip_prefix("log-")
        .and_then(|n| n.strip_suffix(".log"))
    {
        return n.parse().ok().map(|n| (true, n));
    }
    if let Some(n) = name
        .strip_prefix("snapshot-")
        .and_then(|n| n.strip_suffix(".snap"))
    {
        return n.parse().ok().map(|n| (false, n));
    }
    None
}

pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error("sync the directory", dir))
}

impl Segment {
    /// Opens an existing segment for appending, cut to `valid_len` (a torn tail is
    /// dropped; a segment shorter than its header gets a fresh one). With
    /// `zero_ahead`, zeros are written that far ahead of the end.
    pub fn reopen(
        path: PathBuf,
        start: u64,
        valid_len: u64,
        zero_ahead: Option<u64>,
    ) -> Result<Segment, StoreError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_error("open", &path))?;
        let current = file.metadata().map_err(io_error("stat", &path))?.len();
        let mut len = valid_len;
        if current != valid_len {
            file.set_len(valid_len)
                .map_err(io_error("truncate the torn tail of", &path))?;
        }
        if valid_len < FILE_HEADER as u64 {
            file.set_len(0).map_err(io_error("truncate", &path))?;
            file.write_all_at(&file_header(LOG_MAGIC), 0)
                .map_err(io_error("write", &path))?;
            len = FILE_HEADER as u64;
        }
        if current != len {
            file.sync_all().map_err(io_error("sync", &path))?;
        }
        Segment::with_zeroer(file, path, start, len, zero_ahead)
    }

    /// Creates the segment whose records start at sequence number `start`, durably.
    /// With `zero_ahead`, zeros are written that far ahead of the end.
    pub fn create(dir: &Path, start: u64, zero_ahead: Option<u64>) -> Result<Segment, StoreError> {
        let path = dir.join(segment_name(start));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_error("create", &path))?;
        file.set_len(0).map_err(io_error("truncate", &path))?;
        file.write_all_at(&file_header(LOG_MAGIC), 0)
            .map_err(io_error("write", &path))?;
        file.sync_all().map_err(io_error("sync", &path))?;
        sync_dir(dir)?;
        Segment::with_zeroer(file, path, start, FILE_HEADER as u64, zero_ahead)
    }

    fn with_zeroer(
        file: File,
        path: PathBuf,
        start: u64,
        len: u64,
        zero_ahead: Option<u64>,
    ) -> Result<Segment, StoreError> {
        let zeroer = match zero_ahead {
            Some(ahead) if zeroing::helps(&file) => {
                let handle = file.try_clone().map_err(io_error("open", &path))?;
                Zeroer::start(handle, len, ahead)
            }
            _ => None,
        };
        Ok(Segment {
            file,
            path,
            start,
            len,
            zeroer,
        })
    }

    /// Appends `bytes`; on failure cuts the file back so no partial record remains.
    pub fn append(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        let end = self.len + bytes.len() as u64;
        if let Some(zeroer) = &self.zeroer {
            zeroer.reserve(end);
        }
        if let Err(source) = self.file.write_all_at(bytes, self.len) {
            let (file, len) = (&self.file, self.len);
            let undone = match &self.zeroer {
                Some(zeroer) => zeroer.cut_back(len, || file.set_len(len)),
                None => file.set_len(len),
            }
            .is_ok();
            return Err(if undone {
                StoreError::Io {
                    action: "append to",
                    path: self.path.clone(),
                    source,
                }
            } else {
                StoreError::Poisoned {
                    path: self.path.clone(),
                    source,
                }
            });
        }
        self.len = end;
        Ok(())
    }

    /// Whether zeros are being written ahead of the end.
    pub fn zeroes_ahead(&self) -> bool {
        self.zeroer.is_some()
    }

    /// Flushes appended records to the disk.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.file.sync_data().map_err(io_error("sync", &self.path))
    }

    /// Stops zeroing and cuts the zeros off, durably: before the segment stops being
    /// the last one (replay takes a zero-filled tail only there) and on a clean
    /// close. Appending may go on after it, without zeros ahead.
    pub fn finish(&mut self) -> Result<(), StoreError> {
        if let Some(mut zeroer) = self.zeroer.take() {
            zeroer.stop();
        }
        let on_disk = self
            .file
            .metadata()
            .map_err(io_error("stat", &self.path))?
            .len();
        if on_disk > self.len {
            self.file
                .set_len(self.len)
                .and_then(|()| self.file.sync_all())
                .map_err(io_error("cut the zeros off", &self.path))?;
        }
        Ok(())
    }
}

/// What a snapshot holds besides the orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SnapshotHead {
    /// The marks when it began: the log from `marks.seq + 1` on completes it.
    pub marks: Marks,
    /// The eviction floor when it began.
    pub floor: Cursor,
}

/// Bytes before the first order of a snapshot: the file header and four `u64`s.
const SNAP_HEAD: usize = FILE_HEADER + 32;
/// Bytes after the last order: the order count (`u64`) and a CRC-32 of everything
/// before it.
const SNAP_TRAILER: usize = 12;

/// Writes a snapshot to `path` (a temporary name; the caller renames it): the header,
/// then the orders `next_chunk` hands out until it returns an empty chunk, then their
/// count and a CRC-32 of everything before it. The file is synced. Returns the count.
pub(crate) fn write_snapshot(
    path: &Path,
    head: SnapshotHead,
    mut next_chunk: impl FnMut(&mut Vec<Order>),
) -> Result<u64, StoreError> {
    let file = File::create(path).map_err(io_error("create", path))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut hasher = crc32fast::Hasher::new();
    let mut bytes = Vec::with_capacity(SNAP_HEAD + 4096 * ORDER_BYTES);
    bytes.extend_from_slice(&file_header(SNAP_MAGIC));
    for n in [
        head.marks.seq,
        head.marks.rec,
        head.floor.seq,
        head.floor.rec,
    ] {
        bytes.extend_from_slice(&n.to_le_bytes());
    }
    let mut chunk = Vec::with_capacity(4096);
    let mut count = 0u64;
    loop {
        hasher.update(&bytes);
        out.write_all(&bytes).map_err(io_error("write", path))?;
        bytes.clear();
        chunk.clear();
        next_chunk(&mut chunk);
        if chunk.is_empty() {
            break;
        }
        count += chunk.len() as u64;
        for order in &chunk {
            encode_order(order, &mut bytes);
        }
    }
    bytes.extend_from_slice(&count.to_le_bytes());
    hasher.update(&bytes);
    bytes.extend_from_slice(&hasher.finalize().to_le_bytes());
    out.write_all(&bytes).map_err(io_error("write", path))?;
    let file = out
        .into_inner()
        .map_err(|e| e.into_error())
        .map_err(io_error("write", path))?;
    file.sync_all().map_err(io_error("sync", path))?;
    Ok(count)
}

/// Reads the snapshot at `path`, handing each order to `apply`; checks the length,
/// count and checksum.
pub(crate) fn read_snapshot(
    path: &Path,
    mut apply: impl FnMut(Order),
) -> Result<SnapshotHead, StoreError> {
    let file = File::open(path).map_err(io_error("open", path))?;
    let file_len = file.metadata().map_err(io_error("stat", path))?.len();
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut hasher = crc32fast::Hasher::new();
    let mut head = [0u8; SNAP_HEAD];
    let body = file_len.checked_sub((SNAP_HEAD + SNAP_TRAILER) as u64);
    let Some(body) = body.filter(|b| b % ORDER_BYTES as u64 == 0) else {
        return Err(corrupt(
            path,
            0,
            format!(
                "expected {SNAP_HEAD} + {ORDER_BYTES} × orders + {SNAP_TRAILER} bytes, got {file_len}"
            ),
        ));
    };
    reader
        .read_exact(&mut head)
        .map_err(io_error("read", path))?;
    if head[..FILE_HEADER] != file_header(SNAP_MAGIC) {
        return Err(corrupt(
            path,
            0,
            "expected a tranche-feed snapshot header (TRFEEDSN, version 1)",
        ));
    }
    hasher.update(&head);
    let b = &head[FILE_HEADER..];
    let snapshot = SnapshotHead {
        marks: Marks {
            seq: u64_at(b, 0),
            rec: u64_at(b, 8),
        },
        floor: Cursor::new(u64_at(b, 16), u64_at(b, 24)),
    };
    let count = body / ORDER_BYTES as u64;
    let mut offset = SNAP_HEAD as u64;
    let mut order = [0u8; ORDER_BYTES];
    for _ in 0..count {
        reader
            .read_exact(&mut order)
            .map_err(io_error("read", path))?;
        hasher.update(&order);
        let decoded = decode_order(&order).ok_or_else(|| {
            corrupt(
                path,
                offset,
                "expected an order, got an unknown side or status code",
            )
        })?;
        apply(decoded);
        offset += ORDER_BYTES as u64;
    }
    let mut trailer = [0u8; SNAP_TRAILER];
    reader
        .read_exact(&mut trailer)
        .map_err(io_error("read", path))?;
    hasher.update(&trailer[..8]);
    if u32_at(&trailer, 8) != hasher.finalize() {
        return Err(corrupt(path, offset, "snapshot checksum mismatch"));
    }
    if u64_at(&trailer, 0) != count {
        return Err(corrupt(
            path,
            offset,
            format!(
                "expected a count of {count} orders, got {}",
                u64_at(&trailer, 0)
            ),
        ));
    }
    Ok(snapshot)
}

/// Removes a file, ignoring one already gone.
pub(crate) fn remove(path: &Path) -> Result<(), StoreError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_error("remove", path)(e)),
        _ => Ok(()),
    }
}
