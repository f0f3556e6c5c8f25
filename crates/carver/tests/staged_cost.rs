//! Elements staged through registers: a B element (N not a multiple of 8) is priced at 72 issue
//! cycles, an A element at 24 (`cost::STAGED_B_ELEMENT_CYCLES`; docs/RESULTS.md, "B-staged
//! elements").

use carver::{DType, Family, Layout, MatmulTemplate, Prediction, predict_native};
use carver_arch::HardwareDb;
use serde_json::json;

fn price(n: u64, k: u64, bm: u32, bn: u32, bk: u32, warps: u32, stages: u32) -> Prediction {
    let db = HardwareDb::embedded().unwrap();
    let t = MatmulTemplate::new(1536, n, k)
        .with_dtype(DType::F16)
        .with_layouts(Layout::Row, Layout::Row)
        .with_family(Family::Triton);
    let config = json!({"kwargs": {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk,
        "GROUP_SIZE_M": 1, "SPLIT_K": 1}, "num_warps": warps, "num_stages": stages});
    predict_native(&t, db.get("h200").unwrap(), &config)
        .unwrap()
        .1
}

fn assert_slower(slow: &Prediction, fast: &Prediction) {
    assert!(
        slow.time_us > fast.time_us,
        "{} us is not slower than {} us",
        slow.time_us,
        fast.time_us
    );
}

/// holdout17's `odd.n1217.m1536` on the H200: 128x64x64 with 4 warps stages 32 B elements per
/// thread and iteration and ran 132 us; 256x32x64 stages 16 and ran 62 us. At 24 cycles a B
/// element the model had them the other way round (57 against 62 us).
#[test]
fn more_staged_b_elements_per_thread_cost_more_than_the_tile_saves() {
    let many = price(1217, 2048, 128, 64, 64, 4, 6);
    let few = price(1217, 2048, 256, 32, 64, 4, 3);
    assert_slower(&many, &few);
}

/// A B element costs three A elements: a 128 x 64 tile with 4 warps stages 64 A elements per
/// thread and iteration when K is odd, 32 B elements when N is odd, and the B-staged one is
/// priced slower (at one price for both it would be the faster).
#[test]
fn a_b_element_costs_more_than_two_a_elements() {
    let b_staged = price(1217, 2048, 128, 64, 64, 4, 6);
    let a_staged = price(1216, 2047, 128, 64, 64, 4, 6);
    assert_slower(&b_staged, &a_staged);
}
