//! `carver tune --emit DIR`: a tuned winner written out for another program to load and launch
//! without carver: its CUDA source (`kernel.cu`), its cubin (`kernel.cubin`), with split-K the
//! reduction kernel's too (`splitk_reduce.cu`, `splitk_reduce.cubin`), and `launch.json`
//! (carver-schema's [`EmittedKernel`]): grid, block, cluster, dynamic shared memory, and every
//! parameter in order, the tensor maps with each `cuTensorMapEncodeTiled` argument.
//!
//! [`describe`] builds the description from the instantiation, the problem and the grid the
//! tuning run launched (no GPU needed), with the launch geometry of `launch.rs` and `splitk.rs`,
//! the code the tuning run itself launches with; [`write_emit`] writes the directory; [`emit`]
//! compiles (through the kernel cache) and does both.
//!
//! Each shape goes to its own directory, `DIR/<M>x<N>x<K>[_batch<B>]_<dtype>_<layout>/`
//! ([`emit_dir_name`]). carver writes only there and only its own five file names, each through
//! a temporary file and a rename, `launch.json` last; it replaces an earlier emit (a directory
//! whose `launch.json` carver wrote) and refuses a directory that holds anything else, saying so.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use carver::family::ConfigError;
use carver::{DType, Layout};
use carver_schema::{
    EmitBuffer, EmitBuild, EmitDevice, EmitLaunch, EmitParam, EmitParamKind, EmittedKernel,
    EnumArg, SCHEMA_VERSION, TensorMapEncoding,
};
use thiserror::Error;

use super::compile::{GPU_ARCH, compile_source, nvrtc_version, options};
use super::kernel_cache::{Found, read_at_most, replace_file, sha256_hex};
use super::launch::{
    GemmDims, TMA_INTERLEAVE, TMA_L2_PROMOTION, TMA_OOB_FILL, TMA_SWIZZLE, TmaGeometry,
    tma_data_type, tma_geometry,
};
use super::{
    CacheDefect, KERNEL_NAME, KernelCache, KernelSpec, OperandRows, SPLITK_COLUMNS_PER_THREAD,
    SPLITK_NAME, SPLITK_SOURCE, SPLITK_THREADS, SplitKShape, operand_rows,
};
use crate::error::GpuError;

/// The description's file name.
pub const LAUNCH_FILE: &str = "launch.json";
/// The GEMM's source and cubin.
pub const GEMM_SOURCE_FILE: &str = "kernel.cu";
pub const GEMM_CUBIN_FILE: &str = "kernel.cubin";
/// The split-K reduction's source and cubin.
pub const REDUCE_SOURCE_FILE: &str = "splitk_reduce.cu";
pub const REDUCE_CUBIN_FILE: &str = "splitk_reduce.cubin";
/// Every name carver writes into an emitted directory; it never touches another.
const CARVER_FILES: [&str; 5] = [
    LAUNCH_FILE,
    GEMM_SOURCE_FILE,
    GEMM_CUBIN_FILE,
    REDUCE_SOURCE_FILE,
    REDUCE_CUBIN_FILE,
];
/// No `launch.json` carver writes is this large; a larger one is not carver's.
const MAX_LAUNCH_BYTES: u64 = 4 << 20;
/// The base address TMA needs of A and B (and the alignment the kernels' vector stores assume
/// of C and the workspace).
const BUFFER_ALIGNMENT: u32 = 16;
/// A `CUtensorMap`: 128 opaque bytes, 64-byte aligned.
const TENSOR_MAP_BYTES: u32 = 128;
const TENSOR_MAP_ALIGN: u32 = 64;
/// Above this much dynamic shared memory a function needs the attribute raised first.
const DEFAULT_DYNAMIC_SMEM_BYTES: u32 = 48 << 10;

/// Why a winner was not emitted.
#[derive(Debug, Error)]
pub enum EmitError {
    #[error(
        "the emitted kernel reads A and B in place, so it takes 16-byte-aligned rows only (K, and N for row-major B, multiples of {per_16_bytes}); this problem has {detail}, whose rows carver copies into padded buffers before every launch; the tuning result itself is unaffected"
    )]
    UnalignedRows { detail: String, per_16_bytes: u32 },

    #[error("the winner {label} cannot be described: {reason}")]
    Unsupported { label: String, reason: String },

    #[error(
        "{}: {reason}; carver emits only into a new or empty directory or over its own earlier emit (one holding a launch.json it wrote): remove it or choose another --emit directory",
        path.display()
    )]
    NotCarvers { path: PathBuf, reason: String },

    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("the kernel could not be built: {0}")]
    Build(#[source] GpuError),
}

/// What the description is built from: the winner, the problem, and what the tuning run
/// measured of it on its GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct EmitInputs {
    pub spec: KernelSpec,
    pub dims: GemmDims,
    pub device: EmitDevice,
    /// Blocks the tuning run launched the GEMM with.
    pub grid: u32,
    /// Blocks of the GEMM resident per SM, as the tuning run found.
    pub blocks_per_sm: u32,
    pub measured_time_s: Option<f64>,
    pub cublas_time_s: Option<f64>,
}

/// The compiled images the description names, and the compiler that made them.
#[derive(Clone, Copy, Debug)]
pub struct EmitCubins<'a> {
    pub gemm: &'a [u8],
    /// The split-K reduction; needed when the winner splits K.
    pub reduce: Option<&'a [u8]>,
    /// NVRTC's version (major, minor).
    pub nvrtc: (i32, i32),
}

/// Where an emit went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmitWritten {
    pub directory: PathBuf,
    /// The files written there, `launch.json` last.
    pub files: Vec<String>,
}

/// The directory of one problem under `--emit DIR`, e.g. `4096x4096x4096_bf16_rr` or
/// `512x512x256_batch4_f16_rc`.
pub fn emit_dir_name(spec: &KernelSpec, dims: &GemmDims) -> String {
    let batch = if dims.batch > 1 {
        format!("_batch{}", dims.batch)
    } else {
        String::new()
    };
    format!(
        "{}x{}x{}{batch}_{}_r{}",
        dims.m,
        dims.n,
        dims.k,
        spec.input,
        layout_letter(spec.layout_b)
    )
}

fn layout_letter(layout: Layout) -> char {
    match layout {
        Layout::Row => 'r',
        Layout::Col => 'c',
    }
}

