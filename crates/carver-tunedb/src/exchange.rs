//! Sharing results between machines as JSON Lines: a header line, then one record per line.
//!
//! ```text
//! {"format":"carver-tuning-results","format_version":1,"exported_by":"carver-tunedb 0.1.0","records":2}
//! {"key":{...},"winner":{...},"candidates":[...],"cublas_time_s":...,"measured_at_unix_s":...,"method":{...}}
//! {...}
//! ```
//!
//! Records are written sorted by key, so that two exports of the same results are identical.
//!
//! An import trusts nothing in the file: the header must name a format version this carver
//! reads, each line is read with bounded memory (at most [`MAX_LINE_BYTES`]; a longer one is a
//! bad row, quoted by its first characters only), each record is checked as a store would
//! check it plus whatever the caller adds (carver-flows checks times against the GPU's
//! roofline), and fields this carver does not know are reported as warnings and dropped (a
//! later carver of the same format version may add optional fields; they are never stored).

use std::io::{BufRead, Write};

use carver_schema::{
    BadRow, ConflictResolution, ImportConflict, ImportReport, REPORT_LIST_LIMIT, RowWarning,
    SkippedRow, TuneRecord,
};
use rusqlite::TransactionBehavior;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::validate::{MAX_RECORD_BYTES, quote, validate_record};
use crate::{Filter, StoreOutcome, TuneDb, TuneDbError, WritePolicy};

/// The `format` of the header line.
pub const EXPORT_FORMAT: &str = "carver-tuning-results";

/// Version of the export format this carver writes.
pub const EXPORT_FORMAT_VERSION: u32 = 1;

/// Format versions an import reads.
pub const ACCEPTED_FORMAT_VERSIONS: [u32; 1] = [1];

/// Document schema versions a header or record may name in a `schema_version` field (carver's
/// JSON documents carry one; an export does not need it).
pub const ACCEPTED_SCHEMA_VERSIONS: [u32; 1] = [carver_schema::SCHEMA_VERSION];

/// Longest record line an import reads: the largest record the database accepts.
pub const MAX_LINE_BYTES: usize = MAX_RECORD_BYTES;

/// Longest header line: a header is about a hundred bytes.
const MAX_HEADER_BYTES: usize = 64 << 10;

/// Input merged per transaction: bounds the memory an import holds, and how long it keeps
/// other writers waiting.
const BATCH_BYTES: usize = 16 << 20;

/// A check the caller adds to an import or salvage: `Ok` with warnings to report, or `Err` with
/// the reason the record is refused.
pub type RecordCheck<'a> = &'a mut dyn FnMut(&TuneRecord) -> Result<Vec<String>, String>;

/// The first line of an export.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportHeader {
    pub format: String,
    pub format_version: u32,
    /// The exporting library and version, for people reading the file.
    pub exported_by: String,
    /// How many record lines follow; an import with fewer or more is reported.
    pub records: u64,
}

/// Writes `records` in the export format (sorted by key). Used by [`TuneDb::export`], and by
/// callers that have no database to export from (an empty export is still a valid file).
pub fn write_export(records: &[TuneRecord], out: &mut dyn Write) -> Result<u64, TuneDbError> {
    let mut sorted: Vec<&TuneRecord> = records.iter().collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    let header = ExportHeader {
        format: EXPORT_FORMAT.into(),
        format_version: EXPORT_FORMAT_VERSION,
        exported_by: concat!("carver-tunedb ", env!("CARGO_PKG_VERSION")).into(),
        records: sorted.len() as u64,
    };
    write_line(out, &header)?;
    for record in &sorted {
        write_line(out, record)?;
    }
    out.flush().map_err(TuneDbError::ExportWrite)?;
    Ok(sorted.len() as u64)
}

fn write_line<T: Serialize>(out: &mut dyn Write, value: &T) -> Result<(), TuneDbError> {
    serde_json::to_writer(&mut *out, value)
        .map_err(|e| TuneDbError::ExportWrite(std::io::Error::other(e)))?;
    out.write_all(b"\n").map_err(TuneDbError::ExportWrite)
}

