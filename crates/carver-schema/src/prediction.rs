//! The cost model's verdict on a configuration, and a recommended hint.

use serde::{Deserialize, Serialize};

use crate::tile::Tile;

/// The resource or effect that limits a configuration's predicted time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    /// DRAM bandwidth.
    Dram,
    /// L2-to-SM bandwidth.
    L2,
    /// Shared-memory bandwidth.
    Smem,
    /// Tensor-core (or SIMT) throughput.
    Compute,
    /// Memory latency not hidden by the pipeline, or fixed launch costs.
    Latency,
}

impl Bound {
    /// The JSON spelling (`dram`, `l2`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dram => "dram",
            Self::L2 => "l2",
            Self::Smem => "smem",
            Self::Compute => "compute",
            Self::Latency => "latency",
        }
    }
}

/// Where the predicted time goes. Each `_us` term is the time that resource alone would need.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    /// Tensor-core (or SIMT) work.
    pub compute_us: f64,
    /// Shared-memory traffic.
    pub smem_us: f64,
    /// L2-to-SM traffic.
    pub l2_us: f64,
    /// DRAM traffic.
    pub dram_us: f64,
    /// Time the pipeline spends waiting on memory latency beyond the bandwidth terms.
    pub latency_us: f64,
    /// Writing C (and reading it back for split-K).
    pub epilogue_us: f64,
    /// Extra kernels and traffic of the split-K reduction.
    pub split_k_us: f64,
    /// Fixed launch and pipeline fill costs.
    pub overhead_us: f64,
    /// Copy kernels that lay operands out the way the family's loads need (unaligned rows copied
    /// to padded ones) before the main kernel. Absent when there are none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repack_us: f64,
    /// Bytes read from and written to DRAM.
    pub dram_bytes: f64,
    /// Bytes the main loop moves between L2 and the SMs.
    pub l2_bytes: f64,
    /// Fraction of the last wave's slots that hold work (1 = no tail).
    pub wave_efficiency: f64,
    /// Fraction of tensor-core work that is useful (the rest multiplies padding).
    pub padding_efficiency: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// The cost model's verdict on one configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Predicted kernel time (repack copies included), microseconds.
    pub time_us: f64,
    /// Useful FLOP/s at that time, in TFLOP/s.
    pub tflops: f64,
    /// What limits the time.
    pub bound: Bound,
    /// Shared memory one block uses.
    pub smem_bytes: u64,
    /// Registers per thread the family's kernel is expected to use.
    pub registers_per_thread: u32,
    /// Present on a hedge of the ranking: the registers per thread its time assumes, fewer than
    /// `registers_per_thread` (the estimate) but within the estimate's measured error, so that
    /// `blocks_per_sm` is one block more than the estimate allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hedged_registers: Option<u32>,
    /// Threads per block.
    pub threads: u32,
    /// Blocks resident on one SM at once.
    pub blocks_per_sm: u32,
    /// Blocks launched.
    pub grid: u64,
    /// `grid / (SMs x blocks_per_sm)`: waves the launch takes, fractional (2.5 = a half-full
    /// third wave).
    pub waves: f64,
    /// Where the time goes.
    pub breakdown: Breakdown,
}

/// One recommended configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hint {
    /// 1-based position in the ranking.
    pub rank: usize,
    /// The configuration in the target's own parameter names (e.g. a `triton.Config` dict).
    pub config: serde_json::Value,
    /// The same configuration in family-neutral terms.
    pub tile: Tile,
    /// The cost model's verdict on it.
    pub prediction: Prediction,
}