/// Whether `dir` can hold emits at all (it is a directory, or does not exist yet); checked
/// before any tuning so that a bad `--emit` costs no GPU time. Creates nothing.
pub fn check_emit_root(dir: &Path) -> Result<(), EmitError> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(EmitError::NotCarvers {
            path: dir.to_path_buf(),
            reason: "exists and is not a directory".into(),
        }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(source) => Err(EmitError::Io {
            action: "inspect",
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// Whether the winner `spec` of the problem `d` can be emitted at all: a configuration the
/// kernel runs, rows that need no padded copies, sizes below 2^31 (checked before a stored
/// winner is run again for its grid).
pub fn check_emit_problem(spec: &KernelSpec, d: &GemmDims) -> Result<(), EmitError> {
    let unsupported = |reason: String| EmitError::Unsupported {
        label: spec.label(),
        reason,
    };
    spec.check().map_err(|e| unsupported(e.to_string()))?;
    spec.params
        .check_k(d.k)
        .map_err(|v| unsupported(ConfigError::from(v).to_string()))?;
    let (a, b) = operand_rows(spec.layout_b, d.m, d.n, d.k);
    if a.repacked() || b.repacked() {
        let mut what = Vec::new();
        if a.repacked() {
            what.push(format!("K = {} (rows of A)", d.k));
        }
        if b.repacked() {
            what.push(match spec.layout_b {
                Layout::Row => format!("N = {} (rows of row-major B)", d.n),
                Layout::Col => format!("K = {} (rows of column-major B)", d.k),
            });
        }
        return Err(EmitError::UnalignedRows {
            detail: what.join(" and "),
            per_16_bytes: elements_per_16_bytes(spec.input),
        });
    }
    d.int_args().map_err(|e| unsupported(e.to_string()))?;
    Ok(())
}

/// Everything [`describe`] refuses before anything is compiled: what [`check_emit_problem`]
/// refuses, and a grid the kernel cannot have been launched with.
pub fn check_emittable(inputs: &EmitInputs) -> Result<(), EmitError> {
    let spec = &inputs.spec;
    let d = &inputs.dims;
    check_emit_problem(spec, d)?;
    let unsupported = |reason: String| EmitError::Unsupported {
        label: spec.label(),
        reason,
    };
    let cluster = u64::from(spec.params.cluster_m.max(1));
    let full = spec.units(d.m, d.n, d.batch).saturating_mul(cluster);
    let grid = u64::from(inputs.grid);
    let wrong_grid = |why: &str| {
        unsupported(format!(
            "it was launched with {grid} blocks, {why} ({} work units of {cluster} block(s))",
            spec.units(d.m, d.n, d.batch)
        ))
    };
    if grid == 0 || grid % cluster != 0 {
        return Err(wrong_grid("not a positive multiple of its cluster"));
    }
    if spec.params.persistent && grid > full {
        return Err(wrong_grid("more than a persistent grid launches"));
    }
    if !spec.params.persistent && grid != full {
        return Err(wrong_grid("not one block per tile and split"));
    }
    Ok(())
}

/// The launch description of `inputs` with the cubins `cubins` (pure: no GPU, no files).
pub fn describe(inputs: &EmitInputs, cubins: EmitCubins<'_>) -> Result<EmittedKernel, EmitError> {
    check_emittable(inputs)?;
    let spec = &inputs.spec;
    let p = &spec.params;
    let d = &inputs.dims;
    let unsupported = |reason: String| EmitError::Unsupported {
        label: spec.label(),
        reason,
    };
    let too_large = || unsupported("its buffers exceed 2^64 bytes".into());
    let [m, n, k, batch] = d.int_args().map_err(|e| unsupported(e.to_string()))?;
    let (a_rows, b_rows) = operand_rows(spec.layout_b, d.m, d.n, d.k);
    let (geometry_a, geometry_b) = tma_geometry(spec, &a_rows, &b_rows, d.batch);
    let data_type = tma_data_type(spec.input).map_err(|e| unsupported(e.to_string()))?;
    let data_type = EnumArg {
        name: format!("{data_type:?}"),
        value: data_type as u32,
    };
    let split = p.split_k > 1;
    let workspace_bytes = p.workspace_bytes(d.m, d.n, d.batch);

    let matrix = |name: &str, role: &str, dtype: DType, rows: &OperandRows, layout: String| {
        let shape = vec![d.batch, rows.rows, rows.cols];
        Ok::<_, EmitError>(EmitBuffer {
            name: name.into(),
            role: role.into(),
            dtype: dtype.as_str().into(),
            bytes: product(&shape)
                .and_then(|e| e.checked_mul(u64::from(dtype.bytes())))
                .ok_or_else(too_large)?,
            shape,
            alignment_bytes: BUFFER_ALIGNMENT,
            layout,
        })
    };
    let c_rows = OperandRows {
        rows: d.m,
        cols: d.n,
        ld: d.n,
    };
    let mut buffers = vec![
        matrix(
            "A",
            "input",
            spec.input,
            &a_rows,
            "[batch, M, K]: row-major M x K matrices, one after another".into(),
        )?,
        matrix(
            "B",
            "input",
            spec.input,
            &b_rows,
            match spec.layout_b {
                Layout::Row => "[batch, K, N]: row-major K x N matrices (N contiguous)".into(),
                Layout::Col => "[batch, N, K]: B stored column-major, N x K (K contiguous)".into(),
            },
        )?,
        matrix(
            "C",
            "output",
            spec.output,
            &c_rows,
            "[batch, M, N]: row-major M x N matrices".into(),
        )?,
    ];
    let ldw = p.workspace_ld(d.n);
    if split {
        buffers.push(EmitBuffer {
            name: "workspace".into(),
            role: "scratch".into(),
            dtype: DType::F32.as_str().into(),
            shape: vec![d.batch, u64::from(p.split_k), d.m, ldw],
            bytes: workspace_bytes,
            alignment_bytes: BUFFER_ALIGNMENT,
            layout: format!(
                "[batch, split_k, M, ldw]: fp32 partial products, rows of ldw = N rounded up to whole tiles of {} = {ldw}; need not be zeroed",
                p.block_n
            ),
        });
    }
    let c_bytes = buffers[2].bytes;

    // Every parameter is a name, a kind, its size and alignment and a note; each kind adds its
    // own fields to this.
    let param =
        |name: &str, kind: EmitParamKind, size_bytes: u32, align_bytes: u32, note: String| {
            EmitParam {
                name: name.into(),
                kind,
                size_bytes,
                align_bytes,
                tensor_map: None,
                buffer: None,
                bytes: None,
                value: None,
                float_value: None,
                note,
            }
        };
    let map = |name: &str, geometry: &TmaGeometry, operand: &str, note: String| EmitParam {
        tensor_map: Some(TensorMapEncoding {
            global_address: operand.into(),
            note,
            data_type: data_type.clone(),
            rank: 3,
            global_dim: geometry.dims.to_vec(),
            global_strides_bytes: geometry.strides_bytes.to_vec(),
            box_dim: geometry.boxes.to_vec(),
            element_strides: geometry.element_strides.to_vec(),
            interleave: enum_arg(TMA_INTERLEAVE, TMA_INTERLEAVE as u32),
            swizzle: enum_arg(TMA_SWIZZLE, TMA_SWIZZLE as u32),
            l2_promotion: enum_arg(TMA_L2_PROMOTION, TMA_L2_PROMOTION as u32),
            oob_fill: enum_arg(TMA_OOB_FILL, TMA_OOB_FILL as u32),
        }),
        ..param(
            name,
            EmitParamKind::TensorMap,
            TENSOR_MAP_BYTES,
            TENSOR_MAP_ALIGN,
            format!("tensor map of {operand}, by value"),
        )
    };
    let pointer = |name: &str, buffer: Option<&str>, bytes: u64, note: &str| EmitParam {
        buffer: buffer.map(Into::into),
        bytes: Some(bytes),
        ..param(name, EmitParamKind::DevicePointer, 8, 8, note.into())
    };
    let int = |name: &str, value: i32, note: &str| EmitParam {
        value: Some(i64::from(value)),
        ..param(name, EmitParamKind::I32, 4, 4, note.into())
    };
    let float = |name: &str, value: f32, note: &str| EmitParam {
        float_value: Some(f64::from(value)),
        ..param(name, EmitParamKind::F32, 4, 4, note.into())
    };
    let b_note = match spec.layout_b {
        Layout::Row => format!(
            "B (K x N, N contiguous): dims (N, K, batch); boxes of {} columns x {} rows",
            geometry_b.boxes[0], geometry_b.boxes[1]
        ),
        Layout::Col => format!(
            "B (stored N x K, K contiguous): dims (K, N, batch); boxes of {} columns x {} rows{}",
            geometry_b.boxes[0],
            geometry_b.boxes[1],
            if p.cluster_m > 1 {
                " (each block of a cluster loads its share of the tile's rows for both)"
            } else {
                ""
            }
        ),
    };
    let gemm_source = spec.source();
    let gemm_params = in_source_order(&gemm_source, KERNEL_NAME, vec![
        map(
            "tma_a",
            &geometry_a,
            "A",
            format!(
                "A (M x K, row-major): dims (K, M, batch); boxes of {} columns x {} rows",
                geometry_a.boxes[0], geometry_a.boxes[1]
            ),
        ),
        map("tma_b", &geometry_b, "B", b_note),
        pointer(
            "c",
            Some("C"),
            c_bytes,
            if split {
                "C (unused with split-K: the reduction writes it)"
            } else {
                "C"
            },
        ),
        if split {
            pointer(
                "partials",
                Some("workspace"),
                workspace_bytes,
                "the split-K workspace this kernel writes",
            )
        } else {
            pointer("partials", None, 0, "no split: null")
        },
        int("M", m, "rows of A and C"),
        int("N", n, "columns of B and C"),
        int("K", k, "the reduction dimension"),
        int("batch", batch, "matrices in the batch"),
        float(
            "alpha",
            1.0,
            "C = alpha A B: 1 for bf16 and f16 inputs; for fp8, the product of A's and B's per-tensor scales",
        ),
    ])
    .map_err(unsupported)?;
    let cluster_m = p.cluster_m.max(1);
    let smem = spec.dynamic_smem_bytes();
    let mut kernels = vec![EmitLaunch {
        entry_point: KERNEL_NAME.into(),
        source_file: GEMM_SOURCE_FILE.into(),
        cubin_file: GEMM_CUBIN_FILE.into(),
        cubin_sha256: sha256_hex(cubins.gemm),
        grid: [inputs.grid, 1, 1],
        block: [spec.threads(), 1, 1],
        cluster: [cluster_m, 1, 1],
        cluster_compiled_in: cluster_m > 1,
        dynamic_smem_bytes: smem,
        set_max_dynamic_smem: smem > DEFAULT_DYNAMIC_SMEM_BYTES,
        blocks_per_sm: Some(inputs.blocks_per_sm),
        params: gemm_params,
    }];
    if split {
        let reduce = cubins.reduce.ok_or_else(|| {
            unsupported("it splits K and the reduction kernel's cubin is missing".into())
        })?;
        let shape = SplitKShape {
            m: d.m,
            n: d.n,
            ldw,
            splits: p.split_k,
            batch: d.batch,
            out_bf16: spec.output == DType::Bf16,
        };
        let [_, _, ldw_arg, splits, _, out_bf16] =
            shape.int_args().map_err(|e| unsupported(e.to_string()))?;
        let cfg = shape.launch_config();
        kernels.push(EmitLaunch {
            entry_point: SPLITK_NAME.into(),
            source_file: REDUCE_SOURCE_FILE.into(),
            cubin_file: REDUCE_CUBIN_FILE.into(),
            cubin_sha256: sha256_hex(reduce),
            grid: [cfg.grid_dim.0, cfg.grid_dim.1, cfg.grid_dim.2],
            block: [cfg.block_dim.0, cfg.block_dim.1, cfg.block_dim.2],
            cluster: [1, 1, 1],
            cluster_compiled_in: false,
            dynamic_smem_bytes: cfg.shared_mem_bytes,
            set_max_dynamic_smem: false,
            blocks_per_sm: None,
            params: in_source_order(
                SPLITK_SOURCE,
                SPLITK_NAME,
                vec![
                    pointer(
                        "partials",
                        Some("workspace"),
                        workspace_bytes,
                        "the workspace the GEMM wrote",
                    ),
                    pointer("c", Some("C"), c_bytes, "C"),
                    int("M", m, "rows of C"),
                    int("N", n, "columns of C"),
                    int("ldw", ldw_arg, "row length of the workspace, fp32 elements"),
                    int("splits", splits, "split_k"),
                    int("batch", batch, "matrices in the batch"),
                    int("out_bf16", out_bf16, "1: C is bf16; 0: C is f16"),
                ],
            )
            .map_err(unsupported)?,
        });
    }
    Ok(EmittedKernel {
        schema_version: SCHEMA_VERSION,
        carver_version: env!("CARGO_PKG_VERSION").into(),
        target: "cuda-sm90".into(),
        device: inputs.device.clone(),
        problem: spec.stored_problem(d),
        // Plain integers and a bool: serializing them cannot fail.
        config: serde_json::to_value(p).unwrap_or(serde_json::Value::Null),
        label: spec.label(),
        measured_time_us: inputs.measured_time_s.map(|t| t * 1e6),
        cublas_time_us: inputs.cublas_time_s.map(|t| t * 1e6),
        build: EmitBuild {
            arch: GPU_ARCH.into(),
            compiler: format!("NVRTC {}.{}", cubins.nvrtc.0, cubins.nvrtc.1),
            options: options(),
        },
        buffers,
        workspace_bytes,
        kernels,
        grid_rule: grid_rule(inputs),
    })
}

/// The parameters of `entry` in `source`, in the order the source declares them, each from
/// `known` by name. The description follows the source that is compiled: a parameter the
/// emitter does not know, or one whose C type is not the kind it describes, is an error rather
/// than a launch that passes the wrong arguments.
fn in_source_order(
    source: &str,
    entry: &str,
    known: Vec<EmitParam>,
) -> Result<Vec<EmitParam>, String> {
    let declared = signature(source, entry)
        .ok_or_else(|| format!("the parameter list of {entry} cannot be read from its source"))?;
    declared
        .iter()
        .map(|(ty, name)| {
            let param = known.iter().find(|p| &p.name == name).ok_or_else(|| {
                format!(
                    "{entry} takes `{ty} {name}`, a parameter carver's emitter does not describe"
                )
            })?;
            if kind_of(ty) != Some(param.kind) {
                return Err(format!(
                    "{entry} declares `{ty} {name}`, which is not the {:?} the emitter describes",
                    param.kind
                ));
            }
            Ok(param.clone())
        })
        .collect()
}

/// The (C type, name) of each parameter of the `__global__` function `entry` in `source`.
fn signature(source: &str, entry: &str) -> Option<Vec<(String, String)>> {
    let global = source.find("__global__")?;
    let open = global + source[global..].find(&format!("{entry}("))? + entry.len() + 1;
    let close = open + source[open..].find(')')?;
    source[open..close]
        .split(',')
        .map(|param| {
            let param = param.trim();
            let name_at = param
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let (ty, name) = param.split_at(name_at);
            (!name.is_empty()).then(|| (ty.trim().to_string(), name.to_string()))
        })
        .collect()
}

/// What kind of launch argument a parameter of C type `ty` is.
fn kind_of(ty: &str) -> Option<EmitParamKind> {
    if ty.contains("TmaMap") {
        Some(EmitParamKind::TensorMap)
    } else if ty.contains('*') {
        Some(EmitParamKind::DevicePointer)
    } else {
        match ty.trim_start_matches("const ").trim() {
            "int" => Some(EmitParamKind::I32),
            "float" => Some(EmitParamKind::F32),
            _ => None,
        }
    }
}

fn enum_arg<T: std::fmt::Debug>(v: T, value: u32) -> EnumArg {
    EnumArg {
        name: format!("{v:?}"),
        value,
    }
}

/// Elements of the input type in 16 bytes, TMA's row alignment.
fn elements_per_16_bytes(input: DType) -> u32 {
    16 / input.bytes().clamp(1, 16)
}

fn product(dims: &[u64]) -> Option<u64> {
    dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// How the grids (and everything else size-dependent) follow the problem's sizes.
fn grid_rule(inputs: &EmitInputs) -> String {
    let spec = &inputs.spec;
    let p = &spec.params;
    let d = &inputs.dims;
    let cm = p.cluster_m.max(1);
    let units = spec.units(d.m, d.n, d.batch);
    let units_rule = format!(
        "units = ceil(ceil(M / {}) / {cm}) x ceil(N / {}) x {} (split_k) x batch",
        p.block_m, p.block_n, p.split_k
    );
    let mut rule = if p.persistent {
        let resident = inputs.device.sm_count * inputs.blocks_per_sm / cm;
        format!(
            "{KERNEL_NAME} is persistent: grid.x = {cm} x min(units, clusters resident at once), {units_rule}; resident clusters: SMs x blocks per SM / {cm} = {} x {} / {cm} = {resident}{}. Here: {units} units, {} blocks.",
            inputs.device.sm_count,
            inputs.blocks_per_sm,
            if cm > 1 {
                " at most (cuOccupancyMaxActiveClusters gives the exact number, which the tuning run used)"
            } else {
                ""
            },
            inputs.grid
        )
    } else {
        format!(
            "{KERNEL_NAME}: grid.x = {cm} x units, {units_rule}. Here: {units} units, {} blocks.",
            inputs.grid
        )
    };
    rule.push_str(&format!(
        " Any positive multiple of {cm} blocks computes the right result (each cluster loops over units); this grid is the one timed. For other sizes encode the maps with their dims and strides and pass the sizes; K needs at least {} blocks of {} (one per split), and rows of A and B must stay 16-byte aligned (K, and N for row-major B, multiples of {}).",
        p.split_k,
        p.block_k,
        elements_per_16_bytes(spec.input)
    ));
    if p.split_k > 1 {
        rule.push_str(&format!(
            " {SPLITK_NAME}: grid = (ceil(N / {}), min(batch x M, 65535), 1) ({SPLITK_THREADS} threads of {SPLITK_COLUMNS_PER_THREAD} columns a block), after the GEMM on the same stream; workspace = batch x {} x M x ldw x 4 bytes, ldw = ceil(N / {}) x {}.",
            SPLITK_THREADS * SPLITK_COLUMNS_PER_THREAD,
            p.split_k,
            p.block_n,
            p.block_n
        ));
    }
    rule
}

/// What a directory holds for [`write_emit`]: nothing yet, or carver's earlier emit with the
/// files it named.
fn inspect_target(path: &Path) -> Result<Vec<String>, EmitError> {
    let io = |action, source| EmitError::Io {
        action,
        path: path.to_path_buf(),
        source,
    };
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io("inspect", e)),
    };
    let foreign = |reason: &str| EmitError::NotCarvers {
        path: path.to_path_buf(),
        reason: reason.into(),
    };
    if !meta.is_dir() {
        return Err(foreign("exists and is not a directory"));
    }
    let launch = path.join(LAUNCH_FILE);
    let bytes = match read_at_most(&launch, MAX_LAUNCH_BYTES) {
        Ok(Found::Bytes(b)) => b,
        Ok(Found::Larger(_)) => {
            return Err(foreign(
                "its launch.json is larger than any carver writes, so carver did not write it",
            ));
        }
        Ok(Found::Nothing) => {
            let mut entries = std::fs::read_dir(path).map_err(|e| io("list", e))?;
            return match entries.next() {
                None => Ok(Vec::new()),
                Some(_) => Err(foreign("holds files and no launch.json of a carver emit")),
            };
        }
        Err(e) => return Err(io("read", e)),
    };
    let doc: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|_| foreign("its launch.json is not JSON, so carver did not write it"))?;
    let is_carvers = doc.get("schema_version").is_some_and(|v| v.is_u64())
        && doc.get("carver_version").is_some_and(|v| v.is_string())
        && doc.get("target").and_then(|v| v.as_str()) == Some("cuda-sm90");
    let Some(kernels) = doc
        .get("kernels")
        .and_then(|k| k.as_array())
        .filter(|_| is_carvers)
    else {
        return Err(foreign("its launch.json was not written by carver"));
    };
    // Only carver's own names are ever removed, whatever an edited file says.
    Ok(kernels
        .iter()
        .flat_map(|k| [k.get("source_file"), k.get("cubin_file")])
        .filter_map(|f| f.and_then(|f| f.as_str()))
        .filter(|f| CARVER_FILES.contains(f))
        .map(String::from)
        .collect())
}

/// Writes `doc` and `files` (name, content) into `root/<name>/`: a new or empty directory, or
/// carver's earlier emit, whose files this one replaces (and whose split-K files it removes when
/// it has none). Anything else there is refused and nothing is written.
pub fn write_emit(
    root: &Path,
    name: &str,
    doc: &EmittedKernel,
    files: &[(&str, &[u8])],
) -> Result<EmitWritten, EmitError> {
    let directory = root.join(name);
    let previous = inspect_target(&directory)?;
    let json = serde_json::to_vec_pretty(doc).map_err(|e| EmitError::Io {
        action: "serialize the description for",
        path: directory.join(LAUNCH_FILE),
        source: std::io::Error::other(e),
    })?;
    std::fs::create_dir_all(&directory).map_err(|source| EmitError::Io {
        action: "create",
        path: directory.clone(),
        source,
    })?;
    let mut written = Vec::with_capacity(files.len() + 1);
    let launch = [(LAUNCH_FILE, json.as_slice())];
    // launch.json last: until it is renamed in, the earlier description (or none) stands.
    for &(file, bytes) in files.iter().chain(&launch) {
        let path = directory.join(file);
        replace_file(&path, bytes).map_err(|source| EmitError::Io {
            action: "write",
            path,
            source,
        })?;
        written.push(file.to_string());
    }
    for stale in previous.iter().filter(|f| !written.contains(f)) {
        let path = directory.join(stale);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != ErrorKind::NotFound => {
                return Err(EmitError::Io {
                    action: "remove the earlier emit's",
                    path,
                    source: e,
                });
            }
            _ => {}
        }
    }
    Ok(EmitWritten {
        directory,
        files: written,
    })
}

