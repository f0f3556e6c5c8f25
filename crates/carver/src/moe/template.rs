//! The fused MoE layer to configure: tokens routed to `topk` of `experts` experts, each a
//! gate/up GEMM (`[M * topk, hidden] x [hidden, 2N]`, gathered rows) and a down GEMM
//! (`[M * topk, N] x [N, hidden]`, output scaled by the routing weight), with `N` the
//! intermediate size of one tensor-parallel shard.

use std::fmt;
use std::str::FromStr;

use carver_arch::Arch;
use serde::{Deserialize, Serialize};

use super::routing::RoutingModel;
use crate::dtype::{DType, Layout};
use crate::error::CarverError;
use crate::family::Family;
use crate::problem::Problem;
use crate::template::{MAX_DIM, MatmulTemplate};

/// The weight block shape vLLM's and DeepSeek's block-quantized fp8 checkpoints use (and the only
/// one the fused-MoE file names carry in practice): `[block_n, block_k] = [128, 128]`.
pub const BLOCK_SHAPE_128: [u32; 2] = [128, 128];

/// Most experts a layer may have: 4096 covers every public MoE model with room to spare, and
/// keeps the routing sums small.
pub const MAX_EXPERTS: u32 = 4096;

/// Element types of the fused-MoE kernel as vLLM names its config files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MoeDtype {
    Bf16,
    #[serde(rename = "fp16")]
    F16,
    /// fp8 (e4m3) weights and activations, per-tensor scales, or per-block with a block shape.
    Fp8W8a8,
}

impl MoeDtype {
    pub const ALL: [MoeDtype; 3] = [Self::Bf16, Self::F16, Self::Fp8W8a8];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bf16 => "bf16",
            Self::F16 => "fp16",
            Self::Fp8W8a8 => "fp8_w8a8",
        }
    }

    /// Element type of A and B in the kernel.
    pub fn input(self) -> DType {
        match self {
            Self::Bf16 => DType::Bf16,
            Self::F16 => DType::F16,
            Self::Fp8W8a8 => DType::E4m3,
        }
    }

    /// Element type the kernel writes: the model's activations (bf16 for fp8 checkpoints).
    pub fn output(self) -> DType {
        match self {
            Self::F16 => DType::F16,
            Self::Bf16 | Self::Fp8W8a8 => DType::Bf16,
        }
    }

    /// vLLM's `get_config_dtype_str`: only quantized kernels name their dtype in the file name
    /// (bf16 and fp16 share one file).
    pub fn file_selector(self) -> Option<&'static str> {
        match self {
            Self::Fp8W8a8 => Some("fp8_w8a8"),
            Self::Bf16 | Self::F16 => None,
        }
    }
}

impl fmt::Display for MoeDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MoeDtype {
    type Err = CarverError;
    fn from_str(s: &str) -> Result<Self, CarverError> {
        match s.to_ascii_lowercase().as_str() {
            "bf16" | "bfloat16" => Ok(Self::Bf16),
            "fp16" | "f16" | "float16" | "half" => Ok(Self::F16),
            "fp8_w8a8" | "fp8" | "fp8-w8a8" => Ok(Self::Fp8W8a8),
            _ => Err(CarverError::InvalidMoe {
                field: "dtype".into(),
                reason: format!("`{s}` is not supported; accepted: bf16, fp16, fp8_w8a8"),
            }),
        }
    }
}

/// How tokens are spread over experts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// Every expert equally likely (what vLLM's tuner measures with random gating).
    #[default]
    Uniform,
    /// Relative tokens per expert, one entry per expert (any scale).
    Histogram(Vec<f64>),
}

/// A fused MoE layer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoeTemplate {
    pub experts: u32,
    /// Experts each token is routed to.
    pub topk: u32,
    /// Model hidden size: K of gate/up, N of down.
    pub hidden: u64,
    /// The whole layer's intermediate size (before tensor parallelism).
    pub intermediate: u64,
    /// Tensor-parallel degree: each GPU holds `intermediate / tp` of every expert.
    pub tp: u32,
    pub dtype: MoeDtype,
    /// `[block_n, block_k]` of block-quantized fp8 weights; `None` = per-tensor scales.
    pub block_shape: Option<[u32; 2]>,
    pub routing: Routing,
}

/// A validated MoE layer: what the space and the cost model read.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeProblem {
    pub experts: u32,
    pub topk: u32,
    pub hidden: u64,
    /// Intermediate size of one shard (vLLM's `N`, `w2.shape[2]`).
    pub shard_intermediate: u64,
    pub dtype: MoeDtype,
    pub block_shape: Option<[u32; 2]>,
    pub routing: RoutingModel,
    /// The gate/up GEMM as a dense problem of one token row (sizes set per batch when priced).
    pub gate_up: Problem,
    /// The down GEMM likewise.
    pub down: Problem,
}

