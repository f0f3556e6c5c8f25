//! The tuning database as front ends use it: list, show, export, import and clear stored
//! results. Every flow returns the versioned document the CLI prints with `--format json`.

use std::io::{BufRead, Write};
use std::path::Path;

use carver_schema::{
    CacheClear, CacheEntry, CacheImport, CacheList, CacheShow, SCHEMA_VERSION, StoredTuneRecord,
};
use carver_tunedb::{Filter, TuneDb};

use crate::shapes::parse_mnk;
use crate::{FlowError, Locations, Progress};

/// Opens the database for writing (creating, repairing or upgrading it); what the open had to
/// repair goes to `progress` as warnings.
pub fn open(loc: &Locations, progress: &dyn Progress) -> Result<TuneDb, FlowError> {
    let (db, warnings) = TuneDb::open(&loc.cache_dir()?)?;
    for warning in warnings {
        progress.warning(&warning.to_string());
    }
    Ok(db)
}

/// One line per stored result the filter selects.
pub fn list(
    loc: &Locations,
    filter: &Filter,
    progress: &dyn Progress,
) -> Result<CacheList, FlowError> {
    let db = open(loc, progress)?;
    Ok(CacheList {
        schema_version: SCHEMA_VERSION,
        database: db.path().display().to_string(),
        results: db.query(filter)?.into_iter().map(entry).collect(),
    })
}

fn entry(stored: StoredTuneRecord) -> CacheEntry {
    let r = stored.record;
    CacheEntry {
        id: stored.id,
        // Stored records always have a winner time: the database validates it on the way in.
        winner_time_s: r.winner_time_s().unwrap_or(f64::NAN),
        cublas_time_s: r.cublas_time_s,
        candidates: r.candidates.len(),
        failed_candidates: r.candidates.iter().filter(|c| c.failure.is_some()).count(),
        measured_at_unix_s: r.measured_at_unix_s,
        key: r.key,
        winner: r.winner,
    }
}

/// The results `selector` names in full: a result id, or a shape `MxNxK` (with `filter`).
pub fn show(
    loc: &Locations,
    selector: &str,
    mut filter: Filter,
    progress: &dyn Progress,
) -> Result<CacheShow, FlowError> {
    if let Ok(id) = selector.trim().parse::<i64>() {
        filter.id = Some(id);
    } else if let Ok(shape) = parse_mnk(selector) {
        filter.shape = Some(shape);
    } else {
        return Err(FlowError::BadSelector(selector.to_string()));
    }
    let db = open(loc, progress)?;
    let results = db.query(&filter)?;
    if results.is_empty() {
        return Err(FlowError::NothingMatches {
            selector: selector.to_string(),
            filters: describe_filter(&filter),
        });
    }
    Ok(CacheShow {
        schema_version: SCHEMA_VERSION,
        results,
    })
}

/// Where an export goes.
pub enum ExportTo<'a> {
    /// A stream, e.g. standard output.
    Writer(&'a mut dyn Write),
    /// A file, replaced whole: written beside it and renamed over it, so that a failed export
    /// leaves the previous file intact.
    File(&'a Path),
}

/// Writes the selected results as versioned JSON Lines; returns how many. Only reads the
/// database (and writes an empty export when there is none).
pub fn export(loc: &Locations, filter: &Filter, to: ExportTo<'_>) -> Result<u64, FlowError> {
    let db = TuneDb::open_read_only(&loc.cache_dir()?)?;
    let write = |out: &mut dyn Write| -> Result<u64, FlowError> {
        Ok(match &db {
            Some(db) => db.export(filter, out)?,
            None => carver_tunedb::write_export(&[], out)?,
        })
    };
    match to {
        ExportTo::Writer(out) => write(out),
        ExportTo::File(path) => {
            let io = |action: &'static str| {
                move |source| FlowError::Io {
                    action,
                    path: path.to_path_buf(),
                    source,
                }
            };
            let dir = match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => Path::new("."),
            };
            let mut file =
                tempfile::NamedTempFile::new_in(dir).map_err(io("create a file beside"))?;
            let count = {
                let mut out = std::io::BufWriter::new(file.as_file_mut());
                let count = write(&mut out)?;
                out.flush().map_err(io("write"))?;
                count
            };
            file.persist(path).map_err(|e| io("replace")(e.error))?;
            Ok(count)
        }
    }
}

/// Merges an export into the database: the faster result wins each key; conflicts and bad rows
/// are reported by line. `name` is how the report names the input (a path, or `-`).
pub fn import(
    loc: &Locations,
    input: &mut dyn BufRead,
    name: &str,
    progress: &dyn Progress,
) -> Result<CacheImport, FlowError> {
    let db = open(loc, progress)?;
    let report = db.import(input)?;
    Ok(CacheImport {
        schema_version: SCHEMA_VERSION,
        file: name.to_string(),
        report,
    })
}

/// Deletes the selected results. Without `confirmed` nothing is deleted and the error says how
/// many results the filter matches.
pub fn clear(
    loc: &Locations,
    filter: &Filter,
    confirmed: bool,
    progress: &dyn Progress,
) -> Result<CacheClear, FlowError> {
    let db = open(loc, progress)?;
    if !confirmed {
        return Err(FlowError::ClearNotConfirmed {
            count: db.count(filter)?,
            filters: describe_filter(filter),
        });
    }
    Ok(CacheClear {
        schema_version: SCHEMA_VERSION,
        deleted: db.clear(filter)?,
    })
}

/// ` matching device "h100", target triton` when filters are set, for messages.
pub fn describe_filter(filter: &Filter) -> String {
    let mut parts = Vec::new();
    if let Some(id) = filter.id {
        parts.push(format!("id {id}"));
    }
    if let Some(device) = &filter.device {
        parts.push(format!("device {device:?}"));
    }
    if let Some(target) = &filter.target {
        parts.push(format!("target {target}"));
    }
    if let Some([m, n, k]) = filter.shape {
        parts.push(format!("shape {m}x{n}x{k}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" matching {}", parts.join(", "))
    }
}
