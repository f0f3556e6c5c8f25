//! Tables of `carver tune` and `carver bench`. Labels and failures of a stored result come from
//! the tuning database, so they go through [`escape`].

use carver_schema::{BenchReport, EmitReport, RepackReport, TuneShapeResult};

use crate::output::{escape, table};

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// One line on the operand copies, for the tables; `winner_us` gives their share.
fn describe_repack(r: &RepackReport, winner_us: Option<f64>) -> String {
    let share = match (r.time_us, winner_us) {
        (Some(t), Some(w)) if w > 0.0 => format!(", {:.0}% of the winner's time", 100.0 * t / w),
        _ => String::new(),
    };
    format!(
        "repack: {} copied into 16-byte-aligned rows before every launch (included in every measured time): {} us{share}",
        r.operands.join(" and "),
        fmt_opt(r.time_us, 1)
    )
}

pub fn print_shape(device_name: &str, r: &TuneShapeResult) {
    let sh = &r.shape;
    let name = sh
        .name
        .as_deref()
        .map(|n| format!("{n}: "))
        .unwrap_or_default();
    println!(
        "{name}M={} N={} K={} {} {} on {device_name} (target cuda-sm90, {}{})",
        sh.m,
        sh.n,
        sh.k,
        r.dtype,
        r.layout,
        r.source,
        r.matched_shape
            .as_ref()
            .map(|m| format!(": the stored {}x{}x{} in the same bucket", m.m, m.n, m.k))
            .unwrap_or_default()
    );
    if let Some(e) = &r.error
        && r.candidates.is_empty()
    {
        println!("  error: {e}");
        if let Some(emit) = &r.emit {
            println!("  {}", describe_emit(emit));
        }
        println!();
        return;
    }
    let rows: Vec<Vec<String>> = r
        .candidates
        .iter()
        .map(|c| {
            vec![
                c.model_rank.to_string(),
                // Labels and failures of a stored result come from the database.
                escape(&c.label).into_owned(),
                fmt_opt(Some(c.predicted_time_us), 1),
                fmt_opt(c.measured_time_us, 1),
                fmt_opt(c.tflops, 0),
                fmt_opt(
                    c.measured_time_us
                        .zip(r.cublas_time_us)
                        .map(|(t, cb)| cb / t),
                    3,
                ),
                c.details
                    .as_ref()
                    .map_or("-".into(), |d| d.registers.to_string()),
                c.details.as_ref().map_or("-".into(), |d| {
                    if d.rel_error == 0.0 {
                        "exact".into()
                    } else {
                        format!("{:.1e}", d.rel_error)
                    }
                }),
                match (&c.failure, &c.details) {
                    (Some(f), _) => escape(f).into_owned(),
                    (None, Some(d)) if d.timing.early_stopped => {
                        format!("stopped early after {} runs", d.timing.runs)
                    }
                    _ => String::new(),
                },
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &[
                "RANK",
                "CONFIG",
                "PRED us",
                "MEAS us",
                "TFLOP/s",
                "vs cuBLAS",
                "REGS",
                "ERR",
                "NOTE",
            ],
            &rows
        )
    );
    println!(
        "cuBLAS {} us; winner {} us ({} TFLOP/s, model rank {}), {} of cuBLAS",
        fmt_opt(r.cublas_time_us, 1),
        fmt_opt(r.winner_time_us, 1),
        fmt_opt(r.winner_tflops, 0),
        r.winner_model_rank.map_or("-".into(), |x| x.to_string()),
        fmt_opt(r.speedup_vs_cublas, 3),
    );
    if let Some(rp) = &r.repack {
        println!("{}", describe_repack(rp, r.winner_time_us));
    }
    if let (Some(c), Some(b), Some(t)) = (r.compile_wall_s, r.bench_wall_s, r.total_wall_s) {
        println!("wall time: compile {c:.2} s, check and benchmark {b:.2} s, total {t:.2} s");
    }
    if let Some(st) = &r.stored {
        println!("tuning database: {}", escape(st));
    }
    if let Some(e) = &r.error {
        println!("error: {}", escape(e));
    }
    if let Some(emit) = &r.emit {
        println!("{}", describe_emit(emit));
    }
    println!();
}

/// One line on where `--emit` wrote the winner, or why it did not.
fn describe_emit(e: &EmitReport) -> String {
    let rerun = if e.rerun {
        " (the stored winner, run again for its launch grid)"
    } else {
        ""
    };
    match (&e.directory, &e.error) {
        (_, Some(why)) => format!("emit: not emitted{rerun}: {}", escape(why)),
        (Some(dir), None) => format!(
            "emit: {}{rerun}: {}",
            escape(dir),
            escape(&e.files.join(", "))
        ),
        (None, None) => format!("emit: nothing written{rerun}"),
    }
}

pub fn print_bench(report: &BenchReport) {
    let s = &report.shape;
    println!(
        "M={} N={} K={} {} {} on {}: {} ({})",
        s.m,
        s.n,
        s.k,
        report.dtype,
        report.layout,
        report.device.name,
        report.label,
        report.config_source
    );
    let note = report.failure.clone().unwrap_or_else(|| {
        format!(
            "predicted {:.1} us, rel. error {}",
            report.predicted_time_us,
            report
                .details
                .as_ref()
                .map_or("-".into(), |d| format!("{:.1e}", d.rel_error))
        )
    });
    let rows = [
        vec![
            "carver cuda-sm90".into(),
            fmt_opt(report.measured_time_us, 1),
            fmt_opt(report.tflops, 0),
            note,
        ],
        vec![
            "cuBLAS".into(),
            fmt_opt(report.cublas_time_us, 1),
            fmt_opt(report.cublas_tflops, 0),
            String::new(),
        ],
    ];
    println!(
        "{}",
        table(&["KERNEL", "TIME us", "TFLOP/s", "NOTE"], &rows).trim_end()
    );
    println!("{} of cuBLAS", fmt_opt(report.speedup_vs_cublas, 3));
    if let Some(rp) = &report.repack {
        println!("{}", describe_repack(rp, report.measured_time_us));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emit_line_says_where_or_why_not() {
        let written = EmitReport {
            directory: Some("out/1x4096x8192_bf16_rr".into()),
            files: vec!["kernel.cu".into(), "launch.json".into()],
            rerun: true,
            error: None,
        };
        assert_eq!(
            describe_emit(&written),
            "emit: out/1x4096x8192_bf16_rr (the stored winner, run again for its launch grid): kernel.cu, launch.json"
        );
        let refused = EmitReport {
            directory: None,
            files: vec![],
            rerun: false,
            error: Some("rows\u{1b}[31m".into()),
        };
        assert_eq!(
            describe_emit(&refused),
            "emit: not emitted: rows\\u{1b}[31m"
        );
    }
}
