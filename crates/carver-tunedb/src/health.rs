//! Opening the database file safely: recognising our own file, refusing a newer one, moving a
//! damaged or foreign one aside, and bringing an older one up to date.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};

use crate::{TuneDbError, Warning};

/// `PRAGMA application_id` of every carver tuning database: "CRVR".
pub const APPLICATION_ID: i32 = 0x4352_5652;

/// Version of the table layout this carver writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

/// `MIGRATIONS[v]` takes a database from schema version `v` to `v + 1`; version 0 is an empty file.
/// Append only: a released step never changes, or databases upgraded by it would differ.
const MIGRATIONS: &[&str] = &["CREATE TABLE tuning_results (
        id INTEGER PRIMARY KEY,
        device_uuid TEXT NOT NULL,
        device_name TEXT NOT NULL,
        driver_version TEXT NOT NULL,
        carver_version TEXT NOT NULL,
        target TEXT NOT NULL,
        kernel_hash TEXT NOT NULL,
        dtype_a TEXT NOT NULL,
        dtype_b TEXT NOT NULL,
        dtype_c TEXT NOT NULL,
        dtype_acc TEXT NOT NULL,
        layout_a TEXT NOT NULL,
        layout_b TEXT NOT NULL,
        batch INTEGER NOT NULL,
        m INTEGER NOT NULL,
        n INTEGER NOT NULL,
        k INTEGER NOT NULL,
        winner TEXT NOT NULL,
        candidates TEXT NOT NULL,
        cublas_time_s REAL,
        measured_at_unix_s INTEGER NOT NULL,
        method TEXT NOT NULL,
        -- m, n, k last so that a shape-bucket lookup is an index range scan.
        UNIQUE (device_uuid, device_name, driver_version, carver_version, target, kernel_hash,
                dtype_a, dtype_b, dtype_c, dtype_acc, layout_a, layout_b, batch, m, n, k)
    ) STRICT;"];

/// The table every schema version has; its absence in a file that claims to be ours is damage.
const MAIN_TABLE: &str = "tuning_results";

/// How long a writer waits for another process's transaction before giving up. Transactions
/// are short (one record, or one import), so waiting this long means something is stuck.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// What an existing file turned out to be.
#[derive(Debug, PartialEq)]
enum Health {
    /// Empty or brand new: ours to initialise.
    Fresh,
    /// Ours, at `version <= SCHEMA_VERSION`.
    Ours { version: i64 },
    /// Ours, from a newer carver.
    Newer { version: i64 },
    /// Damaged or another application's; the text completes "the tuning database PATH ...".
    Unusable(String),
}

/// Opens `path` for reading and writing, creating, repairing or upgrading it as needed.
pub fn open_read_write(path: &Path) -> Result<(Connection, Vec<Warning>), TuneDbError> {
    let mut warnings = Vec::new();
    // A second pass happens after moving a bad file aside (or seeing another process do it);
    // a third bad file in a row means something keeps writing garbage there.
    for _ in 0..3 {
        refuse_newer_header(path)?;
        let conn = connect(path, OpenFlags::default())?;
        match inspect(&conn).map_err(|e| sqlite(path, e))? {
            Health::Newer { version } => return Err(newer(path, version)),
            Health::Unusable(_) => {
                drop(conn);
                // Judged again under the lock: another process that found the same bad file
                // may have moved it and put a fresh database in its place already.
                let _lock = lock_recovery(path)?;
                let conn = connect(path, OpenFlags::default())?;
                let health = inspect(&conn).map_err(|e| sqlite(path, e))?;
                drop(conn);
                if let Health::Unusable(reason) = health {
                    warnings.push(Warning::MovedAside {
                        path: path.to_path_buf(),
                        moved_to: move_aside(path)?,
                        reason,
                    });
                }
            }
            Health::Fresh | Health::Ours { .. } => {
                enable_wal(path, &conn)?;
                initialise_or_migrate(path, &conn)?;
                return Ok((conn, warnings));
            }
        }
    }
    Err(TuneDbError::Unusable {
        path: path.to_path_buf(),
        reason: "was unusable three times in a row, even after being moved aside; is another \
                 program writing to it?"
            .into(),
    })
}

