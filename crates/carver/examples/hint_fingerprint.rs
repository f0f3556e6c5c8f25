//! Prints every target's top-8 (config and predicted time) for many shapes on a few GPUs, one
//! line per (arch, target, shape, layout): diff two runs to see exactly which hints a change to
//! the policy or the cost model moves (a pure refactor moves none).
use std::process::ExitCode;

use carver::{Family, Layout, MatmulTemplate, TopK, recommend_hints};
use carver_arch::HardwareDb;

#[path = "common/mod.rs"]
mod common;
use common::shapes;

const USAGE: &str = "\
Prints every target's top-8 hints (config and predicted time) for many shapes on the H100, the
A100 and the L40S, one line per (arch, target, shape, B layout): diff two runs to see exactly
which hints a change to the policy or the cost model moves.

Usage: cargo run --release -p carver --example hint_fingerprint > before.txt

Takes no arguments. Shapes: eval/dev-shapes.json, eval/holdout-shapes.json and
eval/latency-1000.csv, each with B row- and column-major.
";

fn main() -> ExitCode {
    common::main(USAGE, run)
}

fn run(args: Vec<String>) -> common::Result {
    if let Some(arg) = args.first() {
        return common::usage_error(format!("unexpected argument `{arg}`"));
    }
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../eval");
    let mut all_shapes: Vec<(u64, u64, u64)> = Vec::new();
    for file in ["dev-shapes.json", "holdout-shapes.json", "latency-1000.csv"] {
        all_shapes.extend(shapes(&format!("{root}/{file}"))?);
    }
    let db = HardwareDb::embedded()?;
    for arch_key in ["h100", "a100", "l40s"] {
        let arch = db.get(arch_key)?;
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
    Ok(())
}
