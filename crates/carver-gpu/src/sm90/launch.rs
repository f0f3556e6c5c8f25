//! Loading a compiled `cuda-sm90` cubin, building its TMA tensor maps and launching it.

use std::sync::Arc;

use carver::Layout;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg, sys,
};
use cudarc::nvrtc::Ptx;

use carver::family::ROW_MAJOR_B_BOX_COLUMNS;

use super::{KERNEL_NAME, KernelSpec, OperandRows};
use crate::driver::driver_err;
use crate::error::GpuError;

/// A tensor map, passed to the kernel by value as a `__grid_constant__` parameter.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct TmaMap(pub sys::CUtensorMap);

// SAFETY: a plain 128-byte, 64-byte-aligned (128 under CUDA 13) value; the kernel declares the
// parameter as a 128-byte struct.
unsafe impl DeviceRepr for TmaMap {}

/// The geometry of one operand's 3-D tensor map, as `cuTensorMapEncodeTiled` takes it (every
/// array innermost first): the one definition both the launch here and `carver tune --emit`'s
/// description use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmaGeometry {
    /// `batch` stacked copies of the operand: (columns, rows, matrices). The true extents: TMA
    /// zero-fills past them, so a padded copy's padding is never read.
    pub dims: [u64; 3],
    /// Byte strides of the row and matrix dimensions (the inner one is contiguous).
    pub strides_bytes: [u64; 2],
    /// The box the kernel loads: inner x outer x 1.
    pub boxes: [u32; 3],
    pub element_strides: [u32; 3],
}

impl TmaGeometry {
    /// A map over `batch` stacked copies of the operand `rows` describes, of `elem_bytes`-byte
    /// elements, loading boxes of `box_inner` x `box_outer` x 1.
    pub fn new(
        rows: &OperandRows,
        elem_bytes: u32,
        batch: u64,
        box_inner: u32,
        box_outer: u32,
    ) -> Self {
        let e = u64::from(elem_bytes);
        Self {
            dims: [rows.cols, rows.rows, batch],
            strides_bytes: [rows.ld * e, rows.rows * rows.ld * e],
            boxes: [box_inner, box_outer, 1],
            element_strides: [1, 1, 1],
        }
    }
}

/// The encoding options every map of the family uses, besides its data type.
pub const TMA_INTERLEAVE: sys::CUtensorMapInterleave =
    sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE;
pub const TMA_SWIZZLE: sys::CUtensorMapSwizzle =
    sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B;
pub const TMA_L2_PROMOTION: sys::CUtensorMapL2promotion =
    sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
pub const TMA_OOB_FILL: sys::CUtensorMapFloatOOBfill =
    sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;

/// The tensor map data type of the kernel's inputs.
pub fn tma_data_type(input: carver::DType) -> Result<sys::CUtensorMapDataType, GpuError> {
    match input {
        carver::DType::Bf16 => Ok(sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16),
        carver::DType::F16 => Ok(sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16),
        // TMA only moves fp8's bytes; the kernel's wgmma reads them as e4m3 or e5m2.
        carver::DType::E4m3 | carver::DType::E5m2 => {
            Ok(sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8)
        }
        other => Err(GpuError::Unsupported {
            what: format!("{other} inputs"),
            reason: "the cuda-sm90 kernel reads bf16, f16, e4m3 or e5m2".into(),
        }),
    }
}

/// Encodes the map `geometry` describes over the operand at `ptr`.
fn encode_3d(
    input: carver::DType,
    ptr: sys::CUdeviceptr,
    geometry: &TmaGeometry,
    what: &'static str,
) -> Result<TmaMap, GpuError> {
    let dtype = tma_data_type(input)?;
    let mut map = TmaMap(sys::CUtensorMap { opaque: [0; 16] });
    // SAFETY: every array has the length rank 3 needs; `map` is 64-byte aligned and 128 bytes.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map.0,
            dtype,
            3,
            ptr as *mut _,
            geometry.dims.as_ptr(),
            geometry.strides_bytes.as_ptr(),
            geometry.boxes.as_ptr(),
            geometry.element_strides.as_ptr(),
            TMA_INTERLEAVE,
            TMA_SWIZZLE,
            TMA_L2_PROMOTION,
            TMA_OOB_FILL,
        )
    }
    .result()
    .map_err(|source| GpuError::Driver { call: what, source })?;
    Ok(map)
}

/// The box the kernel loads of each operand, (inner, outer) elements: A's is block K x block M;
/// B's is block K x block N (in a cluster each CTA loads its share of the rows) when B is
/// stored N x K, else 64 columns x block K.
pub fn tma_boxes(spec: &KernelSpec) -> ((u32, u32), (u32, u32)) {
    let p = &spec.params;
    let b = match spec.layout_b {
        Layout::Col => (p.block_k, p.block_n / p.cluster_m.max(1)),
        Layout::Row => (ROW_MAJOR_B_BOX_COLUMNS, p.block_k),
    };
    ((p.block_k, p.block_m), b)
}