/// What an export wrote, and the stored rows it had to leave out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exported {
    pub written: u64,
    /// Rows that could not be read back (damaged); not in the export.
    pub skipped: Vec<SkippedRow>,
}

impl TuneDb {
    /// Writes the results matching `filter` in the export format. Reads only: the database is
    /// not changed. A damaged row is left out and reported, never the reason the export fails.
    pub fn export(&self, filter: &Filter, out: &mut dyn Write) -> Result<Exported, TuneDbError> {
        let selection = self.query(filter)?;
        let records: Vec<TuneRecord> = selection.records.into_iter().map(|s| s.record).collect();
        Ok(Exported {
            written: write_export(&records, out)?,
            skipped: selection.skipped,
        })
    }

    /// Merges an export into the database with only the database's own checks; see
    /// [`TuneDb::import_checked`].
    pub fn import(&self, input: &mut dyn BufRead) -> Result<ImportReport, TuneDbError> {
        self.import_checked(input, &mut |_| Ok(Vec::new()))
    }

    /// Merges an export into the database. The header must be a carver export of a version
    /// this carver reads, or nothing is imported. Each further line that is not a valid record
    /// (or that `check` refuses) is reported by line number and skipped; the good ones are
    /// merged with [`WritePolicy::KeepFaster`], and a key already stored with a different
    /// winner is reported as a conflict.
    ///
    /// Memory stays bounded whatever the input: lines longer than [`MAX_LINE_BYTES`] are
    /// skipped unread, records are merged in transactions of at most 16 MiB of input, and the
    /// report lists at most [`REPORT_LIST_LIMIT`] bad rows, conflicts and warnings each (and
    /// counts the rest). An import stopped part way has merged whole transactions only;
    /// running it again completes it (merging is idempotent).
    pub fn import_checked(
        &self,
        input: &mut dyn BufRead,
        check: RecordCheck<'_>,
    ) -> Result<ImportReport, TuneDbError> {
        let mut reader = LineReader { input, number: 0 };
        let mut report = ImportReport::default();
        let header_warnings = read_header(&mut reader, &mut report)?;
        for message in header_warnings {
            warn(&mut report, 1, message);
        }
        let mut batch = Vec::new();
        let mut batch_bytes = 0;
        while let Some((line, content)) = reader.read_line(MAX_LINE_BYTES, true)? {
            let bytes = match content {
                Line::TooLong {
                    prefix,
                    bytes,
                    whole,
                } => {
                    report.records_in_file += 1;
                    let start = quote(&String::from_utf8_lossy(&prefix));
                    if !whole {
                        bad(
                            &mut report,
                            line,
                            format!(
                                "the line goes on for more than {MAX_SKIP_BYTES} bytes (it \
                                 starts with {start}); the rest of the input was not read"
                            ),
                        );
                        break;
                    }
                    let reason = format!(
                        "the line is {bytes} bytes long; at most {MAX_LINE_BYTES} are read (it \
                         starts with {start})"
                    );
                    bad(&mut report, line, reason);
                    continue;
                }
                Line::Text(bytes) if bytes.trim_ascii().is_empty() => continue,
                Line::Text(bytes) => bytes,
            };
            report.records_in_file += 1;
            let parsed = parse_record(&bytes).and_then(|(record, mut warnings)| {
                warnings.extend(check(&record)?);
                Ok((record, warnings))
            });
            match parsed {
                Ok((record, warnings)) => {
                    for message in warnings {
                        warn(&mut report, line, message);
                    }
                    batch_bytes += bytes.len();
                    batch.push((line, record));
                }
                Err(reason) => bad(&mut report, line, reason),
            }
            if batch_bytes >= BATCH_BYTES {
                self.merge(std::mem::take(&mut batch), &mut report, check)?;
                batch_bytes = 0;
            }
        }
        self.merge(batch, &mut report, check)?;
        Ok(report)
    }

