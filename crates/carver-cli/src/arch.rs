//! `carver arch ...`: the hardware model, as the user sees it.

use std::process::ExitCode;

use carver_schema::{ArchDescription, DetectedGpu, Extent, MeasuredFigure, Origin, SegmentRates};
use clap::{Args, Subcommand};

use crate::Globals;
use crate::output::{Format, print_json, table};
use crate::progress::Terminal;

#[derive(Debug, Subcommand)]
pub enum ArchCommand {
    /// List every GPU in the hardware database (shipped plus --hardware-db).
    List(FormatArg),
    /// Show one GPU's full model (with measured ceilings when calibrated).
    Show {
        /// Key, name or alias (`h100`, `a100-sxm4-80gb`, "NVIDIA H100 80GB HBM3").
        #[arg(value_parser = crate::recommend::parse_gpu_name)]
        name: String,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Query this machine's GPUs (CUDA driver and NVML) and match them to the database.
    Detect(FormatArg),
    /// Measure DRAM, L2 and shared-memory bandwidth and tensor-core throughput on this GPU and
    /// store them (keyed by GPU UUID) so the model uses them from then on.
    Calibrate {
        /// CUDA device ordinal.
        #[arg(long, default_value_t = 0)]
        device: usize,
        #[command(flatten)]
        format: FormatArg,
    },
}

#[derive(Debug, Args)]
pub struct FormatArg {
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

pub fn run(cmd: ArchCommand, globals: &Globals) -> anyhow::Result<ExitCode> {
    match cmd {
        ArchCommand::List(f) => list(globals, f.format),
        ArchCommand::Show { name, format } => show(globals, &name, format.format),
        ArchCommand::Detect(f) => detect(globals, f.format),
        ArchCommand::Calibrate { device, format } => calibrate(globals, device, format.format),
    }
}

fn list(globals: &Globals, format: Format) -> anyhow::Result<ExitCode> {
    let list = carver_flows::archs::list(&globals.locations)?;
    match format {
        Format::Json => print_json(&list)?,
        Format::Table => {
            let rows: Vec<Vec<String>> = list
                .gpus
                .iter()
                .map(|g| {
                    vec![
                        g.key.clone(),
                        g.name.clone(),
                        format!("sm_{}", g.compute_capability.replace('.', "")),
                        g.sm_count.to_string(),
                        format!("{:.0}", g.dram_bandwidth_bytes_per_s / 1e9),
                        format!("{:.0}", g.l2_size_bytes as f64 / 1048576.0),
                        format!("{}", g.smem_per_block_optin_bytes),
                        g.f16_tflops
                            .map(|t| format!("{t:.0}"))
                            .unwrap_or("-".into()),
                        g.origin.clone(),
                    ]
                })
                .collect();
            print!(
                "{}",
                table(
                    &[
                        "KEY",
                        "NAME",
                        "ARCH",
                        "SMS",
                        "DRAM GB/s",
                        "L2 MiB",
                        "SMEM/BLOCK B",
                        "F16 TFLOP/s",
                        "FROM"
                    ],
                    &rows
                )
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn show(globals: &Globals, name: &str, format: Format) -> anyhow::Result<ExitCode> {
    let report = carver_flows::archs::show(&globals.locations, name, &Terminal::default())?;
    match format {
        Format::Json => print_json(&report)?,
        Format::Table => print!("{}", describe(&report.arch)),
    }
    Ok(ExitCode::SUCCESS)
}

/// Where a description came from, in words.
fn origin_text(origin: &Origin) -> String {
    match origin {
        Origin::Embedded { file } => format!("shipped with carver (hardware-db/{file})"),
        Origin::UserFile { path } => format!("user file {path}"),
        Origin::Live { uuid, base } => match base {
            Some(base) => format!("queried from GPU {uuid}, starting from {base}"),
            None => format!("queried from GPU {uuid}"),
        },
        Origin::Unknown => "unknown".to_string(),
    }
}

/// A human-readable page about one GPU. Figures listed in `estimated` carry "(estimated)".
pub fn describe(a: &ArchDescription) -> String {
    let est = |field: &str| {
        if a.estimated.iter().any(|e| e == field) {
            " (estimated)"
        } else {
            ""
        }
    };
    let aliases = if a.gpu.aliases.is_empty() {
        "-".to_string()
    } else {
        a.gpu.aliases.join(", ")
    };
    let (sm, s, m) = (&a.sm, &a.shared_memory, &a.memory);
    let mut rows: Vec<Vec<String>> = vec![
        vec!["key".into(), a.gpu.key.clone()],
        vec!["name".into(), a.gpu.name.clone()],
        vec!["aliases".into(), aliases],
        vec!["from".into(), origin_text(&a.origin)],
        vec![
            "architecture".into(),
            format!(
                "{} (compute capability {})",
                a.gpu.architecture, a.gpu.compute_capability
            ),
        ],
        vec![
            "SMs".into(),
            format!(
                "{}{} x {} tensor cores, warp {}",
                sm.count,
                est("sm.count"),
                sm.tensor_cores,
                sm.warp_size
            ),
        ],
        vec![
            "SM clock".into(),
            format!(
                "{:.0} MHz boost{}, {:.0} MHz sustained{}",
                sm.boost_clock_mhz,
                est("sm.boost_clock_mhz"),
                sm.sustained_clock_mhz,
                est("sm.sustained_clock_mhz")
            ),
        ],
        vec![
            "threads / blocks per SM".into(),
            format!(
                "{} / {} (max {} per block)",
                sm.max_threads, sm.max_blocks, sm.max_threads_per_block
            ),
        ],
        vec![
            "registers".into(),
            format!(
                "{} per SM, {} per block, {} per thread, unit {}",
                a.registers.per_sm,
                a.registers.per_block,
                a.registers.per_thread_max,
                a.registers.allocation_unit
            ),
        ],
        vec![
            "shared memory".into(),
            format!(
                "{} B per SM; per block {} B default, {} B opt-in, {} B reserved; {} banks x {} B, {} B/clk/SM",
                s.per_sm_bytes,
                s.per_block_default_bytes,
                s.per_block_optin_bytes,
                s.reserved_per_block_bytes,
                s.banks,
                s.bank_width_bytes,
                s.bytes_per_clock_per_sm
            ),
        ],
        vec![
            "DRAM".into(),
            format!(
                "{} {:.0} GiB, {} bit{} x {:.0} MHz{}, {:.2} TB/s{}",
                m.kind,
                m.capacity_bytes as f64 / 1073741824.0,
                m.bus_width_bits,
                est("memory.bus_width_bits"),
                m.memory_clock_mhz,
                est("memory.memory_clock_mhz"),
                m.bandwidth_bytes_per_s / 1e12,
                est("memory.bandwidth_bytes_per_s")
            ),
        ],
        vec![
            "transactions".into(),
            format!(
                "{} B sector, {} B line{}",
                m.sector_bytes,
                m.line_bytes,
                SegmentRates(&m.segment_efficiency)
            ),
        ],
        vec![
            "L2".into(),
            format!(
                "{:.1} MiB{}, {:.2} TB/s{}{}",
                a.l2.size_bytes as f64 / 1048576.0,
                est("l2.size_bytes"),
                a.l2.bandwidth_bytes_per_s / 1e12,
                est("l2.bandwidth_bytes_per_s"),
                a.l2.request_coalescing
                    .map(|r| format!(", requests for one line coalesced up to {r}x"))
                    .unwrap_or_default()
            ),
        ],
    ];
    for ins in &a.tensor_instructions {
        let ext = |e: Extent| match e {
            Extent::Fixed(v) => v.to_string(),
            Extent::Range(r) => format!("{}..{} step {}", r.min, r.max, r.step),
        };
        let classes: Vec<_> = ins.dtypes.iter().map(|d| d.as_str()).collect();
        let step = ins.step_cycles.map(|c| format!(", k-step wait {c} cycles"));
        rows.push(vec![
            format!("tensor {}", ins.family),
            format!(
                "m{} n{} k{} for {}{}",
                ext(ins.m),
                ext(ins.n),
                ins.k,
                classes.join(", "),
                step.unwrap_or_default()
            ),
        ]);
    }
    // The map is ordered as the classes are declared.
    for (class, p) in &a.peak {
        let clock = p.clock_mhz.unwrap_or(a.sm.sustained_clock_mhz);
        // A peak is estimated as a whole (`peak.bf16`) or in its figure (`peak.bf16.tflops`).
        let estimated = if est(&format!("peak.{class}")).is_empty() {
            est(&format!("peak.{class}.tflops"))
        } else {
            " (estimated)"
        };
        rows.push(vec![
            format!("peak {class}"),
            format!("{:.1} TFLOP/s dense at {clock:.0} MHz{estimated}", p.tflops),
        ]);
    }
    if let Some(c) = &a.calibration {
        let fmt_bw = |v: Option<f64>| {
            v.map(|b| format!("{:.2} TB/s", b / 1e12))
                .unwrap_or("-".into())
        };
        rows.push(vec![
            "measured on".into(),
            format!("{} ({})", c.device_name, c.uuid),
        ]);
        rows.push(vec![
            "measured DRAM".into(),
            fmt_bw(c.dram_bandwidth_bytes_per_s),
        ]);
        rows.push(vec![
            "measured L2".into(),
            fmt_bw(c.l2_bandwidth_bytes_per_s),
        ]);
        rows.push(vec![
            "measured shared memory".into(),
            fmt_bw(c.smem_bandwidth_bytes_per_s),
        ]);
        for (class, t) in &c.peak_tflops {
            rows.push(vec![format!("measured {class}"), format!("{t:.1} TFLOP/s")]);
        }
    }
    if !a.estimated.is_empty() {
        rows.push(vec![
            "estimated".into(),
            a.estimated
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        ]);
    }
    for s in &a.gpu.sources {
        rows.push(vec!["source".into(), s.clone()]);
    }
    table(&["FIELD", "VALUE"], &rows)
}

fn detect(globals: &Globals, format: Format) -> anyhow::Result<ExitCode> {
    let report = carver_flows::archs::detect(&globals.locations, &Terminal::default())?;
    match format {
        Format::Json => print_json(&report)?,
        Format::Table => {
            let pages: Vec<String> = report
                .gpus
                .iter()
                .map(|gpu| format!("{}{}", summary(gpu), describe(&gpu.arch)))
                .collect();
            print!("{}", pages.join("\n"));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The lines above a detected GPU's model: identity, driver, match and calibration.
fn summary(gpu: &DetectedGpu) -> String {
    let power = gpu
        .power_limit_w
        .map(|w| format!("{w:.0} W"))
        .unwrap_or_else(|| "not reported".into());
    let matched = match &gpu.matched {
        Some(key) => {
            format!("hardware-db entry `{key}`, with the figures the device reports put in")
        }
        None => "no hardware-db entry; figures the device does not report are estimated from its \
                 compute capability (marked below)"
            .into(),
    };
    let calibration = match &gpu.arch.calibration {
        Some(c) => format!(
            "measured ceilings stored at unix time {} (carver {}) are applied",
            c.measured_at_unix_s, c.carver_version
        ),
        None => format!(
            "none stored; run `carver arch calibrate --device {}` to measure this GPU's ceilings",
            gpu.index
        ),
    };
    format!(
        "GPU {}: {} ({})\n  driver {} (CUDA {}), power limit {power}\n  model: {matched}\n  calibration: {calibration}\n\n",
        gpu.index, gpu.name, gpu.uuid, gpu.driver_version, gpu.cuda_driver_version
    )
}

fn calibrate(globals: &Globals, device: usize, format: Format) -> anyhow::Result<ExitCode> {
    let report = carver_flows::archs::calibrate(&globals.locations, device, &Terminal::default())?;
    eprintln!(
        "stored the calibration of {} in {}",
        report.uuid, report.stored_at
    );
    match format {
        Format::Json => print_json(&report)?,
        Format::Table => {
            println!(
                "GPU {}: {} ({})",
                report.device_index, report.device_name, report.uuid
            );
            print!("{}", figures_table(&report.figures));
            println!();
            for f in &report.figures {
                println!("{}: {}", f.label, f.method);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Bandwidths in TB/s, throughputs in TFLOP/s.
fn scaled(value: f64, unit: &str) -> String {
    if unit == "B/s" {
        format!("{:.2} TB/s", value / 1e12)
    } else {
        format!("{value:.1} {unit}")
    }
}

fn figures_table(figures: &[MeasuredFigure]) -> String {
    let rows: Vec<Vec<String>> = figures
        .iter()
        .map(|f| {
            let estimate = if f.spec_is_estimate {
                " (estimated)"
            } else {
                ""
            };
            vec![
                f.label.clone(),
                scaled(f.measured, &f.unit),
                format!("{}{estimate}", scaled(f.spec, &f.unit)),
                format!("{:.2}", f.measured / f.spec),
                format!(
                    "{} ({} .. {})",
                    f.runs,
                    scaled(f.slowest, &f.unit),
                    scaled(f.fastest, &f.unit)
                ),
            ]
        })
        .collect();
    table(
        &[
            "FIGURE",
            "MEASURED (MEDIAN)",
            "MODEL BEFORE",
            "RATIO",
            "RUNS (SLOWEST .. FASTEST)",
        ],
        &rows,
    )
}
