//! Replays `carver tune --exhaustive` runs of the `cuda-sm90` family through the current model:
//! for each run, where `TopK, recommend_hints`' top-1 and best-of-top-8 land relative to the exhaustive
//! best, every time taken from the run itself. The runs cover the family's whole space, so every
//! pick is measured.
//!
//! `cargo run --release -p carver --example replay_tune -- DIR... [--verbose NAME]`
//! (DIR holds `ex-NAME.json` or `ex-NAME.json.gz`, as `benches/sm90/run.sh` writes them.)

use std::collections::HashMap;

use carver::{DType, Family, MatmulTemplate, TopK, recommend_hints};
use carver_arch::HardwareDb;

#[path = "common/mod.rs"]
mod common;
use common::read_json;

fn key(cfg: &serde_json::Value) -> String {
    let mut fields: Vec<(String, String)> = cfg
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect();
    fields.sort();
    fields
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn geomean(xs: &[f64]) -> f64 {
    (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let verbose = args
        .iter()
        .position(|a| a == "--verbose")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let dirs: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with("--") && (*i == 0 || args[i - 1] != "--verbose"))
        .map(|(_, a)| a)
        .collect();
    // `$CARVER_HARDWARE_DB` may override the shipped description (to replay a variant arch).
    let db = HardwareDb::load(None).unwrap();
    let arch = db.get("h100").unwrap();
    let (mut top1, mut top8) = (Vec::new(), Vec::new());
    println!("run        top1    top8   model pick / measured best");
    for dir in dirs {
        let mut runs: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                name.starts_with("ex-") && (name.ends_with(".json") || name.ends_with(".json.gz"))
            })
            .collect();
        runs.sort();
        for path in runs {
            let name = path.file_name().unwrap().to_string_lossy();
            let name = name
                .trim_start_matches("ex-")
                .trim_end_matches(".gz")
                .trim_end_matches(".json")
                .to_string();
            let run = &read_json(&path)["results"][0];
            let shape = &run["shape"];
            let dim = |k: &str| shape[k].as_u64().unwrap();
            let measured: HashMap<String, f64> = run["candidates"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| Some((key(&c["config"]), c["measured_time_us"].as_f64()?)))
                .collect();
            let best = measured.values().copied().fold(f64::INFINITY, f64::min);
            let tpl = MatmulTemplate::new(dim("m"), dim("n"), dim("k"))
                .with_family(Family::CudaSm90)
                .with_dtype(DType::Bf16);
            let hints = recommend_hints(&tpl, arch, TopK::DEFAULT).unwrap();
            let times: Vec<f64> = hints.iter().map(|h| measured[&key(&h.config)]).collect();
            let r1 = best / times[0];
            let r8 = best / times.iter().copied().fold(f64::INFINITY, f64::min);
            let best_key = measured.iter().min_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
            println!(
                "{name:<10} {r1:>5.3}  {r8:>5.3}   {} / {best_key}",
                key(&hints[0].config)
            );
            if verbose.as_deref() == Some(name.as_str()) {
                for (h, t) in hints.iter().zip(&times) {
                    println!(
                        "    #{} {}  predicted {:.1} us  measured {t:.1} us ({:.3})",
                        h.rank,
                        key(&h.config),
                        h.prediction.time_us,
                        best / t
                    );
                }
            }
            top1.push(r1);
            top8.push(r8);
        }
    }
    println!(
        "{} runs: top-1 geomean {:.3} (worst {:.3}), best-of-8 geomean {:.3} (worst {:.3})",
        top1.len(),
        geomean(&top1),
        top1.iter().copied().fold(f64::INFINITY, f64::min),
        geomean(&top8),
        top8.iter().copied().fold(f64::INFINITY, f64::min)
    );
}
