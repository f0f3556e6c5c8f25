//! Loading a compiled `cuda-sm90` cubin, building its TMA tensor maps and launching it.

use std::sync::Arc;

use carver::Layout;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg, sys,
};
use cudarc::nvrtc::Ptx;

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

fn encode_2d(
    input: carver::DType,
    ptr: sys::CUdeviceptr,
    rows: &OperandRows,
    box_inner: u32,
    box_outer: u32,
    what: &'static str,
) -> Result<TmaMap, GpuError> {
    let dtype = match input {
        carver::DType::Bf16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        carver::DType::F16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        other => {
            return Err(GpuError::Unsupported {
                what: format!("{other} inputs"),
                reason: "the cuda-sm90 kernel reads bf16 or f16".into(),
            });
        }
    };
    // The true extents: TMA zero-fills past them, so a padded copy's padding is never read.
    let dims = [rows.cols, rows.rows];
    // Byte stride of the outer dimension (the inner one is contiguous).
    let strides = [rows.ld * 2];
    let boxes = [box_inner, box_outer];
    let element_strides = [1u32, 1];
    let mut map = TmaMap(sys::CUtensorMap { opaque: [0; 16] });
    // SAFETY: every array has the length rank 2 needs; `map` is 64-byte aligned and 128 bytes.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map.0,
            dtype,
            2,
            ptr as *mut _,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()
    .map_err(|source| GpuError::Driver { call: what, source })?;
    Ok(map)
}

/// Tensor maps of A (row-major M x K) and B (row-major K x N, or N x K when `layout_b` is
/// column-major), with the boxes the kernel loads. `a` and `b` say how each is laid out where
/// `a_ptr` and `b_ptr` point (see [`operand_rows`](super::operand_rows)): every `ld` must be a
/// multiple of 8 elements, so an operand whose rows are not points at its padded copy.
pub fn encode_tma_maps(
    spec: &KernelSpec,
    a_ptr: sys::CUdeviceptr,
    b_ptr: sys::CUdeviceptr,
    a: &OperandRows,
    b: &OperandRows,
) -> Result<(TmaMap, TmaMap), GpuError> {
    let p = &spec.params;
    let map_a = encode_2d(
        spec.input,
        a_ptr,
        a,
        p.block_k,
        p.block_m,
        "cuTensorMapEncodeTiled(A)",
    )?;
    let map_b = match spec.layout_b {
        // In a cluster each CTA loads its share of the B tile's rows.
        Layout::Col => encode_2d(
            spec.input,
            b_ptr,
            b,
            p.block_k,
            p.block_n / p.cluster_m.max(1),
            "cuTensorMapEncodeTiled(B)",
        )?,
        Layout::Row => encode_2d(
            spec.input,
            b_ptr,
            b,
            64,
            p.block_k,
            "cuTensorMapEncodeTiled(B)",
        )?,
    };
    Ok((map_a, map_b))
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

    /// Blocks to launch: one per tile (rounded up to whole clusters), or at most one wave for a
    /// persistent kernel.
    pub fn grid(&self, m: u64, n: u64, sms: u32) -> Result<u32, GpuError> {
        let cluster = u64::from(self.spec.params.cluster_m.max(1));
        let units = self.spec.units(m, n);
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

    /// Launches C = A B on `stream` (asynchronous).
    ///
    /// # Safety
    /// `maps` must describe live A and B buffers (or their padded copies) of an M x K and
    /// K x N problem, and `c` must
    /// point to at least M x N 16-bit elements, all on `stream`'s device.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn launch(
        &self,
        stream: &Arc<CudaStream>,
        maps: &(TmaMap, TmaMap),
        c: sys::CUdeviceptr,
        m: u64,
        n: u64,
        k: u64,
        grid: u32,
    ) -> Result<(), GpuError> {
        let dim = |v: u64| {
            i32::try_from(v).map_err(|_| GpuError::Unsupported {
                what: format!("a size of {v}"),
                reason: "the cuda-sm90 kernel takes sizes below 2^31".into(),
            })
        };
        let (m, n, k) = (dim(m)?, dim(n)?, dim(k)?);
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (self.spec.threads(), 1, 1),
            shared_mem_bytes: self.spec.dynamic_smem_bytes(),
        };
        let mut launch = stream.launch_builder(&self.function);
        launch
            .arg(&maps.0)
            .arg(&maps.1)
            .arg(&c)
            .arg(&m)
            .arg(&n)
            .arg(&k);
        // SAFETY: the caller guarantees the buffers; the parameters match the kernel's
        // signature (two 128-byte maps, a pointer, three ints).
        unsafe { launch.launch(cfg) }
            .map(|_| ())
            .map_err(driver_err("cuLaunchKernel(carver_sm90_gemm)"))
    }
}