    /// Writes good records in one transaction, counting outcomes and conflicts into `report`.
    /// A stored record that `check` refuses never wins over an incoming one.
    pub(crate) fn merge(
        &self,
        batch: Vec<(u64, TuneRecord)>,
        report: &mut ImportReport,
        check: RecordCheck<'_>,
    ) -> Result<(), TuneDbError> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut conn = self.connection();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sqlite(e))?;
        for (line, record) in batch {
            let mut trusted = |stored: &TuneRecord| check(stored).is_ok();
            let (outcome, existing) =
                self.write(&tx, &record, WritePolicy::KeepFaster, &mut trusted)?;
            match outcome {
                StoreOutcome::Inserted => report.inserted += 1,
                StoreOutcome::Replaced => report.replaced += 1,
                StoreOutcome::KeptExisting => report.kept_existing += 1,
            }
            if let Some(existing) = existing.filter(|e| e.winner != record.winner) {
                if report.conflicts.len() >= REPORT_LIST_LIMIT {
                    report.conflicts_not_listed += 1;
                    continue;
                }
                report.conflicts.push(ImportConflict {
                    line,
                    key: record.key.clone(),
                    existing_time_s: existing.winner_time_s().unwrap_or(f64::NAN),
                    existing_winner: existing.winner,
                    incoming_time_s: record.winner_time_s().unwrap_or(f64::NAN),
                    incoming_winner: record.winner,
                    kept: if outcome == StoreOutcome::Replaced {
                        ConflictResolution::Incoming
                    } else {
                        ConflictResolution::Existing
                    },
                });
            }
        }
        tx.commit().map_err(|e| self.sqlite(e))?;
        drop(conn);
        self.refresh();
        Ok(())
    }
}

fn bad(report: &mut ImportReport, line: u64, reason: String) {
    if report.bad_rows.len() < REPORT_LIST_LIMIT {
        report.bad_rows.push(BadRow { line, reason });
    } else {
        report.bad_rows_not_listed += 1;
    }
}

fn warn(report: &mut ImportReport, line: u64, message: String) {
    if report.warnings.len() < REPORT_LIST_LIMIT {
        report.warnings.push(RowWarning { line, message });
    } else {
        report.warnings_not_listed += 1;
    }
}

/// One line of input.
enum Line {
    /// The line without its ending.
    Text(Vec<u8>),
    /// A line over the limit, skipped: its first bytes (to quote) and how many bytes were read
    /// of it; `whole` is false when reading stopped before its end (the rest of the input is
    /// not read).
    TooLong {
        prefix: Vec<u8>,
        bytes: u64,
        whole: bool,
    },
}

/// Bytes of an over-long line kept to quote it (a quote shows 200 characters).
const PREFIX_BYTES: usize = 1024;

/// Longest line skipped to reach the next one; past it the input is not a line-based file (or
/// never ends, as `/dev/zero`), and reading stops.
const MAX_SKIP_BYTES: u64 = 1 << 30;

/// Reads numbered lines as bytes (a line of invalid UTF-8 is one bad row, not the end of the
/// import), holding at most `limit` bytes of any line.
struct LineReader<'a> {
    input: &'a mut dyn BufRead,
    number: u64,
}

impl LineReader<'_> {
    /// The next line and its 1-based number; `None` at the end of the input. A line over
    /// `limit` is skipped to its end when `skip` (up to [`MAX_SKIP_BYTES`]), else left at once.
    fn read_line(&mut self, limit: usize, skip: bool) -> Result<Option<(u64, Line)>, TuneDbError> {
        let mut text = Vec::new();
        let mut length: u64 = 0;
        let mut too_long = false;
        let mut any = false;
        let mut whole = false;
        loop {
            let buf = match self.input.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    return Err(TuneDbError::ImportRead {
                        line: self.number + 1,
                        error,
                    });
                }
            };
            if buf.is_empty() {
                whole = true;
                break;
            }
            any = true;
            let end = buf.iter().position(|&b| b == b'\n');
            let chunk = &buf[..end.unwrap_or(buf.len())];
            length += chunk.len() as u64;
            if !too_long {
                if text.len() + chunk.len() > limit {
                    too_long = true;
                    let room = PREFIX_BYTES.saturating_sub(text.len());
                    text.extend_from_slice(&chunk[..room.min(chunk.len())]);
                    text.truncate(PREFIX_BYTES);
                } else {
                    text.extend_from_slice(chunk);
                }
            }
            let used = chunk.len() + usize::from(end.is_some());
            self.input.consume(used);
            if end.is_some() {
                whole = true;
                break;
            }
            if too_long && (!skip || length > MAX_SKIP_BYTES) {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        self.number += 1;
        if too_long {
            return Ok(Some((
                self.number,
                Line::TooLong {
                    prefix: text,
                    bytes: length,
                    whole,
                },
            )));
        }
        // The line ending is not part of the row: without it, a row cut short reads as "EOF
        // while parsing" rather than as a stray control character.
        if text.last() == Some(&b'\r') {
            text.pop();
        }
        Ok(Some((self.number, Line::Text(text))))
    }
}

