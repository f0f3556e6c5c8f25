//! `carver tune` and `carver bench`: arguments and exit statuses here, the tables of their
//! reports in [`render`]. The flows themselves are `carver_flows::tune` (a worker process runs
//! `carver tune --worker`, hidden).

mod render;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use carver::{DType, Layout, TopK};
use carver_flows::shapes::{ShapeRow, read_shapes};
use carver_flows::tune::{
    self as flows, BenchRequest, Candidates, RunOptions, TuneRequest, WorkerProgram,
};
use carver_tunedb::Bucket;
use clap::Args;
use render::{print_bench, print_shape};

use crate::Globals;
use crate::output::{Format, print_json};
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
    /// Input dtype of A and B: bf16, f16, or fp8 e4m3 / e5m2 (fp8 needs `--layout rc`: wgmma
    /// reads 8-bit operands K-major, and K a multiple of 16).
    #[arg(long, default_value = "bf16", value_parser = parse_dtype)]
    pub dtype: DType,
    /// Output dtype: bf16 or f16 (default: the input's; f16 for fp8 inputs).
    #[arg(long, value_parser = parse_out_dtype)]
    pub out_dtype: Option<DType>,
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
    #[arg(long, conflicts_with = "reference")]
    pub exhaustive: bool,
    /// Try the top-k and, to measure them against, a reduced whole space (every plain
    /// structure at two depths, about 900 configurations): ranks 1 to k are the picks.
    #[arg(long)]
    pub reference: bool,
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
    /// Write each shape's winner for other programs under DIR/<shape>/: its CUDA source, its
    /// cubin and launch.json (grid, block, cluster, shared memory, every parameter; see
    /// examples/emit). A winner from the database is run once more for its launch grid.
    #[arg(long, value_name = "DIR")]
    pub emit: Option<PathBuf>,
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
    /// Input dtype of A and B: bf16, f16, or fp8 e4m3 / e5m2 (fp8 needs `--layout rc`: wgmma
    /// reads 8-bit operands K-major, and K a multiple of 16).
    #[arg(long, default_value = "bf16", value_parser = parse_dtype)]
    pub dtype: DType,
    /// Output dtype: bf16 or f16 (default: the input's; f16 for fp8 inputs).
    #[arg(long, value_parser = parse_out_dtype)]
    pub out_dtype: Option<DType>,
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
    if matches!(t, DType::Bf16 | DType::F16 | DType::E4m3 | DType::E5m2) {
        Ok(t)
    } else {
        Err(format!(
            "dtype `{s}`: carver's native kernel family (cuda-sm90) takes bf16, f16, e4m3 or e5m2"
        ))
    }
}

fn parse_out_dtype(s: &str) -> Result<DType, String> {
    let t: DType = s.parse()?;
    if matches!(t, DType::Bf16 | DType::F16) {
        Ok(t)
    } else {
        Err(format!(
            "output dtype `{s}`: carver's native kernel family (cuda-sm90) writes bf16 or f16"
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
        out_dtype: args.out_dtype,
        layouts: args.layout,
        candidates: if args.exhaustive {
            Candidates::Every
        } else if args.reference {
            Candidates::Reference(args.topk)
        } else {
            Candidates::Top(args.topk)
        },
        retune: args.retune,
        bucket: args.bucket,
        run: run_options(args.device, args.watchdog_s, globals),
        emit: args.emit.clone(),
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
    let total = report.results.len();
    let failed = report.results.iter().filter(|r| r.error.is_some()).count();
    if failed > 0 {
        eprintln!("error: {failed} of {total} shape(s) have no result");
    }
    // An emit that was asked for and did not happen is a failure too, never a quiet skip.
    let not_emitted = report
        .results
        .iter()
        .filter(|r| r.emit.as_ref().is_some_and(|e| e.error.is_some()))
        .count();
    if not_emitted > 0 {
        eprintln!("error: {not_emitted} of {total} shape(s) were not emitted");
    }
    Ok(if failed + not_emitted > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
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
        out_dtype: args.out_dtype,
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
