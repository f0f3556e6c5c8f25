//! `launch.json`, which `carver tune --emit DIR` writes beside a tuned winner's CUDA source and
//! cubin: everything another program needs to load and launch the kernel without carver (the
//! CUDA driver's module and launch calls, and `cuTensorMapEncodeTiled` for the operands).
//!
//! Sizes are in bytes (`_bytes`), times in microseconds (`_us`). Arrays of dimensions list the
//! innermost (contiguous) one last in [`EmitBuffer::shape`], as a C array is declared, and first
//! in [`TensorMapEncoding`], as the driver takes them.

use serde::{Deserialize, Serialize};

use crate::cache::TuneProblem;

/// `launch.json`: one tuned kernel and how to launch it on this problem.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmittedKernel {
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
    pub schema_version: u32,
    /// Version of the carver that tuned and wrote it.
    pub carver_version: String,
    /// The kernel family: `cuda-sm90`.
    pub target: String,
    /// The GPU it was tuned on (the cubin runs on any GPU of the same compute capability).
    pub device: EmitDevice,
    /// The matmul: `C[batch, M, N] = A[batch, M, K] * B[batch, K, N]`, A and C row-major.
    pub problem: TuneProblem,
    /// The winner in cuda-sm90's own terms.
    pub config: serde_json::Value,
    /// Compact description (`128x256x64 s4 c2 g8 ...`).
    pub label: String,
    /// The winner's measured time (median, every kernel below included), when known.
    pub measured_time_us: Option<f64>,
    /// cuBLAS on the same problem in the same run, when known.
    pub cublas_time_us: Option<f64>,
    /// How the cubins were built from the sources.
    pub build: EmitBuild,
    /// The device buffers the kernels read and write.
    pub buffers: Vec<EmitBuffer>,
    /// Bytes of the fp32 split-K workspace (0 without a split: the kernel takes a null pointer).
    pub workspace_bytes: u64,
    /// The kernels to launch, in this order, on one stream.
    pub kernels: Vec<EmitLaunch>,
    /// How each kernel's grid (and the tensor maps) change for other sizes.
    pub grid_rule: String,
}

/// The GPU of a tuning run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmitDevice {
    /// Name as the driver reports it, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// `major.minor`, e.g. `9.0`.
    pub compute_capability: String,
    /// Streaming multiprocessors (the persistent grid depends on them).
    pub sm_count: u32,
}

/// How the cubins were compiled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmitBuild {
    /// The GPU architecture compiled for, e.g. `sm_90a`.
    pub arch: String,
    /// The compiler and its version, e.g. `NVRTC 13.0`.
    pub compiler: String,
    /// Its options, verbatim.
    pub options: Vec<String>,
}

/// One device buffer: `shape` elements of `dtype`, densely stored, the last dimension
/// contiguous.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmitBuffer {
    /// `A`, `B`, `C` or `workspace`: what the parameters below refer to.
    pub name: String,
    /// `input` (read), `output` (written) or `scratch` (written and read by the kernels).
    pub role: String,
    /// Element type: `bf16`, `f16` or `f32`.
    pub dtype: String,
    /// Dimensions, outermost first, e.g. `[batch, M, K]` for A.
    pub shape: Vec<u64>,
    /// Total size.
    pub bytes: u64,
    /// The base address must be a multiple of this (TMA needs 16).
    pub alignment_bytes: u32,
    /// What the dimensions are, in words.
    pub layout: String,
}

/// One kernel launch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmitLaunch {
    /// The `extern "C"` entry point (`cuModuleGetFunction`).
    pub entry_point: String,
    /// The CUDA source beside this file.
    pub source_file: String,
    /// The cubin beside this file (`cuModuleLoadData`).
    pub cubin_file: String,
    /// SHA-256 of the cubin, to check it is the one described.
    pub cubin_sha256: String,
    /// Blocks, `[x, y, z]`.
    pub grid: [u32; 3],
    /// Threads per block, `[x, y, z]`.
    pub block: [u32; 3],
    /// Blocks per cluster, `[x, y, z]` (`[1, 1, 1]`: no clusters).
    pub cluster: [u32; 3],
    /// The cluster shape is compiled into the kernel (`__cluster_dims__`), so a plain
    /// `cuLaunchKernel` launches clusters; the grid must be a multiple of it.
    pub cluster_compiled_in: bool,
    /// Dynamic shared memory per block (`sharedMemBytes` of `cuLaunchKernel`).
    pub dynamic_smem_bytes: u32,
    /// Set `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` to `dynamic_smem_bytes` before the
    /// first launch (needed above 48 KiB).
    pub set_max_dynamic_smem: bool,
    /// Blocks of this kernel resident per SM, as measured (for the persistent grid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks_per_sm: Option<u32>,
    /// The kernel's parameters, in order (`kernelParams` of `cuLaunchKernel`).
    pub params: Vec<EmitParam>,
}

/// What kind of value a kernel parameter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EmitParamKind {
    /// A 128-byte `CUtensorMap`, passed by value (`__grid_constant__`): encode it as
    /// [`EmitParam::tensor_map`] says, in a 64-byte-aligned host buffer.
    TensorMap,
    /// A device address (8 bytes).
    DevicePointer,
    /// A 32-bit signed integer.
    I32,
    /// A 32-bit float.
    F32,
}

/// One kernel parameter and what to pass.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmitParam {
    /// The name in the source.
    pub name: String,
    /// What kind of value it is.
    pub kind: EmitParamKind,
    /// Bytes of the value (128, 8 or 4).
    pub size_bytes: u32,
    /// Its alignment in the parameter space.
    pub align_bytes: u32,
    /// `tensor_map`: the `cuTensorMapEncodeTiled` arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_map: Option<TensorMapEncoding>,
    /// `device_pointer`: the buffer whose base address to pass; absent: pass 0 (null).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<String>,
    /// `device_pointer`: bytes the kernel may touch there (0 with a null pointer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// `i32`: the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// `f32`: the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub float_value: Option<f64>,
    /// What it is, in words.
    pub note: String,
}

/// Every argument of `cuTensorMapEncodeTiled` after the map itself, for one operand.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorMapEncoding {
    /// The buffer whose base address is `globalAddress` (`A` or `B`).
    pub global_address: String,
    /// Which operand and how the dimensions map onto it, in words.
    pub note: String,
    /// `tensorDataType`.
    pub data_type: EnumArg,
    /// `tensorRank`.
    pub rank: u32,
    /// `globalDim`, innermost first (elements).
    pub global_dim: Vec<u64>,
    /// `globalStrides`: bytes between consecutive indices of every dimension but the innermost.
    pub global_strides_bytes: Vec<u64>,
    /// `boxDim`, innermost first (elements).
    pub box_dim: Vec<u32>,
    /// `elementStrides`.
    pub element_strides: Vec<u32>,
    /// `interleave`.
    pub interleave: EnumArg,
    /// `swizzle`.
    pub swizzle: EnumArg,
    /// `l2Promotion`.
    pub l2_promotion: EnumArg,
    /// `oobFill`.
    pub oob_fill: EnumArg,
}

/// A value of one of the CUDA driver's enums: its name in `cuda.h` and its value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnumArg {
    /// E.g. `CU_TENSOR_MAP_SWIZZLE_128B`.
    pub name: String,
    /// E.g. 3.
    pub value: u32,
}
