//! `carver recommend --format json`.

use serde::{Deserialize, Serialize};

use crate::prediction::Hint;

/// The whole document: one result per (shape, arch).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecommendOutput {
    pub schema_version: u32,
    pub carver_version: String,
    pub results: Vec<RecommendResult>,
}

/// The problem as the user gave it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShapeSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub batch: u64,
}

/// Dtypes and layouts of the problem.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProblemSpec {
    pub dtype_a: String,
    pub dtype_b: String,
    pub dtype_c: String,
    pub dtype_acc: String,
    pub layout_a: String,
    pub layout_b: String,
}

/// Hints for one shape on one arch, or why there are none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecommendResult {
    pub shape: ShapeSpec,
    pub arch: String,
    pub target: String,
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
    pub measured_time_us: f64,
    /// cuBLAS on the same problem in the same run, when timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cublas_time_us: Option<f64>,
    pub device_name: String,
    pub device_uuid: String,
    pub measured_at_unix_s: i64,
    pub carver_version: String,
}