/// Reads and checks the header line, filling `report.expected_records`; returns warnings about
/// fields it does not know.
fn read_header(
    reader: &mut LineReader<'_>,
    report: &mut ImportReport,
) -> Result<Vec<String>, TuneDbError> {
    let refuse = |reason: String| TuneDbError::ImportHeader(reason);
    let example = format!(
        "{{\"format\":\"{EXPORT_FORMAT}\",\"format_version\":{EXPORT_FORMAT_VERSION},...}}"
    );
    let bytes = match reader.read_line(MAX_HEADER_BYTES, false)? {
        None => return Err(refuse("the file is empty".into())),
        Some((_, Line::TooLong { prefix, .. })) => {
            return Err(refuse(format!(
                "line 1 is longer than {MAX_HEADER_BYTES} bytes, so it is no header like \
                 {example} (it starts with {})",
                quote(&String::from_utf8_lossy(&prefix))
            )));
        }
        Some((_, Line::Text(bytes))) => bytes,
    };
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
        refuse(format!(
            "line 1 should be a header like {example} ({}; it starts with {})",
            without_position(&e),
            quote(&String::from_utf8_lossy(&bytes))
        ))
    })?;
    let Some(fields) = value.as_object() else {
        return Err(refuse(format!(
            "line 1 should be a header like {example}, not {}",
            value_text(&value)
        )));
    };
    match fields.get("format").and_then(Value::as_str) {
        Some(EXPORT_FORMAT) => {}
        Some(other) => {
            return Err(refuse(format!(
                "the header's format is {}, expected {EXPORT_FORMAT:?}",
                quote(other)
            )));
        }
        None => {
            return Err(refuse(format!(
                "line 1 should be a header like {example}; it has no \"format\" text"
            )));
        }
    }
    let accepted = ACCEPTED_FORMAT_VERSIONS.map(|v| v.to_string()).join(", ");
    match fields.get("format_version").map(|v| (v, v.as_u64())) {
        Some((_, Some(v))) if ACCEPTED_FORMAT_VERSIONS.iter().any(|&a| u64::from(a) == v) => {}
        Some((_, Some(v))) if v > u64::from(EXPORT_FORMAT_VERSION) => {
            return Err(refuse(format!(
                "format version {v} was written by a newer carver; this one reads version \
                 {accepted}"
            )));
        }
        Some((raw, _)) => {
            return Err(refuse(format!(
                "format version {} is not one this carver reads (accepted: {accepted})",
                value_text(raw)
            )));
        }
        None => {
            return Err(refuse(format!(
                "the header has no format_version (accepted: {accepted})"
            )));
        }
    }
    if let Some(v) = fields.get("schema_version") {
        check_schema_version(v).map_err(|reason| refuse(format!("the header's {reason}")))?;
    }
    report.expected_records = match fields.get("records") {
        Some(v) => v.as_u64().ok_or_else(|| {
            refuse(format!(
                "the header's records must be a count of records (got {})",
                value_text(v)
            ))
        })?,
        None => return Err(refuse("the header has no records count".into())),
    };
    if let Some(v) = fields.get("exported_by")
        && !v.is_string()
    {
        return Err(refuse(format!(
            "the header's exported_by must be a text (got {})",
            value_text(v)
        )));
    }
    let known = [
        "format",
        "format_version",
        "exported_by",
        "records",
        "schema_version",
    ];
    Ok(unknown_fields(fields, &known, "the header"))
}

