//! How far behind its own best prediction the model puts the configuration that measured
//! fastest: for every shape of saved GPU measurements (Triton sweeps, `cuda-sm90` exhaustive
//! runs), the winner's predicted time over the best predicted time among the measured configs,
//! and the same for the best-predicted config measured within 2% and 5% of the winner. The
//! ranking's diversity windows (`rank::diversity_window`) are set from this spread.
//!
//! `cargo run --release -p carver --example winner_gap -- \
//!     benches/triton/runs/h100-2026-11-22-sweep4/triton_sweep.json \
//!     benches/triton/runs/h100-2026-11-22-holdout/triton_sweep.json \
//!     crates/carver-gpu/measurements/h100-exhaustive-*/ex-*.json.gz`
use carver::{DType, Family, MatmulTemplate, predict_native};
use carver_arch::HardwareDb;

#[path = "common/mod.rs"]
mod common;

/// (template, measured (native config, time), name) of every shape in a saved run.
type Shape = (MatmulTemplate, Vec<(serde_json::Value, f64)>, String);

fn shapes(path: &str) -> Vec<Shape> {
    let v = common::read_json(std::path::Path::new(path));
    let dim = |x: &serde_json::Value, k: &str| x[k].as_u64().unwrap();
    if let Some(sweep) = v["shapes"].as_array() {
        // A Triton sweep (benches/triton/harness.py).
        sweep
            .iter()
            .map(|s| {
                let tpl = MatmulTemplate::new(dim(s, "M"), dim(s, "N"), dim(s, "K"))
                    .with_family(Family::Triton);
                let rows = s["configs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|c| c["status"] == "timed")
                    .filter_map(|c| Some((c["config"].clone(), c["final_us"].as_f64()?)))
                    .collect();
                (tpl, rows, s["name"].as_str().unwrap_or("?").to_string())
            })
            .collect()
    } else {
        // A `carver tune --exhaustive` result (bf16).
        let run = &v["results"][0];
        let shape = &run["shape"];
        let tpl = MatmulTemplate::new(dim(shape, "m"), dim(shape, "n"), dim(shape, "k"))
            .with_family(Family::CudaSm90)
            .with_dtype(DType::Bf16);
        let rows = run["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| Some((c["config"].clone(), c["measured_time_us"].as_f64()?)))
            .collect();
        let name = path.rsplit('/').next().unwrap_or(path).to_string();
        vec![(tpl, rows, name)]
    }
}

fn main() {
    let db = HardwareDb::load(None).unwrap();
    let arch = db.get("h100").unwrap();
    let mut gaps: [Vec<f64>; 3] = Default::default();
    for path in std::env::args().skip(1) {
        for (tpl, rows, name) in shapes(&path) {
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
}
