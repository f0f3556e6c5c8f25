//! The top-k for a few (arch, shape, target) cases, pinned: a change to the policy or the cost
//! model that reorders them has to be accepted deliberately (`cargo insta review`).

use carver::{DType, Family, MatmulTemplate, TopK, recommend_hints};
use carver_arch::HardwareDb;

fn summary(arch: &str, template: MatmulTemplate, topk: usize) -> Vec<String> {
    let db = HardwareDb::embedded().unwrap();
    let arch = db.get(arch).unwrap();
    recommend_hints(&template, arch, TopK::new(topk).unwrap())
        .unwrap()
        .iter()
        .map(|h| {
            let repack = match h.prediction.breakdown.repack_us {
                0.0 => String::new(),
                us => format!(", {us:.3e} us of operand repack"),
            };
            format!(
                "#{} {} | {:.3e} us, {}-bound, {} B smem, {} blocks/SM{repack}",
                h.rank,
                h.config,
                h.prediction.time_us,
                h.prediction.bound.as_str(),
                h.prediction.smem_bytes,
                h.prediction.blocks_per_sm
            )
        })
        .collect()
}

#[test]
fn h100_triton_square_4096() {
    let t = MatmulTemplate::new(4096, 4096, 4096).with_family(Family::Triton);
    insta::assert_debug_snapshot!(summary("h100", t, 8));
}

#[test]
fn h100_triton_decode_m16() {
    let t = MatmulTemplate::new(16, 12288, 4096).with_family(Family::Triton);
    insta::assert_debug_snapshot!(summary("h100", t, 8));
}

#[test]
fn h100_triton_unaligned() {
    let t = MatmulTemplate::new(1537, 2049, 3001).with_family(Family::Triton);
    insta::assert_debug_snapshot!(summary("h100", t, 4));
}

#[test]
fn a100_tilelang_bf16_1024() {
    let t = MatmulTemplate::new(1024, 1024, 1024)
        .with_dtype(DType::Bf16)
        .with_family(Family::TileLang);
    insta::assert_debug_snapshot!(summary("a100", t, 4));
}

#[test]
fn l40s_generic_fp8() {
    let t = MatmulTemplate::new(2048, 8192, 8192)
        .with_dtype(DType::E4m3)
        .with_family(Family::Generic);
    insta::assert_debug_snapshot!(summary("l40s", t, 4));
}

#[test]
fn h100_sm90_short_k() {
    // Persistent variants first: their next tile's fill hides under the epilogue.
    let t = MatmulTemplate::new(4096, 4096, 96)
        .with_dtype(DType::Bf16)
        .with_family(Family::CudaSm90);
    insta::assert_debug_snapshot!(summary("h100", t, 4));
}

#[test]
fn h100_sm90_unaligned_operands() {
    // Both operands repacked before the kernel: the copies are in every prediction.
    let t = MatmulTemplate::new(333, 777, 999)
        .with_dtype(DType::Bf16)
        .with_family(Family::CudaSm90);
    insta::assert_debug_snapshot!(summary("h100", t, 4));
}
