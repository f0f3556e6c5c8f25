//! `carver recommend --format json`.

use serde::{Deserialize, Serialize};

use crate::prediction::Hint;

/// The whole document: one result per (shape, arch).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecommendOutput {
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION) of the carver that wrote it.
    pub schema_version: u32,
    /// Version of the carver that ranked the configurations.
    pub carver_version: String,
    /// Shapes in input order; for each shape, the archs in the order given.
    pub results: Vec<RecommendResult>,
}

/// The problem as the user gave it: `C[batch, m, n] = A[batch, m, k] * B[batch, k, n]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShapeSpec {
    /// The shape's name in a shapes file, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Rows of A and C.
    pub m: u64,
    /// Columns of B and C.
    pub n: u64,
    /// The reduction dimension.
    pub k: u64,
    /// Independent matmuls of this shape.
    pub batch: u64,
}

/// Dtypes and layouts of the problem.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProblemSpec {
    /// Element type of A (`f16`, `bf16`, `f32`, `e4m3`, `e5m2`, `i8`).
    pub dtype_a: String,
    /// Element type of B.
    pub dtype_b: String,
    /// Element type of C.
    pub dtype_c: String,
    /// The accumulator's type (`f32`, or `i32` for `i8`).
    pub dtype_acc: String,
    /// Storage order of A: `row` or `col`.
    pub layout_a: String,
    /// Storage order of B: `row` (K x N) or `col` (stored N x K).
    pub layout_b: String,
}

/// Hints for one shape on one arch, or why there are none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecommendResult {
    /// The shape as given.
    pub shape: ShapeSpec,
    /// Key of the GPU planned for (`h100-sxm`).
    pub arch: String,
    /// Kernel family the configurations are for (`triton`, `tilelang`, `cuda-sm90`, `generic`).
    pub target: String,
    /// Dtypes and layouts.
    pub problem: ProblemSpec,
    /// In rank order, best first; empty when `error` is set.
    pub hints: Vec<Hint>,
    /// Why this shape got no hints (bad size, unsupported dtype, ...).
    pub error: Option<String>,
    /// The fastest configuration `carver tune` measured for this problem on a GPU of this kind,
    /// when the tuning database holds one (next to, not instead of, the model's ranking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<MeasuredWinner>,
    /// Wall time of the recommendation itself, microseconds.
    pub elapsed_us: f64,
}

/// A tuning result from the database, reported beside the model's hints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredWinner {
    /// The winner in the target's own parameter names.
    pub config: serde_json::Value,
    /// Its measured time, microseconds.
    pub measured_time_us: f64,
    /// cuBLAS on the same problem in the same run, when timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cublas_time_us: Option<f64>,
    /// The GPU it was measured on, as the driver names it.
    pub device_name: String,
    /// That GPU's UUID.
    pub device_uuid: String,
    /// When the run finished, seconds since the Unix epoch.
    pub measured_at_unix_s: i64,
    /// Version of the carver that tuned it.
    pub carver_version: String,
}
