//! Tuning results: the records the tuning database keeps (and exports as JSON Lines), and the
//! documents of `carver cache ... --format json`.
//!
//! Times are in seconds. Kernel configurations are opaque JSON: each target family has its own
//! native dictionary (a Triton config is `{"kwargs": {...}, "num_warps": 8, "num_stages": 3}`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The GPU a result was measured on. A driver upgrade gives a new key: its timings may differ.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DeviceKey {
    /// Marketing name as the driver reports it, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// The driver's UUID of this physical GPU, e.g. `GPU-5e0c...`.
    pub uuid: String,
    /// Kernel-mode driver version (`580.159.04`).
    pub driver_version: String,
}

/// The matmul that was tuned: `C[batch, M, N] = A[batch, M, K] * B[batch, K, N]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TuneProblem {
    /// Rows of A and C.
    pub m: u64,
    /// Columns of B and C.
    pub n: u64,
    /// The reduction dimension.
    pub k: u64,
    /// Independent matmuls of this shape.
    pub batch: u64,
    /// Element type of A (`bf16`, `f16`, ...).
    pub dtype_a: String,
    /// Element type of B.
    pub dtype_b: String,
    /// Element type of C.
    pub dtype_c: String,
    /// The accumulator's type, e.g. `f32` for an f16 GEMM.
    pub dtype_acc: String,
    /// Memory layout of A, e.g. `row` or `col`.
    pub layout_a: String,
    /// Memory layout of B: `row` (K x N) or `col` (stored N x K).
    pub layout_b: String,
}

/// Everything a tuning result depends on. Two runs with equal keys measured the same thing.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TuneKey {
    /// The GPU it was measured on.
    pub device: DeviceKey,
    /// Version of the carver that chose and timed the candidates.
    pub carver_version: String,
    /// Kernel family the configurations are for, e.g. `triton` or `cuda-sm90`.
    pub target: String,
    /// Hash of the kernel source, so that an edited kernel is tuned again.
    pub kernel_hash: String,
    /// The matmul.
    pub problem: TuneProblem,
}

/// One configuration that was timed (or failed) during a tuning run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredCandidate {
    /// The target's native configuration.
    pub config: Value,
    /// Position in the cost model's ranking, 1 = the model's first choice.
    pub model_rank: u32,
    /// The cost model's predicted time.
    pub predicted_time_s: f64,
    /// Measured time; absent when the candidate failed before it could be timed.
    pub measured_time_s: Option<f64>,
    /// Why the candidate failed (did not compile, wrong result, out of resources, ...).
    pub failure: Option<String>,
}

/// One tuning result: the key, the winner, and every candidate that was tried.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneRecord {
    /// What was measured.
    pub key: TuneKey,
    /// The fastest valid configuration (equal to the `config` of one measured candidate).
    pub winner: Value,
    /// Every candidate tried, failures included.
    pub candidates: Vec<MeasuredCandidate>,
    /// cuBLAS on the same problem, when it was timed in the same run.
    pub cublas_time_s: Option<f64>,
    /// When the run finished, in seconds since the Unix epoch.
    pub measured_at_unix_s: i64,
    /// How the times were taken, e.g. `{"warmup": 10, "reps": 100, "timer": "cuda-events",
    /// "statistic": "median"}`.
    pub method: Value,
}

impl TuneRecord {
    /// The measured time of the winner: the fastest successful candidate whose config is the
    /// winner. `None` when no such candidate exists (a record the database refuses to store).
    pub fn winner_time_s(&self) -> Option<f64> {
        self.candidates
            .iter()
            .filter(|c| c.config == self.winner && c.failure.is_none())
            .filter_map(|c| c.measured_time_s)
            .min_by(f64::total_cmp)
    }
}

/// A stored record and its id in this machine's database (ids are not portable).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredTuneRecord {
    /// Row id in the database.
    pub id: i64,
    /// The record, its fields inline.
    #[serde(flatten)]
    pub record: TuneRecord,
}

/// `carver cache list --format json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheList {
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
    pub schema_version: u32,
    /// The database file that was read.
    pub database: String,
    /// The matching results.
    pub results: Vec<CacheEntry>,
    /// Stored rows that matched but could not be read back (damaged); left out of `results`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedRow>,
}

/// A stored row that could not be read back or failed the record checks, and was left out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedRow {
    /// Row id in the database (`carver cache remove ID` deletes it).
    pub id: i64,
    /// What is wrong with it.
    pub reason: String,
}

/// One line of `carver cache list`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    /// Row id in the database.
    pub id: i64,
    /// What was measured.
    pub key: TuneKey,
    /// The fastest valid configuration.
    pub winner: Value,
    /// Its measured time.
    pub winner_time_s: f64,
    /// cuBLAS on the same problem, when it was timed in the same run.
    pub cublas_time_s: Option<f64>,
    /// How many candidates were tried, failures included.
    pub candidates: usize,
    /// How many of them failed.
    pub failed_candidates: usize,
    /// When the run finished, in seconds since the Unix epoch.
    pub measured_at_unix_s: i64,
}

/// `carver cache show ... --format json`: full records, candidates included.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheShow {
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
    pub schema_version: u32,
    /// The matching records.
    pub results: Vec<StoredTuneRecord>,
    /// Stored rows that matched but could not be read back (damaged); left out of `results`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedRow>,
}