/// Opens an existing `path` without changing it: nothing is created, moved or upgraded. `None`
/// when there is no database yet.
pub fn open_read_only(path: &Path) -> Result<Option<Connection>, TuneDbError> {
    if !path.exists() {
        return Ok(None);
    }
    refuse_newer_header(path)?;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = connect(path, flags)?;
    let unusable = |reason: String| TuneDbError::Unusable {
        path: path.to_path_buf(),
        reason,
    };
    match inspect(&conn).map_err(|e| sqlite(path, e))? {
        Health::Fresh => Ok(None),
        Health::Ours { version } if version == SCHEMA_VERSION => Ok(Some(conn)),
        Health::Ours { version } => Err(unusable(format!(
            "has schema version {version}, older than this carver's {SCHEMA_VERSION}; \
             opening it for writing upgrades it"
        ))),
        Health::Newer { version } => Err(newer(path, version)),
        Health::Unusable(reason) => Err(unusable(format!(
            "{reason}; opening it for writing moves it aside"
        ))),
    }
}

/// Refuses a newer carver's file from its header bytes alone, before SQLite opens it: a WAL
/// database opened by SQLite gets `-wal` and `-shm` files, and a file we refuse is one we leave
/// exactly as it is. (While a newer carver has it open its WAL may hold a newer header than the
/// file; `inspect` catches that case.)
fn refuse_newer_header(path: &Path) -> Result<(), TuneDbError> {
    let mut header = [0u8; 100];
    let read = std::fs::File::open(path).and_then(|mut f| {
        use std::io::Read;
        f.read_exact(&mut header)
    });
    if read.is_err() || !header.starts_with(b"SQLite format 3\0") {
        return Ok(()); // missing, short or foreign: for `inspect` to judge
    }
    let field = |offset: usize| {
        i32::from_be_bytes([
            header[offset],
            header[offset + 1],
            header[offset + 2],
            header[offset + 3],
        ])
    };
    let (version, application_id) = (i64::from(field(60)), field(68));
    if application_id == APPLICATION_ID && version > SCHEMA_VERSION {
        return Err(newer(path, version));
    }
    Ok(())
}

fn connect(path: &Path, flags: OpenFlags) -> Result<Connection, TuneDbError> {
    let conn = Connection::open_with_flags(path, flags).map_err(|e| sqlite(path, e))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| sqlite(path, e))?;
    Ok(conn)
}

fn sqlite(path: &Path, error: rusqlite::Error) -> TuneDbError {
    TuneDbError::Sqlite {
        path: path.to_path_buf(),
        error,
    }
}

fn newer(path: &Path, version: i64) -> TuneDbError {
    TuneDbError::NewerSchema {
        path: path.to_path_buf(),
        found: version,
        supported: SCHEMA_VERSION,
    }
}

/// Reads what the file is without writing to it. Only SQLite's own verdicts of "not a
/// database" or "corrupt" make a file unusable; any other failure (busy, permissions, I/O) is
/// returned as an error so that a healthy file is never moved aside by mistake.
fn inspect(conn: &Connection) -> rusqlite::Result<Health> {
    // One read transaction, so that every answer comes from the same snapshot: read one by one,
    // another process's initialisation could land in between and show its table without its
    // application_id, which would look like a foreign file.
    let snapshot = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Deferred)?;
    match inspect_unchecked(&snapshot) {
        Err(e) => match e.sqlite_error_code() {
            Some(ErrorCode::NotADatabase) => {
                Ok(Health::Unusable("is not an SQLite database".into()))
            }
            Some(ErrorCode::DatabaseCorrupt) => Ok(Health::Unusable(format!("is damaged ({e})"))),
            _ => Err(e),
        },
        health => health,
    }
}

