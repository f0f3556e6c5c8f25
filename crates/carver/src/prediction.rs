//! The cost model's verdict on a configuration, and a recommended hint.
//!
//! The model's working types; `carver_schema` holds their JSON form (see `schema.rs` for the
//! conversions).

use crate::tile::TileConfig;

/// The resource or effect that limits a configuration's predicted time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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

/// Where the predicted time goes. Each term is the time that resource alone would need.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Breakdown {
    pub compute_us: f64,
    pub smem_us: f64,
    pub l2_us: f64,
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
    /// to padded ones) before the main kernel; 0 when there are none.
    pub repack_us: f64,
    pub dram_bytes: f64,
    pub l2_bytes: f64,
    /// Fraction of the last wave's slots that hold work (1 = no tail).
    pub wave_efficiency: f64,
    /// Fraction of tensor-core work that is useful (the rest multiplies padding).
    pub padding_efficiency: f64,
}

/// The cost model's verdict on one configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    pub time_us: f64,
    pub tflops: f64,
    pub bound: Bound,
    pub smem_bytes: u64,
    pub registers_per_thread: u32,
    /// Set on a hedge of the ranking (`policy::register_hedges`): the registers per thread the
    /// time assumes, fewer than the estimate above, so that one more block fits per SM.
    pub hedged_registers: Option<u32>,
    pub threads: u32,
    pub blocks_per_sm: u32,
    pub grid: u64,
    pub waves: f64,
    pub breakdown: Breakdown,
}

/// One recommended configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Hint {
    /// 1-based position in the ranking.
    pub rank: usize,
    /// The configuration in the target's own parameter names (e.g. a `triton.Config` dict).
    pub config: serde_json::Value,
    /// The same configuration in family-neutral terms.
    pub tile: TileConfig,
    pub prediction: Prediction,
}
