//! The vendor baseline of an fp8 problem: cuBLASLt's fp8 GEMM (`cublasLtMatmul`, fp32 compute,
//! per-tensor scale as alpha, 16-bit output), timed beside carver's candidates.
//!
//! Both operands are read K-major, the only fp8 layout cuBLASLt and wgmma take: in cuBLASLt's
//! column-major terms carver's row-major C (M x N) is D (N x M) = op_T(B stored N x K) x A^T.
//! Its fast-accumulation mode is on: the tensor cores accumulate without the periodic promotion
//! to full fp32, the arithmetic carver's kernel does, so both are timed doing the same work.
//! cuBLASLt has no e5m2 x e5m2 GEMM (and refuses e5m2 x e4m3 into f16): an e5m2 problem's
//! baseline reads both operands' bytes as e4m3 (the same sizes and traffic; its values are not
//! the problem's, so it is a time, never a reference).

use std::ffi::c_void;
use std::sync::Arc;

use carver::DType;
use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use super::GemmProblem;
use crate::error::GpuError;

/// Workspace offered to cuBLASLt's heuristic (what PyTorch gives it on Hopper).
const WORKSPACE_BYTES: usize = 32 << 20;

fn lt_err(call: &'static str) -> impl Fn(lt::CublasError) -> GpuError {
    move |source| GpuError::CublasLt { call, source }
}

/// One planned fp8 GEMM: handle, descriptors and the algorithm cuBLASLt's heuristic chose.
pub struct LtFp8 {
    handle: sys::cublasLtHandle_t,
    desc: sys::cublasLtMatmulDesc_t,
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    algo: sys::cublasLtMatmulAlgo_t,
    workspace: CudaSlice<u8>,
    workspace_bytes: usize,
    stream: Arc<CudaStream>,
}

// SAFETY: the handle and descriptors are used from the worker's one thread only.
unsafe impl Send for LtFp8 {}

fn lt_type(t: DType) -> sys::cudaDataType {
    match t {
        DType::E4m3 | DType::E5m2 => sys::cudaDataType::CUDA_R_8F_E4M3,
        DType::Bf16 => sys::cudaDataType::CUDA_R_16BF,
        _ => sys::cudaDataType::CUDA_R_16F,
    }
}