/// What an import did, row by row where it matters. `carver cache import --format json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ImportReport {
    /// Records with a key the database did not have.
    pub inserted: u64,
    /// Records that replaced a slower result for the same key.
    pub replaced: u64,
    /// Records not taken because the database already held a result at least as fast.
    pub kept_existing: u64,
    /// Same key, different winner (whichever way it was resolved).
    pub conflicts: Vec<ImportConflict>,
    /// Rows that were not imported, with the reason.
    pub bad_rows: Vec<BadRow>,
    /// Record count announced by the file's header.
    pub expected_records: u64,
    /// Record lines found after the header, good and bad.
    pub records_in_file: u64,
    /// Bad rows beyond the first [`REPORT_LIST_LIMIT`], counted but not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bad_rows_not_listed: u64,
    /// Conflicts beyond the first [`REPORT_LIST_LIMIT`], counted but not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub conflicts_not_listed: u64,
    /// Rows imported with something to say: fields this carver does not know (dropped), a device
    /// the hardware database does not describe (times checked for sense only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<RowWarning>,
    /// Warnings beyond the first [`REPORT_LIST_LIMIT`], counted but not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warnings_not_listed: u64,
}

/// How many bad rows, conflicts or warnings a report lists; the rest are counted. Keeps a report
/// on a huge or hostile file small.
pub const REPORT_LIST_LIMIT: usize = 1000;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ImportReport {
    /// True when every row was good and the file held as many records as its header announced.
    pub fn is_clean(&self) -> bool {
        self.bad_rows.is_empty()
            && self.bad_rows_not_listed == 0
            && self.records_in_file == self.expected_records
    }

    /// Bad rows, listed or not.
    pub fn bad_row_count(&self) -> u64 {
        self.bad_rows.len() as u64 + self.bad_rows_not_listed
    }
}

/// Something to know about a row that was imported all the same.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowWarning {
    /// 1-based line in the imported file.
    pub line: u64,
    /// What to know.
    pub message: String,
}

/// A record whose key the database already held with a different winner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImportConflict {
    /// 1-based line in the imported file.
    pub line: u64,
    /// The shared key.
    pub key: TuneKey,
    /// The database's winner.
    pub existing_winner: Value,
    /// Its measured time.
    pub existing_time_s: f64,
    /// The file's winner.
    pub incoming_winner: Value,
    /// Its measured time.
    pub incoming_time_s: f64,
    /// `existing` or `incoming`: the faster one is kept; a tie keeps the existing one.
    pub kept: ConflictResolution,
}

/// Which side of a conflict the database kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConflictResolution {
    /// The database's result stayed.
    Existing,
    /// The file's result replaced it.
    Incoming,
}

/// A row of an import file that was not imported.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BadRow {
    /// 1-based line in the imported file.
    pub line: u64,
    /// Why it was not imported.
    pub reason: String,
}

/// `carver cache import FILE --format json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheImport {
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
    pub schema_version: u32,
    /// The imported file.
    pub file: String,
    /// What the import did, its fields inline.
    #[serde(flatten)]
    pub report: ImportReport,
}

/// `carver cache clear --yes --format json` (and `--dry-run`, and `carver cache remove`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheClear {
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
    pub schema_version: u32,
    /// Records deleted (0 for a dry run).
    pub deleted: u64,
    /// True for `--dry-run`: nothing was deleted, `would_delete` lists what would have been.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// The ids a dry run would delete.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub would_delete: Vec<i64>,
}

/// `carver cache recover FILE --format json`: rows read back from a damaged or moved-aside
/// database file and merged into the current one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheRecover {
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
    pub schema_version: u32,
    /// The file that was read (never changed).
    pub file: String,
    /// The database the good rows went into.
    pub database: String,
    /// What was found and kept, its fields inline.
    #[serde(flatten)]
    pub report: SalvageReport,
}

/// What salvaging a database file found: every row that could still be read, checked like an
/// import, the good ones merged (the faster result wins each key).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SalvageReport {
    /// Rows of carver's table found in the file, good and bad.
    pub rows_found: u64,
    /// Good rows with a key the database did not have.
    pub inserted: u64,
    /// Good rows that replaced a slower result for the same key.
    pub replaced: u64,
    /// Good rows not taken because the database held a result at least as fast.
    pub kept_existing: u64,
    /// Rows that could not be decoded or failed the record checks, by their id in the file.
    pub bad_rows: Vec<SkippedRow>,
    /// Bad rows beyond the first [`REPORT_LIST_LIMIT`], counted but not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bad_rows_not_listed: u64,
    /// Pages of the file that could not be read as table pages holding rows (damaged or foreign).
    pub unreadable_pages: u64,
    /// What else the salvage noticed (a write-ahead log it could not apply, a header it could not
    /// read, rows found twice).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl SalvageReport {
    /// Rows taken into the database or already there as fast: what survived.
    pub fn kept(&self) -> u64 {
        self.inserted + self.replaced + self.kept_existing
    }

    /// Bad rows, listed or not.
    pub fn bad_row_count(&self) -> u64 {
        self.bad_rows.len() as u64 + self.bad_rows_not_listed
    }
}
