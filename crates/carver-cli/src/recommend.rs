//! `carver recommend`: rank configurations with the cost model, for one shape or a file of them,
//! on one or several GPUs.

use std::path::PathBuf;
use std::process::ExitCode;

use carver::template::MAX_DIM;
use carver::{DType, Family, Layout, TopK};
use carver_flows::archs::ArchChoice;
use carver_flows::recommend::{RecommendRequest, parse_layouts, recommend};
use carver_flows::shapes::{ShapeRow, read_shapes};
use carver_schema::{Hint, RecommendResult};
use clap::Args;

use crate::Globals;
use crate::output::{Format, escape, print_json, table};
use crate::progress::Terminal;

#[derive(Debug, Args)]
pub struct RecommendArgs {
    /// GPU(s) to plan for: a database name (`h100`), several (`h100,a100,l40s`), or `auto`
    /// for this machine's GPU.
    #[arg(long, value_delimiter = ',', default_value = "h100", value_parser = parse_gpu_name)]
    pub arch: Vec<String>,
    /// Rows of A and C: the problem is C (M x N) = A (M x K) @ B (K x N).
    #[arg(
        long,
        required_unless_present = "shapes",
        value_parser = parse_size,
        allow_negative_numbers = true
    )]
    pub m: Option<u64>,
    /// Columns of B and C.
    #[arg(
        long,
        required_unless_present = "shapes",
        value_parser = parse_size,
        allow_negative_numbers = true
    )]
    pub n: Option<u64>,
    /// The reduction dimension: columns of A, rows of B.
    #[arg(
        long,
        required_unless_present = "shapes",
        value_parser = parse_size,
        allow_negative_numbers = true
    )]
    pub k: Option<u64>,
    /// Independent matmuls of this shape in one launch, C[b] = A[b] @ B[b] (a shapes file gives
    /// its own, per row).
    #[arg(
        long,
        default_value_t = 1,
        value_parser = parse_size,
        allow_negative_numbers = true
    )]
    pub batch: u64,
    /// Input dtype of A and B: f16, bf16, f32 (tf32), e4m3, e5m2, i8.
    #[arg(long, default_value = "f16", value_parser = parse_dtype)]
    pub dtype: DType,
    /// Output dtype (default: f16/bf16 inputs keep their type, f32 -> f32, fp8 -> f16, i8 -> i32).
    #[arg(long, value_parser = parse_dtype)]
    pub out_dtype: Option<DType>,
    /// Accumulator dtype (default f32; i32 for i8).
    #[arg(long, value_parser = parse_dtype)]
    pub acc_dtype: Option<DType>,
    /// Storage order of A and B, two letters: r = row-major, c = column-major (`rr`, `rc`, ...).
    #[arg(long, default_value = "rr", value_parser = parse_layouts)]
    pub layout: (Layout, Layout),
    /// Kernel family: triton, tilelang, cuda-sm90 or generic.
    #[arg(long, default_value = "generic", value_parser = parse_target)]
    pub target: Family,
    /// How many configurations to recommend, best first (1 to 1024).
    #[arg(
        long,
        default_value_t = TopK::DEFAULT,
        value_parser = parse_topk,
        allow_negative_numbers = true
    )]
    pub topk: TopK,
    /// A table for people, or versioned JSON for programs.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Print the cost model's breakdown for every hint.
    #[arg(long)]
    pub explain: bool,
    /// Many shapes in one process: JSON (like eval/dev-shapes.json) or CSV with M,N,K columns.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["m", "n", "k"])]
    pub shapes: Option<PathBuf>,
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    s.parse()
}

/// A GPU name as given: anything but blanks (the hardware database says whether it knows it).
pub fn parse_gpu_name(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        let accepted = "give a key, name or alias from `carver arch list`, like `h100`";
        return Err(format!("an empty GPU name: {accepted}"));
    }
    Ok(s.to_string())
}

/// A matrix size or batch count, refused here rather than planned and failed: a whole number
/// from 1 to the largest size carver supports.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let accepted = format!("accepted: a whole number from 1 to {MAX_DIM}, in digits");
    let digits = s.trim();
    match digits.parse::<u64>() {
        Ok(0) => Err(format!("must be at least 1 ({accepted})")),
        Ok(v) if v <= MAX_DIM => Ok(v),
        _ if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => Err(format!(
            "{digits} exceeds the largest supported size ({accepted})"
        )),
        _ => Err(format!("`{s}` is not a whole number ({accepted})")),
    }
}

