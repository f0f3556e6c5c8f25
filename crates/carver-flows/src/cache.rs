//! The tuning database as front ends use it: list, show, export, import, recover, clear and
//! remove stored results. Every flow returns the versioned document the CLI prints with
//! `--format json`.
//!
//! Nothing from outside is trusted: filters must not be empty (an empty one would select
//! everything), imported and recovered rows pass the database's checks and the plausibility
//! checks against the hardware model ([`crate::plausible`]), and a damaged stored row is
//! reported and skipped, never the reason a whole command fails.

use std::io::{BufRead, Write};
use std::path::Path;

use carver_schema::{
    CacheClear, CacheEntry, CacheImport, CacheList, CacheRecover, CacheShow, SCHEMA_VERSION,
    StoredTuneRecord,
};
use carver_tunedb::{Exported, Filter, TuneDb};

use crate::plausible::Plausibility;
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

/// One line per stored result the filter selects; damaged rows are listed in `skipped`.
pub fn list(
    loc: &Locations,
    filter: &Filter,
    progress: &dyn Progress,
) -> Result<CacheList, FlowError> {
    filter.check()?;
    let db = open(loc, progress)?;
    let selection = db.query(filter)?;
    Ok(CacheList {
        schema_version: SCHEMA_VERSION,
        database: db.path().display().to_string(),
        results: selection.records.into_iter().map(entry).collect(),
        skipped: selection.skipped,
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
    filter.check()?;
    if let Ok(id) = selector.trim().parse::<i64>() {
        filter.id = Some(id);
    } else if let Ok(shape) = parse_mnk(selector) {
        filter.shape = Some(shape);
    } else {
        // Echoed in the message: escaped, as it may hold anything.
        return Err(FlowError::BadSelector(selector.escape_debug().to_string()));
    }
    let db = open(loc, progress)?;
    let selection = db.query(&filter)?;
    if selection.records.is_empty() {
        if selection.skipped.is_empty() {
            return Err(FlowError::NothingMatches {
                selector: selector.escape_debug().to_string(),
                filters: describe_filter(&filter),
            });
        }
        let reasons: Vec<String> = selection
            .skipped
            .iter()
            .map(|s| format!("row {}: {}", s.id, s.reason))
            .collect();
        return Err(FlowError::OnlyDamaged {
            selector: selector.escape_debug().to_string(),
            reasons: reasons.join("; "),
        });
    }
    Ok(CacheShow {
        schema_version: SCHEMA_VERSION,
        results: selection.records,
        skipped: selection.skipped,
    })
}

/// Where an export goes.
pub enum ExportTo<'a> {
    /// A stream, e.g. standard output.
    Writer(&'a mut dyn Write),
    /// A file, replaced whole: written beside it and renamed over it, so that a failed export
    /// leaves the previous file intact. A new file gets the usual permissions (the umask's), a
    /// replaced one keeps its own. A symbolic link, device, FIFO or socket is refused unless
    /// `force` (then a link is followed and a device written into); a directory always is.
    File { path: &'a Path, force: bool },
}

/// Writes the selected results as versioned JSON Lines; returns how many, and the damaged rows
/// left out. Only reads the database (and writes an empty export when there is none).
pub fn export(loc: &Locations, filter: &Filter, to: ExportTo<'_>) -> Result<Exported, FlowError> {
    filter.check()?;
    let db = TuneDb::open_read_only(&loc.cache_dir()?)?;
    let write = |out: &mut dyn Write| -> Result<Exported, FlowError> {
        Ok(match &db {
            Some(db) => db.export(filter, out)?,
            None => Exported {
                written: carver_tunedb::write_export(&[], out)?,
                skipped: Vec::new(),
            },
        })
    };
    match to {
        ExportTo::Writer(out) => write(out),
        ExportTo::File { path, force } => crate::files::write_file(path, force, write),
    }
}

/// The plausibility checks of imported and recovered rows, against the hardware database.
fn plausibility(loc: &Locations) -> Result<Plausibility, FlowError> {
    Ok(Plausibility::new(loc.hardware_db()?))
}

/// Merges an export into the database: each row is checked (the database's checks, then its
/// times against the roofline of its GPU and its winner against its kernel family's format),
/// the faster result wins each key; conflicts, bad rows and warnings are reported by line.
/// `name` is how the report names the input (a path, or `-`).
pub fn import(
    loc: &Locations,
    input: &mut dyn BufRead,
    name: &str,
    progress: &dyn Progress,
) -> Result<CacheImport, FlowError> {
    let mut plausibility = plausibility(loc)?;
    let db = open(loc, progress)?;
    let report = db.import_checked(input, &mut |record| plausibility.check(record))?;
    Ok(CacheImport {
        schema_version: SCHEMA_VERSION,
        file: name.to_string(),
        report,
    })
}

/// Reads every row still readable in a carver database file (one moved aside for damage, or
/// any other), checks each as an import does, and merges the good ones into the database.
/// `file` is never changed.
pub fn recover(
    loc: &Locations,
    file: &Path,
    progress: &dyn Progress,
) -> Result<CacheRecover, FlowError> {
    let mut plausibility = plausibility(loc)?;
    let db = open(loc, progress)?;
    let report = db.salvage(file, &mut |record| plausibility.check(record))?;
    Ok(CacheRecover {
        schema_version: SCHEMA_VERSION,
        file: file.display().to_string(),
        database: db.path().display().to_string(),
        report,
    })
}

/// What `clear` is to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClearMode {
    /// Refuse, saying how many results the filter matches.
    Unconfirmed,
    /// Delete nothing; list the ids that would go.
    DryRun,
    /// Delete.
    Confirmed,
}

/// Deletes the selected results (damaged rows included). Unconfirmed, nothing is deleted and
/// the error says how many results the filter matches; a dry run lists their ids.
pub fn clear(
    loc: &Locations,
    filter: &Filter,
    mode: ClearMode,
    progress: &dyn Progress,
) -> Result<CacheClear, FlowError> {
    filter.check()?;
    let db = open(loc, progress)?;
    let done = |deleted, would_delete: Vec<i64>| CacheClear {
        schema_version: SCHEMA_VERSION,
        deleted,
        dry_run: mode == ClearMode::DryRun,
        would_delete,
    };
    match mode {
        ClearMode::Unconfirmed => Err(FlowError::ClearNotConfirmed {
            count: db.count(filter)?,
            filters: describe_filter(filter),
        }),
        ClearMode::DryRun => Ok(done(0, db.ids(filter)?)),
        ClearMode::Confirmed => Ok(done(db.clear(filter)?, Vec::new())),
    }
}

/// Deletes the results with these ids (damaged rows too). Every id must be stored, or nothing
/// is deleted.
pub fn remove(
    loc: &Locations,
    ids: &[i64],
    progress: &dyn Progress,
) -> Result<CacheClear, FlowError> {
    let db = open(loc, progress)?;
    for &id in ids {
        let one = Filter {
            id: Some(id),
            ..Filter::default()
        };
        if db.count(&one)? == 0 {
            return Err(FlowError::NoSuchResult { id });
        }
    }
    let mut deleted = 0;
    for &id in ids {
        deleted += u64::from(db.remove(id)?);
    }
    Ok(CacheClear {
        schema_version: SCHEMA_VERSION,
        deleted,
        dry_run: false,
        would_delete: Vec::new(),
    })
}

/// ` matching device "h100", target triton` when filters are set, for messages.
pub fn describe_filter(filter: &Filter) -> String {
    let mut parts = Vec::new();
    if let Some(id) = filter.id {
        parts.push(format!("id {id}"));
    }
    if let Some(device) = &filter.device {
        parts.push(format!("device {}", carver_tunedb::quote(device)));
    }
    if let Some(target) = &filter.target {
        parts.push(format!("target {}", carver_tunedb::quote(target)));
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
