//! The second kernel of a split-K GEMM (`splitk.cu`): it sums the fp32 partial tiles the GEMM's
//! splits wrote to the workspace, in split order (deterministic), into the 16-bit output.
//!
//! The workspace's layout is the family's ([`carver::family::Sm90Params::workspace_ld`]); the
//! recommender prices this kernel as the family's separate reduction.

use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaContext, CudaStream, LaunchConfig, PushKernelArg};

use super::launch::HelperKernel;
use crate::driver::driver_err;
use crate::error::GpuError;

/// The reduction kernel's source.
pub const SPLITK_SOURCE: &str = include_str!("splitk.cu");
/// Its entry point.
pub const SPLITK_NAME: &str = "carver_sm90_splitk_reduce";
/// Threads per block (the kernel's launch bound).
pub const SPLITK_THREADS: u32 = 256;
/// Adjacent columns one thread sums (`COLUMNS` in the source).
pub const SPLITK_COLUMNS_PER_THREAD: u32 = 4;
/// The most blocks along y (the kernel loops over the rows beyond).
const MAX_GRID_Y: u64 = 65_535;

/// What one reduction sums: `batch` outputs of M x N from `splits` slices of the workspace,
/// rows `ldw` fp32 elements long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitKShape {
    pub m: u64,
    pub n: u64,
    pub ldw: u64,
    pub splits: u32,
    pub batch: u64,
    pub out_bf16: bool,
}

impl SplitKShape {
    /// Blocks of 256 threads of 4 columns each (x) by rows (y, at most 65,535; the kernel
    /// strides past them).
    pub fn launch_config(&self) -> LaunchConfig {
        let rows = self.batch * self.m;
        let columns_per_block = u64::from(SPLITK_THREADS * SPLITK_COLUMNS_PER_THREAD);
        LaunchConfig {
            grid_dim: (
                self.n.div_ceil(columns_per_block).max(1) as u32,
                rows.clamp(1, MAX_GRID_Y) as u32,
                1,
            ),
            block_dim: (SPLITK_THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// The kernel's integer parameters after the two pointers, in order.
    pub fn int_args(&self) -> Result<[i32; 6], GpuError> {
        let dim = |v: u64| {
            i32::try_from(v).map_err(|_| GpuError::Unsupported {
                what: format!("a size of {v}"),
                reason: "the split-K reduction takes sizes below 2^31".into(),
            })
        };
        Ok([
            dim(self.m)?,
            dim(self.n)?,
            dim(self.ldw)?,
            dim(u64::from(self.splits))?,
            dim(self.batch)?,
            i32::from(self.out_bf16),
        ])
    }
}

/// The reduction kernel, loaded on a device.
pub struct SplitKReduce(HelperKernel);

impl SplitKReduce {
    /// Compiles the kernel with NVRTC (sm_90a) and loads it.
    pub fn load(ctx: &Arc<CudaContext>) -> Result<Self, GpuError> {
        HelperKernel::load(ctx, SPLITK_SOURCE, SPLITK_NAME).map(Self)
    }

    /// Sums the workspace at `partials` into `c` on `stream` (asynchronous).
    ///
    /// # Safety
    /// `partials` must hold `batch x splits x m x ldw` fp32 elements written by the GEMM and
    /// `c` `batch x m x n` 16-bit elements, both live on `stream`'s device.
    pub unsafe fn launch(
        &self,
        stream: &Arc<CudaStream>,
        partials: CUdeviceptr,
        c: CUdeviceptr,
        shape: &SplitKShape,
    ) -> Result<(), GpuError> {
        let [m, n, ldw, splits, batch, out_bf16] = shape.int_args()?;
        let mut launch = stream.launch_builder(&self.0.function);
        launch
            .arg(&partials)
            .arg(&c)
            .arg(&m)
            .arg(&n)
            .arg(&ldw)
            .arg(&splits)
            .arg(&batch)
            .arg(&out_bf16);
        // SAFETY: the caller guarantees the buffers; the arguments match the kernel's signature
        // (two pointers, six ints).
        unsafe { launch.launch(shape.launch_config()) }
            .map(|_| ())
            .map_err(driver_err("cuLaunchKernel(carver_sm90_splitk_reduce)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The launch geometry's constants are the source's: its launch bound and its columns a
    /// thread.
    #[test]
    fn the_geometry_is_the_sources() {
        assert!(SPLITK_SOURCE.contains(&format!("__launch_bounds__({SPLITK_THREADS})")));
        assert!(SPLITK_SOURCE.contains(&format!("#define COLUMNS {SPLITK_COLUMNS_PER_THREAD}\n")));
    }

    #[test]
    fn the_grid_covers_every_column_and_row() {
        for (m, n, batch) in [
            (1u64, 10_240u64, 1u64),
            (4096, 4096, 1),
            (300_000, 7, 1),
            (5, 3, 9),
        ] {
            let s = SplitKShape {
                m,
                n,
                ldw: n.div_ceil(64) * 64,
                splits: 4,
                batch,
                out_bf16: true,
            };
            let c = s.launch_config();
            assert!(
                u64::from(c.grid_dim.0) * u64::from(SPLITK_THREADS * SPLITK_COLUMNS_PER_THREAD)
                    >= n
            );
            assert!(u64::from(c.grid_dim.1) <= MAX_GRID_Y);
            assert!(u64::from(c.grid_dim.1) == (m * batch).min(MAX_GRID_Y));
        }
        let too_big = SplitKShape {
            m: 1 << 31,
            n: 8,
            ldw: 64,
            splits: 2,
            batch: 1,
            out_bf16: false,
        };
        assert!(too_big.int_args().is_err());
    }
}
