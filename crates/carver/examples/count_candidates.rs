//! Prices the policy's candidates for a few shapes many times: a profiling and latency probe.
use std::process::ExitCode;

use carver::{Family, MatmulTemplate, TopK};
use carver_arch::HardwareDb;

#[path = "common/mod.rs"]
mod common;

const USAGE: &str = "\
Prices the policy's candidates for a few shapes many times on the H100 (a profiling and latency
probe): per target and shape, how many candidates are priced for a top-8 out of all, and the
mean time of one recommendation.

Usage: cargo run --release -p carver --example count_candidates -- [REPS] [TARGET] [MxNxK ...]

  REPS    recommendations timed per shape (default 200)
  TARGET  triton, tilelang, cuda-sm90, generic, or all (default all)
  MxNxK   shapes (default 1x12288x4096 2048x12288x4096 1537x2049x3001)
";

fn main() -> ExitCode {
    common::main(USAGE, run)
}

fn run(args: Vec<String>) -> common::Result {
    common::no_options(&args)?;
    let reps = match args.first() {
        Some(a) => common::positive(a, "REPS")?,
        None => 200,
    };
    let only: Option<Family> = match args.get(1).map(String::as_str) {
        None | Some("all") => None,
        Some(t) => Some(
            t.parse()
                .or_else(|e| common::usage_error(format!("TARGET: {e}")))?,
        ),
    };
    let mut shapes = args
        .iter()
        .skip(2)
        .map(|s| common::shape(s))
        .collect::<common::Result<Vec<_>>>()?;
    if shapes.is_empty() {
        shapes = vec![(1, 12288, 4096), (2048, 12288, 4096), (1537, 2049, 3001)];
    }
    let db = HardwareDb::embedded()?;
    let arch = db.get("h100")?;
    for t in Family::ALL
        .into_iter()
        .filter(|t| only.is_none_or(|o| o == *t))
    {
        let mut line = String::new();
        for &(m, n, k) in &shapes {
            let tpl = MatmulTemplate::new(m, n, k).with_family(t);
            let Ok(p) = tpl.validate(arch) else { continue };
            let count = carver::policy::candidates(t.rules(), &p, arch).len();
            let kept = carver::policy::candidates_for_topk(t.rules(), &p, arch, Some(8)).len();
            let start = std::time::Instant::now();
            for _ in 0..reps {
                let _ = carver::recommend_hints(&tpl, arch, TopK::DEFAULT);
            }
            line += &format!(
                " {m}x{n}x{k}: {kept} of {count} priced, {:?};",
                start.elapsed() / reps
            );
        }
        println!("{t}:{line}");
    }
    Ok(())
}
