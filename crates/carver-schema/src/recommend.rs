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
    /// Wall time of the recommendation itself, microseconds.
    pub elapsed_us: f64,
}
