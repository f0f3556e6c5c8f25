//! The wgmma queue of a software-pipelined loop: a Triton tile whose iteration issues more
//! `wgmma` instructions per SM sub-partition than the tensor pipe queues (8) issues its next
//! loads late, so one more stage of its ring is held by the tensor cores
//! (`FamilyRules::queued_wgmma_instructions`; docs/RESULTS.md, "Why BLOCK_SIZE_K 128 stalls").

use carver::{DType, Family, Layout, MatmulTemplate, Prediction, predict_native};
use carver_arch::HardwareDb;
use serde_json::json;

fn template(m: u64, n: u64, k: u64, family: Family) -> MatmulTemplate {
    MatmulTemplate::new(m, n, k)
        .with_dtype(DType::F16)
        .with_layouts(Layout::Row, Layout::Row)
        .with_family(family)
}

fn triton_config(bm: u32, bn: u32, bk: u32, warps: u32, stages: u32) -> serde_json::Value {
    json!({"kwargs": {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk,
        "GROUP_SIZE_M": 8, "SPLIT_K": 1}, "num_warps": warps, "num_stages": stages})
}

fn price(bm: u32, bn: u32, bk: u32, warps: u32, stages: u32) -> Prediction {
    let db = HardwareDb::embedded().unwrap();
    let t = template(8192, 8192, 8192, Family::Triton);
    predict_native(
        &t,
        db.get("h200").unwrap(),
        &triton_config(bm, bn, bk, warps, stages),
    )
    .unwrap()
    .1
}

/// The exposed stage latency of `a` over `b`'s (printed, for a failing assertion).
fn latency_ratio(a: &Prediction, b: &Prediction) -> f64 {
    let ratio = a.breakdown.latency_us / b.breakdown.latency_us;
    eprintln!(
        "exposed latency {} us against {} us: {ratio}",
        a.breakdown.latency_us, b.breakdown.latency_us
    );
    ratio
}

/// 128 x 128 x 128 with 8 warps issues 16 wgmma per sub-partition and iteration (2 warpgroups
/// x 8 K steps): with 2 stages nothing is left in flight while it computes, so its stage
/// arrival is exposed in full. Its BLOCK_SIZE_K 64 twin (8 per iteration) keeps one stage in
/// flight. Measured on the H200 (ncu probe): 3037 us against 2057 us.
#[test]
fn a_two_stage_ring_behind_a_full_queue_hides_nothing() {
    let deep = price(128, 128, 128, 8, 2);
    let twin = price(128, 128, 64, 8, 2);
    assert!(latency_ratio(&deep, &twin) > 1.5);
    assert!(deep.time_us > 1.2 * twin.time_us);
}

/// The rule counts instructions, not K: 256 x 128 x 64 with 8 warps (each warpgroup 128 rows,
/// two wgmma per K step) issues 16 and holds a stage; 128 x 256 x 64 (one 256-wide wgmma per K
/// step) issues 8 and does not. With 3 stages the first keeps one stage in flight, the second
/// two.
#[test]
fn the_rule_counts_instructions_per_sub_partition() {
    let tall = price(256, 128, 64, 8, 3);
    let wide = price(128, 256, 64, 8, 3);
    assert!(latency_ratio(&tall, &wide) > 1.2);
    // (Without the rule the ratio is 1.11: the two load the same bytes per stage, but the
    // consecutive blocks that share a B panel save the L2 more of the wide tile's bytes.)
    // One warpgroup over 128 x 128 x 64 issues 2 x 4 = 8 as well: no stage held, so it is
    // priced as its 8-warp twin at the same depth (measured level on every stored sweep).
    let one_group = price(128, 128, 64, 4, 4);
    let two_groups = price(128, 128, 64, 8, 4);
    assert!((latency_ratio(&one_group, &two_groups) - 1.0).abs() < 0.05);
}

/// The rule is Triton's: carver's warp-specialized sm90 family loads from a producer warp
/// that does not wait behind the product, so its pricing of deep K tiles is unchanged.
#[test]
fn only_the_software_pipelined_family_holds_a_stage() {
    let triton = carver::Family::Triton.rules();
    assert_eq!(triton.queued_wgmma_instructions(), Some(8));
    for family in [Family::CudaSm90, Family::TileLang, Family::Generic] {
        assert_eq!(family.rules().queued_wgmma_instructions(), None, "{family}");
    }
}
