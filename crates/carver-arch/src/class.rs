//! The compute classes a GPU has a peak for: a leaf of the model that the calibration and the
//! field names also read.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Compute classes that have a peak: the tensor-core input types plus SIMT fp32 / fp64.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ComputeClass {
    F16,
    Bf16,
    Tf32,
    Fp8,
    Int8,
    /// fp32 on the CUDA cores (no tensor cores).
    Fp32,
    Fp64,
}

impl ComputeClass {
    pub const ALL: [ComputeClass; 7] = [
        Self::F16,
        Self::Bf16,
        Self::Tf32,
        Self::Fp8,
        Self::Int8,
        Self::Fp32,
        Self::Fp64,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::Tf32 => "tf32",
            Self::Fp8 => "fp8",
            Self::Int8 => "int8",
            Self::Fp32 => "fp32",
            Self::Fp64 => "fp64",
        }
    }
    /// Whether this class runs on tensor cores (and so needs a tensor instruction).
    pub fn is_tensor(self) -> bool {
        !matches!(self, Self::Fp32 | Self::Fp64)
    }
}

impl fmt::Display for ComputeClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ComputeClass {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!(
                    "unknown compute class `{s}` (accepted: {})",
                    Self::ALL.map(|c| c.as_str()).join(", ")
                )
            })
    }
}
