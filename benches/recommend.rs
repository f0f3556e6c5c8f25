//! Recommendation latency: top-8 hints for single shapes, and the dev shapes in one go.
//!
//! `cargo bench -p carver --bench recommend`

use carver::{Family, MatmulTemplate, TopK, recommend_hints};
use carver_arch::{Arch, HardwareDb};

fn main() {
    divan::main();
}

fn h100() -> Arch {
    HardwareDb::embedded().unwrap().get("h100").unwrap().clone()
}

const SHAPES: [(u64, u64, u64); 6] = [
    (1, 12288, 4096),
    (16, 12288, 4096),
    (2048, 12288, 4096),
    (4096, 4096, 4096),
    (1537, 2049, 3001),
    (65536, 256, 1024),
];

#[divan::bench(args = [Family::Triton, Family::TileLang, Family::CudaSm90, Family::Generic], sample_count = 50)]
fn top8_per_shape(bencher: divan::Bencher, target: Family) {
    let arch = h100();
    let templates: Vec<MatmulTemplate> = SHAPES
        .iter()
        .map(|&(m, n, k)| MatmulTemplate::new(m, n, k).with_family(target))
        .collect();
    let mut i = 0;
    bencher.bench_local(|| {
        let t = &templates[i % templates.len()];
        i += 1;
        recommend_hints(divan::black_box(t), &arch, TopK::DEFAULT)
    });
}

/// A whole fused-MoE config file (18 batch sizes, top-8 each) for Mixtral-8x7B TP2 and
/// DeepSeek-V3 (256 experts, top-8) on the H100.
#[divan::bench(args = ["mixtral-tp2", "deepseek-v3"], sample_count = 20)]
fn moe_whole_file(bencher: divan::Bencher, model: &str) {
    use carver::moe::{MoeTemplate, recommend_moe_file};
    let arch = h100();
    let template = match model {
        "mixtral-tp2" => MoeTemplate::new(8, 2, 4096, 14336).with_tp(2),
        _ => MoeTemplate::new(256, 8, 7168, 2048),
    };
    bencher.bench_local(|| {
        recommend_moe_file(divan::black_box(&template), &arch, None, TopK::DEFAULT).unwrap()
    });
}