fn inspect_unchecked(conn: &Connection) -> rusqlite::Result<Health> {
    let application_id: i32 = conn.pragma_query_value(None, "application_id", |r| r.get(0))?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;

    if application_id != APPLICATION_ID {
        return Ok(if application_id != 0 {
            Health::Unusable(format!(
                "belongs to another application (SQLite application_id {application_id:#010x})"
            ))
        } else if !tables.is_empty() {
            Health::Unusable(format!(
                "holds another application's tables ({})",
                tables.join(", ")
            ))
        } else if version != 0 {
            Health::Unusable(format!(
                "is an empty SQLite database of another application (user_version {version})"
            ))
        } else {
            Health::Fresh
        });
    }
    if version < 0 {
        return Ok(Health::Unusable(format!(
            "has an impossible schema version ({version})"
        )));
    }
    // Judge a newer file by its version alone: its layout is not ours to understand.
    if version > SCHEMA_VERSION {
        return Ok(Health::Newer { version });
    }
    let problems: Vec<String> = conn
        .prepare("PRAGMA quick_check(5)")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if problems != ["ok"] {
        return Ok(Health::Unusable(format!(
            "is damaged (SQLite quick_check: {})",
            problems.join("; ")
        )));
    }
    if version >= 1 && !tables.iter().any(|t| t == MAIN_TABLE) {
        return Ok(Health::Unusable(format!("has lost its {MAIN_TABLE} table")));
    }
    Ok(Health::Ours { version })
}

fn enable_wal(path: &Path, conn: &Connection) -> Result<(), TuneDbError> {
    // Switching a fresh file to WAL needs it to itself, and SQLite answers "busy" at once
    // rather than waiting when another process is doing the same: retry until the busy timeout.
    let started = std::time::Instant::now();
    let mode: String = loop {
        match conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0)) {
            Err(e)
                if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                    && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            result => break result.map_err(|e| sqlite(path, e))?,
        }
    };
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(TuneDbError::Unusable {
            path: path.to_path_buf(),
            reason: format!(
                "cannot use SQLite's WAL mode (journal mode stays {mode:?}), which several \
                 processes need to write safely; is the cache directory on a network file system?"
            ),
        });
    }
    // In WAL mode NORMAL still survives a killed process; a power cut may lose the last commits
    // but never corrupts the file. FULL would cost an fsync per stored result.
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(|e| sqlite(path, e))
}

/// Creates the tables of a fresh file or applies the missing migrations, in one write
/// transaction; the version is read again inside it because another process may have done the
/// work since `inspect`.
fn initialise_or_migrate(path: &Path, conn: &Connection) -> Result<(), TuneDbError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)
        .map_err(|e| sqlite(path, e))?;
    let (application_id, version) = (|| -> rusqlite::Result<(i32, i64)> {
        Ok((
            tx.pragma_query_value(None, "application_id", |r| r.get(0))?,
            tx.pragma_query_value(None, "user_version", |r| r.get(0))?,
        ))
    })()
    .map_err(|e| sqlite(path, e))?;
    if version > SCHEMA_VERSION {
        return Err(newer(path, version));
    }
    if application_id != APPLICATION_ID && application_id != 0 {
        return Err(TuneDbError::Unusable {
            path: path.to_path_buf(),
            reason: format!(
                "was taken by another application while opening (application_id {application_id:#010x})"
            ),
        });
    }
    if version == SCHEMA_VERSION && application_id == APPLICATION_ID {
        return Ok(());
    }
    // `inspect` refused negative versions; another process cannot have set one since.
    let from = usize::try_from(version).unwrap_or(0);
    for step in &MIGRATIONS[from..] {
        tx.execute_batch(step).map_err(|e| sqlite(path, e))?;
    }
    tx.pragma_update(None, "application_id", APPLICATION_ID)
        .and_then(|()| tx.pragma_update(None, "user_version", SCHEMA_VERSION))
        .and_then(|()| tx.commit())
        .map_err(|e| sqlite(path, e))
}