/// The geometry of A's and B's tensor maps for `batch` stacked operands laid out as `a` and `b`
/// say, with the boxes the kernel loads.
pub fn tma_geometry(
    spec: &KernelSpec,
    a: &OperandRows,
    b: &OperandRows,
    batch: u64,
) -> (TmaGeometry, TmaGeometry) {
    let (box_a, box_b) = tma_boxes(spec);
    (
        TmaGeometry::new(a, spec.input.bytes(), batch, box_a.0, box_a.1),
        TmaGeometry::new(b, spec.input.bytes(), batch, box_b.0, box_b.1),
    )
}

/// Tensor maps of `batch` stacked A (row-major M x K) and B (row-major K x N, or N x K when
/// `layout_b` is column-major), with the boxes the kernel loads. `a` and `b` say how each matrix
/// is laid out where `a_ptr` and `b_ptr` point (see [`operand_rows`](super::operand_rows)):
/// every `ld` must be a multiple of 8 elements, so an operand whose rows are not points at its
/// padded copy; matrix i starts `rows x ld` elements after matrix i - 1.
pub fn encode_tma_maps(
    spec: &KernelSpec,
    a_ptr: sys::CUdeviceptr,
    b_ptr: sys::CUdeviceptr,
    a: &OperandRows,
    b: &OperandRows,
    batch: u64,
) -> Result<(TmaMap, TmaMap), GpuError> {
    let (geometry_a, geometry_b) = tma_geometry(spec, a, b, batch);
    let map_a = encode_3d(spec.input, a_ptr, &geometry_a, "cuTensorMapEncodeTiled(A)")?;
    let map_b = encode_3d(spec.input, b_ptr, &geometry_b, "cuTensorMapEncodeTiled(B)")?;
    Ok((map_a, map_b))
}

/// Where the GEMM writes: C (16-bit), and with split-K the fp32 workspace (0 without).
#[derive(Clone, Copy, Debug)]
pub struct GemmOutput {
    pub c: sys::CUdeviceptr,
    pub partials: sys::CUdeviceptr,
}

/// The sizes the kernel takes: `batch` products of M x K and K x N.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmDims {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub batch: u64,
}

impl GemmDims {
    /// The kernel's int parameters (M, N, K, batch), each below 2^31.
    pub fn int_args(&self) -> Result<[i32; 4], GpuError> {
        let dim = |v: u64| {
            i32::try_from(v).map_err(|_| GpuError::Unsupported {
                what: format!("a size of {v}"),
                reason: "the cuda-sm90 kernel takes sizes below 2^31".into(),
            })
        };
        Ok([dim(self.m)?, dim(self.n)?, dim(self.k)?, dim(self.batch)?])
    }
}

/// A cubin loaded on a device, ready to launch.
pub struct LoadedKernel {
    pub spec: KernelSpec,
    _module: Arc<CudaModule>,
    function: CudaFunction,
    /// Registers per thread and local memory per thread, as the loaded function reports them.
    pub registers: u32,
    pub local_bytes: u32,
    /// Blocks of this kernel that fit on one SM at once.
    pub blocks_per_sm: u32,
    /// Clusters of this kernel that can be resident on the GPU at once (for clusters of one
    /// CTA: blocks per SM x SMs is used instead).
    pub max_active_clusters: Option<u32>,
}

/// One of the family's helper kernels (the repack copy, the split-K reduction), compiled from
/// its source with NVRTC and loaded: the module it lives in is kept with it.
pub(crate) struct HelperKernel {
    _module: Arc<CudaModule>,
    pub(crate) function: CudaFunction,
}

impl HelperKernel {
    pub(crate) fn load(ctx: &Arc<CudaContext>, source: &str, name: &str) -> Result<Self, GpuError> {
        let (cubin, _log) = super::compile::compile_source(source, name)?;
        let (module, function) = load_function(ctx, cubin, name)?;
        Ok(Self {
            _module: module,
            function,
        })
    }
}

/// Loads a cubin into the context and finds its kernel `name`; the module must outlive the
/// function.
pub(crate) fn load_function(
    ctx: &Arc<CudaContext>,
    cubin: Vec<u8>,
    name: &str,
) -> Result<(Arc<CudaModule>, CudaFunction), GpuError> {
    let module = ctx
        .load_module(Ptx::from_binary(cubin))
        .map_err(driver_err("cuModuleLoadData"))?;
    let function = module
        .load_function(name)
        .map_err(driver_err("cuModuleGetFunction"))?;
    Ok((module, function))
}

