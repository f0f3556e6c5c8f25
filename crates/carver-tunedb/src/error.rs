//! What can go wrong, and what the caller should tell the user about.

use std::fmt;
use std::path::PathBuf;

/// Errors of the tuning database. None of them leaves the database file changed.
#[derive(Debug, thiserror::Error)]
pub enum TuneDbError {
    #[error("cannot create the cache directory {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
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

    #[error("cannot move the unusable tuning database {} aside: {source}", path.display())]
    MoveAside {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("SQLite failed on the tuning database {}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },

    #[error("invalid tuning record: {0}")]
    InvalidRecord(String),

    #[error("stored result {id} in {} cannot be read back: {reason}", path.display())]
    BadStoredRow {
        path: PathBuf,
        id: i64,
        reason: String,
    },

    #[error("cannot write the export: {0}")]
    ExportWrite(#[source] std::io::Error),

    #[error("cannot read the import file at line {line}: {source}")]
    ImportRead { line: u64, source: std::io::Error },

    #[error("not a carver tuning export: {0}")]
    ImportHeader(String),
}

/// Something the caller should show the user although the open succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Warning {
    /// The file at `path` was not a usable carver database; it was renamed to `moved_to` (its
    /// `-wal` and `-shm` companions too) and a new, empty database took its place.
    MovedAside {
        path: PathBuf,
        moved_to: PathBuf,
        reason: String,
    },
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
                "the tuning database {} {reason}; it was moved to {} and a new, empty database \
                 was created",
                path.display(),
                moved_to.display()
            ),
        }
    }
}