/// Compiles the winner (through `cache`; `on_defect` hears of a cache entry that could not be
/// trusted) and, with split-K, the reduction, then writes them, their sources and `launch.json`
/// under `root` (see [`write_emit`]).
pub fn emit(
    root: &Path,
    cache: &KernelCache,
    inputs: &EmitInputs,
    on_defect: &dyn Fn(&CacheDefect),
) -> Result<EmitWritten, EmitError> {
    check_emittable(inputs)?;
    let spec = &inputs.spec;
    let gemm = cache
        .get_or_compile(spec, on_defect)
        .map_err(EmitError::Build)?;
    let reduce = if spec.params.split_k > 1 {
        Some(
            compile_source(SPLITK_SOURCE, SPLITK_NAME)
                .map_err(EmitError::Build)?
                .0,
        )
    } else {
        None
    };
    let nvrtc = nvrtc_version().map_err(EmitError::Build)?;
    let doc = describe(
        inputs,
        EmitCubins {
            gemm: &gemm.cubin,
            reduce: reduce.as_deref(),
            nvrtc,
        },
    )?;
    let source = spec.source();
    let mut files: Vec<(&str, &[u8])> = vec![
        (GEMM_SOURCE_FILE, source.as_bytes()),
        (GEMM_CUBIN_FILE, &gemm.cubin),
    ];
    if let Some(reduce) = &reduce {
        files.push((REDUCE_SOURCE_FILE, SPLITK_SOURCE.as_bytes()));
        files.push((REDUCE_CUBIN_FILE, reduce));
    }
    write_emit(root, &emit_dir_name(spec, &inputs.dims), &doc, &files)
}