impl LtFp8 {
    /// Plans `problem` (fp8 inputs, B stored N x K) on `stream`.
    pub fn new(stream: Arc<CudaStream>, problem: &GemmProblem) -> Result<Self, GpuError> {
        // SAFETY: only tries to dlopen the candidate names.
        if !unsafe { sys::is_culib_present() } {
            return Err(GpuError::MissingLibrary {
                library: "libcublasLt (CUDA cuBLASLt)",
                why: "fp8 candidates are timed beside cuBLASLt's fp8 GEMM",
            });
        }
        let p = problem;
        // The bytes of both operands, read as e4m3 (see the module docs).
        let (a_type, b_type) = (lt_type(DType::E4m3), lt_type(DType::E4m3));
        let out = lt_type(p.output);
        let handle = lt::create_handle().map_err(lt_err("cublasLtCreate"))?;
        let mut plan = Self {
            handle,
            desc: std::ptr::null_mut(),
            layouts: [std::ptr::null_mut(); 3],
            // SAFETY: a plain C struct of integers; replaced by the heuristic's choice below.
            algo: unsafe { std::mem::zeroed() },
            // SAFETY: cuBLASLt's scratch space; never read before cuBLASLt writes it.
            workspace: unsafe { stream.alloc::<u8>(WORKSPACE_BYTES) }
                .map_err(crate::driver::driver_err("cuMemAlloc"))?,
            workspace_bytes: WORKSPACE_BYTES,
            stream: stream.clone(),
        };
        plan.desc = lt::create_matmul_desc(
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cudaDataType::CUDA_R_32F,
        )
        .map_err(lt_err("cublasLtMatmulDescCreate"))?;
        let set_desc = |attr: sys::cublasLtMatmulDescAttributes_t, value: i32| {
            // SAFETY: both transposes are int32_t (cublasOperation_t).
            unsafe {
                lt::set_matmul_desc_attribute(
                    plan.desc,
                    attr,
                    (&value as *const i32).cast(),
                    std::mem::size_of::<i32>(),
                )
            }
            .map_err(lt_err("cublasLtMatmulDescSetAttribute"))
        };
        use sys::cublasLtMatmulDescAttributes_t as Attr;
        set_desc(
            Attr::CUBLASLT_MATMUL_DESC_TRANSA,
            cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_T as i32,
        )?;
        set_desc(
            Attr::CUBLASLT_MATMUL_DESC_TRANSB,
            cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N as i32,
        )?;
        let fast_accumulation: i8 = 1;
        // SAFETY: this attribute is an int8_t (the transposes above are int32_t).
        unsafe {
            lt::set_matmul_desc_attribute(
                plan.desc,
                Attr::CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                (&fast_accumulation as *const i8).cast(),
                std::mem::size_of::<i8>(),
            )
        }
        .map_err(lt_err("cublasLtMatmulDescSetAttribute"))?;

        // (type, rows, cols, leading dimension, elements per matrix of the batch)
        let (m, n, k) = (p.m, p.n, p.k);
        let shapes = [
            (b_type, k, n, k, n * k),
            (a_type, k, m, k, m * k),
            (out, n, m, n, m * n),
        ];
        for (slot, (ty, rows, cols, ld, stride)) in plan.layouts.iter_mut().zip(shapes) {
            let ld = i64::try_from(ld).map_err(|_| too_big(ld))?;
            *slot = lt::create_matrix_layout(ty, rows, cols, ld)
                .map_err(lt_err("cublasLtMatrixLayoutCreate"))?;
            if p.batch > 1 {
                let batch = i32::try_from(p.batch).map_err(|_| too_big(p.batch))?;
                let stride = i64::try_from(stride).map_err(|_| too_big(stride))?;
                use sys::cublasLtMatrixLayoutAttribute_t as L;
                // SAFETY: batch count is an int32, the stride an int64.
                unsafe {
                    lt::set_matrix_layout_attribute(
                        *slot,
                        L::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                        (&batch as *const i32).cast(),
                        4,
                    )
                    .map_err(lt_err("cublasLtMatrixLayoutSetAttribute"))?;
                    lt::set_matrix_layout_attribute(
                        *slot,
                        L::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                        (&stride as *const i64).cast(),
                        8,
                    )
                    .map_err(lt_err("cublasLtMatrixLayoutSetAttribute"))?;
                }
            }
        }
        let pref = lt::create_matmul_pref().map_err(lt_err("cublasLtMatmulPreferenceCreate"))?;
        let workspace = plan.workspace_bytes as u64;
        // SAFETY: the attribute takes a uint64; the preference is destroyed right after use.
        let heuristic = unsafe {
            let set = lt::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&workspace as *const u64).cast(),
                8,
            );
            let found = set.and_then(|()| {
                lt::get_matmul_algo_heuristic(
                    plan.handle,
                    plan.desc,
                    plan.layouts[0],
                    plan.layouts[1],
                    plan.layouts[2],
                    plan.layouts[2],
                    pref,
                )
            });
            let _ = lt::destroy_matmul_pref(pref);
            found.map_err(lt_err("cublasLtMatmulAlgoGetHeuristic"))?
        };
        plan.algo = heuristic.algo;
        Ok(plan)
    }

    /// D = alpha A B into `c` (batch x M x N 16-bit elements), on the plan's stream.
    ///
    /// # Safety
    /// `a` and `b` must hold the problem's stacked fp8 operands (B stored N x K) and `c` its
    /// output, all on the plan's stream's device.
    pub unsafe fn run(&self, a: u64, b: u64, c: u64, alpha: f32) -> Result<(), GpuError> {
        let beta = 0.0f32;
        let (workspace, _guard) = self.workspace.device_ptr(&self.stream);
        // SAFETY: the caller guarantees the operands; the descriptors match them (see `new`).
        unsafe {
            lt::matmul(
                self.handle,
                self.desc,
                (&alpha as *const f32).cast(),
                (&beta as *const f32).cast(),
                b as *const c_void,
                self.layouts[0],
                a as *const c_void,
                self.layouts[1],
                c as *const c_void,
                self.layouts[2],
                c as *mut c_void,
                self.layouts[2],
                &self.algo,
                workspace as *mut c_void,
                self.workspace_bytes,
                self.stream.cu_stream() as sys::cudaStream_t,
            )
        }
        .map_err(lt_err("cublasLtMatmul"))
    }
}

fn too_big(v: u64) -> GpuError {
    GpuError::Unsupported {
        what: format!("a size of {v}"),
        reason: "cuBLASLt takes sizes below 2^31 per dimension".into(),
    }
}

impl Drop for LtFp8 {
    fn drop(&mut self) {
        // SAFETY: each was created by `new` and is destroyed once.
        unsafe {
            for layout in self.layouts {
                if !layout.is_null() {
                    let _ = lt::destroy_matrix_layout(layout);
                }
            }
            if !self.desc.is_null() {
                let _ = lt::destroy_matmul_desc(self.desc);
            }
            let _ = lt::destroy_handle(self.handle);
        }
    }
}
