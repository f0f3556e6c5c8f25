//! What can go wrong, and what the caller should tell the user about.

use std::fmt;
use std::path::PathBuf;

use carver_schema::SalvageReport;

/// Errors of the tuning database. None of them leaves the database file changed.
///
/// Each message is whole: the underlying error's text is part of it and is not chained again as
/// a source, so that a front end printing the chain says it once.
#[derive(Debug, thiserror::Error)]
pub enum TuneDbError {
    #[error(
        "cannot create the cache directory {}: {error}; choose another with --cache-dir or \
         CARVER_CACHE_DIR",
        path.display()
    )]
    CreateDir {
        path: PathBuf,
        error: std::io::Error,
    },

    /// The cache directory (which needs new files beside the database) or the database file
    /// cannot be written.
    #[error(
        "the {what} {} is not writable: {error}; choose another cache directory with \
         --cache-dir or CARVER_CACHE_DIR",
        path.display()
    )]
    NotWritable {
        what: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },

    #[error(
        "the tuning database {} was written by a newer carver (schema version {found}; this carver \
         reads versions up to {supported}); it was left untouched: upgrade carver, or use another \
         cache directory (--cache-dir or CARVER_CACHE_DIR)",
        path.display()
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        supported: i64,
    },

    /// Only from a read-only open, which repairs nothing; a read-write open moves such a file aside.
    #[error("the tuning database {} cannot be read: it {reason}", path.display())]
    Unusable { path: PathBuf, reason: String },

    #[error("cannot move the unusable tuning database {} aside: {error}", path.display())]
    MoveAside {
        path: PathBuf,
        error: std::io::Error,
    },

    #[error("SQLite failed on the tuning database {}: {error}", path.display())]
    Sqlite {
        path: PathBuf,
        error: rusqlite::Error,
    },

    #[error("invalid tuning record: {0}")]
    InvalidRecord(String),

    /// A filter given as an empty or blank text: it would match everything.
    #[error(
        "the {field} filter is empty{blank}: an empty filter would select every stored result \
         (an unset shell variable?); give {accepted}, or leave the filter out"
    )]
    EmptyFilter {
        field: &'static str,
        /// ` (only spaces)` when it was blank rather than empty.
        blank: &'static str,
        accepted: &'static str,
    },

    #[error("cannot write the export: {0}")]
    ExportWrite(std::io::Error),

    #[error("cannot read the import file at line {line}: {error}")]
    ImportRead { line: u64, error: std::io::Error },

    #[error("not a carver tuning export: {0}")]
    ImportHeader(String),

    /// `recover` was given something it cannot read as a database file.
    #[error("cannot recover from {}: {reason}", path.display())]
    Recover { path: PathBuf, reason: String },
}

/// Something the caller should show the user although the open succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Warning {
    /// The file at `path` was not a usable carver database; it was renamed to `moved_to` (its
    /// `-wal` and `-shm` companions too) and a new database took its place (holding what
    /// [`Warning::Salvaged`] reports, if anything).
    MovedAside {
        path: PathBuf,
        moved_to: PathBuf,
        reason: String,
    },
    /// After moving a file aside, the rows that could still be read from it were checked and
    /// merged into the new database.
    Salvaged {
        from: PathBuf,
        report: SalvageReport,
    },
    /// The moved file could not be salvaged (it stays where it was moved to; `carver cache
    /// recover` can try again).
    SalvageFailed { from: PathBuf, reason: String },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::MovedAside {
                path,
                moved_to,
                reason,
            } => write!(
                f,
                "the tuning database {} {reason}; it was moved to {} and a new database was \
                 created",
                path.display(),
                moved_to.display()
            ),
            Warning::Salvaged { from, report } => {
                write!(
                    f,
                    "recovered {} of the {} results found in {} into the new database",
                    report.kept(),
                    report.rows_found,
                    from.display()
                )?;
                let bad = report.bad_row_count();
                if bad > 0 {
                    // A warning line, not a report: the first ids say enough.
                    const SHOWN: usize = 20;
                    let ids: Vec<String> = report
                        .bad_rows
                        .iter()
                        .take(SHOWN)
                        .map(|b| b.id.to_string())
                        .collect();
                    let rest = bad - ids.len() as u64;
                    let more = if rest > 0 {
                        format!(" and {rest} more")
                    } else {
                        String::new()
                    };
                    write!(
                        f,
                        "; {bad} damaged rows were left behind (ids {}{more})",
                        ids.join(", ")
                    )?;
                }
                if report.unreadable_pages > 0 {
                    write!(
                        f,
                        "; {} pages could not be read at all",
                        report.unreadable_pages
                    )?;
                }
                Ok(())
            }
            Warning::SalvageFailed { from, reason } => write!(
                f,
                "no results could be recovered from {}: {reason}",
                from.display()
            ),
        }
    }
}