#[cfg(test)]
mod tests {
    use carver::family::Sm90Params;

    use super::*;

    fn spec(
        (block_m, block_n, consumers): (u32, u32, u32),
        cluster_m: u32,
        persistent: bool,
        split_k: u32,
        layout_b: Layout,
        dtype: DType,
    ) -> KernelSpec {
        let base = crate::sm90::test_spec(block_m, block_n, consumers, layout_b);
        KernelSpec {
            params: Sm90Params {
                cluster_m,
                persistent,
                split_k,
                ..base.params
            },
            input: dtype,
            output: dtype,
            ..base
        }
    }

    fn inputs(spec: KernelSpec, (m, n, k, batch): (u64, u64, u64, u64), grid: u32) -> EmitInputs {
        EmitInputs {
            spec,
            dims: GemmDims { m, n, k, batch },
            device: EmitDevice {
                name: "NVIDIA H100 80GB HBM3".into(),
                compute_capability: "9.0".into(),
                sm_count: 132,
            },
            grid,
            blocks_per_sm: 1,
            measured_time_s: Some(12.5e-6),
            cublas_time_s: Some(14e-6),
        }
    }

    const GEMM: &[u8] = b"\x7fELF gemm";
    const REDUCE: &[u8] = b"\x7fELF reduce";

