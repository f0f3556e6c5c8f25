//! The database handle: lookups (with an in-process cache), stores, queries and deletes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use carver_schema::{DeviceKey, SkippedRow, StoredTuneRecord, TuneKey, TuneRecord};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, ErrorCode, Row, TransactionBehavior, params_from_iter};

use crate::bucket::KeyBuckets;
use crate::validate::{validate_key, validate_record};
use crate::{TuneDbError, Warning, health};

/// Name of the database file inside the cache directory.
pub const DB_FILE_NAME: &str = "tuning.sqlite3";

/// Options of [`TuneDb::lookup_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LookupOptions {
    /// How M, N and K match stored sizes. With bucketing an exact result is preferred;
    /// otherwise the stored shape closest to the asked one (in log2 distance over M, N, K).
    pub buckets: KeyBuckets,
}

/// What [`TuneDb::store_with`] does when the key is already stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WritePolicy {
    /// Keep whichever result has the faster winner; on a tie keep the stored one. The outcome
    /// then depends neither on the order of concurrent writers nor on the order of imports.
    #[default]
    KeepFaster,
    /// The new result replaces the stored one (a deliberate re-tune).
    Replace,
}

/// What a store did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreOutcome {
    /// The key was new.
    Inserted,
    /// The stored result for the key was replaced.
    Replaced,
    /// The stored result was kept (it was at least as fast).
    KeptExisting,
}

/// Which stored results a query, export or clear applies to. A field left `None` matches
/// everything; a text given empty or blank is refused ([`TuneDbError::EmptyFilter`]), because
/// it is usually an unset shell variable and would otherwise select everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub id: Option<i64>,
    /// The device's exact UUID, or a case-insensitive part of its name.
    pub device: Option<String>,
    /// Exact target family, e.g. `triton`.
    pub target: Option<String>,
    /// Exact `[M, N, K]`, any batch.
    pub shape: Option<[u64; 3]>,
}

impl Filter {
    /// Refuses empty or blank texts, naming the filter.
    pub fn check(&self) -> Result<(), TuneDbError> {
        let texts = [
            ("device", &self.device, "a device UUID or part of its name"),
            (
                "target",
                &self.target,
                "a target family such as triton or cuda-sm90",
            ),
        ];
        for (field, text, accepted) in texts {
            if let Some(text) = text
                && text.trim().is_empty()
            {
                return Err(TuneDbError::EmptyFilter {
                    field,
                    blank: if text.is_empty() {
                        ""
                    } else {
                        " (only spaces)"
                    },
                    accepted,
                });
            }
        }
        Ok(())
    }
}

/// What a query found: the records that read back whole, and the rows it had to leave out.
/// A damaged row never fails the whole query.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    /// Readable, valid records, oldest first.
    pub records: Vec<StoredTuneRecord>,
    /// Rows that could not be read back or failed the record checks, with why.
    pub skipped: Vec<SkippedRow>,
}

/// The tuning database of one cache directory. Cheap to share between threads (`&self`
/// everywhere); several processes may use the same file at once.
pub struct TuneDb {
    path: PathBuf,
    conn: Mutex<Connection>,
    memo: Mutex<Memo>,
}

/// Results already looked up, so that a repeated lookup does not query SQLite. Misses are not
/// remembered (the caller will usually tune and store). Hits are not re-read: a result another
/// process improves later is seen after [`TuneDb::refresh`] or by the next `TuneDb`.
#[derive(Default)]
struct Memo {
    hits: HashMap<(KeyBuckets, TuneKey), Arc<TuneRecord>>,
}

/// Columns in the order `read_row` expects.
const COLUMNS: &str = "id, device_uuid, device_name, driver_version, carver_version, target, \
    kernel_hash, dtype_a, dtype_b, dtype_c, dtype_acc, layout_a, layout_b, batch, m, n, k, \
    winner, candidates, cublas_time_s, measured_at_unix_s, method";

