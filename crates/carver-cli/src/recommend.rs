//! `carver recommend`: rank configurations with the cost model, for one shape or a file of them,
//! on one or several GPUs.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use carver::{DType, Family, Hint, Layout, MatmulTemplate, recommend_hints};
use carver_arch::Arch;
use carver_schema::{ProblemSpec, RecommendOutput, RecommendResult, SCHEMA_VERSION, ShapeSpec};
use clap::Args;

use crate::Globals;
use crate::output::{Format, print_json, table};
use crate::shapes::{ParsedShape, shape_rows};

#[derive(Debug, Args)]
pub struct RecommendArgs {
    /// GPU(s) to plan for: a database name (`h100`), several (`h100,a100,l40s`), or `auto`
    /// for this machine's GPU.
    #[arg(long, value_delimiter = ',', default_value = "h100")]
    pub arch: Vec<String>,
    /// Rows of A and C: the problem is C (M x N) = A (M x K) @ B (K x N).
    #[arg(long, required_unless_present = "shapes")]
    pub m: Option<u64>,
    /// Columns of B and C.
    #[arg(long, required_unless_present = "shapes")]
    pub n: Option<u64>,
    /// The reduction dimension: columns of A, rows of B.
    #[arg(long, required_unless_present = "shapes")]
    pub k: Option<u64>,
    /// Independent matmuls of this shape in one launch, C[b] = A[b] @ B[b] (a shapes file gives
    /// its own, per row).
    #[arg(long, default_value_t = 1)]
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
    #[arg(long, default_value = "rr", value_parser = parse_layout)]
    pub layout: (Layout, Layout),
    /// Kernel family: triton, tilelang, cuda-sm90 or generic.
    #[arg(long, default_value = "generic", value_parser = parse_target)]
    pub target: Family,
    /// How many configurations to recommend, best first.
    #[arg(long, default_value_t = 8)]
    pub topk: usize,
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

fn parse_target(s: &str) -> Result<Family, String> {
    s.parse().map_err(|e: carver::CarverError| e.to_string())
}

fn parse_layout(s: &str) -> Result<(Layout, Layout), String> {
    let letters: Vec<char> = s.chars().collect();
    let one = |c: char| match c.to_ascii_lowercase() {
        'r' => Ok(Layout::Row),
        'c' => Ok(Layout::Col),
        _ => Err(format!(
            "layout `{s}`: use two letters, r (row-major) or c (column-major), for A then B, like `rr` or `rc`"
        )),
    };
    if letters.len() != 2 {
        return Err(format!(
            "layout `{s}`: use two letters, r or c, for A then B (like `rr` or `rc`)"
        ));
    }
    Ok((one(letters[0])?, one(letters[1])?))
}

/// The archs to plan for, in the order given.
fn resolve_archs(globals: &Globals, names: &[String]) -> anyhow::Result<Vec<Arch>> {
    let mut out = Vec::new();
    for name in names {
        let name = name.trim();
        if name.eq_ignore_ascii_case("auto") {
            out.push(crate::arch::detect_for_planning(globals)?);
        } else {
            out.push(crate::arch::resolve_with_calibration(globals, name)?);
        }
    }
    Ok(out)
}

fn template_for(args: &RecommendArgs, shape: &ParsedShape) -> MatmulTemplate {
    let mut t = MatmulTemplate::new(shape.m, shape.n, shape.k)
        .with_dtype(args.dtype)
        .with_batch(shape.batch)
        .with_layouts(args.layout.0, args.layout.1)
        .with_family(args.target);
    if let Some(c) = args.out_dtype {
        t.dtype_c = c;
    }
    if let Some(acc) = args.acc_dtype {
        t.dtype_acc = acc;
    }
    t
}

pub fn run(args: RecommendArgs, globals: &Globals) -> anyhow::Result<ExitCode> {
    if args.topk == 0 {
        anyhow::bail!("--topk must be at least 1");
    }
    let archs = resolve_archs(globals, &args.arch)?;
    let rows = shape_rows(args.shapes.as_deref(), args.m, args.n, args.k, args.batch)?;

    // Read-only: recommending never creates, repairs or migrates the tuning database.
    let tuned = match globals.cache_dir() {
        Ok(dir) => carver_tunedb::TuneDb::open_read_only(&dir)?,
        Err(_) => None,
    };
    let mut results = Vec::new();
    let mut failures = 0usize;
    for row in &rows {
        let shape = match &row.parsed {
            Ok(s) => s.clone(),
            Err(reason) => {
                failures += 1;
                let where_ = args
                    .shapes
                    .as_ref()
                    .map(|p| format!("{}:{}", p.display(), row.line))
                    .unwrap_or_default();
                eprintln!("error: {where_}: bad shape row: {reason}");
                continue;
            }
        };
        let template = template_for(&args, &shape);
        for arch in &archs {
            let start = Instant::now();
            let outcome = recommend_hints(&template, arch, args.topk);
            let elapsed_us = start.elapsed().as_secs_f64() * 1e6;
            let measured = match (&tuned, &outcome) {
                (Some(db), Ok(_)) => crate::measured::lookup(db, &template, arch)?,
                _ => None,
            };
            let (hints, error) = match outcome {
                Ok(h) => (h, None),
                Err(e) => {
                    failures += 1;
                    let label = shape
                        .name
                        .clone()
                        .unwrap_or_else(|| format!("{}x{}x{}", shape.m, shape.n, shape.k));
                    let where_ = if args.shapes.is_some() {
                        format!(" (line {})", row.line)
                    } else {
                        String::new()
                    };
                    eprintln!("error: {label}{where_} on {}: {e}", arch.key());
                    (Vec::new(), Some(e.to_string()))
                }
            };
            results.push(RecommendResult {
                shape: ShapeSpec {
                    name: shape.name.clone(),
                    m: shape.m,
                    n: shape.n,
                    k: shape.k,
                    batch: shape.batch,
                },
                arch: arch.key().to_string(),
                target: args.target.to_string(),
                problem: ProblemSpec {
                    dtype_a: template.dtype_a.to_string(),
                    dtype_b: template.dtype_b.to_string(),
                    dtype_c: template.dtype_c.to_string(),
                    dtype_acc: template.dtype_acc.to_string(),
                    layout_a: template.layout_a.to_string(),
                    layout_b: template.layout_b.to_string(),
                },
                hints,
                error,
                measured,
                elapsed_us,
            });
        }
    }

    match args.format {
        Format::Json => print_json(&RecommendOutput {
            schema_version: SCHEMA_VERSION,
            carver_version: env!("CARGO_PKG_VERSION").to_string(),
            results,
        })?,
        Format::Table => print_tables(&results, args.explain),
    }
    Ok(if failures > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
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
        t.compute_warps() + t.producer_warps,
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
    s.push_str(&format!(" {}", t.mma));
    s
}

/// The notation of [`compact`], printed under the tables: a newcomer cannot guess `g8` or `sk1`.
const CONFIG_LEGEND: &str = "CONFIG: block MxNxK, wN warps, sN pipeline stages, gN launch-order group, \
skN split-K, cMxN cluster, persistent kernel, tensor-core instruction";

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
         one is staged through registers), so rank is not strictly predicted-time order.",
        rank_list(ranks),
        carver::rank::DIVERSITY_WINDOW * 100.0,
        carver::rank::STAGED_DIVERSITY_WINDOW * 100.0
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
                m.device_name, m.device_uuid, m.config, m.measured_time_us
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
                    p.registers_per_thread.to_string(),
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