    fn cubins() -> EmitCubins<'static> {
        EmitCubins {
            gemm: GEMM,
            reduce: Some(REDUCE),
            nvrtc: (13, 0),
        }
    }

    fn names(params: &[EmitParam]) -> Vec<&str> {
        params.iter().map(|p| p.name.as_str()).collect()
    }

    fn map(params: &[EmitParam], name: &str) -> TensorMapEncoding {
        let p = params.iter().find(|p| p.name == name).unwrap();
        assert_eq!(p.kind, EmitParamKind::TensorMap);
        assert_eq!((p.size_bytes, p.align_bytes), (128, 64));
        p.tensor_map.clone().unwrap()
    }

    fn value(params: &[EmitParam], name: &str) -> i64 {
        let p = params.iter().find(|p| p.name == name).unwrap();
        assert_eq!(p.kind, EmitParamKind::I32, "{name}");
        p.value.unwrap()
    }

    fn pointer(params: &[EmitParam], name: &str) -> (Option<String>, u64) {
        let p = params.iter().find(|p| p.name == name).unwrap();
        assert_eq!(p.kind, EmitParamKind::DevicePointer, "{name}");
        (p.buffer.clone(), p.bytes.unwrap())
    }

    #[test]
    fn row_major_b_is_one_launch_with_the_tuned_grid_and_maps() {
        // Unequal M, N and K, so that a swapped dimension shows.
        let s = spec((128, 256, 2), 1, false, 1, Layout::Row, DType::Bf16);
        let doc = describe(&inputs(s, (1000, 3072, 512, 1), 8 * 12), cubins()).unwrap();
        assert_eq!(doc.schema_version, SCHEMA_VERSION);
        assert_eq!(doc.kernels.len(), 1);
        assert_eq!(doc.workspace_bytes, 0);
        let k = &doc.kernels[0];
        assert_eq!(k.entry_point, KERNEL_NAME);
        assert_eq!(
            (k.grid, k.block, k.cluster),
            ([96, 1, 1], [384, 1, 1], [1, 1, 1])
        );
        assert!(!k.cluster_compiled_in);
        assert_eq!(k.dynamic_smem_bytes, 4 * (128 + 256) * 64 * 2 + 1024);
        assert!(k.set_max_dynamic_smem);
        assert_eq!(k.cubin_sha256, sha256_hex(GEMM));
        // The order launch.rs passes them in (a parameter added at the end, e.g. alpha, follows).
        assert_eq!(
            names(&k.params)[..8],
            ["tma_a", "tma_b", "c", "partials", "M", "N", "K", "batch"]
        );
        let a = map(&k.params, "tma_a");
        assert_eq!(a.global_address, "A");
        assert_eq!(a.rank, 3);
        assert_eq!(a.global_dim, [512, 1000, 1]);
        assert_eq!(a.global_strides_bytes, [1024, 1000 * 512 * 2]);
        assert_eq!(a.box_dim, [64, 128, 1]);
        assert_eq!(a.element_strides, [1, 1, 1]);
        assert_eq!(
            (a.data_type.name.as_str(), a.data_type.value),
            ("CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", 9)
        );
        assert_eq!(
            (a.swizzle.name.as_str(), a.swizzle.value),
            ("CU_TENSOR_MAP_SWIZZLE_128B", 3)
        );
        assert_eq!(
            (a.l2_promotion.name.as_str(), a.l2_promotion.value),
            ("CU_TENSOR_MAP_L2_PROMOTION_L2_256B", 3)
        );
        assert_eq!(
            (a.interleave.value, a.oob_fill.value),
            (0, 0),
            "{:?} {:?}",
            a.interleave,
            a.oob_fill
        );
        let b = map(&k.params, "tma_b");
        assert_eq!(b.global_address, "B");
        // K x N, N contiguous: 64-column boxes, block K rows.
        assert_eq!(b.global_dim, [3072, 512, 1]);
        assert_eq!(b.global_strides_bytes, [3072 * 2, 512 * 3072 * 2]);
        assert_eq!(b.box_dim, [64, 64, 1]);
        assert_eq!(pointer(&k.params, "c"), (Some("C".into()), 1000 * 3072 * 2));
        assert_eq!(pointer(&k.params, "partials"), (None, 0));
        for (name, v) in [("M", 1000), ("N", 3072), ("K", 512), ("batch", 1)] {
            assert_eq!(value(&k.params, name), v);
        }
        let shapes: Vec<(&str, &[u64], u64)> = doc
            .buffers
            .iter()
            .map(|b| (b.name.as_str(), b.shape.as_slice(), b.bytes))
            .collect();
        assert_eq!(
            shapes,
            [
                ("A", &[1, 1000, 512][..], 1000 * 512 * 2),
                ("B", &[1, 512, 3072][..], 512 * 3072 * 2),
                ("C", &[1, 1000, 3072][..], 1000 * 3072 * 2),
            ]
        );
        assert_eq!(doc.problem.layout_b, "row");
        assert_eq!(doc.config, serde_json::to_value(s.params).unwrap());
        assert_eq!(doc.measured_time_us, Some(12.5));
        assert!(doc.grid_rule.contains("ceil(M / 128)"), "{}", doc.grid_rule);
        assert!(!doc.grid_rule.contains("splitk"), "{}", doc.grid_rule);
    }

    #[test]
    fn column_major_b_with_clusters_and_a_batch() {
        let s = spec((128, 144, 2), 2, true, 1, Layout::Col, DType::F16);
        // ceil(ceil(777 / 128) / 2) = 4 cluster rows x ceil(1000 / 144) = 7 x 2 matrices.
        let units = 4 * 7 * 2;
        let dims = (777, 1000, 304, 2);
        let doc = describe(&inputs(s, dims, 2 * units), cubins()).unwrap();
        let k = &doc.kernels[0];
        assert_eq!((k.grid, k.cluster), ([112, 1, 1], [2, 1, 1]));
        assert!(k.cluster_compiled_in);
        let a = map(&k.params, "tma_a");
        assert_eq!(a.global_dim, [304, 777, 2]);
        assert_eq!(a.global_strides_bytes, [608, 777 * 304 * 2]);
        assert_eq!(a.data_type.value, 6, "{:?}", a.data_type);
        let b = map(&k.params, "tma_b");
        // Stored N x K: K contiguous; each block of a pair loads half of the tile's rows.
        assert_eq!(b.global_dim, [304, 1000, 2]);
        assert_eq!(b.global_strides_bytes, [608, 1000 * 304 * 2]);
        assert_eq!(b.box_dim, [64, 72, 1]);
        assert_eq!(value(&k.params, "batch"), 2);
        assert_eq!(doc.buffers[1].shape, [2, 1000, 304]);
        assert_eq!(doc.buffers[2].dtype, "f16");
        assert_eq!(doc.buffers[2].bytes, 2 * 777 * 1000 * 2);
        assert!(doc.grid_rule.contains("persistent"), "{}", doc.grid_rule);
        // A persistent grid may be smaller (fewer clusters resident), never larger, and is
        // made of whole clusters.
        assert!(describe(&inputs(s, dims, 100), cubins()).is_ok());
        for wrong in [0, 111, 114] {
            let e = describe(&inputs(s, dims, wrong), cubins()).unwrap_err();
            assert!(matches!(e, EmitError::Unsupported { .. }), "{wrong}: {e}");
        }
        assert_eq!(
            emit_dir_name(
                &s,
                &GemmDims {
                    m: 777,
                    n: 1000,
                    k: 304,
                    batch: 2
                }
            ),
            "777x1000x304_batch2_f16_rc"
        );
    }

    #[test]
    fn a_non_persistent_grid_is_one_block_per_tile_and_split() {
        let s = spec((128, 128, 1), 1, false, 1, Layout::Row, DType::Bf16);
        let dims = (512, 512, 512, 1);
        assert!(describe(&inputs(s, dims, 16), cubins()).is_ok());
        let e = describe(&inputs(s, dims, 15), cubins()).unwrap_err();
        assert!(e.to_string().contains("one block per tile"), "{e}");
    }

    #[test]
    fn split_k_adds_the_reduction_and_its_workspace() {
        let s = spec((64, 128, 1), 1, false, 4, Layout::Row, DType::Bf16);
        // 1 row tile x 32 column tiles x 4 splits x 3 matrices.
        let dims = (1, 4096, 8192, 3);
        let doc = describe(&inputs(s, dims, 384), cubins()).unwrap();
        let workspace = 3 * 4 * 4096 * 4;
        assert_eq!(doc.workspace_bytes, workspace);
        let ws = doc.buffers.iter().find(|b| b.name == "workspace").unwrap();
        assert_eq!(
            (ws.shape.as_slice(), ws.dtype.as_str()),
            (&[3, 4, 1, 4096][..], "f32")
        );
        assert_eq!(doc.kernels.len(), 2);
        let gemm = &doc.kernels[0];
        assert_eq!(gemm.grid, [384, 1, 1]);
        assert_eq!(
            pointer(&gemm.params, "partials"),
            (Some("workspace".into()), workspace)
        );
        let reduce = &doc.kernels[1];
        assert_eq!(reduce.entry_point, SPLITK_NAME);
        assert_eq!(
            (reduce.source_file.as_str(), reduce.cubin_file.as_str()),
            (REDUCE_SOURCE_FILE, REDUCE_CUBIN_FILE)
        );
        assert_eq!(reduce.cubin_sha256, sha256_hex(REDUCE));
        // 4096 columns, 1024 a block (256 threads of 4); 3 rows (one per matrix).
        assert_eq!((reduce.grid, reduce.block), ([4, 3, 1], [256, 1, 1]));
        assert_eq!(reduce.dynamic_smem_bytes, 0);
        assert_eq!(
            names(&reduce.params),
            [
                "partials", "c", "M", "N", "ldw", "splits", "batch", "out_bf16"
            ]
        );
        assert_eq!(
            pointer(&reduce.params, "partials"),
            (Some("workspace".into()), workspace)
        );
        assert_eq!(
            pointer(&reduce.params, "c"),
            (Some("C".into()), 3 * 4096 * 2)
        );
        for (name, v) in [
            ("M", 1),
            ("N", 4096),
            ("ldw", 4096),
            ("splits", 4),
            ("batch", 3),
            ("out_bf16", 1),
        ] {
            assert_eq!(value(&reduce.params, name), v, "{name}");
        }
        assert!(doc.grid_rule.contains(SPLITK_NAME), "{}", doc.grid_rule);

        // Ragged N: the workspace rows are whole tiles; f16 output.
        let s = spec((64, 128, 1), 1, false, 2, Layout::Col, DType::F16);
        let doc = describe(&inputs(s, (1, 1000, 4096, 1), 16), cubins()).unwrap();
        let reduce = &doc.kernels[1];
        assert_eq!(value(&reduce.params, "ldw"), 1024);
        assert_eq!(value(&reduce.params, "out_bf16"), 0);
        assert_eq!(doc.workspace_bytes, 2 * 1024 * 4);

        // Without the reduction's cubin the description is refused, not half written.
        let mut no_reduce = cubins();
        no_reduce.reduce = None;
        assert!(describe(&inputs(s, (1, 1000, 4096, 1), 16), no_reduce).is_err());
        // More splits than K blocks.
        let e = describe(&inputs(s, (1, 1000, 64, 1), 16), cubins()).unwrap_err();
        assert!(e.to_string().contains("split_k"), "{e}");
    }

    #[test]
    fn rows_that_need_the_padded_copies_are_refused() {
        let rr = spec((128, 128, 1), 1, true, 1, Layout::Row, DType::Bf16);
        let rc = spec((128, 128, 1), 1, true, 1, Layout::Col, DType::Bf16);
        let e = describe(&inputs(rr, (333, 777, 999, 1), 1), cubins()).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, EmitError::UnalignedRows { .. }), "{text}");
        for part in ["K = 999", "N = 777", "multiples of 8", "unaffected"] {
            assert!(text.contains(part), "{part}: {text}");
        }
        let e = describe(&inputs(rr, (333, 777, 1000, 1), 1), cubins()).unwrap_err();
        assert!(!e.to_string().contains("K = "), "{e}");
        // Column-major B's rows are K long: N does not matter, nor do C's rows.
        assert!(describe(&inputs(rc, (333, 777, 1000, 1), 1), cubins()).is_ok());
        let e = describe(&inputs(rc, (333, 777, 998, 1), 1), cubins()).unwrap_err();
        assert!(e.to_string().contains("column-major B"), "{e}");
    }

    #[test]
    fn every_parameter_the_sources_declare_is_described_in_order() {
        let s = spec((64, 128, 1), 1, false, 2, Layout::Col, DType::Bf16);
        let doc = describe(&inputs(s, (64, 1024, 1024, 1), 16), cubins()).unwrap();
        for (kernel, source) in doc.kernels.iter().zip([s.source().as_str(), SPLITK_SOURCE]) {
            let declared = signature(source, &kernel.entry_point).unwrap();
            assert!(declared.len() >= 8, "{declared:?}");
            assert_eq!(
                declared.len(),
                kernel.params.len(),
                "{}",
                kernel.entry_point
            );
            for ((ty, name), param) in declared.iter().zip(&kernel.params) {
                assert_eq!(name, &param.name);
                assert_eq!(kind_of(ty), Some(param.kind), "{ty} {name}");
            }
        }
        if let Some(alpha) = doc.kernels[0].params.iter().find(|p| p.name == "alpha") {
            assert_eq!(alpha.float_value, Some(1.0));
        }
    }

    #[test]
    fn a_parameter_the_emitter_does_not_describe_is_refused() {
        let known = || {
            vec![EmitParam {
                name: "n".into(),
                kind: EmitParamKind::I32,
                size_bytes: 4,
                align_bytes: 4,
                tensor_map: None,
                buffer: None,
                bytes: None,
                value: Some(3),
                float_value: None,
                note: String::new(),
            }]
        };
        let source =
            |params: &str| format!("// f(int n)\nextern \"C\" __global__ void f({params}) {{}}");
        assert_eq!(
            in_source_order(&source("int n"), "f", known())
                .unwrap()
                .len(),
            1
        );
        let e = in_source_order(&source("int n, float scale"), "f", known()).unwrap_err();
        assert!(e.contains("`float scale`"), "{e}");
        let e = in_source_order(&source("const float* n"), "f", known()).unwrap_err();
        assert!(e.contains("not the I32"), "{e}");
        assert!(in_source_order("no kernel here", "f", known()).is_err());
        assert_eq!(
            signature(
                &source("const __grid_constant__ TmaMap m, u16* __restrict__ c, int k"),
                "f"
            ),
            Some(vec![
                ("const __grid_constant__ TmaMap".into(), "m".into()),
                ("u16* __restrict__".into(), "c".into()),
                ("int".into(), "k".into())
            ])
        );
    }

    #[test]
    fn the_description_reads_back_as_the_schemas_document() {
        let s = spec((64, 128, 1), 2, true, 3, Layout::Col, DType::Bf16);
        let doc = describe(&inputs(s, (256, 512, 1024, 2), 64), cubins()).unwrap();
        let text = serde_json::to_string_pretty(&doc).unwrap();
        let back: EmittedKernel = serde_json::from_str(&text).unwrap();
        assert_eq!(back, doc);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["kernels"][0]["params"][0]["kind"], "tensor_map");
        assert_eq!(v["kernels"][0]["params"][2]["kind"], "device_pointer");
        assert_eq!(v["kernels"][0]["params"][4]["kind"], "i32");
        assert_eq!(v["build"]["arch"], "sm_90a");
    }

    fn tree(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn an_emit_replaces_carvers_own_files_and_refuses_anything_else() {
        let root = tempfile::tempdir().unwrap();
        let split = spec((64, 128, 1), 1, false, 4, Layout::Row, DType::Bf16);
        let split_doc = describe(&inputs(split, (1, 4096, 8192, 1), 128), cubins()).unwrap();
        let all: [(&str, &[u8]); 4] = [
            (GEMM_SOURCE_FILE, b"// gemm"),
            (GEMM_CUBIN_FILE, GEMM),
            (REDUCE_SOURCE_FILE, b"// reduce"),
            (REDUCE_CUBIN_FILE, REDUCE),
        ];
        let w = write_emit(root.path(), "shape", &split_doc, &all).unwrap();
        assert_eq!(w.directory, root.path().join("shape"));
        assert_eq!(w.files.last().map(String::as_str), Some(LAUNCH_FILE));
        assert_eq!(
            tree(&w.directory),
            [
                "kernel.cu",
                "kernel.cubin",
                "launch.json",
                "splitk_reduce.cu",
                "splitk_reduce.cubin"
            ]
        );
        let back: EmittedKernel =
            serde_json::from_slice(&std::fs::read(w.directory.join(LAUNCH_FILE)).unwrap()).unwrap();
        assert_eq!(back, split_doc);
        assert_eq!(
            std::fs::read(w.directory.join(GEMM_CUBIN_FILE)).unwrap(),
            GEMM
        );

        // Emitting again without a split: carver's split-K files go, the user's file stays.
        std::fs::write(w.directory.join("notes.txt"), "mine").unwrap();
        let plain = spec((128, 128, 1), 1, false, 1, Layout::Row, DType::Bf16);
        let plain_doc = describe(&inputs(plain, (128, 4096, 8192, 1), 32), cubins()).unwrap();
        write_emit(root.path(), "shape", &plain_doc, &all[..2]).unwrap();
        assert_eq!(
            tree(&w.directory),
            ["kernel.cu", "kernel.cubin", "launch.json", "notes.txt"]
        );

        // A directory carver did not write is left as it is.
        let foreign = root.path().join("theirs");
        std::fs::create_dir(&foreign).unwrap();
        std::fs::write(foreign.join("kernel.cu"), "their kernel").unwrap();
        let e = write_emit(root.path(), "theirs", &plain_doc, &all[..2]).unwrap_err();
        assert!(matches!(e, EmitError::NotCarvers { .. }), "{e}");
        assert!(e.to_string().contains("no launch.json"), "{e}");
        assert_eq!(tree(&foreign), ["kernel.cu"]);
        assert_eq!(
            std::fs::read_to_string(foreign.join("kernel.cu")).unwrap(),
            "their kernel"
        );
        for launch in ["{\"hello\": 1}", "not json", "{\"schema_version\": 1}"] {
            std::fs::write(foreign.join(LAUNCH_FILE), launch).unwrap();
            let e = write_emit(root.path(), "theirs", &plain_doc, &all[..2]).unwrap_err();
            assert!(
                e.to_string().contains("carver did not write it")
                    || e.to_string().contains("not written by carver"),
                "{launch}: {e}"
            );
            assert_eq!(
                std::fs::read_to_string(foreign.join("kernel.cu")).unwrap(),
                "their kernel"
            );
        }
        // A file where the directory would go.
        std::fs::write(root.path().join("a_file"), "x").unwrap();
        let e = write_emit(root.path(), "a_file", &plain_doc, &all[..2]).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
        // An empty directory is taken.
        std::fs::create_dir(root.path().join("empty")).unwrap();
        write_emit(root.path(), "empty", &plain_doc, &all[..2]).unwrap();
        // No temporary file is left anywhere.
        for dir in [w.directory.clone(), root.path().join("empty"), foreign] {
            assert!(tree(&dir).iter().all(|f| !f.ends_with(".tmp")), "{dir:?}");
        }
    }

    #[test]
    fn the_emit_root_is_checked_without_creating_it() {
        let root = tempfile::tempdir().unwrap();
        let missing = root.path().join("not/yet");
        check_emit_root(&missing).unwrap();
        assert!(!missing.exists());
        check_emit_root(root.path()).unwrap();
        let file = root.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let e = check_emit_root(&file).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
    }
}
