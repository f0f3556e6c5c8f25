//! Prints every target's top-8 (config and predicted time) for many shapes on a few GPUs, one
//! line per (arch, target, shape, layout): diff two runs to see exactly which hints a change to
//! the policy or the cost model moves (a pure refactor moves none).
//!
//! `cargo run --release -p carver --example hint_fingerprint > before.txt`
//! Shapes: `eval/dev-shapes.json`, `eval/holdout-shapes.json`, `eval/latency-1000.csv`, each
//! with B row- and column-major, on the H100, the A100 and the L40S.
use carver::{Family, Layout, MatmulTemplate, TopK, recommend_hints};
use carver_arch::HardwareDb;

#[path = "common/mod.rs"]
mod common;
use common::shapes;

fn main() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../eval");
    let all_shapes: Vec<(u64, u64, u64)> =
        ["dev-shapes.json", "holdout-shapes.json", "latency-1000.csv"]
            .iter()
            .flat_map(|file| shapes(&format!("{root}/{file}")))
            .collect();
    let db = HardwareDb::embedded().unwrap();
    for arch_key in ["h100", "a100", "l40s"] {
        let arch = db.get(arch_key).unwrap();
        for target in Family::ALL {
            for &(m, n, k) in &all_shapes {
                for layout_b in [Layout::Row, Layout::Col] {
                    let t = MatmulTemplate::new(m, n, k)
                        .with_family(target)
                        .with_layouts(Layout::Row, layout_b);
                    let line = match recommend_hints(&t, arch, TopK::DEFAULT) {
                        Ok(hints) => hints
                            .iter()
                            .map(|h| format!("{} {:.4}", h.config, h.prediction.time_us))
                            .collect::<Vec<_>>()
                            .join(" | "),
                        Err(e) => format!("error: {e}"),
                    };
                    println!("{arch_key} {target} {m}x{n}x{k} {layout_b:?}: {line}");
                }
            }
        }
    }
}