fn invalid(field: &str, reason: impl Into<String>) -> CarverError {
    CarverError::InvalidMoe {
        field: field.into(),
        reason: reason.into(),
    }
}

impl MoeTemplate {
    /// A bf16 layer on one GPU with uniform routing.
    pub fn new(experts: u32, topk: u32, hidden: u64, intermediate: u64) -> Self {
        Self {
            experts,
            topk,
            hidden,
            intermediate,
            tp: 1,
            dtype: MoeDtype::Bf16,
            block_shape: None,
            routing: Routing::Uniform,
        }
    }

    pub fn with_tp(mut self, tp: u32) -> Self {
        self.tp = tp;
        self
    }

    pub fn with_dtype(mut self, dtype: MoeDtype) -> Self {
        self.dtype = dtype;
        self
    }

    pub fn with_block_shape(mut self, block_shape: Option<[u32; 2]>) -> Self {
        self.block_shape = block_shape;
        self
    }

    pub fn with_routing(mut self, routing: Routing) -> Self {
        self.routing = routing;
        self
    }

    /// The per-shard intermediate size, `intermediate / tp`.
    pub fn shard_intermediate(&self) -> Result<u64, CarverError> {
        if self.tp == 0 {
            return Err(invalid("tp", "is 0; accepted: 1 or more"));
        }
        if self.intermediate == 0 || self.intermediate % u64::from(self.tp) != 0 {
            return Err(invalid(
                "intermediate",
                format!(
                    "{} is not divisible by tp = {}; each tensor-parallel shard must hold the same \
                     share of every expert",
                    self.intermediate, self.tp
                ),
            ));
        }
        Ok(self.intermediate / u64::from(self.tp))
    }

    /// Checks the layer against the arch and returns what the model reads.
    pub fn validate(&self, arch: &Arch) -> Result<MoeProblem, CarverError> {
        if self.experts == 0 || self.experts > MAX_EXPERTS {
            return Err(invalid(
                "experts",
                format!("is {}; accepted: 1 to {MAX_EXPERTS}", self.experts),
            ));
        }
        if self.topk == 0 || self.topk > self.experts {
            return Err(invalid(
                "topk",
                format!(
                    "is {}; each token is routed to 1 to experts = {} distinct experts",
                    self.topk, self.experts
                ),
            ));
        }
        for (name, v) in [("hidden", self.hidden), ("intermediate", self.intermediate)] {
            if v == 0 || v > MAX_DIM {
                return Err(invalid(name, format!("is {v}; accepted: 1 to {MAX_DIM}")));
            }
        }
        let shard = self.shard_intermediate()?;
        match (self.dtype, self.block_shape) {
            (_, None) => {}
            (MoeDtype::Fp8W8a8, Some(BLOCK_SHAPE_128)) => {}
            (MoeDtype::Fp8W8a8, Some([n, k])) => {
                return Err(invalid(
                    "block_shape",
                    format!("[{n}, {k}] is not supported; accepted: 128,128 (or none)"),
                ));
            }
            (other, Some(_)) => {
                return Err(invalid(
                    "block_shape",
                    format!(
                        "applies to fp8_w8a8 weights only, not {other}; drop it or use --dtype fp8_w8a8"
                    ),
                ));
            }
        }
        let routing = match &self.routing {
            Routing::Uniform => RoutingModel::uniform(self.experts, self.topk),
            Routing::Histogram(w) => {
                if w.len() != self.experts as usize {
                    return Err(invalid(
                        "routing",
                        format!(
                            "the histogram has {} entries; it needs one per expert ({})",
                            w.len(),
                            self.experts
                        ),
                    ));
                }
                if let Some((i, x)) = w
                    .iter()
                    .enumerate()
                    .find(|(_, x)| !x.is_finite() || **x < 0.0)
                {
                    return Err(invalid(
                        "routing",
                        format!("entry {i} is {x}; every entry must be a finite number >= 0"),
                    ));
                }
                if !w.iter().any(|&x| x > 0.0) {
                    return Err(invalid(
                        "routing",
                        "every entry is 0; at least one expert must get tokens",
                    ));
                }
                RoutingModel::histogram(w, self.topk)
            }
        };
        let dense = |n: u64, k: u64| -> Result<Problem, CarverError> {
            // A: gathered token rows, K contiguous; B: an expert's [N, K] slice, K contiguous
            // (column-major K x N).
            let mut t = MatmulTemplate::new(1, n, k)
                .with_dtype(self.dtype.input())
                .with_layouts(Layout::Row, Layout::Col)
                .with_family(Family::Triton);
            t.dtype_c = self.dtype.output();
            t.validate(arch)
        };
        Ok(MoeProblem {
            experts: self.experts,
            topk: self.topk,
            hidden: self.hidden,
            shard_intermediate: shard,
            dtype: self.dtype,
            block_shape: self.block_shape,
            routing,
            gate_up: dense(2 * shard, self.hidden)?,
            down: dense(self.hidden, shard)?,
        })
    }
}
