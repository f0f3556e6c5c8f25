//! Prints carver's fused-MoE file for a layer (rank-1 config and predicted times per batch
//! size) and how long the whole file took.
//!
//! `cargo run --release -p carver --example moe_file -- [arch] [experts topk hidden intermediate tp]`

use std::time::Instant;

use carver::TopK;
use carver::moe::{MoeTemplate, recommend_moe_file};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help") {
        println!(
            "moe_file [arch] [experts topk hidden intermediate tp]  (default: h100 8 2 4096 14336 2)"
        );
        return;
    }
    let arch_name = args.first().map_or("h100", String::as_str);
    let num = |i: usize, d: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let template = MoeTemplate::new(
        num(1, 8) as u32,
        num(2, 2) as u32,
        num(3, 4096),
        num(4, 14336),
    )
    .with_tp(num(5, 2) as u32);
    let db = carver_arch::HardwareDb::embedded().expect("embedded database");
    let arch = db.get(arch_name).expect("GPU in the database");
    let start = Instant::now();
    let file = recommend_moe_file(&template, arch, None, TopK::DEFAULT).expect("a file");
    let elapsed = start.elapsed();
    println!("{}", file.file_name);
    for b in &file.batches {
        let h = &b.hints[0];
        println!(
            "M={:>5} {:?} total {:>9.1} us  gate_up {:>8.1} ({:?}, rows {:.0}, experts {:.2})  down {:>8.1} ({:?})",
            b.m,
            h.config,
            h.time_us,
            h.gate_up.time_us,
            h.gate_up.detail.bound,
            h.gate_up.padded_rows,
            h.gate_up.active_experts,
            h.down.time_us,
            h.down.detail.bound
        );
    }
    println!("whole file: {:.2} ms", elapsed.as_secs_f64() * 1e3);
}