impl LoadedKernel {
    pub fn load(
        ctx: &Arc<CudaContext>,
        spec: &KernelSpec,
        cubin: Vec<u8>,
    ) -> Result<Self, GpuError> {
        let (module, function) = load_function(ctx, cubin, KERNEL_NAME)?;
        let smem = spec.dynamic_smem_bytes();
        function
            .set_attribute(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem as i32,
            )
            .map_err(driver_err(
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
            ))?;
        let registers = function
            .num_regs()
            .map_err(driver_err("cuFuncGetAttribute(NUM_REGS)"))? as u32;
        let local_bytes = function
            .local_size_bytes()
            .map_err(driver_err("cuFuncGetAttribute(LOCAL_SIZE_BYTES)"))?
            as u32;
        let blocks_per_sm = function
            .occupancy_max_active_blocks_per_multiprocessor(spec.threads(), smem as usize, None)
            .map_err(driver_err("cuOccupancyMaxActiveBlocksPerMultiprocessor"))?;
        if blocks_per_sm == 0 {
            return Err(GpuError::NotPlaceable {
                config: spec.label(),
                reason: format!(
                    "no block fits on an SM ({} threads, {} B shared memory, {} registers)",
                    spec.threads(),
                    smem,
                    registers
                ),
            });
        }
        let max_active_clusters = None;
        Ok(Self {
            spec: *spec,
            _module: module,
            function,
            registers,
            local_bytes,
            blocks_per_sm,
            max_active_clusters,
        })
    }

    /// Asks the driver how many clusters of this kernel fit on the GPU at once (its compiled-in
    /// cluster shape); needed for a persistent grid of clusters.
    pub fn query_cluster_occupancy(&mut self, stream: &Arc<CudaStream>) -> Result<(), GpuError> {
        if self.spec.params.cluster_m <= 1 {
            return Ok(());
        }
        let cfg = LaunchConfig {
            grid_dim: (self.spec.params.cluster_m, 1, 1),
            block_dim: (self.spec.threads(), 1, 1),
            shared_mem_bytes: self.spec.dynamic_smem_bytes(),
        };
        let n = self
            .function
            .occupancy_max_active_clusters(cfg, stream)
            .map_err(driver_err("cuOccupancyMaxActiveClusters"))?;
        if n == 0 {
            return Err(GpuError::NotPlaceable {
                config: self.spec.label(),
                reason: "the driver reports that no cluster of this kernel fits on the GPU".into(),
            });
        }
        self.max_active_clusters = Some(n);
        Ok(())
    }

    /// Blocks to launch for `batch` M x N products: one per tile and K split (rounded up to
    /// whole clusters), or at most one wave for a persistent kernel.
    pub fn grid(&self, m: u64, n: u64, batch: u64, sms: u32) -> Result<u32, GpuError> {
        let cluster = u64::from(self.spec.params.cluster_m.max(1));
        let units = self.spec.units(m, n, batch);
        let resident_units = match self.max_active_clusters {
            Some(c) => u64::from(c),
            None => u64::from(sms) * u64::from(self.blocks_per_sm) / cluster,
        };
        let blocks = if self.spec.params.persistent {
            units.min(resident_units.max(1)) * cluster
        } else {
            units * cluster
        };
        u32::try_from(blocks)
            .ok()
            .filter(|&b| b < (1 << 31))
            .ok_or_else(|| GpuError::NotPlaceable {
                config: self.spec.label(),
                reason: format!("{blocks} blocks exceed the grid limit"),
            })
    }

    /// Launches the GEMM on `stream` (asynchronous): C = alpha A B for each of the `batch`
    /// matrices (`alpha`: fp8's per-tensor scales multiplied; 1 for 16-bit inputs), or with
    /// split-K the scaled partial products into `partials` (sum them with
    /// [`SplitKReduce`](super::SplitKReduce)).
    ///
    /// # Safety
    /// `maps` must describe live A and B buffers (or their padded copies) of `batch` M x K and
    /// K x N problems; `c` must point to at least batch x M x N 16-bit elements, and with
    /// split-K `partials` to the workspace
    /// ([`Sm90Params::workspace_bytes`](carver::family::Sm90Params::workspace_bytes)), all on
    /// `stream`'s device.
    pub unsafe fn launch(
        &self,
        stream: &Arc<CudaStream>,
        maps: &(TmaMap, TmaMap),
        out: GemmOutput,
        dims: GemmDims,
        alpha: f32,
        grid: u32,
    ) -> Result<(), GpuError> {
        let [m, n, k, batch] = dims.int_args()?;
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (self.spec.threads(), 1, 1),
            shared_mem_bytes: self.spec.dynamic_smem_bytes(),
        };
        let mut launch = stream.launch_builder(&self.function);
        launch
            .arg(&maps.0)
            .arg(&maps.1)
            .arg(&out.c)
            .arg(&out.partials)
            .arg(&m)
            .arg(&n)
            .arg(&k)
            .arg(&batch)
            .arg(&alpha);
        // SAFETY: the caller guarantees the buffers; the parameters match the kernel's
        // signature (two 128-byte maps, two pointers, four ints, a float).
        unsafe { launch.launch(cfg) }
            .map(|_| ())
            .map_err(driver_err("cuLaunchKernel(carver_sm90_gemm)"))
    }
}