/// The key columns up to (not including) the sizes M, N, K.
const KEY_PREFIX_WHERE: &str = "device_uuid = ?1 AND device_name = ?2 AND driver_version = ?3 \
    AND carver_version = ?4 AND target = ?5 AND kernel_hash = ?6 AND dtype_a = ?7 \
    AND dtype_b = ?8 AND dtype_c = ?9 AND dtype_acc = ?10 AND layout_a = ?11 AND layout_b = ?12 \
    AND batch = ?13";

impl TuneDb {
    /// Opens (creating if needed) `<cache_dir>/tuning.sqlite3` for reading and writing.
    ///
    /// A file that is damaged, not a database, or another application's is moved aside and
    /// replaced by an empty database; the returned warnings say so and should be shown. A file
    /// written by a newer carver is refused ([`TuneDbError::NewerSchema`]) and left untouched; an
    /// older one is upgraded.
    ///
    /// The rows still readable in a file moved aside are salvaged into the new database
    /// ([`Warning::Salvaged`], when there were any); a salvage that fails is a warning too,
    /// never an error.
    pub fn open(cache_dir: &Path) -> Result<(TuneDb, Vec<Warning>), TuneDbError> {
        std::fs::create_dir_all(cache_dir).map_err(|error| TuneDbError::CreateDir {
            path: cache_dir.to_path_buf(),
            error,
        })?;
        let path = cache_dir.join(DB_FILE_NAME);
        check_writable(cache_dir, &path)?;
        let (conn, mut warnings) = health::open_read_write(&path)?;
        let db = TuneDb::new(path, conn);
        let moved: Vec<PathBuf> = warnings
            .iter()
            .filter_map(|w| match w {
                Warning::MovedAside { moved_to, .. } => Some(moved_to.clone()),
                _ => None,
            })
            .collect();
        for from in moved {
            match db.salvage(&from, &mut |_| Ok(Vec::new())) {
                // Nothing of carver's in it (garbage, another application's file): the
                // moved-aside warning says all there is.
                Ok(report) if report.rows_found == 0 => {}
                Ok(report) => warnings.push(Warning::Salvaged { from, report }),
                Err(e) => warnings.push(Warning::SalvageFailed {
                    from,
                    reason: e.to_string(),
                }),
            }
        }
        Ok((db, warnings))
    }

    /// Opens an existing database without changing anything on disk: no file is created,
    /// moved or upgraded, so a damaged or outdated file is an error here. `None` when the cache
    /// directory holds no database yet. Writes through this handle fail.
    pub fn open_read_only(cache_dir: &Path) -> Result<Option<TuneDb>, TuneDbError> {
        let path = cache_dir.join(DB_FILE_NAME);
        Ok(health::open_read_only(&path)?.map(|conn| TuneDb::new(path, conn)))
    }

