//! `carver tune --format json` and `carver bench --format json`: configurations measured on this
//! machine's GPU beside cuBLAS.
//!
//! Times here are in microseconds (`_us`) or wall seconds (`_wall_s`); the nested
//! [`CandidateMeasurement`] keeps the worker's seconds (`_s`).

use serde::{Deserialize, Serialize};

use crate::cache::DeviceKey;
use crate::recommend::ShapeSpec;

/// `carver tune --format json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneReport {
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
    pub schema_version: u32,
    /// Version of the carver that tuned.
    pub carver_version: String,
    /// The GPU every shape was tuned on.
    pub device: DeviceKey,
    /// One answer per input shape, in input order.
    pub results: Vec<TuneShapeResult>,
}

/// One shape's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneShapeResult {
    /// The shape as given (all zero for a row of a shapes file that did not parse).
    pub shape: ShapeSpec,
    /// Input (and output) dtype: `bf16` or `f16`.
    pub dtype: String,
    /// Storage order of A and B: `rr` or `rc`.
    pub layout: String,
    /// `tuned` (measured now), `database` (a stored result) or `error`.
    pub source: String,
    /// The winner in cuda-sm90's own terms.
    pub winner: Option<serde_json::Value>,
    /// The winner's measured time.
    pub winner_time_us: Option<f64>,
    /// The winner's useful throughput, TFLOP/s.
    pub winner_tflops: Option<f64>,
    /// cuBLAS on the same problem in the same run.
    pub cublas_time_us: Option<f64>,
    /// cuBLAS time / winner time: above 1 means carver's kernel is faster.
    pub speedup_vs_cublas: Option<f64>,
    /// Position of the winner in the model's ranking (1 = the model's first choice).
    pub winner_model_rank: Option<u32>,
    /// Candidates tried: every one with its prediction and measurement or failure.
    pub candidates: Vec<TuneCandidate>,
    /// Wall time of compiling the candidates (tuned now only).
    pub compile_wall_s: Option<f64>,
    /// Wall time of checking and timing them (tuned now only).
    pub bench_wall_s: Option<f64>,
    /// Wall time of this shape from the database lookup to the stored result.
    pub total_wall_s: Option<f64>,
    /// Where the result went: `inserted`, `replaced`, `kept-existing`, or why it was not
    /// stored.
    pub stored: Option<String>,
    /// Present when rows of A or B are not 16-byte aligned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repack: Option<RepackReport>,
    /// With shape bucketing (`--bucket pow2`): the stored shape whose result answered, when it
    /// is not the shape asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_shape: Option<ShapeSpec>,
    /// Why this shape has no result, or why its result was not stored.
    pub error: Option<String>,
    /// With `--emit DIR`: where the winner was written, or why it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emit: Option<EmitReport>,
}

/// Where `carver tune --emit DIR` wrote a shape's winner (its `launch.json`, source and cubins),
/// or why it did not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmitReport {
    /// The directory written; absent when nothing was.
    pub directory: Option<String>,
    /// The files written there.
    pub files: Vec<String>,
    /// The winner came from the tuning database and was run again (checked against cuBLAS) to
    /// measure its launch grid.
    pub rerun: bool,
    /// Why the winner was not emitted.
    pub error: Option<String>,
}

/// Operands copied into rows padded to 16 bytes before every launch; every measured time of the
/// family includes the copies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepackReport {
    /// `A`, `B` or both.
    pub operands: Vec<String>,
    /// The copies alone (median), timed at worker setup.
    pub time_us: Option<f64>,
}

/// One configuration tried by `carver tune`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneCandidate {
    /// Position in the model's ranking (1 = the model's first choice).
    pub model_rank: u32,
    /// Compact description (`128x256x64 s4 c2 g8 ...`).
    pub label: String,
    /// The configuration in cuda-sm90's own terms.
    pub config: serde_json::Value,
    /// The cost model's predicted time.
    pub predicted_time_us: f64,
    /// Measured time (median); absent when it failed before it could be timed.
    pub measured_time_us: Option<f64>,
    /// Useful throughput at the measured time, TFLOP/s.
    pub tflops: Option<f64>,
    /// The worker's full measurement (registers, relative error, runs...), when tuned now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<CandidateMeasurement>,
    /// Seconds NVRTC took (tuned now only).
    pub compile_s: Option<f64>,
    /// Whether the compiled kernel came from the kernel cache (tuned now only).
    pub from_cache: Option<bool>,
    /// Why it failed (did not compile, wrong result, out of resources, ...).
    pub failure: Option<String>,
}

/// A candidate that passed the check against cuBLAS, with its times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateMeasurement {
    /// Registers per thread, as the loaded function reports them.
    pub registers: u32,
    /// Local (spill) memory per thread.
    pub local_bytes: u32,
    /// Blocks resident per SM, from the occupancy calculator.
    pub blocks_per_sm: u32,
    /// Blocks launched.
    pub grid: u32,
    /// `||C - C_cublas|| / ||C_cublas||`.
    pub rel_error: f64,
    /// Its times.
    pub timing: Timing,
}

/// Times of one timed operation, seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Median over the runs.
    pub median_s: f64,
    /// Fastest run.
    pub min_s: f64,
    /// Slowest run.
    pub max_s: f64,
    /// Timed runs.
    pub runs: u64,
    /// Timing stopped early because the candidate was far behind the best.
    pub early_stopped: bool,
}

/// `carver bench --format json`: one configuration timed beside cuBLAS.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
    pub schema_version: u32,
    /// The GPU it ran on.
    pub device: DeviceKey,
    /// The problem (batch 1).
    pub shape: ShapeSpec,
    /// Input (and output) dtype: `bf16` or `f16`.
    pub dtype: String,
    /// Storage order of A and B: `rr` or `rc`.
    pub layout: String,
    /// `argument` (`--config`) or `database` (the stored winner).
    pub config_source: String,
    /// The configuration in cuda-sm90's own terms.
    pub config: serde_json::Value,
    /// Compact description (`128x256x64 s4 c2 g8 ...`).
    pub label: String,
    /// The cost model's predicted time.
    pub predicted_time_us: f64,
    /// Measured time (median); absent when it failed.
    pub measured_time_us: Option<f64>,
    /// Useful throughput at the measured time, TFLOP/s.
    pub tflops: Option<f64>,
    /// cuBLAS on the same problem in the same run.
    pub cublas_time_us: Option<f64>,
    /// cuBLAS throughput, TFLOP/s.
    pub cublas_tflops: Option<f64>,
    /// cuBLAS time / measured time: above 1 means carver's kernel is faster.
    pub speedup_vs_cublas: Option<f64>,
    /// The worker's full measurement, when the configuration passed the check.
    pub details: Option<CandidateMeasurement>,
    /// Present when rows of A or B are not 16-byte aligned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repack: Option<RepackReport>,
    /// Why it failed (did not compile, wrong result, out of resources, ...).
    pub failure: Option<String>,
}
