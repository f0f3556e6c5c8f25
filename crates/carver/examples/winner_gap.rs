//! How far behind its own best prediction the model puts the configuration that measured
//! fastest: for every shape of saved GPU measurements (Triton sweeps, `cuda-sm90` exhaustive
//! runs), the winner's predicted time over the best predicted time among the measured configs,
//! and the same for the best-predicted config measured within 2% and 5% of the winner. The
//! ranking's diversity windows (`rank::diversity_window`) are set from this spread.
use std::process::ExitCode;

use carver::{DType, Family, MatmulTemplate, predict_native};
use carver_arch::HardwareDb;

#[path = "common/mod.rs"]
mod common;
use common::{Context, field_array, field_u64};

const USAGE: &str = "\
How far behind its own best prediction the model (H100) puts the configuration that measured
fastest, per shape of saved measurements, and the same for the best-predicted config measured
within 2% and 5% of the winner; then the distribution of those ratios over all shapes.

Usage: cargo run --release -p carver --example winner_gap -- FILE...

  FILE  a Triton sweep (benches/triton/harness.py's triton_sweep.json) or a
        `carver tune --exhaustive` result (.json, .json.xz or .json.gz), for example
        benches/triton/runs/h100-2026-11-22-sweep4/triton_sweep.json.xz
        crates/carver-gpu/measurements/h100-exhaustive-*/ex-*.json.xz
";

/// (template, measured (native config, time), name) of every shape in a saved run.
type Shape = (MatmulTemplate, Vec<(serde_json::Value, f64)>, String);

fn shapes(path: &str) -> common::Result<Vec<Shape>> {
    let v = common::read_json(std::path::Path::new(path))?;
    if let Some(sweep) = v["shapes"].as_array() {
        // A Triton sweep (benches/triton/harness.py).
        let mut out = Vec::new();
        for (i, s) in sweep.iter().enumerate() {
            let at = format!("{path}: shape {}", i + 1);
            let tpl = MatmulTemplate::new(
                field_u64(s, "M", &at)?,
                field_u64(s, "N", &at)?,
                field_u64(s, "K", &at)?,
            )
            .with_family(Family::Triton);
            let rows = field_array(s, "configs", &at)?
                .iter()
                .filter(|c| c["status"] == "timed")
                .filter_map(|c| Some((c["config"].clone(), c["final_us"].as_f64()?)))
                .collect();
            out.push((tpl, rows, s["name"].as_str().unwrap_or("?").to_string()));
        }
        Ok(out)
    } else {
        // A `carver tune --exhaustive` result (bf16).
        let run = &v["results"][0];
        let shape = &run["shape"];
        let at = format!("{path}: results[0].shape");
        let tpl = MatmulTemplate::new(
            field_u64(shape, "m", &at)?,
            field_u64(shape, "n", &at)?,
            field_u64(shape, "k", &at)?,
        )
        .with_family(Family::CudaSm90)
        .with_dtype(DType::Bf16);
        let rows = field_array(run, "candidates", format!("{path}: results[0]"))?
            .iter()
            .filter_map(|c| Some((c["config"].clone(), c["measured_time_us"].as_f64()?)))
            .collect();
        let name = path.rsplit('/').next().unwrap_or(path).to_string();
        Ok(vec![(tpl, rows, name)])
    }
}

fn main() -> ExitCode {
    common::main(USAGE, run)
}

fn run(args: Vec<String>) -> common::Result {
    common::no_options(&args)?;
    if args.is_empty() {
        return common::usage_error("no measurement files given");
    }
    let db = HardwareDb::load(None).context("hardware database")?;
    let arch = db.get("h100")?;
    let mut gaps: [Vec<f64>; 3] = Default::default();
    for path in args {
        for (tpl, rows, name) in shapes(&path)? {
            // (predicted, measured) of every measured config the model can price.
            let priced: Vec<(f64, f64)> = rows
                .iter()
                .filter_map(|(c, t)| Some((predict_native(&tpl, arch, c).ok()?.1.time_us, *t)))
                .collect();
            let predicted_best = priced.iter().map(|x| x.0).fold(f64::INFINITY, f64::min);
            let measured_best = priced.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
            let gap = |within: f64| {
                priced
                    .iter()
                    .filter(|x| x.1 <= measured_best * within)
                    .map(|x| x.0 / predicted_best)
                    .fold(f64::INFINITY, f64::min)
            };
            let row = [gap(1.0), gap(1.02), gap(1.05)];
            println!(
                "{name:<28} winner at {:.3}x the predicted best; within 2%: {:.3}x; within 5%: {:.3}x",
                row[0], row[1], row[2]
            );
            for (g, v) in gaps.iter_mut().zip(row) {
                g.push(v);
            }
        }
    }
    for (label, mut xs) in ["winner", "within 2%", "within 5%"].into_iter().zip(gaps) {
        if xs.is_empty() {
            continue;
        }
        xs.sort_by(f64::total_cmp);
        let q = |p: f64| xs[((xs.len() - 1) as f64 * p).round() as usize];
        println!(
            "{label:>10}: {} shapes, median {:.3}, p75 {:.3}, p90 {:.3}, max {:.3}",
            xs.len(),
            q(0.5),
            q(0.75),
            q(0.9),
            xs[xs.len() - 1]
        );
    }
    Ok(())
}
