//! `carver moe`: the fused-MoE kernel's rankings (`--format json`, [`MoeOutput`]) and the config
//! file vLLM and SGLang read ([`MoeConfigFile`]).

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::prediction::Prediction;

/// One configuration of the fused-MoE Triton kernel, in the kernel's own parameter names (the
/// six keys vLLM's tuner writes, integers).
#[allow(non_snake_case)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MoeKernelConfig {
    pub BLOCK_SIZE_M: u32,
    pub BLOCK_SIZE_N: u32,
    pub BLOCK_SIZE_K: u32,
    pub GROUP_SIZE_M: u32,
    pub num_warps: u32,
    pub num_stages: u32,
}

/// The config file vLLM's `get_moe_configs` (and SGLang's) reads: a JSON object from batch size
/// (an integer as a string, `"1"`, `"2"`, ...) to a [`MoeKernelConfig`], in the order given
/// (ascending for the tuner's ladder). No other key: the loaders call `int(key)` on each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MoeConfigFile(pub Vec<(u64, MoeKernelConfig)>);

impl Serialize for MoeConfigFile {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (m, c) in &self.0 {
            map.serialize_entry(&m.to_string(), c)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for MoeConfigFile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = MoeConfigFile;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object from batch sizes (\"1\", \"2\", ...) to kernel configs")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((key, config)) = map.next_entry::<String, MoeKernelConfig>()? {
                    let m = key.parse::<u64>().map_err(|_| {
                        serde::de::Error::custom(format!("key `{key}` is not a batch size"))
                    })?;
                    out.push((m, config));
                }
                Ok(MoeConfigFile(out))
            }
        }
        d.deserialize_map(Entries)
    }
}

/// The MoE layer as the user gave it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoeProblemSpec {
    pub experts: u32,
    /// Experts per token.
    pub topk: u32,
    pub hidden: u64,
    /// The whole layer's intermediate size.
    pub intermediate: u64,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// `intermediate / tp`: the `N` of the file name.
    pub shard_intermediate: u64,
    /// `bf16`, `fp16` or `fp8_w8a8`.
    pub dtype: String,
    /// `[block_n, block_k]` of block-quantized fp8 weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_shape: Option<[u32; 2]>,
    /// `uniform`, or `histogram` when tokens per expert were given.
    pub routing: String,
}

/// The model's verdict on one of the layer's two GEMMs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoeGemmPrediction {
    /// Predicted time, microseconds.
    pub time_us: f64,
    /// Rows computed, padding to `BLOCK_SIZE_M` per expert included (expected).
    pub padded_rows: f64,
    /// Experts with at least one token (expected).
    pub active_experts: f64,
    /// Blocks with work (expected).
    pub grid: f64,
    /// The dense model's prediction at the nearest whole number of row blocks per expert, with
    /// its breakdown and bound.
    pub detail: Prediction,
}

/// One ranked configuration: one config for both GEMMs, ranked by their summed time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoeHint {
    pub rank: usize,
    pub config: MoeKernelConfig,
    /// Gate/up plus down, microseconds.
    pub predicted_us: f64,
    pub gate_up: MoeGemmPrediction,
    pub down: MoeGemmPrediction,
}

/// The ranking for one batch size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoeBatch {
    /// Tokens in the batch (the file's key).
    pub m: u64,
    pub hints: Vec<MoeHint>,
}

/// `carver moe --format json`: one GPU's rankings for every batch size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoeOutput {
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
    pub schema_version: u32,
    pub carver_version: String,
    pub problem: MoeProblemSpec,
    /// Key of the GPU planned for (`h100-sxm`).
    pub arch: String,
    /// The GPU's name as torch reports it, spaces as underscores.
    pub device_name: String,
    /// The file vLLM looks up.
    pub file_name: String,
    /// The same file as SGLang names it.
    pub sglang_file_name: String,
    pub batches: Vec<MoeBatch>,
}

impl MoeOutput {
    /// The config file: every batch size's rank-1 configuration.
    pub fn config_file(&self) -> MoeConfigFile {
        MoeConfigFile(
            self.batches
                .iter()
                .filter_map(|b| Some((b.m, b.hints.first()?.config)))
                .collect(),
        )
    }
}
