//! `carver tune` and `carver bench`: arguments, and the tables of their reports. The flows
//! themselves are `carver_flows::tune` (a worker process runs `carver tune --worker`, hidden).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use carver::{DType, Layout, TopK};
use carver_flows::shapes::{ShapeRow, read_shapes};
use carver_flows::tune::{
    self as flows, BenchRequest, Candidates, RunOptions, TuneRequest, WorkerProgram,
};
use carver_schema::{BenchReport, RepackReport, TuneShapeResult};
use carver_tunedb::Bucket;
use clap::Args;

use crate::Globals;
use crate::output::{Format, escape, print_json, table};
use crate::progress::Terminal;
use crate::recommend::parse_size;

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// Rows of A and C: the problem is C (M x N) = A (M x K) @ B (K x N).
    #[arg(
        long,
        required_unless_present_any = ["shapes", "worker"],
        value_parser = parse_size,
        allow_negative_numbers = true
    )]
    pub m: Option<u64>,
    /// Columns of B and C.
    #[arg(
        long,
        required_unless_present_any = ["shapes", "worker"],
        value_parser = parse_size,
        allow_negative_numbers = true
    )]
    pub n: Option<u64>,
    /// The reduction dimension: columns of A, rows of B.
    #[arg(
        long,
        required_unless_present_any = ["shapes", "worker"],
        value_parser = parse_size,
        allow_negative_numbers = true
    )]
    pub k: Option<u64>,
    /// Independent matmuls of this shape, stored one after another (strided batched GEMM).
    #[arg(
        long,
        default_value_t = 1,
        value_parser = parse_size,
        allow_negative_numbers = true,
        conflicts_with = "shapes"
    )]
    pub batch: u64,
    /// Input dtype of A and B (the output has the same type): bf16 or f16.
    #[arg(long, default_value = "bf16", value_parser = parse_dtype)]
    pub dtype: DType,
    /// Storage order of A and B: `rr` (B is K x N) or `rc` (B is N x K, K contiguous).
    #[arg(long, default_value = "rr", value_parser = parse_layout)]
    pub layout: (Layout, Layout),
    /// How many of the model's best configurations to try.
    #[arg(
        long,
        default_value_t = TopK::DEFAULT,
        value_parser = crate::recommend::parse_topk,
        allow_negative_numbers = true
    )]
    pub topk: TopK,
    /// Try every legal configuration of the family instead of the top-k.
    #[arg(long)]
    pub exhaustive: bool,
    /// A table for people, or versioned JSON for programs.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Many shapes: JSON (like eval/dev-shapes.json) or CSV with M,N,K columns.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["m", "n", "k"])]
    pub shapes: Option<PathBuf>,
    /// Measure again even when the tuning database already has a result, and store the new
    /// result in its place.
    #[arg(long)]
    pub retune: bool,
    /// How a stored result's M, N and K must match: `exact`, or `pow2` (each size rounded up to
    /// a power of two; the closest stored shape in that bucket answers).
    #[arg(long, default_value_t = Bucket::Exact, value_parser = parse_bucket)]
    pub bucket: Bucket,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Seconds a candidate may take (check and timing) before its worker is killed.
    #[arg(long, default_value_t = 60)]
    pub watchdog_s: u64,
    /// Serve one tuning worker on stdin/stdout (used by `carver tune` itself).
    #[arg(long, hide = true)]
    pub worker: bool,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Rows of A and C: the problem is C (M x N) = A (M x K) @ B (K x N).
    #[arg(long, value_parser = parse_size, allow_negative_numbers = true)]
    pub m: u64,
    /// Columns of B and C.
    #[arg(long, value_parser = parse_size, allow_negative_numbers = true)]
    pub n: u64,
    /// The reduction dimension: columns of A, rows of B.
    #[arg(long, value_parser = parse_size, allow_negative_numbers = true)]
    pub k: u64,
    /// Input dtype of A and B (the output has the same type): bf16 or f16.
    #[arg(long, default_value = "bf16", value_parser = parse_dtype)]
    pub dtype: DType,
    /// Storage order of A and B: `rr` (B is K x N) or `rc` (B is N x K, K contiguous).
    #[arg(long, default_value = "rr", value_parser = parse_layout)]
    pub layout: (Layout, Layout),
    /// The configuration in cuda-sm90's own terms, e.g. `{"block_m":128,"block_n":256,
    /// "block_k":64,"stages":4,"consumers":2,"group_m":8,"cluster_m":1,"persistent":true}`
    /// (default: the tuning database's winner for this shape on this GPU).
    #[arg(long, value_name = "JSON")]
    pub config: Option<String>,
    /// Without --config: how the database winner's M, N and K must match (`exact` or `pow2`).
    #[arg(long, default_value_t = Bucket::Exact, value_parser = parse_bucket)]
    pub bucket: Bucket,
    /// A table for people, or versioned JSON for programs.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Seconds the configuration may take (check and timing) before its worker is killed.
    #[arg(long, default_value_t = 60)]
    pub watchdog_s: u64,
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    let t: DType = s.parse()?;
    if matches!(t, DType::Bf16 | DType::F16) {
        Ok(t)
    } else {
        Err(format!(
            "dtype `{s}`: carver's native kernel family (cuda-sm90) takes bf16 or f16"
        ))
    }
}