    fn new(path: PathBuf, conn: Connection) -> TuneDb {
        TuneDb {
            path,
            conn: Mutex::new(conn),
            memo: Mutex::default(),
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stored result for exactly this key.
    pub fn lookup(&self, key: &TuneKey) -> Result<Option<Arc<TuneRecord>>, TuneDbError> {
        self.lookup_with(key, LookupOptions::default())
    }

    /// The stored result for this key, matched as `options` says. With shape bucketing the
    /// returned record's `key.problem` may differ from the one asked for.
    pub fn lookup_with(
        &self,
        key: &TuneKey,
        options: LookupOptions,
    ) -> Result<Option<Arc<TuneRecord>>, TuneDbError> {
        let memo_key = (options.buckets, key.clone());
        if let Some(hit) = lock(&self.memo).hits.get(&memo_key) {
            return Ok(Some(Arc::clone(hit)));
        }
        validate_key(key).map_err(TuneDbError::InvalidRecord)?;
        let found = if options.buckets.is_exact() {
            self.select_exact(&lock(&self.conn), key)?
                .records
                .into_iter()
                .next()
                .map(|stored| stored.record)
        } else {
            self.select_bucket(key, options.buckets)?
        };
        let Some(record) = found else { return Ok(None) };
        let record = Arc::new(record);
        lock(&self.memo).hits.insert(memo_key, Arc::clone(&record));
        Ok(Some(record))
    }

    /// Stores a result, keeping the faster one if the key is already stored
    /// ([`WritePolicy::KeepFaster`]). Storing the same record twice changes nothing.
    pub fn store(&self, record: &TuneRecord) -> Result<StoreOutcome, TuneDbError> {
        self.store_with(record, WritePolicy::KeepFaster)
    }

    /// Stores a result under the given policy, in one transaction. A stored row for the same key
    /// that can no longer be read back is replaced.
    pub fn store_with(
        &self,
        record: &TuneRecord,
        policy: WritePolicy,
    ) -> Result<StoreOutcome, TuneDbError> {
        self.store_checked(record, policy, &mut |_| true)
    }

    /// [`TuneDb::store_with`], where a stored result for the same key that `trusted` refuses
    /// (one the caller's own checks find implausible) is replaced whatever its time: otherwise a
    /// fault that claims an impossible time would win its key for good.
    pub fn store_checked(
        &self,
        record: &TuneRecord,
        policy: WritePolicy,
        trusted: &mut dyn FnMut(&TuneRecord) -> bool,
    ) -> Result<StoreOutcome, TuneDbError> {
        validate_record(record).map_err(TuneDbError::InvalidRecord)?;
        let mut conn = lock(&self.conn);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sqlite(e))?;
        let (outcome, _) = self.write(&tx, record, policy, trusted)?;
        tx.commit().map_err(|e| self.sqlite(e))?;
        drop(conn);
        self.refresh();
        Ok(outcome)
    }

    /// Stored results matching `filter`, oldest first; rows that cannot be read back are
    /// reported in [`Selection::skipped`], not returned as an error.
    pub fn query(&self, filter: &Filter) -> Result<Selection, TuneDbError> {
        let (condition, params) = filter_sql(filter)?;
        self.select(&lock(&self.conn), &condition, params)
    }

    /// Every result measured on exactly this device (name, UUID and driver), any target or
    /// carver version, oldest first.
    pub fn winners_for_device(&self, device: &DeviceKey) -> Result<Selection, TuneDbError> {
        let sql = "device_uuid = ?1 AND device_name = ?2 AND driver_version = ?3";
        let params =
            [&device.uuid, &device.name, &device.driver_version].map(|s| SqlValue::Text(s.clone()));
        self.select(&lock(&self.conn), sql, params.to_vec())
    }

    /// How many stored rows match `filter` (damaged ones included: they are what a clear with
    /// the same filter deletes).
    pub fn count(&self, filter: &Filter) -> Result<u64, TuneDbError> {
        let (condition, params) = filter_sql(filter)?;
        let sql = format!("SELECT count(*) FROM tuning_results WHERE {condition}");
        let n: i64 = lock(&self.conn)
            .query_row(&sql, params_from_iter(params), |r| r.get(0))
            .map_err(|e| self.sqlite(e))?;
        Ok(n.unsigned_abs())
    }

    /// The ids of the stored rows matching `filter` (damaged ones included), ascending.
    pub fn ids(&self, filter: &Filter) -> Result<Vec<i64>, TuneDbError> {
        let (condition, params) = filter_sql(filter)?;
        let sql = format!("SELECT id FROM tuning_results WHERE {condition} ORDER BY id");
        lock(&self.conn)
            .prepare(&sql)
            .and_then(|mut stmt| {
                stmt.query_map(params_from_iter(params), |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<i64>>>()
            })
            .map_err(|e| self.sqlite(e))
    }

    /// Deletes the results matching `filter`; returns how many.
    pub fn clear(&self, filter: &Filter) -> Result<u64, TuneDbError> {
        let (condition, params) = filter_sql(filter)?;
        let sql = format!("DELETE FROM tuning_results WHERE {condition}");
        let deleted = lock(&self.conn)
            .execute(&sql, params_from_iter(params))
            .map_err(|e| self.sqlite(e))?;
        self.refresh();
        Ok(deleted as u64)
    }

    /// Writes one validated record inside the caller's transaction. A stored record `trusted`
    /// refuses is replaced whatever the policy. Also returns the stored record it was compared
    /// with, for conflict reports.
    pub(crate) fn write(
        &self,
        conn: &Connection,
        record: &TuneRecord,
        policy: WritePolicy,
        trusted: &mut dyn FnMut(&TuneRecord) -> bool,
    ) -> Result<(StoreOutcome, Option<TuneRecord>), TuneDbError> {
        // A damaged row with this key is not "existing": the upsert overwrites it.
        let existing = self
            .select_exact(conn, &record.key)?
            .records
            .into_iter()
            .next()
            .map(|stored| stored.record);
        let outcome = match &existing {
            None => StoreOutcome::Inserted,
            Some(_) if policy == WritePolicy::Replace => StoreOutcome::Replaced,
            Some(old) if !trusted(old) => StoreOutcome::Replaced,
            Some(old) => {
                // Both have a winner time: validation guarantees it for everything stored.
                let old_time = old.winner_time_s().unwrap_or(f64::INFINITY);
                let new_time = record.winner_time_s().unwrap_or(f64::INFINITY);
                if new_time < old_time {
                    StoreOutcome::Replaced
                } else {
                    StoreOutcome::KeptExisting
                }
            }
        };
        if outcome != StoreOutcome::KeptExisting {
            self.upsert(conn, record)?;
        }
        Ok((outcome, existing))
    }

    /// Forgets the in-process cache, so that the next lookups read the file again and see what
    /// other processes have stored since. Every write through this handle does it too: writes
    /// are rare, and a changed result can move which record a bucketed lookup finds.
    pub fn refresh(&self) {
        *lock(&self.memo) = Memo::default();
    }

    pub(crate) fn connection(&self) -> MutexGuard<'_, Connection> {
        lock(&self.conn)
    }

    pub(crate) fn sqlite(&self, error: rusqlite::Error) -> TuneDbError {
        TuneDbError::Sqlite {
            path: self.path.clone(),
            error,
        }
    }

    /// Deletes the result with this id; false when there is none.
    pub fn remove(&self, id: i64) -> Result<bool, TuneDbError> {
        self.clear(&Filter {
            id: Some(id),
            ..Filter::default()
        })
        .map(|n| n > 0)
    }

    fn upsert(&self, conn: &Connection, record: &TuneRecord) -> Result<(), TuneDbError> {
        let mut params = key_prefix_params(&record.key);
        let p = &record.key.problem;
        params.extend([p.m, p.n, p.k].map(sql_size));
        params.extend([
            SqlValue::Text(to_json(&record.winner)?),
            SqlValue::Text(to_json(&record.candidates)?),
            record.cublas_time_s.map_or(SqlValue::Null, SqlValue::Real),
            SqlValue::Integer(record.measured_at_unix_s),
            SqlValue::Text(to_json(&record.method)?),
        ]);
        conn.prepare_cached(
            "INSERT INTO tuning_results (device_uuid, device_name, driver_version, \
             carver_version, target, kernel_hash, dtype_a, dtype_b, dtype_c, dtype_acc, layout_a, \
             layout_b, batch, m, n, k, winner, candidates, cublas_time_s, measured_at_unix_s, \
             method) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, \
             ?16, ?17, ?18, ?19, ?20, ?21) \
             ON CONFLICT DO UPDATE SET winner = excluded.winner, \
             candidates = excluded.candidates, cublas_time_s = excluded.cublas_time_s, \
             measured_at_unix_s = excluded.measured_at_unix_s, method = excluded.method",
        )
        .and_then(|mut stmt| stmt.execute(params_from_iter(params)))
        .map_err(|e| self.sqlite(e))?;
        Ok(())
    }

    fn select_exact(&self, conn: &Connection, key: &TuneKey) -> Result<Selection, TuneDbError> {
        let mut params = key_prefix_params(key);
        let p = &key.problem;
        params.extend([p.m, p.n, p.k].map(sql_size));
        let condition = format!("{KEY_PREFIX_WHERE} AND m = ?14 AND n = ?15 AND k = ?16");
        self.select(conn, &condition, params)
    }

    fn select_bucket(
        &self,
        key: &TuneKey,
        buckets: KeyBuckets,
    ) -> Result<Option<TuneRecord>, TuneDbError> {
        let mut params = key_prefix_params(key);
        let p = &key.problem;
        for (low, high) in buckets.ranges([p.m, p.n, p.k]) {
            params.extend([sql_size(low), sql_size(high)]);
        }
        let condition = format!(
            "{KEY_PREFIX_WHERE} \
             AND m > ?14 AND m <= ?15 AND n > ?16 AND n <= ?17 AND k > ?18 AND k <= ?19"
        );
        let asked = [p.m, p.n, p.k];
        let closest = self
            .select(&lock(&self.conn), &condition, params)?
            .records
            .into_iter()
            .min_by(|a, b| {
                let distance = |r: &StoredTuneRecord| {
                    let q = &r.record.key.problem;
                    log2_distance([q.m, q.n, q.k], asked)
                };
                distance(a).total_cmp(&distance(b)).then(a.id.cmp(&b.id))
            });
        Ok(closest.map(|stored| stored.record))
    }

    /// The rows matching `condition` (whose parameters are `params`), oldest first. A row that
    /// cannot be read back (a column of the wrong type, JSON that does not parse, a record that
    /// fails the checks, a record SQLite itself cannot decode) is skipped and reported; only an
    /// error that is not about the file's content (busy, I/O) fails the query.
    fn select(
        &self,
        conn: &Connection,
        condition: &str,
        params: Vec<SqlValue>,
    ) -> Result<Selection, TuneDbError> {
        // `id > ?` comes last: an anonymous parameter numbers after the highest one before it.
        let sql = format!(
            "SELECT {COLUMNS} FROM tuning_results WHERE ({condition}) AND id > ? ORDER BY id"
        );
        let mut selection = Selection::default();
        let mut after = i64::MIN;
        loop {
            let mut all = params.clone();
            all.push(SqlValue::Integer(after));
            let mut stmt = conn.prepare_cached(&sql).map_err(|e| self.sqlite(e))?;
            let mut rows = stmt
                .query(params_from_iter(all))
                .map_err(|e| self.sqlite(e))?;
            let stopped = loop {
                match rows.next() {
                    Ok(Some(row)) => match row.get::<_, i64>(0) {
                        Ok(id) => {
                            after = id;
                            match read_row(row)
                                .map_err(|e| format!("a column cannot be read: {e}"))
                                .and_then(decode)
                            {
                                Ok(stored) => selection.records.push(stored),
                                Err(reason) => selection.skipped.push(SkippedRow { id, reason }),
                            }
                        }
                        Err(e) => break Some(e),
                    },
                    Ok(None) => break None,
                    Err(e) => break Some(e),
                }
            };
            let Some(error) = stopped else {
                return Ok(selection);
            };
            if !is_damage(&error) {
                return Err(self.sqlite(error));
            }
            // SQLite cannot step over the next row. Its id alone may still be readable (from
            // the b-tree, without decoding the record): skip that row and go on after it.
            let next: rusqlite::Result<Option<i64>> = conn
                .query_row(
                    "SELECT id FROM tuning_results WHERE id > ?1 ORDER BY id LIMIT 1",
                    [after],
                    |r| r.get(0),
                )
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                });
            match next {
                Ok(Some(id)) => {
                    selection.skipped.push(SkippedRow {
                        id,
                        reason: format!("SQLite cannot read this row: {error}"),
                    });
                    after = id;
                }
                Ok(None) => return Ok(selection),
                Err(e) if is_damage(&e) => {
                    selection.skipped.push(SkippedRow {
                        id: after.saturating_add(1),
                        reason: format!(
                            "this row and every later one cannot be read ({error}); `carver \
                             cache recover` on a copy of the file salvages what is left"
                        ),
                    });
                    return Ok(selection);
                }
                Err(e) => return Err(self.sqlite(e)),
            }
        }
    }
}