pub fn parse_topk(s: &str) -> Result<TopK, String> {
    s.parse().map_err(|e: carver::CarverError| e.to_string())
}

fn parse_target(s: &str) -> Result<Family, String> {
    s.parse()
        .map_err(|e: carver::family::UnknownFamily| e.to_string())
}

pub fn run(args: RecommendArgs, globals: &Globals) -> anyhow::Result<ExitCode> {
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
    let request = RecommendRequest {
        archs: args.arch.iter().map(|a| ArchChoice::parse(a)).collect(),
        shapes,
        dtype: args.dtype,
        out_dtype: args.out_dtype,
        acc_dtype: args.acc_dtype,
        layouts: args.layout,
        family: args.target,
        topk: args.topk,
    };
    let answer = recommend(&globals.locations, &request, &Terminal::default())?;
    let file = args
        .shapes
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    for row in &answer.skipped_rows {
        eprintln!("error: {file}:{}: bad shape row: {}", row.line, row.reason);
    }
    for f in &answer.failures {
        // `file:line:` as for a bad row, so an editor can jump to the shape.
        let place = if args.shapes.is_some() {
            format!("{file}:{}: ", f.line)
        } else {
            String::new()
        };
        eprintln!("error: {place}{} on {}: {}", f.shape, f.arch, f.error);
    }
    match args.format {
        Format::Json => print_json(&answer.output)?,
        Format::Table => print_tables(&answer.output.results, args.explain),
    }
    Ok(if answer.is_complete() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `128x256x64 w8 s3 g8 sk1 wgmma`: the structure of a hint at a glance.
fn compact(h: &Hint) -> String {
    let t = &h.tile;
    let mut s = format!(
        "{}x{}x{} w{} s{} g{} sk{}",
        t.block_m,
        t.block_n,
        t.block_k,
        t.warps_m * t.warps_n + t.producer_warps,
        t.stages,
        t.raster.group,
        t.split_k
    );
    if t.cluster_m * t.cluster_n > 1 {
        s.push_str(&format!(" c{}x{}", t.cluster_m, t.cluster_n));
    }
    if t.persistent {
        s.push_str(" persistent");
    }
    if t.swap_ab {
        s.push_str(" swap-ab");
    }
    s.push_str(&format!(" {}", t.mma));
    s
}

/// The notation of [`compact`], printed under the tables: a newcomer cannot guess `g8` or `sk1`.
const CONFIG_LEGEND: &str = "CONFIG: block MxNxK, wN warps, sN pipeline stages, gN launch-order group, \
skN split-K, cMxN cluster, persistent kernel, swap-ab A and B swapped in the tensor instruction \
(small M), tensor-core instruction";

/// Ranks of hints predicted faster than a hint ranked above them.
fn out_of_order(hints: &[Hint]) -> Vec<usize> {
    let mut slowest_above = f64::NEG_INFINITY;
    let mut out = Vec::new();
    for h in hints {
        let t = h.prediction.time_us;
        if t < slowest_above {
            out.push(h.rank);
        }
        slowest_above = slowest_above.max(t);
    }
    out
}

/// `rank 3`, `ranks 3-4` or `ranks 2, 5-8`: runs of consecutive ranks collapsed.
fn rank_list(ranks: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &r in ranks {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == r => *end = r,
            _ => runs.push((r, r)),
        }
    }
    let text: Vec<String> = runs
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    let plural = ranks.len() > 1;
    format!("rank{} {}", if plural { "s" } else { "" }, text.join(", "))
}

/// Why a later rank may be predicted faster than an earlier one: users read the table as sorted.
fn order_note(ranks: &[usize]) -> String {
    let verb = if ranks.len() > 1 {
        "are predicted faster than a rank above them"
    } else {
        "is predicted faster than a rank above it"
    };
    format!(
        "  note: {} {verb}. The ranking keeps a diverse\n  \
         top-k: it picks structurally different configs among those within the model's measured\n  \
         error of the fastest prediction ({:.0}% when every operand is loaded in vectors, {:.0}% when\n  \
         one is staged through registers), and shallower pipelines of those it picked, so rank\n  \
         is not strictly predicted-time order.",
        rank_list(ranks),
        carver::rank::DIVERSITY_WINDOW * 100.0,
        carver::rank::STAGED_DIVERSITY_WINDOW * 100.0
    )
}

/// What `REGS a~b` means: users would otherwise take the row's blocks per SM as the estimate's.
fn hedge_note(ranks: &[usize]) -> String {
    format!(
        "  note: {} {} a hedge on the register estimate (REGS estimate~assumed): priced as if\n  \
         the compiler fits the assumed registers, one block more per SM, as it does for many\n  \
         configs this close to the limit. Rank 1 is never a hedge.",
        rank_list(ranks),
        if ranks.len() > 1 { "are" } else { "is" }
    )
}

fn print_tables(results: &[RecommendResult], explain: bool) {
    for (i, r) in results.iter().enumerate() {
        if i > 0 {
            println!();
        }
        let name = r
            .shape
            .name
            .as_deref()
            .map(|n| format!("{n}: "))
            .unwrap_or_default();
        println!(
            "{name}M={} N={} K={} batch={} {}x{}->{} on {} (target {}), planned in {:.0} us",
            r.shape.m,
            r.shape.n,
            r.shape.k,
            r.shape.batch,
            r.problem.dtype_a,
            r.problem.dtype_b,
            r.problem.dtype_c,
            r.arch,
            r.target,
            r.elapsed_us
        );
        if let Some(e) = &r.error {
            println!("  error: {e}");
            continue;
        }
        if let Some(m) = &r.measured {
            let cublas = m
                .cublas_time_us
                .map(|c| format!(", cuBLAS {c:.1} us"))
                .unwrap_or_default();
            println!(
                "  measured winner on {} ({}): {} -> {:.1} us{cublas}",
                escape(&m.device_name),
                escape(&m.device_uuid),
                escape(&m.config.to_string()),
                m.measured_time_us
            );
        }
        let rows: Vec<Vec<String>> = r
            .hints
            .iter()
            .map(|h| {
                let p = &h.prediction;
                vec![
                    h.rank.to_string(),
                    compact(h),
                    format!("{:.1}", p.time_us),
                    format!("{:.0}", p.tflops),
                    p.bound.as_str().to_string(),
                    p.smem_bytes.to_string(),
                    match p.hedged_registers {
                        Some(hedged) => format!("{}~{hedged}", p.registers_per_thread),
                        None => p.registers_per_thread.to_string(),
                    },
                    p.blocks_per_sm.to_string(),
                    format!("{:.2}", p.waves),
                ]
            })
            .collect();
        print!(
            "{}",
            table(
                &[
                    "RANK", "CONFIG", "TIME us", "TFLOP/s", "BOUND", "SMEM B", "REGS", "BLK/SM",
                    "WAVES"
                ],
                &rows
            )
        );
        let unordered = out_of_order(&r.hints);
        if !unordered.is_empty() {
            println!("{}", order_note(&unordered));
        }
        let hedges: Vec<usize> = r
            .hints
            .iter()
            .filter(|h| h.prediction.hedged_registers.is_some())
            .map(|h| h.rank)
            .collect();
        if !hedges.is_empty() {
            println!("{}", hedge_note(&hedges));
        }
        if explain {
            for h in &r.hints {
                let b = &h.prediction.breakdown;
                let repack = if b.repack_us > 0.0 {
                    format!(", operand repack {:.1}", b.repack_us)
                } else {
                    String::new()
                };
                println!(
                    "  #{} {}: compute {:.1} us, smem {:.1}, l2 {:.1}, dram {:.1}, latency {:.1}, epilogue {:.1}, split-k {:.1}, overhead {:.1}{repack}; DRAM {:.1} MB, L2 {:.1} MB; wave efficiency {:.2}, padding efficiency {:.2}; grid {}",
                    h.rank,
                    h.config,
                    b.compute_us,
                    b.smem_us,
                    b.l2_us,
                    b.dram_us,
                    b.latency_us,
                    b.epilogue_us,
                    b.split_k_us,
                    b.overhead_us,
                    b.dram_bytes / 1e6,
                    b.l2_bytes / 1e6,
                    b.wave_efficiency,
                    b.padding_efficiency,
                    h.prediction.grid
                );
            }
        }
    }
    // Once, after every table: the notation is the same in all of them.
    if results.iter().any(|r| !r.hints.is_empty()) {
        println!("{CONFIG_LEGEND}");
    }
}
