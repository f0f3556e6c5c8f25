//! The body of the `latency` and `latency_mimalloc` examples, which differ only in the
//! allocator: the library's callers bring their own, the CLI and the Python module ship mimalloc.
use std::time::Instant;

use carver::{Family, MatmulTemplate, TopK, recommend_hints};
use carver_arch::HardwareDb;

use crate::common::{self, shapes};

pub const USAGE: &str = "\
Per-shape recommendation latency on the H100 (top-8): for every shape of a set, the median of
REPS calls; then, per target, the median, 90th percentile and maximum of those medians, as a
Markdown table.

Usage: cargo run --release -p carver --example latency[_mimalloc] -- [REPS] [FILE.json|FILE.csv ...]

  REPS  calls timed per shape (default 20)
  FILE  shape sets: JSON like eval/dev-shapes.json, or CSV with name,M,N,K rows
        (default: eval/dev-shapes.json and eval/latency-1000.csv)
";

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

pub fn run(args: Vec<String>) -> common::Result {
    common::no_options(&args)?;
    let reps = match args.first() {
        Some(a) => common::positive(a, "REPS")? as usize,
        None => 20,
    };
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../eval");
    let mut files: Vec<String> = args.iter().skip(1).cloned().collect();
    if files.is_empty() {
        files = vec![
            format!("{root}/dev-shapes.json"),
            format!("{root}/latency-1000.csv"),
        ];
    }
    let db = HardwareDb::embedded()?;
    let arch = db.get("h100")?;
    println!("| shapes | target | median us | p90 us | max us | shapes over 50 us |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for file in &files {
        let set = shapes(file)?;
        if set.is_empty() {
            return common::error(format!("{file}: no shapes"));
        }
        let name = file.rsplit('/').next().unwrap_or(file);
        for target in Family::ALL {
            let mut per_shape: Vec<f64> = Vec::new();
            for &(m, n, k) in &set {
                let t = MatmulTemplate::new(m, n, k).with_family(target);
                let mut times: Vec<f64> = (0..reps)
                    .map(|_| {
                        let start = Instant::now();
                        let hints = recommend_hints(std::hint::black_box(&t), arch, TopK::DEFAULT);
                        let elapsed = start.elapsed().as_secs_f64() * 1e6;
                        std::hint::black_box(hints).ok();
                        elapsed
                    })
                    .collect();
                times.sort_by(f64::total_cmp);
                per_shape.push(quantile(&times, 0.5));
            }
            per_shape.sort_by(f64::total_cmp);
            println!(
                "| {name} ({}) | {target} | {:.1} | {:.1} | {:.1} | {} |",
                set.len(),
                quantile(&per_shape, 0.5),
                quantile(&per_shape, 0.9),
                per_shape[per_shape.len() - 1],
                per_shape.iter().filter(|&&t| t > 50.0).count()
            );
        }
    }
    Ok(())
}