/// Whether SQLite's error is about the file's content rather than about access to it.
fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    )
}

/// Turns a row back into a record and checks it as a store would: the file may have been
/// damaged or edited since it was written.
pub(crate) fn decode(raw: RawRow) -> Result<StoredTuneRecord, String> {
    let size =
        |name: &str, v: i64| u64::try_from(v).map_err(|_| format!("{name} is negative ({v})"));
    fn json<T: serde::de::DeserializeOwned>(name: &str, text: &str) -> Result<T, String> {
        serde_json::from_str(text).map_err(|e| format!("{name} is not valid: {e}"))
    }
    let record = TuneRecord {
        key: TuneKey {
            device: DeviceKey {
                name: raw.device_name,
                uuid: raw.device_uuid,
                driver_version: raw.driver_version,
            },
            carver_version: raw.carver_version,
            target: raw.target,
            kernel_hash: raw.kernel_hash,
            problem: carver_schema::TuneProblem {
                m: size("m", raw.m)?,
                n: size("n", raw.n)?,
                k: size("k", raw.k)?,
                batch: size("batch", raw.batch)?,
                dtype_a: raw.dtype_a,
                dtype_b: raw.dtype_b,
                dtype_c: raw.dtype_c,
                dtype_acc: raw.dtype_acc,
                layout_a: raw.layout_a,
                layout_b: raw.layout_b,
            },
        },
        winner: json("winner", &raw.winner)?,
        candidates: json("candidates", &raw.candidates)?,
        cublas_time_s: raw.cublas_time_s,
        measured_at_unix_s: raw.measured_at_unix_s,
        method: json("method", &raw.method)?,
    };
    validate_record(&record)?;
    Ok(StoredTuneRecord { id: raw.id, record })
}

