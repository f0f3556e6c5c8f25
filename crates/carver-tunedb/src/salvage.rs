//! Salvage: every row that can still be read from a damaged (or any) carver database file,
//! checked like an import and merged into a working database.
//!
//! SQLite stops at the first damaged b-tree page it meets, and a file moved aside for damage
//! usually still holds almost all of its rows. So the file is read page by page, the way SQLite
//! lays it out (<https://www.sqlite.org/fileformat2.html>): each table leaf page's cells are
//! decoded, following overflow chains, and every record with the `tuning_results` layout
//! becomes a candidate row. Nothing here depends on the b-tree above the leaves, so a damaged
//! interior page or index costs nothing, and a damaged leaf costs only its own rows.
//!
//! Pages on the free list are skipped (they hold deleted rows, which must not come back). A
//! write-ahead log beside the file is applied first, on a private copy, so that the newest
//! committed version of every page is read. Memory stays bounded: one page, one record and the
//! set of ids seen are held at a time, and rows are merged in batches.

use std::collections::HashSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use carver_schema::{ImportReport, REPORT_LIST_LIMIT, SalvageReport, SkippedRow, TuneRecord};

use crate::db::{RawRow, decode};
use crate::exchange::RecordCheck;
use crate::health::{APPLICATION_ID, SCHEMA_VERSION};
use crate::validate::MAX_RECORD_BYTES;
use crate::{TuneDb, TuneDbError};

/// Columns of `tuning_results`, the id (stored as NULL, the rowid standing for it) included.
const COLUMN_COUNT: usize = 22;

/// Largest payload followed: the largest record plus its key columns and record header.
const MAX_PAYLOAD: u64 = MAX_RECORD_BYTES as u64 + (64 << 10);

/// Rows merged per transaction.
const BATCH_ROWS: usize = 1000;

impl TuneDb {
    /// Reads every row that can still be read from the carver database file at `file` (one
    /// moved aside for damage, or any other), checks each like an import (the database's checks,
    /// then `check`), and merges the good ones into this database, the faster result winning
    /// each key. `file` is never changed. Refuses this database's own file.
    pub fn salvage(
        &self,
        file: &Path,
        check: RecordCheck<'_>,
    ) -> Result<SalvageReport, TuneDbError> {
        let refuse = |reason: String| TuneDbError::Recover {
            path: file.to_path_buf(),
            reason,
        };
        let meta = std::fs::metadata(file).map_err(|e| refuse(e.to_string()))?;
        if !meta.is_file() {
            return Err(refuse(format!(
                "it is {}, not a database file",
                if meta.is_dir() {
                    "a directory"
                } else {
                    "a device, pipe or socket"
                }
            )));
        }
        if same_file(file, self.path()) {
            return Err(refuse(
                "it is the database in use; recover from a moved-aside copy, or from another \
                 file"
                    .into(),
            ));
        }
        let mut report = SalvageReport::default();
        // Kept alive while the copy is read.
        let (_copy_dir, source) = with_wal_applied(file, &mut report.notes);
        let mut reader = PageReader::open(&source).map_err(|e| refuse(e.to_string()))?;
        reader.check_header(file, &mut report.notes)?;

        let mut seen = HashSet::new();
        let mut batch: Vec<(u64, TuneRecord)> = Vec::new();
        let mut merged = ImportReport::default();
        let mut failure = None;
        let mut twice = 0u64;
        reader
            .rows(&mut report.unreadable_pages, &mut |id, row| {
                if failure.is_some() {
                    return;
                }
                report.rows_found += 1;
                if !seen.insert(id) {
                    twice += 1;
                }
                let checked = row.and_then(decode).and_then(|stored| {
                    for message in check(&stored.record)? {
                        note(&mut report.notes, message);
                    }
                    Ok(stored.record)
                });
                match checked {
                    Ok(record) => batch.push((id.unsigned_abs(), record)),
                    Err(reason) => {
                        if report.bad_rows.len() < REPORT_LIST_LIMIT {
                            report.bad_rows.push(SkippedRow { id, reason });
                        } else {
                            report.bad_rows_not_listed += 1;
                        }
                    }
                }
                if batch.len() >= BATCH_ROWS
                    && let Err(e) = self.merge_rows(std::mem::take(&mut batch), &mut merged, check)
                {
                    failure = Some(e);
                }
            })
            .map_err(|e| refuse(e.to_string()))?;
        if let Some(e) = failure {
            return Err(e);
        }
        if twice > 0 {
            note(
                &mut report.notes,
                format!(
                    "{twice} row ids were found more than once (pages left over from earlier \
                     versions); every copy was checked and the fastest result kept"
                ),
            );
        }
        self.merge_rows(batch, &mut merged, check)?;
        report.inserted = merged.inserted;
        report.replaced = merged.replaced;
        report.kept_existing = merged.kept_existing;
        report.bad_rows.sort_by_key(|b| b.id);
        Ok(report)
    }

