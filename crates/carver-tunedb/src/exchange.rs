//! Sharing results between machines as JSON Lines: a header line, then one record per line.
//!
//! ```text
//! {"format":"carver-tuning-results","format_version":1,"exported_by":"carver-tunedb 0.1.0","records":2}
//! {"key":{...},"winner":{...},"candidates":[...],"cublas_time_s":...,"measured_at_unix_s":...,"method":{...}}
//! {...}
//! ```
//!
//! Records are written sorted by key, so that two exports of the same results are identical.

use std::io::{BufRead, Write};

use carver_schema::{BadRow, ConflictResolution, ImportConflict, ImportReport, TuneRecord};
use rusqlite::TransactionBehavior;
use serde::{Deserialize, Serialize};

use crate::validate::validate_record;
use crate::{Filter, StoreOutcome, TuneDb, TuneDbError, WritePolicy};

/// The `format` of the header line.
pub const EXPORT_FORMAT: &str = "carver-tuning-results";

/// Version of the export format; an import refuses a file with a higher one.
pub const EXPORT_FORMAT_VERSION: u32 = 1;

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

impl TuneDb {
    /// Writes the results matching `filter` in the export format; returns how many. Reads only:
    /// the database is not changed.
    pub fn export(&self, filter: &Filter, out: &mut dyn Write) -> Result<u64, TuneDbError> {
        let records: Vec<TuneRecord> = self.query(filter)?.into_iter().map(|s| s.record).collect();
        write_export(&records, out)
    }

    /// Merges an export into the database. The header must be a carver export of a version
    /// this carver reads, or nothing is imported. Each further line that is not a valid record
    /// is reported by line number and skipped; the good ones are merged in one transaction with
    /// [`WritePolicy::KeepFaster`], and a key already stored with a different winner is
    /// reported as a conflict.
    pub fn import(&self, input: &mut dyn BufRead) -> Result<ImportReport, TuneDbError> {
        let mut lines = numbered_lines(input);
        let header = read_header(lines.next())?;
        let mut report = ImportReport {
            expected_records: header.records,
            ..ImportReport::default()
        };
        let mut good = Vec::new();
        for item in lines {
            let (line, bytes) = item?;
            if bytes.trim_ascii().is_empty() {
                continue;
            }
            report.records_in_file += 1;
            match parse_record(&bytes) {
                Ok(record) => good.push((line, record)),
                Err(reason) => report.bad_rows.push(BadRow { line, reason }),
            }
        }

        let mut conn = self.connection();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sqlite(e))?;
        for (line, record) in good {
            let (outcome, existing) = self.write(&tx, &record, WritePolicy::KeepFaster)?;
            match outcome {
                StoreOutcome::Inserted => report.inserted += 1,
                StoreOutcome::Replaced => report.replaced += 1,
                StoreOutcome::KeptExisting => report.kept_existing += 1,
            }
            if let Some(existing) = existing.filter(|e| e.winner != record.winner) {
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
        Ok(report)
    }
}

/// Lines with their 1-based numbers, as bytes: a line of invalid UTF-8 is one bad row, not
/// the end of the import.
fn numbered_lines(
    input: &mut dyn BufRead,
) -> impl Iterator<Item = Result<(u64, Vec<u8>), TuneDbError>> + '_ {
    let mut number = 0;
    std::iter::from_fn(move || {
        number += 1;
        let mut bytes = Vec::new();
        match input.read_until(b'\n', &mut bytes) {
            Ok(0) => None,
            Ok(_) => {
                // The line ending is not part of the row: without it, a row cut short reads
                // as "EOF while parsing" rather than as a stray control character.
                let content = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
                let content = content.strip_suffix(b"\r").unwrap_or(content);
                Some(Ok((number, content.to_vec())))
            }
            Err(source) => Some(Err(TuneDbError::ImportRead {
                line: number,
                source,
            })),
        }
    })
}

fn read_header(
    first: Option<Result<(u64, Vec<u8>), TuneDbError>>,
) -> Result<ExportHeader, TuneDbError> {
    let (_, bytes) =
        first.ok_or_else(|| TuneDbError::ImportHeader("the file is empty".into()))??;
    let header: ExportHeader = serde_json::from_slice(&bytes).map_err(|e| {
        TuneDbError::ImportHeader(format!(
            "line 1 should be a header like {{\"format\":\"{EXPORT_FORMAT}\",\"format_version\":\
             {EXPORT_FORMAT_VERSION},...}} ({})",
            without_position(&e)
        ))
    })?;
    if header.format != EXPORT_FORMAT {
        return Err(TuneDbError::ImportHeader(format!(
            "the header's format is {:?}, expected {EXPORT_FORMAT:?}",
            header.format
        )));
    }
    if header.format_version > EXPORT_FORMAT_VERSION {
        return Err(TuneDbError::ImportHeader(format!(
            "format version {} was written by a newer carver; this one reads up to version \
             {EXPORT_FORMAT_VERSION}",
            header.format_version
        )));
    }
    Ok(header)
}

fn parse_record(bytes: &[u8]) -> Result<TuneRecord, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "the line is not valid UTF-8".to_string())?;
    let record: TuneRecord = serde_json::from_str(text)
        .map_err(|e| format!("not a tuning record: {}", without_position(&e)))?;
    validate_record(&record)?;
    Ok(record)
}

/// serde_json's message without its "at line 1 column N" suffix, which would be misleading next
/// to the file's own line number; the column is kept.
fn without_position(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let text = message
        .rsplit_once(" at line ")
        .map_or(message.as_str(), |(text, _)| text);
    format!("{text} (column {})", e.column())
}
