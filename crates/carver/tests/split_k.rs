//! Split-K in carver's own Hopper family: a persistent grid walks every (tile, split) unit, so
//! splitting K cannot make a grid that already fills the GPU faster; the recommender offers
//! splits where the tiles alone leave SMs idle.

use carver::{DType, Family, Layout, MatmulTemplate, TopK, predict_native};
use carver_arch::HardwareDb;
use serde_json::json;

fn template(m: u64, n: u64, k: u64) -> MatmulTemplate {
    MatmulTemplate::new(m, n, k)
        .with_dtype(DType::Bf16)
        .with_layouts(Layout::Row, Layout::Row)
        .with_family(Family::CudaSm90)
}

fn time_us(t: &MatmulTemplate, split_k: u32, persistent: bool) -> f64 {
    let db = HardwareDb::embedded().unwrap();
    let config = json!({"block_m": 128, "block_n": 256, "block_k": 64, "stages": 4,
        "consumers": 2, "group_m": 1, "cluster_m": 1, "persistent": persistent,
        "split_k": split_k});
    predict_native(t, db.get("h100").unwrap(), &config)
        .unwrap()
        .1
        .time_us
}

#[test]
fn splitting_a_full_wave_saves_no_time_persistent_or_not() {
    // 12 x 11 = 132 tiles of 128 x 256: one full wave on the H100's 132 SMs, compute-bound.
    let t = template(12 * 128, 11 * 256, 8192);
    for persistent in [false, true] {
        let whole = time_us(&t, 1, persistent);
        for split in [2, 4] {
            let split_time = time_us(&t, split, persistent);
            assert!(
                split_time > 0.95 * whole,
                "persistent {persistent}: split {split} {split_time:.1} us vs {whole:.1} us whole"
            );
        }
    }
}

#[test]
fn splits_are_offered_where_tiles_leave_sms_idle() {
    let db = HardwareDb::embedded().unwrap();
    let arch = db.get("h100").unwrap();
    let split_of = |h: &carver::Hint| h.config["split_k"].as_u64().unwrap();
    // A decode GEMM: one tile row, 40 tiles of 64 x 128 at most for 132 SMs.
    let decode =
        carver::recommend_hints(&template(1, 5120, 27648), arch, TopK::new(8).unwrap()).unwrap();
    assert!(decode.iter().any(|h| split_of(h) > 1), "{decode:#?}");
    // A large GEMM fills the GPU many times over: no split.
    let large =
        carver::recommend_hints(&template(8192, 8192, 8192), arch, TopK::new(8).unwrap()).unwrap();
    assert!(large.iter().all(|h| split_of(h) == 1));
}
