//! Operands whose rows are not 16-byte aligned: TMA cannot describe them, so before every GEMM
//! they are copied (`repack.cu`) into buffers of the same shape with rows padded to 16 bytes,
//! and the kernel's tensor maps point at those copies with the true extents.
//!
//! Which operands, and their padded leading dimension, come from
//! [`carver::family::tma_leading_dim`], the rule the recommender prices the copies with.

use std::sync::Arc;

use carver::Layout;
use carver::family::tma_leading_dim;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaContext, CudaStream, LaunchConfig, PushKernelArg};

use super::launch::HelperKernel;
use crate::driver::driver_err;
use crate::error::GpuError;

/// The copy kernel's source.
pub const REPACK_SOURCE: &str = include_str!("repack.cu");
/// Its entry point.
pub const REPACK_NAME: &str = "carver_sm90_repack";
/// Threads per block (the kernel's launch bound).
const THREADS: u32 = 256;
/// The most blocks along y (the kernel loops over the rows beyond).
const MAX_GRID_Y: u64 = 65_535;

/// One operand as the kernel reads it: `rows` rows of `cols` contiguous elements, `ld` elements
/// apart. `ld == cols` when the operand is read in place, otherwise it is a padded copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperandRows {
    pub rows: u64,
    pub cols: u64,
    pub ld: u64,
}

impl OperandRows {
    /// A densely stored operand of 16-bit elements.
    pub fn dense(rows: u64, cols: u64) -> Self {
        Self {
            rows,
            cols,
            ld: tma_leading_dim(cols, 2),
        }
    }

    /// Whether the kernel reads a padded copy rather than the operand itself.
    pub fn repacked(&self) -> bool {
        self.ld != self.cols
    }

    /// Elements of the padded copy.
    pub fn padded_elems(&self) -> u64 {
        self.rows * self.ld
    }

    /// DRAM bytes one copy moves: every element read, every padded row written.
    pub fn copy_bytes(&self) -> u64 {
        self.rows * (self.cols + self.ld) * 2
    }
}

/// A and B of a dense M x N x K problem as the kernel reads them (A is row-major M x K; B is
/// K x N, or N x K when `layout_b` is column-major).
pub fn operand_rows(layout_b: Layout, m: u64, n: u64, k: u64) -> (OperandRows, OperandRows) {
    let b = match layout_b {
        Layout::Row => OperandRows::dense(k, n),
        Layout::Col => OperandRows::dense(n, k),
    };
    (OperandRows::dense(m, k), b)
}

/// The copy kernel, loaded on a device.
pub struct RepackKernel(HelperKernel);

impl RepackKernel {
    /// Compiles the kernel with NVRTC (sm_90a) and loads it.
    pub fn load(ctx: &Arc<CudaContext>) -> Result<Self, GpuError> {
        HelperKernel::load(ctx, REPACK_SOURCE, REPACK_NAME).map(Self)
    }

    /// Blocks of (chunks of a row) x (rows): a warp covers 32 chunks (512 bytes) of one row,
    /// or several short rows whole.
    fn config(rows: &OperandRows) -> LaunchConfig {
        let chunks = rows.ld / 8;
        let bx = if chunks >= 32 {
            32
        } else {
            chunks.max(1).next_power_of_two() as u32
        };
        let by = THREADS / bx;
        LaunchConfig {
            grid_dim: (
                chunks.div_ceil(u64::from(bx)) as u32,
                rows.rows.div_ceil(u64::from(by)).clamp(1, MAX_GRID_Y) as u32,
                1,
            ),
            block_dim: (bx, by, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Copies `rows` from `src` (dense, `cols` elements a row) into `dst` (`ld` elements a row),
    /// on `stream` (asynchronous).
    ///
    /// # Safety
    /// `src` must hold `rows x cols` and `dst` `rows x ld` 16-bit elements, both 16-byte
    /// aligned and live on `stream`'s device, and must not overlap.
    pub unsafe fn launch(
        &self,
        stream: &Arc<CudaStream>,
        src: CUdeviceptr,
        dst: CUdeviceptr,
        rows: &OperandRows,
    ) -> Result<(), GpuError> {
        if rows.ld % 8 != 0 || rows.ld < rows.cols || rows.cols == 0 {
            return Err(GpuError::Unsupported {
                what: format!("a copy of {} x {} into rows of {}", rows.rows, rows.cols, rows.ld),
                reason: "the repack kernel writes rows of whole 16-byte chunks, at least as long as the source rows".into(),
            });
        }
        if rows.ld / 8 > u64::from(u32::MAX) {
            return Err(GpuError::Unsupported {
                what: format!("rows of {} elements", rows.ld),
                reason: "the repack kernel takes fewer than 2^32 chunks a row".into(),
            });
        }
        let cfg = Self::config(rows);
        let mut launch = stream.launch_builder(&self.0.function);
        launch
            .arg(&src)
            .arg(&dst)
            .arg(&rows.rows)
            .arg(&rows.cols)
            .arg(&rows.ld);
        // SAFETY: the caller guarantees the buffers; the arguments match the kernel's signature
        // (two pointers, three 64-bit sizes).
        unsafe { launch.launch(cfg) }
            .map(|_| ())
            .map_err(driver_err("cuLaunchKernel(carver_sm90_repack)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unaligned_rows_are_copied() {
        let (a, b) = operand_rows(Layout::Row, 333, 777, 999);
        assert_eq!((a.rows, a.cols, a.ld), (333, 999, 1000));
        assert_eq!((b.rows, b.cols, b.ld), (999, 777, 784));
        assert!(a.repacked() && b.repacked());
        assert_eq!(a.copy_bytes(), 333 * (999 + 1000) * 2);
        let (a, b) = operand_rows(Layout::Col, 333, 777, 1000);
        assert!(!a.repacked() && !b.repacked());
        assert_eq!((b.rows, b.cols, b.ld), (777, 1000, 1000));
        let (a, b) = operand_rows(Layout::Row, 64, 1001, 64);
        assert!(!a.repacked() && b.repacked());
    }

    #[test]
    fn launch_shapes_cover_every_chunk_and_row() {
        for (rows, cols) in [
            (333u64, 999u64),
            (3001, 2049),
            (7, 3),
            (100_000_000, 20),
            (1, 1),
        ] {
            let r = OperandRows::dense(rows, cols);
            let c = RepackKernel::config(&r);
            let (bx, by) = (u64::from(c.block_dim.0), u64::from(c.block_dim.1));
            assert_eq!(bx * by, u64::from(THREADS), "{rows}x{cols}");
            assert!(u64::from(c.grid_dim.0) * bx >= r.ld / 8, "{rows}x{cols}");
            assert!(u64::from(c.grid_dim.1) <= MAX_GRID_Y);
            // Rows beyond the grid are covered by the kernel's stride loop.
            assert!(u64::from(c.grid_dim.1) * by >= rows.min(MAX_GRID_Y * by));
        }
    }
}