/// A row as SQLite returns it (or as salvage finds it in a page), before the JSON columns are
/// parsed. Fields in the order of [`COLUMNS`].
pub(crate) struct RawRow {
    pub id: i64,
    pub device_uuid: String,
    pub device_name: String,
    pub driver_version: String,
    pub carver_version: String,
    pub target: String,
    pub kernel_hash: String,
    pub dtype_a: String,
    pub dtype_b: String,
    pub dtype_c: String,
    pub dtype_acc: String,
    pub layout_a: String,
    pub layout_b: String,
    pub batch: i64,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub winner: String,
    pub candidates: String,
    pub cublas_time_s: Option<f64>,
    pub measured_at_unix_s: i64,
    pub method: String,
}

fn read_row(row: &Row<'_>) -> rusqlite::Result<RawRow> {
    Ok(RawRow {
        id: row.get(0)?,
        device_uuid: row.get(1)?,
        device_name: row.get(2)?,
        driver_version: row.get(3)?,
        carver_version: row.get(4)?,
        target: row.get(5)?,
        kernel_hash: row.get(6)?,
        dtype_a: row.get(7)?,
        dtype_b: row.get(8)?,
        dtype_c: row.get(9)?,
        dtype_acc: row.get(10)?,
        layout_a: row.get(11)?,
        layout_b: row.get(12)?,
        batch: row.get(13)?,
        m: row.get(14)?,
        n: row.get(15)?,
        k: row.get(16)?,
        winner: row.get(17)?,
        candidates: row.get(18)?,
        cublas_time_s: row.get(19)?,
        measured_at_unix_s: row.get(20)?,
        method: row.get(21)?,
    })
}

