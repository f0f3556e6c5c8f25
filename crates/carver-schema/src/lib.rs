//! The machine-readable output of carver: every document `carver ... --format json` prints, the
//! tuning database's records (and their JSON Lines export), and the hardware descriptions, as
//! plain serde types.
//!
//! This crate depends on serde and serde_json only, never on carver's model, hardware database
//! or GPU code: a tool that reads carver's output (or `carver-tunedb`, which stores records)
//! links nothing else. carver's own types convert into these (`From` impls in `carver`,
//! `carver-arch` and `carver-gpu`), so an internal change to the model does not move the JSON.
//!
//! # Versioning
//!
//! Every top-level document carries `schema_version` ([`SCHEMA_VERSION`]).
//! - Adding an optional field (one a reader may find absent) keeps the version.
//! - Removing or renaming a field, changing its type or unit, or changing its meaning bumps it.
//!
//! Readers should check the version, and should not reject fields they do not know.
//!
//! # Documents
//!
//! | command | type |
//! |---|---|
//! | `carver recommend` | [`RecommendOutput`] |
//! | `carver arch list` | [`ArchList`] |
//! | `carver arch show` | [`ArchReport`] |
//! | `carver arch detect` | [`DetectReport`] |
//! | `carver arch calibrate` | [`CalibrateReport`] |
//! | `carver moe` | [`MoeOutput`]; the engines' config file [`MoeConfigFile`] |
//! | `carver tune` | [`TuneReport`] |
//! | `carver bench` | [`BenchReport`] |
//! | `carver tune --emit DIR` (`launch.json`) | [`EmittedKernel`] |
//! | `carver cache list` / `show` / `import` / `clear` / `remove` / `recover` | [`CacheList`], [`CacheShow`], [`CacheImport`], [`CacheClear`], [`CacheClear`], [`CacheRecover`] |
//!
//! The tuning database stores [`TuneRecord`]s.

/// Version of every document of this crate.
pub const SCHEMA_VERSION: u32 = 1;

mod arch;
mod cache;
mod device;
mod emit;
mod moe;
mod prediction;
mod recommend;
mod tile;
mod tune;

pub use arch::*;
pub use cache::*;
pub use device::*;
pub use emit::*;
pub use moe::*;
pub use prediction::*;
pub use recommend::*;
pub use tile::*;
pub use tune::*;
