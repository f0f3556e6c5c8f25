//! carver's tuning database: measured winners, kept so that a tuning run is paid for once.
//!
//! One SQLite file, `<cache dir>/tuning.sqlite3` (the cache directory comes from
//! `carver_arch::cache_dir`; never the working directory). Each result is keyed by the device
//! (name, UUID, driver), the carver version, the target family, a hash of the kernel source and
//! the problem (sizes, batch, dtypes, layouts); it holds the winning configuration, every
//! candidate that was tried (predicted time, measured time or failure, rank in the model's
//! list), the cuBLAS time when measured, and when and how the times were taken. Configurations
//! are opaque JSON in the target's own format: this crate knows no kernel.
//!
//! # Guarantees
//! - **Several processes** may read and write at once: WAL mode, a busy timeout, and every
//!   write in one `BEGIN IMMEDIATE` transaction. Nothing committed is lost, and a process killed
//!   mid-write leaves the file consistent with every committed result intact.
//! - **Same key twice**: the result with the faster winner is kept, a tie keeps the stored one
//!   ([`WritePolicy::KeepFaster`]), so concurrent tuners and imports agree whatever their order.
//!   [`WritePolicy::Replace`] is there for a deliberate re-tune.
//! - **A damaged or foreign file** (truncated, not a database, another application's SQLite
//!   file) is detected on open (`PRAGMA application_id`, `PRAGMA quick_check`), renamed to
//!   `tuning.sqlite3.moved-aside-<unix seconds>` and replaced by a new database, into which
//!   every row still readable in the moved file is salvaged ([`TuneDb::salvage`], which reads
//!   the file page by page and so survives damaged b-tree pages); [`Warning`]s say what was
//!   moved and what was kept. Only SQLite's own verdicts count: a busy or unreadable file is an
//!   error, never moved. Processes that find the same bad file take turns (an `flock` on
//!   `tuning.sqlite3.recovery-lock`, Unix only) and judge it again, so it is moved once.
//! - **A damaged row** in a file that passes SQLite's checks (a flipped byte in a record) is
//!   skipped and reported by every query ([`Selection::skipped`]) and export, never the reason
//!   a whole query fails; [`TuneDb::remove`] deletes it by id, and a store for its key replaces
//!   it.
//! - **Nothing is trusted**: every store, imported row and row read back is checked
//!   ([`validate_record`]: sizes within carver's limits, known dtypes and layouts, times between
//!   1 ns and 1 hour, configurations that are JSON objects, a winner that was measured); an
//!   import reads lines with bounded memory and refuses unknown format versions.
//! - **A newer schema** (a file written by a later carver) is refused with
//!   [`TuneDbError::NewerSchema`] and left untouched; an older one is migrated.
//! - **Lookups** are answered from an in-process cache after the first hit (well under a
//!   millisecond; `cargo bench -p carver-tunedb`). Shape bucketing is declared per size of the key
//!   ([`KeyBuckets`]: M, N, K each exact or rounded up to a power of two) and applied by
//!   [`TuneDb::lookup_with`]; exact by default.
//! - **Sharing**: [`TuneDb::export`] writes versioned JSON Lines and changes nothing;
//!   [`TuneDb::import`] merges, reporting conflicts and bad rows by line number, and
//!   [`TuneDb::import_checked`] lets the caller add checks (carver-flows adds the GPU's
//!   roofline).
//!
//! # Example
//! ```
//! use carver_tunedb::{DeviceKey, MeasuredCandidate, TuneDb, TuneKey, TuneProblem, TuneRecord};
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cache_dir = tempfile::tempdir()?;
//! let (db, warnings) = TuneDb::open(cache_dir.path())?;
//! for warning in &warnings {
//!     eprintln!("warning: {warning}");
//! }
//!
//! let key = TuneKey {
//!     device: DeviceKey {
//!         name: "NVIDIA H100 80GB HBM3".into(),
//!         uuid: "GPU-5e0c4a1b-0000-4000-8000-000000000001".into(),
//!         driver_version: "580.65.06".into(),
//!     },
//!     carver_version: "0.1.0".into(),
//!     target: "triton".into(),
//!     kernel_hash: "9f2c4e1a7b3d5f60".into(),
//!     problem: TuneProblem {
//!         m: 4096, n: 4096, k: 4096, batch: 1,
//!         dtype_a: "f16".into(), dtype_b: "f16".into(), dtype_c: "f16".into(),
//!         dtype_acc: "f32".into(), layout_a: "row".into(), layout_b: "row".into(),
//!     },
//! };
//! assert!(db.lookup(&key)?.is_none()); // a miss: tune, then store
//!
//! let winner = json!({"kwargs": {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, "num_warps": 8, "num_stages": 3});
//! db.store(&TuneRecord {
//!     key: key.clone(),
//!     winner: winner.clone(),
//!     candidates: vec![MeasuredCandidate {
//!         config: winner.clone(),
//!         model_rank: 1,
//!         predicted_time_s: 160e-6,
//!         measured_time_s: Some(171e-6),
//!         failure: None,
//!     }],
//!     cublas_time_s: Some(168e-6),
//!     measured_at_unix_s: 1_767_225_600,
//!     method: json!({"warmup": 10, "reps": 100, "timer": "cuda-events", "statistic": "median"}),
//! })?;
//!
//! let hit = db.lookup(&key)?.expect("just stored");
//! assert_eq!(hit.winner, winner);
//! assert_eq!(hit.winner_time_s(), Some(171e-6));
//! assert_eq!(db.winners_for_device(&key.device)?.records.len(), 1);
//! # Ok(())
//! # }
//! ```

mod bucket;
mod db;
mod error;
mod exchange;
mod health;
mod salvage;
mod validate;

#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod test_support;

pub use bucket::{Bucket, KeyBuckets};
pub use carver_schema::{
    BadRow, ConflictResolution, DeviceKey, ImportConflict, ImportReport, MeasuredCandidate,
    RowWarning, SalvageReport, SkippedRow, StoredTuneRecord, TuneKey, TuneProblem, TuneRecord,
};
pub use db::{DB_FILE_NAME, Filter, LookupOptions, Selection, StoreOutcome, TuneDb, WritePolicy};
pub use error::{TuneDbError, Warning};
pub use exchange::{
    ACCEPTED_FORMAT_VERSIONS, ACCEPTED_SCHEMA_VERSIONS, EXPORT_FORMAT, EXPORT_FORMAT_VERSION,
    ExportHeader, Exported, MAX_LINE_BYTES, RecordCheck, write_export,
};
pub use health::{APPLICATION_ID, SCHEMA_VERSION};
pub use validate::{
    ACCEPTED_DTYPES, ACCEPTED_LAYOUTS, MAX_KEY_TEXT_BYTES, MAX_PREDICTED_TIME_S, MAX_RECORD_BYTES,
    MAX_SIZE, MAX_TIME_S, MIN_TIME_S, QUOTE_CHARS, quote, validate_key, validate_record,
};
