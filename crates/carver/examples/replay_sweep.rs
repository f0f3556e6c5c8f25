//! Replays a measured Triton sweep (`benches/triton/harness.py` output) through the cost model:
//! for each shape, ranks the measured configurations by predicted time and reports how close the
//! model's top-1 and best-of-top-8 come to the measured best, plus where `recommend_hints`'
//! own picks land when they were measured.

use std::collections::HashMap;
use std::process::ExitCode;

use carver::{Family, MatmulTemplate, TopK, predict_native, recommend_hints};
use carver_arch::HardwareDb;

#[path = "common/mod.rs"]
mod common;
use common::{Context, field_array, field_u64};

const USAGE: &str = "\
Replays a measured Triton sweep through the cost model (H100): per shape, how close the model's
top-1 and best-of-top-8 among the measured configs come to the measured best, where the policy
and ranking's own picks land when they were measured, and the Spearman correlation of predicted
and measured times.

Usage: cargo run --release -p carver --example replay_sweep -- SWEEP.json [--verbose NAME]

  SWEEP.json      benches/triton/harness.py's output (triton_sweep.json)
  --verbose NAME  also list the shape NAME's configs, by prediction and by measurement
                  (`all` for every shape)

$CARVER_HARDWARE_DB may override the shipped H100 description (to replay a variant).
";

fn key_of(cfg: &serde_json::Value) -> String {
    let kw = &cfg["kwargs"];
    format!(
        "BM{}_BN{}_BK{}_G{}_SK{}_w{}_s{}",
        kw["BLOCK_SIZE_M"],
        kw["BLOCK_SIZE_N"],
        kw["BLOCK_SIZE_K"],
        kw["GROUP_SIZE_M"],
        kw["SPLIT_K"],
        cfg["num_warps"],
        cfg["num_stages"]
    )
}

fn main() -> ExitCode {
    common::main(USAGE, run)
}