/// Takes `<db>.recovery-lock` exclusively (waiting for it), held while a process decides about
/// and moves aside an unusable file, so that two processes never both move it: the second would
/// move the first one's fresh database. Released when the returned file is dropped. Unix only
/// (`flock`); elsewhere concurrent recoveries are not serialised.
fn lock_recovery(path: &Path) -> Result<std::fs::File, TuneDbError> {
    let failed = |error| TuneDbError::MoveAside {
        path: path.to_path_buf(),
        error,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(companion(path, ".recovery-lock"))
        .map_err(failed)?;
    #[cfg(unix)]
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| failed(e.into()))?;
    Ok(file)
}

/// Renames the file (and its `-wal`/`-shm` companions, which belong to it and must not be
/// replayed into the new database) to `<name>.moved-aside-<unix seconds>[-i]`.
fn move_aside(path: &Path) -> Result<PathBuf, TuneDbError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let base = format!("{}.moved-aside-{now}", path.display());
    let target = (0..)
        .map(|i| {
            PathBuf::from(if i == 0 {
                base.clone()
            } else {
                format!("{base}-{i}")
            })
        })
        .find(|p| !p.exists() && !companion(p, "-wal").exists())
        .expect("an unbounded range always yields an unused name");
    let failed = |error| TuneDbError::MoveAside {
        path: path.to_path_buf(),
        error,
    };
    std::fs::rename(path, &target).map_err(failed)?;
    for suffix in ["-wal", "-shm"] {
        match std::fs::rename(companion(path, suffix), companion(&target, suffix)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failed(e)),
            _ => {}
        }
    }
    Ok(target)
}

fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_reach_the_current_version() {
        assert_eq!(MIGRATIONS.len() as i64, SCHEMA_VERSION);
    }

    #[test]
    fn an_empty_file_is_fresh_and_gets_initialised() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        std::fs::write(&path, b"").unwrap();
        let conn = connect(&path, OpenFlags::default()).unwrap();
        assert_eq!(inspect(&conn).unwrap(), Health::Fresh);
        drop(conn);
        let (conn, warnings) = open_read_write(&path).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(
            inspect(&conn).unwrap(),
            Health::Ours {
                version: SCHEMA_VERSION
            }
        );
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn a_foreign_application_id_is_unusable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "application_id", 0x1234_5678)
            .unwrap();
        match inspect(&conn).unwrap() {
            Health::Unusable(reason) => assert!(reason.contains("0x12345678"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn ours_without_its_table_is_unusable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "application_id", APPLICATION_ID)
            .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute_batch("CREATE TABLE other (x)").unwrap();
        assert_eq!(
            inspect(&conn).unwrap(),
            Health::Unusable("has lost its tuning_results table".into())
        );
    }

    #[test]
    fn moving_aside_takes_the_companions_and_never_reuses_a_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        std::fs::write(&path, b"garbage").unwrap();
        std::fs::write(companion(&path, "-wal"), b"wal").unwrap();
        let moved = move_aside(&path).unwrap();
        assert!(!path.exists() && !companion(&path, "-wal").exists());
        assert_eq!(std::fs::read(&moved).unwrap(), b"garbage");
        assert_eq!(std::fs::read(companion(&moved, "-wal")).unwrap(), b"wal");

        // A second move in the same second gets a distinct name.
        std::fs::write(&path, b"again").unwrap();
        let again = move_aside(&path).unwrap();
        assert_ne!(again, moved);
        assert_eq!(std::fs::read(&again).unwrap(), b"again");
        assert_eq!(std::fs::read(&moved).unwrap(), b"garbage");
    }
}