/// Parameters ?1 to ?13 of [`KEY_PREFIX_WHERE`].
fn key_prefix_params(key: &TuneKey) -> Vec<SqlValue> {
    let p = &key.problem;
    let mut params: Vec<SqlValue> = [
        &key.device.uuid,
        &key.device.name,
        &key.device.driver_version,
        &key.carver_version,
        &key.target,
        &key.kernel_hash,
        &p.dtype_a,
        &p.dtype_b,
        &p.dtype_c,
        &p.dtype_acc,
        &p.layout_a,
        &p.layout_b,
    ]
    .into_iter()
    .map(|s| SqlValue::Text(s.clone()))
    .collect();
    params.push(sql_size(p.batch));
    params
}

/// Sizes are validated to fit in an `i64` before they reach SQL; a larger bound (a bucket's
/// upper end) saturates, which keeps the comparison right.
fn sql_size(size: u64) -> SqlValue {
    SqlValue::Integer(i64::try_from(size).unwrap_or(i64::MAX))
}

fn log2_distance(stored: [u64; 3], asked: [u64; 3]) -> f64 {
    stored
        .iter()
        .zip(asked)
        .map(|(&s, a)| ((s as f64).log2() - (a as f64).log2()).abs())
        .sum()
}

/// The WHERE clause and parameters of a filter (`1` when it is empty). The clause uses
/// anonymous `?` parameters, which SQLite numbers left to right, in the order of `params`.
fn filter_sql(filter: &Filter) -> Result<(String, Vec<SqlValue>), TuneDbError> {
    filter.check()?;
    let mut conditions = Vec::new();
    let mut params = Vec::new();
    if let Some(id) = filter.id {
        conditions.push("id = ?");
        params.push(SqlValue::Integer(id));
    }
    if let Some(device) = &filter.device {
        conditions.push("(device_uuid = ? OR instr(lower(device_name), lower(?)) > 0)");
        params.extend([
            SqlValue::Text(device.clone()),
            SqlValue::Text(device.clone()),
        ]);
    }
    if let Some(target) = &filter.target {
        conditions.push("target = ?");
        params.push(SqlValue::Text(target.clone()));
    }
    if let Some(shape) = filter.shape {
        conditions.push("m = ? AND n = ? AND k = ?");
        params.extend(shape.map(sql_size));
    }
    Ok(if conditions.is_empty() {
        ("1".into(), params)
    } else {
        (conditions.join(" AND "), params)
    })
}

/// Refuses, before SQLite tries, a cache directory or database file this process cannot write:
/// SQLite would only say "unable to open database file" or "attempt to write a readonly
/// database", without naming the cause.
fn check_writable(dir: &Path, db: &Path) -> Result<(), TuneDbError> {
    // The WAL and its index are created beside the database, so the directory must take files.
    tempfile::tempfile_in(dir).map_err(|error| TuneDbError::NotWritable {
        what: "cache directory",
        path: dir.to_path_buf(),
        error,
    })?;
    match std::fs::OpenOptions::new().read(true).write(true).open(db) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(TuneDbError::NotWritable {
            what: "tuning database",
            path: db.to_path_buf(),
            error,
        }),
        Ok(_) => Ok(()),
    }
}

/// Serialising JSON values and plain structs cannot fail; the error is mapped all the same.
fn to_json<T: serde::Serialize>(value: &T) -> Result<String, TuneDbError> {
    serde_json::to_string(value).map_err(|e| TuneDbError::InvalidRecord(e.to_string()))
}

/// A poisoned lock only means another thread panicked while holding it; the connection rolls
/// back any open transaction when it is dropped and the memo is a cache, so both stay usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
