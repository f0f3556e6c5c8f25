//! The names serving engines look their fused-MoE config files up by.
//!
//! Checked against the engines' source:
//! - vLLM `vllm/model_executor/layers/fused_moe/fused_moe.py`, `get_config_file_name(E, N, dtype,
//!   block_shape)`: `E={E},N={N},device_name={device_name}{dtype_selector}{block_shape_selector}.json`
//!   with `device_name = current_platform.get_device_name().replace(" ", "_")` (torch's
//!   `get_device_name`, the NVML name: "NVIDIA H100 80GB HBM3"), `dtype_selector = ",dtype=" +
//!   dtype` only for a quantized kernel (`get_config_dtype_str`: "fp8_w8a8"; None for bf16/fp16)
//!   and `block_shape_selector = ",block_shape=" + str(block_shape)` with spaces removed
//!   (`[128,128]`), only when a block shape is set. `N` is `w2.shape[2]`, the intermediate size
//!   of one shard after `silu_and_mul` (`try_get_optimal_moe_config`; benchmark_moe.py passes
//!   `shard_intermediate_size // 2` with `shard_intermediate_size = 2 * intermediate // tp`).
//!   `get_moe_configs` reads `{int(key): value}` from the file in `fused_moe/configs/` and picks
//!   the batch size nearest to M, so keys must be integers as strings and nothing else.
//! - SGLang `python/sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_config.py`: the same
//!   name except that the block shape keeps Python's list spelling with a space
//!   (`,block_shape=[128, 128]`); files live in `configs/triton_{version with _}/` under the
//!   package or `$SGLANG_MOE_CONFIG_DIR`, and later versions also look for a down-projection
//!   file with a `_down` suffix (carver writes the one shared config: both GEMMs use it).

use carver_arch::Arch;

use super::template::MoeProblem;

/// The GPU's name as torch reports it, spaces replaced by underscores (the hardware database's
/// `name` is the NVML name torch returns).
pub fn device_name(arch: &Arch) -> String {
    arch.gpu.name.replace(' ', "_")
}

/// Which engine's spelling of the file name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Vllm,
    Sglang,
}

/// The file name `engine` looks up for this layer on `arch`.
pub fn config_file_name(p: &MoeProblem, arch: &Arch, engine: Engine) -> String {
    let dtype = p
        .dtype
        .file_selector()
        .map(|d| format!(",dtype={d}"))
        .unwrap_or_default();
    let block = match (p.block_shape, engine) {
        (None, _) => String::new(),
        (Some([n, k]), Engine::Vllm) => format!(",block_shape=[{n},{k}]"),
        (Some([n, k]), Engine::Sglang) => format!(",block_shape=[{n}, {k}]"),
    };
    format!(
        "E={},N={},device_name={}{dtype}{block}.json",
        p.experts,
        p.shard_intermediate,
        device_name(arch)
    )
}