    fn merge_rows(
        &self,
        batch: Vec<(u64, TuneRecord)>,
        into: &mut ImportReport,
        check: RecordCheck<'_>,
    ) -> Result<(), TuneDbError> {
        // Conflicts say nothing useful here (both sides are this machine's results); only the
        // counts are kept.
        self.merge(batch, into, check)?;
        into.conflicts.clear();
        Ok(())
    }
}

/// Adds a note once.
fn note(notes: &mut Vec<String>, text: String) {
    if notes.len() < REPORT_LIST_LIMIT && !notes.contains(&text) {
        notes.push(text);
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The file to read: `file` itself, or, when a write-ahead log lies beside it, a private copy
/// with the log applied (the copy's directory is returned to keep it alive).
fn with_wal_applied(file: &Path, notes: &mut Vec<String>) -> (Option<tempfile::TempDir>, PathBuf) {
    let wal = companion(file, "-wal");
    if std::fs::metadata(&wal).map_or(true, |m| m.len() == 0) {
        return (None, file.to_path_buf());
    }
    let applied = (|| -> Result<(tempfile::TempDir, PathBuf), String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let copy = dir.path().join("salvage.sqlite3");
        std::fs::copy(file, &copy).map_err(|e| e.to_string())?;
        std::fs::copy(&wal, companion(&copy, "-wal")).map_err(|e| e.to_string())?;
        let conn = rusqlite::Connection::open(&copy).map_err(|e| e.to_string())?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            r.get::<_, i64>(0)
        })
        .map_err(|e| e.to_string())?;
        conn.close().map_err(|(_, e)| e.to_string())?;
        Ok((dir, copy))
    })();
    match applied {
        Ok((dir, copy)) => (Some(dir), copy),
        Err(reason) => {
            notes.push(format!(
                "the write-ahead log {} could not be applied ({reason}); the rows it held are \
                 missing, and rows deleted since the last checkpoint may reappear",
                wal.display()
            ));
            (None, file.to_path_buf())
        }
    }
}

fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// A database file read page by page.
struct PageReader {
    file: File,
    page_size: usize,
    /// Bytes of each page that hold data (the rest is reserved by extensions).
    usable: usize,
    pages: u64,
    header: [u8; 100],
    has_header: bool,
}

