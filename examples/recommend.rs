//! Recommends Triton configurations for a few LLM-sized matmuls on an H100, from Rust.
//!
//! Run with `cargo run -p carver --example recommend [M N K]`.

use carver::{Family, MatmulTemplate, TopK, recommend_hints};
use carver_arch::HardwareDb;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let db = HardwareDb::embedded()?;
    let h100 = db.get("h100")?;
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let shapes: Vec<(u64, u64, u64)> = match args.as_slice() {
        [m, n, k] => vec![(*m, *n, *k)],
        _ => vec![
            (1, 12288, 4096),
            (2048, 12288, 4096),
            (8192, 4096, 11008),
            (333, 777, 999),
        ],
    };
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