fn run(mut args: Vec<String>) -> common::Result {
    let verbose = common::take_option(&mut args, "--verbose")?;
    common::no_options(&args)?;
    let path = match args.as_slice() {
        [path] => path,
        [] => return common::usage_error("no sweep file given"),
        [_, extra, ..] => return common::usage_error(format!("unexpected argument `{extra}`")),
    };
    let sweep = common::read_json(std::path::Path::new(path))?;
    // `$CARVER_HARDWARE_DB` may override the shipped description (to replay a variant arch).
    let db = HardwareDb::load(None).context("hardware database")?;
    let arch = db.get("h100")?;
    let (mut top1, mut top8, mut picks1, mut picks8) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    println!(
        "{:<18} {:>7} {:>7} {:>7} {:>7}  {:>6}  model-best / measured-best",
        "shape", "top1", "top8", "pick1", "pick8", "rho"
    );
    for (i, shape) in field_array(&sweep, "shapes", path)?.iter().enumerate() {
        let at = format!("{path}: shape {}", i + 1);
        let name = shape["name"]
            .as_str()
            .context(format!("{at}: no string `name`"))?;
        let (m, n, k) = (
            field_u64(shape, "M", &at)?,
            field_u64(shape, "N", &at)?,
            field_u64(shape, "K", &at)?,
        );
        let tpl = MatmulTemplate::new(m, n, k).with_family(Family::Triton);
        let mut rows: Vec<(String, f64, f64)> = Vec::new();
        let mut measured: HashMap<String, f64> = HashMap::new();
        for c in field_array(shape, "configs", &at)? {
            let Some(t) = c["final_us"].as_f64() else {
                continue;
            };
            if c["status"] != "timed" {
                continue;
            }
            let key = key_of(&c["config"]);
            measured.insert(key.clone(), t);
            if let Ok((_, p)) = predict_native(&tpl, arch, &c["config"]) {
                rows.push((key, p.time_us, t));
            }
        }
        let best = measured.values().copied().fold(f64::INFINITY, f64::min);
        rows.sort_by(|a, b| a.1.total_cmp(&b.1));
        let Some(first) = rows.first() else {
            return common::error(format!(
                "{at} ({name}): the model prices none of its timed configs"
            ));
        };
        let r1 = best / first.2;
        let r8 = best
            / rows
                .iter()
                .take(8)
                .map(|r| r.2)
                .fold(f64::INFINITY, f64::min);
        // Spearman rank correlation between predicted and measured.
        let n_rows = rows.len();
        let mut by_meas: Vec<usize> = (0..n_rows).collect();
        by_meas.sort_by(|&a, &b| rows[a].2.total_cmp(&rows[b].2));
        let mut rank_meas = vec![0usize; n_rows];
        for (r, &i) in by_meas.iter().enumerate() {
            rank_meas[i] = r;
        }
        let d2: f64 = (0..n_rows)
            .map(|i| (i as f64 - rank_meas[i] as f64).powi(2))
            .sum();
        let rho = 1.0 - 6.0 * d2 / (n_rows as f64 * ((n_rows * n_rows) as f64 - 1.0));
        // The policy and ranking restricted to measured configurations: what recommend_hints
        // would pick if the sweep had covered its whole space.
        let problem = tpl.validate(arch).context(&at)?;
        let family = tpl.family.rules();
        let covered: Vec<_> = carver::policy::candidates(family, &problem, arch)
            .into_iter()
            .filter(|c| measured.contains_key(&key_of(&family.native(&c.tile))))
            .collect();
        let chosen = carver::rank::select(
            &covered,
            8,
            carver::rank::window_for(family, &problem, arch),
        );
        let pick_times: Vec<Option<f64>> = chosen
            .iter()
            .map(|c| measured.get(&key_of(&family.native(&c.tile))).copied())
            .collect();
        let hints = recommend_hints(&tpl, arch, TopK::DEFAULT).context(&at)?;
        let unmeasured = hints
            .iter()
            .filter(|h| !measured.contains_key(&key_of(&h.config)))
            .count();
        let p1 = pick_times.first().copied().flatten().map(|t| best / t);
        let p8 = pick_times
            .iter()
            .flatten()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let p8 = (p8.is_finite()).then(|| best / p8);
        // Not empty: every priced row was measured.
        let best_key = measured
            .iter()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .map(|(key, _)| key)
            .context(&at)?;
        let fmt = |x: Option<f64>| x.map(|v| format!("{v:.3}")).unwrap_or("  -  ".into());
        println!(
            "{name:<18} {r1:>7.3} {r8:>7.3} {:>7} {:>7}  {rho:>6.2}  {} / {best_key} ({unmeasured} of 8 real picks unmeasured)",
            fmt(p1),
            fmt(p8),
            chosen
                .first()
                .map(|c| key_of(&family.native(&c.tile)))
                .unwrap_or_default()
        );
        top1.push(r1);
        top8.push(r8);
        if let Some(v) = p1 {
            picks1.push(v);
        }
        if let Some(v) = p8 {
            picks8.push(v);
        }
        if verbose.as_deref() == Some(name) || verbose.as_deref() == Some("all") {
            for (key, pred, meas) in rows.iter().take(25) {
                println!(
                    "    {key:<32} predicted {pred:>9.2} us  measured {meas:>9.2} us  ({:.3})",
                    best / meas
                );
            }
            let mut by_measured = rows.clone();
            by_measured.sort_by(|a, b| a.2.total_cmp(&b.2));
            println!("    -- measured fastest --");
            for (key, pred, meas) in by_measured.iter().take(12) {
                println!("    {key:<32} predicted {pred:>9.2} us  measured {meas:>9.2} us");
            }
        }
    }
    let geo = |v: &[f64]| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len().max(1) as f64).exp();
    let worst = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "model over measured configs: top1 geomean {:.3} worst {:.3}; top8 geomean {:.3} worst {:.3}",
        geo(&top1),
        worst(&top1),
        geo(&top8),
        worst(&top8)
    );
    println!(
        "policy + ranking over measured configs ({} top-1, {} shapes): top1 geomean {:.3}, best-of-8 geomean {:.3}",
        picks1.len(),
        picks8.len(),
        geo(&picks1),
        geo(&picks8)
    );
    Ok(())
}
