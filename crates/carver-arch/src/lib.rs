//! carver's hardware model.
//!
//! [`Arch`] is the one description of a GPU that the rest of carver reads. [`HardwareDb`] holds the
//! descriptions shipped in `hardware-db/` (embedded in the binary) plus a user's own directory;
//! [`CalibrationStore`] holds ceilings measured on real devices. Nothing here touches a GPU: live
//! detection lives in `carver-gpu` and produces an [`Arch`] through [`Arch`]'s public fields.
//!
//! The JSON form of a description is `carver_schema::ArchDescription` (and `ArchSummary` for
//! `carver arch list`), converted from an [`Arch`] with `From`; [`Arch`]'s own serde form is the
//! TOML of `hardware-db/`.
//!
//! ```
//! let db = carver_arch::HardwareDb::embedded().unwrap();
//! let h100 = db.get("h100").unwrap();
//! assert_eq!(h100.sm.count, 132);
//! ```

mod calibrated;
mod calibration;
pub mod check;
mod class;
mod db;
mod error;
mod field;
mod model;
mod paths;
mod schema;
mod validate;

pub use calibrated::{CALIBRATION_FACTORS, CalibrationLookup};
pub use calibration::{CALIBRATION_FORMAT, CalibratedFigure, Calibration, CalibrationStore};
pub use check::{Check, DERIVED_TOLERANCE};
pub use db::{HardwareDb, parse_arch};
pub use error::ArchError;
pub use field::{ArchField, UnknownArchField};
pub use model::*;
pub use paths::{CACHE_DIR_ENV, HARDWARE_DB_ENV, cache_dir};
pub use validate::{MAX_INSTRUCTION_EXTENT, validate};