impl PageReader {
    fn open(path: &Path) -> std::io::Result<Self> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        let mut header = [0u8; 100];
        let has_header = len >= 100
            && file.read_exact(&mut header).is_ok()
            && header.starts_with(b"SQLite format 3\0");
        let raw = usize::from(u16::from_be_bytes([header[16], header[17]]));
        let declared = if raw == 1 { 65536 } else { raw };
        let page_size = if has_header && declared.is_power_of_two() && declared >= 512 {
            declared
        } else {
            4096
        };
        let reserved = if has_header {
            usize::from(header[20])
        } else {
            0
        };
        Ok(PageReader {
            file,
            page_size,
            usable: page_size.saturating_sub(reserved).max(480),
            pages: len / page_size as u64,
            header,
            has_header,
        })
    }

    /// Refuses a newer carver's file (its rows may not have this layout); notes a foreign or
    /// headerless one.
    fn check_header(&self, path: &Path, notes: &mut Vec<String>) -> Result<(), TuneDbError> {
        if !self.has_header {
            notes.push(format!(
                "the file has no SQLite header (damaged, or not a database); it was read as \
                 {}-byte pages",
                self.page_size
            ));
            return Ok(());
        }
        let field = |at: usize| {
            i32::from_be_bytes([
                self.header[at],
                self.header[at + 1],
                self.header[at + 2],
                self.header[at + 3],
            ])
        };
        let (version, application_id) = (i64::from(field(60)), field(68));
        if application_id == APPLICATION_ID && version > SCHEMA_VERSION {
            return Err(TuneDbError::NewerSchema {
                path: path.to_path_buf(),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if application_id != APPLICATION_ID {
            notes.push(format!(
                "the file's header does not name it a carver database (application_id \
                 {application_id:#010x}); only rows with carver's layout were taken"
            ));
        }
        Ok(())
    }

    fn read_page(&mut self, number: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.file
            .seek(SeekFrom::Start((number - 1) * self.page_size as u64))?;
        self.file.read_exact(buf)
    }

    /// Pages on the free list (trunk and leaf pages), as far as the list can be followed.
    fn free_pages(&mut self) -> HashSet<u64> {
        let mut free = HashSet::new();
        if !self.has_header {
            return free;
        }
        let mut trunk = u64::from(u32::from_be_bytes([
            self.header[32],
            self.header[33],
            self.header[34],
            self.header[35],
        ]));
        let mut page = vec![0u8; self.page_size];
        // Each trunk is visited once: a damaged list that loops ends here.
        while trunk >= 1 && trunk <= self.pages && free.insert(trunk) {
            if self.read_page(trunk, &mut page).is_err() {
                break;
            }
            let count = u32_at(&page, 4) as usize;
            for i in 0..count.min(self.usable / 4 - 2) {
                let leaf = u64::from(u32_at(&page, 8 + 4 * i));
                if leaf >= 1 && leaf <= self.pages {
                    free.insert(leaf);
                }
            }
            trunk = u64::from(u32_at(&page, 0));
        }
        free
    }

    /// Calls `found(id, row)` for every record of the table's layout on every table leaf page
    /// not on the free list; counts pages whose layout cannot be parsed.
    fn rows(
        &mut self,
        unreadable_pages: &mut u64,
        found: &mut dyn FnMut(i64, Result<RawRow, String>),
    ) -> std::io::Result<()> {
        let free = self.free_pages();
        let mut page = vec![0u8; self.page_size];
        for number in 1..=self.pages {
            if free.contains(&number) {
                continue;
            }
            self.read_page(number, &mut page)?;
            let start = if number == 1 { 100 } else { 0 };
            // 0x0D: a table b-tree leaf, the only kind of page that holds rows.
            if page[start] != 0x0D {
                continue;
            }
            let cells = usize::from(u16::from_be_bytes([page[start + 3], page[start + 4]]));
            let pointers = start + 8;
            if pointers + 2 * cells > self.usable {
                *unreadable_pages += 1;
                continue;
            }
            let mut damaged = false;
            for i in 0..cells {
                let at = pointers + 2 * i;
                let offset = usize::from(u16::from_be_bytes([page[at], page[at + 1]]));
                match self.cell(&page, offset, pointers + 2 * cells) {
                    Ok(Some((id, payload))) => {
                        if let Some(row) = record(id, &payload) {
                            found(id, row);
                        }
                    }
                    Ok(None) => {}
                    Err(()) => damaged = true,
                }
            }
            if damaged {
                *unreadable_pages += 1;
            }
        }
        Ok(())
    }

    /// The rowid and payload of the cell at `offset` of a table leaf page, its overflow
    /// included. `Ok(None)` for a payload too large to be one of ours; `Err` for a cell whose
    /// layout is damaged.
    fn cell(
        &mut self,
        page: &[u8],
        offset: usize,
        content_start: usize,
    ) -> Result<Option<(i64, Vec<u8>)>, ()> {
        if offset < content_start || offset >= self.usable {
            return Err(());
        }
        let area = &page[offset..self.usable];
        let (size, a) = varint(area).ok_or(())?;
        let (rowid, b) = varint(&area[a..]).ok_or(())?;
        if size > MAX_PAYLOAD {
            return Ok(None);
        }
        let size = size as usize;
        let u = self.usable;
        let max_local = u - 35;
        let local = if size <= max_local {
            size
        } else {
            let min_local = (u - 12) * 32 / 255 - 23;
            let k = min_local + (size - min_local) % (u - 4);
            if k <= max_local { k } else { min_local }
        };
        let body = &area[a + b..];
        if body.len() < local + if local < size { 4 } else { 0 } {
            return Err(());
        }
        let mut payload = Vec::with_capacity(size);
        payload.extend_from_slice(&body[..local]);
        if local < size {
            let mut next = u64::from(u32_at(body, local));
            let mut overflow = vec![0u8; self.page_size];
            let mut hops = 0u64;
            while payload.len() < size {
                hops += 1;
                if next < 1 || next > self.pages || hops > self.pages {
                    return Err(());
                }
                self.read_page(next, &mut overflow).map_err(|_| ())?;
                let take = (size - payload.len()).min(u - 4);
                payload.extend_from_slice(&overflow[4..4 + take]);
                next = u64::from(u32_at(&overflow, 0));
            }
        }
        Ok(Some((rowid as i64, payload)))
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// SQLite's variable-length integer: 1 to 9 bytes, big-endian, 7 bits per byte but the ninth's
/// full 8. Returns the value and its length.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for i in 0..9 {
        let byte = *bytes.get(i)?;
        if i == 8 {
            return Some(((value << 8) | u64::from(byte), 9));
        }
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// A value of a record.
enum Column<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a [u8]),
    Blob,
}

/// The row a record payload holds, when it has the table's 22 columns; `None` for a record of
/// any other shape (the schema table, another application's table).
fn record(id: i64, payload: &[u8]) -> Option<Result<RawRow, String>> {
    let (header_size, mut at) = varint(payload)?;
    let header_size = usize::try_from(header_size).ok()?;
    if header_size > payload.len() || header_size < at {
        return None;
    }
    let mut types = Vec::with_capacity(COLUMN_COUNT);
    while at < header_size {
        let (t, n) = varint(&payload[at..header_size])?;
        types.push(t);
        at += n;
        if types.len() > COLUMN_COUNT {
            return None;
        }
    }
    if types.len() != COLUMN_COUNT {
        return None;
    }
    let mut body = &payload[header_size..];
    let mut columns = Vec::with_capacity(COLUMN_COUNT);
    for t in types {
        let length = match t {
            0 | 8 | 9 => 0,
            1..=4 => t as usize,
            5 => 6,
            6 | 7 => 8,
            10 | 11 => return Some(Err(format!("column {} has a reserved type", columns.len()))),
            _ => ((t - 12) / 2) as usize,
        };
        if body.len() < length {
            return Some(Err("the record is cut short".into()));
        }
        let (value, rest) = body.split_at(length);
        body = rest;
        columns.push(match t {
            0 => Column::Null,
            1..=6 => {
                // Big-endian two's complement of 1 to 8 bytes: sign-extend from the first byte.
                let mut v: i64 = if value[0] & 0x80 != 0 { -1 } else { 0 };
                for &byte in value {
                    v = (v << 8) | i64::from(byte);
                }
                Column::Int(v)
            }
            7 => Column::Real(f64::from_bits(u64::from_be_bytes(value.try_into().ok()?))),
            8 => Column::Int(0),
            9 => Column::Int(1),
            t if t % 2 == 0 => Column::Blob,
            _ => Column::Text(value),
        });
    }
    Some(raw_row(id, &columns))
}

fn raw_row(id: i64, c: &[Column<'_>]) -> Result<RawRow, String> {
    const NAMES: [&str; COLUMN_COUNT] = [
        "id",
        "device_uuid",
        "device_name",
        "driver_version",
        "carver_version",
        "target",
        "kernel_hash",
        "dtype_a",
        "dtype_b",
        "dtype_c",
        "dtype_acc",
        "layout_a",
        "layout_b",
        "batch",
        "m",
        "n",
        "k",
        "winner",
        "candidates",
        "cublas_time_s",
        "measured_at_unix_s",
        "method",
    ];
    let text = |i: usize| match &c[i] {
        Column::Text(bytes) => String::from_utf8(bytes.to_vec())
            .map_err(|_| format!("{} is not valid UTF-8", NAMES[i])),
        _ => Err(format!("{} is not text", NAMES[i])),
    };
    let int = |i: usize| match c[i] {
        Column::Int(v) => Ok(v),
        _ => Err(format!("{} is not an integer", NAMES[i])),
    };
    // SQLite stores a REAL without a fraction as an integer on disk.
    let cublas = match c[19] {
        Column::Null => None,
        Column::Real(v) => Some(v),
        Column::Int(v) => Some(v as f64),
        _ => return Err("cublas_time_s is not a number".into()),
    };
    if !matches!(c[0], Column::Null | Column::Int(_)) {
        return Err("id is not an integer".into());
    }
    if c.iter().any(|v| matches!(v, Column::Blob)) {
        return Err("a column holds a blob".into());
    }
    Ok(RawRow {
        id,
        device_uuid: text(1)?,
        device_name: text(2)?,
        driver_version: text(3)?,
        carver_version: text(4)?,
        target: text(5)?,
        kernel_hash: text(6)?,
        dtype_a: text(7)?,
        dtype_b: text(8)?,
        dtype_c: text(9)?,
        dtype_acc: text(10)?,
        layout_a: text(11)?,
        layout_b: text(12)?,
        batch: int(13)?,
        m: int(14)?,
        n: int(15)?,
        k: int(16)?,
        winner: text(17)?,
        candidates: text(18)?,
        cublas_time_s: cublas,
        measured_at_unix_s: int(20)?,
        method: text(21)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_decode_as_sqlite_writes_them() {
        assert_eq!(varint(&[0x05]), Some((5, 1)));
        assert_eq!(varint(&[0x81, 0x00]), Some((128, 2)));
        assert_eq!(varint(&[0xff; 9]), Some((u64::MAX, 9)));
        assert_eq!(varint(&[0x81]), None);
    }

    #[test]
    fn records_of_another_shape_are_not_rows() {
        // Header of 3 bytes: two NULL columns.
        assert!(record(1, &[3, 0, 0]).is_none());
        assert!(record(1, &[]).is_none());
        assert!(record(1, &[0xff]).is_none());
    }
}
