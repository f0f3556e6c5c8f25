//! A warp's `mma.sync` k-steps wait for each other (`cost::Pricer::k_step_chain`;
//! docs/RESULTS.md, "A warp's k-steps wait for each other"): a lone 16-row block at long K takes
//! at least its iterations times its steps' wait, whatever its pipeline depth.

use carver::{Family, Layout, MatmulTemplate, TopK, predict_native, recommend_hints};
use carver_arch::HardwareDb;
use serde_json::json;

/// `yuan2-2b.down.m32` of holdout32: 128 blocks of 16 x 32, one an SM, 64 iterations of 128.
fn small_m_long_k() -> MatmulTemplate {
    MatmulTemplate::new(32, 2048, 8192)
        .with_layouts(Layout::Row, Layout::Row)
        .with_family(Family::Triton)
}

#[test]
fn a_lone_thin_block_takes_its_k_steps_one_after_another() {
    let db = HardwareDb::embedded().unwrap();
    let arch = db.get("h200").unwrap();
    let config = json!({"kwargs": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 8, "SPLIT_K": 1}, "num_warps": 2, "num_stages": 6});
    let (_, p) = predict_native(&small_m_long_k(), arch, &config).unwrap();
    // 64 iterations of 8 steps of 63 cycles at 1830 MHz, after a 3 us launch. The H200 ran this
    // config in 24.5 us; the model without the chain priced it at 15.8.
    let chain_us = 64.0 * 8.0 * 63.0 / 1830.0;
    assert!(p.time_us >= 3.0 + chain_us, "{} us", p.time_us);
}

#[test]
fn split_k_beats_the_lone_thin_block_at_small_m_and_long_k() {
    // Measured on the H200 (holdout32): the fastest configs split K; the unsplit 16 x 32 tiles
    // reached 0.745 of them.
    let db = HardwareDb::embedded().unwrap();
    let hints = recommend_hints(&small_m_long_k(), db.get("h200").unwrap(), TopK::DEFAULT).unwrap();
    assert!(hints[0].tile.split_k > 1, "top-1 {:?}", hints[0].tile);
}