fn parse_bucket(s: &str) -> Result<Bucket, String> {
    s.parse()
}

fn parse_layout(s: &str) -> Result<(Layout, Layout), String> {
    match s.to_ascii_lowercase().as_str() {
        "rr" => Ok((Layout::Row, Layout::Row)),
        "rc" => Ok((Layout::Row, Layout::Col)),
        _ => Err(format!(
            "layout `{s}`: cuda-sm90 takes `rr` (A row-major, B row-major K x N) or `rc` (B column-major, stored N x K)"
        )),
    }
}

fn run_options(device: usize, watchdog_s: u64, globals: &Globals) -> RunOptions {
    let mut args = globals.relaunch.args.clone();
    args.extend(["tune".into(), "--worker".into()]);
    RunOptions {
        device,
        watchdog: Duration::from_secs(watchdog_s),
        worker: WorkerProgram {
            program: globals.relaunch.program.clone(),
            args,
        },
    }
}

pub fn run_tune(args: TuneArgs, globals: &Globals) -> anyhow::Result<ExitCode> {
    if args.worker {
        flows::serve_worker()?;
        return Ok(ExitCode::SUCCESS);
    }
    let shapes = match &args.shapes {
        Some(path) => read_shapes(path)?,
        // clap requires --m, --n and --k without --shapes.
        None => vec![ShapeRow::one(
            args.m.unwrap_or_default(),
            args.n.unwrap_or_default(),
            args.k.unwrap_or_default(),
            args.batch,
        )],
    };
    let request = TuneRequest {
        shapes,
        dtype: args.dtype,
        layouts: args.layout,
        candidates: if args.exhaustive {
            Candidates::Every
        } else {
            Candidates::Top(args.topk)
        },
        retune: args.retune,
        bucket: args.bucket,
        run: run_options(args.device, args.watchdog_s, globals),
    };
    let report = flows::tune(&globals.locations, &request, &Terminal::default())?;
    match args.format {
        Format::Json => print_json(&report)?,
        Format::Table => {
            for r in &report.results {
                print_shape(&report.device.name, r);
            }
        }
    }
    let failed = report.results.iter().filter(|r| r.error.is_some()).count();
    if failed > 0 {
        eprintln!(
            "error: {failed} of {} shape(s) have no result",
            report.results.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_bench(args: BenchArgs, globals: &Globals) -> anyhow::Result<ExitCode> {
    let config = match &args.config {
        Some(text) => {
            Some(serde_json::from_str::<serde_json::Value>(text).context("--config is not JSON")?)
        }
        None => None,
    };
    let request = BenchRequest {
        m: args.m,
        n: args.n,
        k: args.k,
        dtype: args.dtype,
        layouts: args.layout,
        config,
        bucket: args.bucket,
        run: run_options(args.device, args.watchdog_s, globals),
    };
    let report = flows::bench(&globals.locations, &request, &Terminal::default())?;
    match args.format {
        Format::Json => print_json(&report)?,
        Format::Table => print_bench(&report),
    }
    Ok(if report.failure.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

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

fn print_shape(device_name: &str, r: &TuneShapeResult) {
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
        println!("  error: {e}\n");
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
    println!();
}

fn print_bench(report: &BenchReport) {
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
