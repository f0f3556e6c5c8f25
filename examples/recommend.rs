//! Recommends Triton configurations for a few LLM-sized matmuls on an H100, from Rust: the
//! smallest use of the library (`recommend_hints`).
use std::process::ExitCode;

use carver::{Family, MatmulTemplate, TopK, recommend_hints};
use carver_arch::HardwareDb;

#[path = "../crates/carver/examples/common/mod.rs"]
mod common;

const USAGE: &str = "\
Recommends Triton configurations (top-8) for matmuls on an H100, with carver::recommend_hints.

Usage: cargo run -p carver --example recommend -- [M N K]

  M N K  one problem, C (M x N) = A (M x K) @ B (K x N)
         (default: 1x12288x4096, 2048x12288x4096, 8192x4096x11008 and 333x777x999)
";

fn main() -> ExitCode {
    common::main(USAGE, run)
}

fn run(args: Vec<String>) -> common::Result {
    common::no_options(&args)?;
    let shapes: Vec<(u64, u64, u64)> = match args.as_slice() {
        [m, n, k] => vec![(
            common::number(m, "M")?,
            common::number(n, "N")?,
            common::number(k, "K")?,
        )],
        [] => vec![
            (1, 12288, 4096),
            (2048, 12288, 4096),
            (8192, 4096, 11008),
            (333, 777, 999),
        ],
        _ => return common::usage_error(format!("expected M N K, got {} arguments", args.len())),
    };
    let db = HardwareDb::embedded()?;
    let h100 = db.get("h100")?;
    for (m, n, k) in shapes {
        let template = MatmulTemplate::new(m, n, k).with_family(Family::Triton);
        println!("M={m} N={n} K={k}");
        for hint in recommend_hints(&template, h100, TopK::DEFAULT)? {
            let p = &hint.prediction;
            println!(
                "  #{} {} -> {:.1} us, {:.0} TFLOP/s, {}-bound",
                hint.rank,
                hint.config,
                p.time_us,
                p.tflops,
                p.bound.as_str()
            );
        }
    }
    Ok(())
}
