//! Replays `carver tune --exhaustive` runs of the `cuda-sm90` family through the current model:
//! for each run, where `recommend_hints`' top-1 and best-of-top-8 land relative to the exhaustive
//! best, every time taken from the run itself. The runs cover the family's whole space, so every
//! pick is measured.

use std::collections::HashMap;
use std::process::ExitCode;

use carver::{DType, Family, MatmulTemplate, TopK, recommend_hints};
use carver_arch::HardwareDb;

#[path = "common/mod.rs"]
mod common;
use common::{Context, field_array, field_u64, read_json};

const USAGE: &str = "\
Replays `carver tune --exhaustive` runs of the cuda-sm90 family through the current model (H100):
per run, where recommend_hints' top-1 and best-of-top-8 land relative to the exhaustive best,
every time taken from the run itself; then their geometric means over all runs.

Usage: cargo run --release -p carver --example replay_tune -- DIR... [--verbose NAME]

  DIR             holds ex-NAME.json, ex-NAME.json.xz or ex-NAME.json.gz (benches/sm90/run.sh
                  writes them; the stored ones are xz-compressed)
                  (e.g. crates/carver-gpu/measurements/h100-exhaustive-*)
  --verbose NAME  also list run NAME's top-8 with predicted and measured times

$CARVER_HARDWARE_DB may override the shipped H100 description (to replay a variant).
";

/// The configuration's fields, sorted, as one string: the same config from a hint and from a
/// run's candidate list gives the same key.
fn key(cfg: &serde_json::Value) -> common::Result<String> {
    let mut fields: Vec<(String, String)> = cfg
        .as_object()
        .context(format!("config {cfg} is not a JSON object"))?
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect();
    fields.sort();
    Ok(fields
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(","))
}

fn geomean(xs: &[f64]) -> f64 {
    (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp()
}

fn main() -> ExitCode {
    common::main(USAGE, run)
}

fn run(mut args: Vec<String>) -> common::Result {
    let verbose = common::take_option(&mut args, "--verbose")?;
    common::no_options(&args)?;
    let dirs = args;
    if dirs.is_empty() {
        return common::usage_error("no run directory given");
    }
    // `$CARVER_HARDWARE_DB` may override the shipped description (to replay a variant arch).
    let db = HardwareDb::load(None).context("hardware database")?;
    let arch = db.get("h100")?;
    let (mut top1, mut top8) = (Vec::new(), Vec::new());
    println!("run        top1    top8   model pick / measured best");
    for dir in &dirs {
        let mut runs: Vec<(std::path::PathBuf, String)> = std::fs::read_dir(dir)
            .context(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter_map(|p| {
                let name = p.file_name()?.to_string_lossy().into_owned();
                (name.starts_with("ex-")
                    && [".json", ".json.gz", ".json.xz"]
                        .iter()
                        .any(|e| name.ends_with(e)))
                .then_some((p, name))
            })
            .collect();
        runs.sort();
        for (path, name) in runs {
            let name = name
                .trim_start_matches("ex-")
                .trim_end_matches(".gz")
                .trim_end_matches(".xz")
                .trim_end_matches(".json")
                .to_string();
            let at = path.display().to_string();
            let file = read_json(&path)?;
            let run = &file["results"][0];
            let shape = &run["shape"];
            let dim = |k: &str| field_u64(shape, k, format!("{at}: results[0].shape"));
            let mut measured: HashMap<String, f64> = HashMap::new();
            for c in field_array(run, "candidates", format!("{at}: results[0]"))? {
                if let Some(t) = c["measured_time_us"].as_f64() {
                    measured.insert(key(&c["config"]).context(&at)?, t);
                }
            }
            let best = measured.values().copied().fold(f64::INFINITY, f64::min);
            let tpl = MatmulTemplate::new(dim("m")?, dim("n")?, dim("k")?)
                .with_family(Family::CudaSm90)
                .with_dtype(DType::Bf16);
            let hints = recommend_hints(&tpl, arch, TopK::DEFAULT).context(&at)?;
            let mut times: Vec<f64> = Vec::new();
            for h in &hints {
                let k = key(&h.config)?;
                let t = measured.get(&k).context(format!(
                    "{at}: pick #{} {k} was not measured (not an exhaustive run of this family?)",
                    h.rank
                ))?;
                times.push(*t);
            }
            let (Some(first_time), Some(first_hint)) = (times.first(), hints.first()) else {
                return common::error(format!("{at}: the model recommends nothing"));
            };
            let r1 = best / first_time;
            let r8 = best / times.iter().copied().fold(f64::INFINITY, f64::min);
            // Not empty: every hint's time was found in it.
            let best_key = measured
                .iter()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .map(|(k, _)| k)
                .context(&at)?;
            println!(
                "{name:<10} {r1:>5.3}  {r8:>5.3}   {} / {best_key}",
                key(&first_hint.config)?
            );
            if verbose.as_deref() == Some(name.as_str()) {
                for (h, t) in hints.iter().zip(&times) {
                    println!(
                        "    #{} {}  predicted {:.1} us  measured {t:.1} us ({:.3})",
                        h.rank,
                        key(&h.config)?,
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
    Ok(())
}
