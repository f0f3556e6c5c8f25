//! Element types of a matmul's operands, output and accumulator.

use std::fmt;
use std::str::FromStr;

use carver_arch::ComputeClass;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F16,
    Bf16,
    F32,
    /// fp32 storage, multiplied on tensor cores as tf32.
    Tf32,
    E4m3,
    E5m2,
    I8,
    I32,
}

impl DType {
    pub const ALL: [DType; 8] = [
        Self::F16,
        Self::Bf16,
        Self::F32,
        Self::Tf32,
        Self::E4m3,
        Self::E5m2,
        Self::I8,
        Self::I32,
    ];

    pub fn bytes(self) -> u32 {
        match self {
            Self::F16 | Self::Bf16 => 2,
            Self::F32 | Self::Tf32 | Self::I32 => 4,
            Self::E4m3 | Self::E5m2 | Self::I8 => 1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::F32 => "f32",
            Self::Tf32 => "tf32",
            Self::E4m3 => "e4m3",
            Self::E5m2 => "e5m2",
            Self::I8 => "i8",
            Self::I32 => "i32",
        }
    }

    /// The compute class a multiply with this input type runs in.
    pub fn compute_class(self) -> ComputeClass {
        match self {
            Self::F16 => ComputeClass::F16,
            Self::Bf16 => ComputeClass::Bf16,
            Self::Tf32 => ComputeClass::Tf32,
            // A plain f32 matmul on a tensor-core GPU runs as tf32 in every kernel family carver targets.
            Self::F32 => ComputeClass::Tf32,
            Self::E4m3 | Self::E5m2 => ComputeClass::Fp8,
            Self::I8 => ComputeClass::Int8,
            Self::I32 => ComputeClass::Fp32,
        }
    }

    pub fn is_float(self) -> bool {
        !matches!(self, Self::I8 | Self::I32)
    }

    pub fn is_fp8(self) -> bool {
        matches!(self, Self::E4m3 | Self::E5m2)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let lower = s.to_ascii_lowercase();
        let found = match lower.as_str() {
            "f16" | "fp16" | "half" | "float16" => Self::F16,
            "bf16" | "bfloat16" => Self::Bf16,
            "f32" | "fp32" | "float" | "float32" => Self::F32,
            "tf32" => Self::Tf32,
            "e4m3" | "fp8" | "fp8e4m3" | "float8_e4m3fn" | "e4m3fn" => Self::E4m3,
            "e5m2" | "fp8e5m2" | "float8_e5m2" => Self::E5m2,
            "i8" | "int8" => Self::I8,
            "i32" | "int32" => Self::I32,
            _ => {
                return Err(format!(
                    "unknown dtype `{s}` (accepted: f16, bf16, f32, tf32, e4m3 (fp8), e5m2, i8, i32)"
                ));
            }
        };
        Ok(found)
    }
}

/// Storage order of a matrix operand.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// Rows contiguous (C order): A is M x K with stride K.
    #[default]
    Row,
    /// Columns contiguous (Fortran order).
    Col,
}

impl Layout {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Row => "row",
            Self::Col => "col",
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Layout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "row" | "r" | "row-major" => Ok(Self::Row),
            "col" | "c" | "column" | "col-major" | "column-major" => Ok(Self::Col),
            _ => Err(format!("unknown layout `{s}` (accepted: row, col)")),
        }
    }
}
