//! The generic kernel configuration ("hint") every kernel family maps its own parameters to.
//!
//! These are the model's working types, free to change; the JSON shape of a hint is
//! `carver_schema::Tile`, which they convert into.

use carver_arch::InstructionFamily;

/// Order in which output tiles are handed to blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RasterOrder {
    /// Groups of `group` tile rows, walked column by column inside a group (Triton's
    /// `GROUP_SIZE_M`); `group = 1` is plain row-major order.
    GroupedRows,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Raster {
    pub order: RasterOrder,
    /// Tile rows per group (1 = no grouping).
    pub group: u32,
}

/// One point of a kernel family's configuration space, in family-neutral terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileConfig {
    pub block_m: u32,
    pub block_n: u32,
    pub block_k: u32,
    /// Warps computing the tile, laid out `warps_m x warps_n`.
    pub warps_m: u32,
    pub warps_n: u32,
    /// Extra warps that only move data (warp specialization); 0 when every warp computes.
    pub producer_warps: u32,
    /// Shared-memory pipeline depth.
    pub stages: u32,
    pub raster: Raster,
    /// K is split across this many blocks whose partial sums are reduced.
    pub split_k: u32,
    /// Thread-block cluster shape (1 x 1 = no cluster).
    pub cluster_m: u32,
    pub cluster_n: u32,
    /// Blocks loop over tiles (grid = number of SMs) instead of one block per tile.
    pub persistent: bool,
    /// Tensor-core instruction family the kernel issues.
    pub mma: InstructionFamily,
    /// The instruction's rows run along the tile's N and its columns along M: A and B trade
    /// places in it, so a tile of few rows (a small-M path) wastes no instruction rows.
    pub swap_ab: bool,
}

impl TileConfig {
    pub fn compute_warps(&self) -> u32 {
        self.warps_m * self.warps_n
    }

    pub fn threads(&self) -> u32 {
        32 * (self.compute_warps() + self.producer_warps)
    }

    /// Warp tile (rows, cols) each compute warp owns.
    pub fn warp_tile(&self) -> (u32, u32) {
        (self.block_m / self.warps_m, self.block_n / self.warps_n)
    }
}