/// A JSON value from the file for a message: a text quoted and escaped, anything else as JSON
/// (which escapes its texts), both cut to [`QUOTE_CHARS`](crate::QUOTE_CHARS) characters.
fn value_text(v: &Value) -> String {
    match v {
        Value::String(text) => quote(text),
        other => {
            let json = other.to_string();
            let mut chars = json.chars();
            let head: String = chars.by_ref().take(crate::QUOTE_CHARS).collect();
            if chars.next().is_some() {
                format!("{head}...")
            } else {
                head
            }
        }
    }
}

fn check_schema_version(v: &Value) -> Result<(), String> {
    match v.as_u64() {
        Some(v) if ACCEPTED_SCHEMA_VERSIONS.iter().any(|&a| u64::from(a) == v) => Ok(()),
        _ => Err(format!(
            "schema_version {} is not one this carver reads (accepted: {})",
            value_text(v),
            ACCEPTED_SCHEMA_VERSIONS.map(|v| v.to_string()).join(", ")
        )),
    }
}

/// A warning for each field of `fields` not in `known`, at `place`.
fn unknown_fields(
    fields: &serde_json::Map<String, Value>,
    known: &[&str],
    place: &str,
) -> Vec<String> {
    fields
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .map(|k| format!("{place} has the unknown field {}; it was ignored", quote(k)))
        .collect()
}

/// Parses and checks one record line; returns the record and warnings about unknown fields.
fn parse_record(bytes: &[u8]) -> Result<(TuneRecord, Vec<String>), String> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        format!(
            "the line is not valid UTF-8 (at byte {}; it starts with {})",
            e.valid_up_to(),
            quote(&String::from_utf8_lossy(bytes))
        )
    })?;
    let record: TuneRecord = serde_json::from_str(text).map_err(|e| {
        format!(
            "not a tuning record: {} (the line starts with {})",
            without_position(&e),
            quote(text)
        )
    })?;
    // It parsed as a record, so it is an object with the record's fields; only extras remain.
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut warnings = Vec::new();
    if let Some(fields) = value.as_object() {
        if let Some(v) = fields.get("schema_version") {
            check_schema_version(v)?;
        }
        let record_fields = [
            "key",
            "winner",
            "candidates",
            "cublas_time_s",
            "measured_at_unix_s",
            "method",
            "schema_version",
        ];
        warnings.extend(unknown_fields(fields, &record_fields, "the record"));
        let nested: [(&str, &[&str]); 3] = [
            (
                "key",
                &[
                    "device",
                    "carver_version",
                    "target",
                    "kernel_hash",
                    "problem",
                ],
            ),
            ("key.device", &["name", "uuid", "driver_version"]),
            (
                "key.problem",
                &[
                    "m",
                    "n",
                    "k",
                    "batch",
                    "dtype_a",
                    "dtype_b",
                    "dtype_c",
                    "dtype_acc",
                    "layout_a",
                    "layout_b",
                ],
            ),
        ];
        for (path, known) in nested {
            let inner = path.split('.').try_fold(&value, |v, part| v.get(part));
            if let Some(inner) = inner.and_then(Value::as_object) {
                warnings.extend(unknown_fields(inner, known, path));
            }
        }
        let candidate_fields = [
            "config",
            "model_rank",
            "predicted_time_s",
            "measured_time_s",
            "failure",
        ];
        if let Some(candidates) = fields.get("candidates").and_then(Value::as_array) {
            for (i, c) in candidates.iter().enumerate() {
                if let Some(c) = c.as_object() {
                    let place = format!("candidates[{i}]");
                    warnings.extend(unknown_fields(c, &candidate_fields, &place));
                }
            }
        }
    }
    validate_record(&record)?;
    Ok((record, warnings))
}

/// serde_json's message without its "at line 1 column N" suffix, which would be misleading next
/// to the file's own line number; the column is kept.
fn without_position(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let text = message
        .rsplit_once(" at line ")
        .map_or(message.as_str(), |(text, _)| text);
    // serde quotes the offending value, which may be megabytes long.
    let mut short: String = text.chars().take(300).collect();
    if short.len() < text.len() {
        short.push_str("...");
    }
    format!("{short} (column {})", e.column())
}
