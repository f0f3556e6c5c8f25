//! `carver arch ...`: the hardware model, as the user sees it.

use std::process::ExitCode;

use carver_arch::{Arch, ArchField, CalibrationStore, ComputeClass, Origin};
use carver_schema::{ArchList, ArchReport, ArchSummary, SCHEMA_VERSION};
use clap::{Args, Subcommand};

use crate::Globals;
use crate::output::{Format, print_json, table};

#[derive(Debug, Subcommand)]
pub enum ArchCommand {
    /// List every GPU in the hardware database (shipped plus --hardware-db).
    List(FormatArg),
    /// Show one GPU's full model (with measured ceilings when calibrated).
    Show {
        /// Key, name or alias (`h100`, `a100-sxm4-80gb`, "NVIDIA H100 80GB HBM3").
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
        ArchCommand::Detect(f) => crate::arch_live::detect(globals, f.format),
        ArchCommand::Calibrate { device, format } => {
            crate::arch_live::calibrate(globals, device, format.format)
        }
    }
}

fn list(globals: &Globals, format: Format) -> anyhow::Result<ExitCode> {
    let db = globals.db()?;
    let gpus: Vec<ArchSummary> = db.iter().map(ArchSummary::of).collect();
    match format {
        Format::Json => print_json(&ArchList {
            schema_version: SCHEMA_VERSION,
            gpus,
        })?,
        Format::Table => {
            let rows: Vec<Vec<String>> = gpus
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

/// The database entry for `name`, with the newest stored calibration of that GPU applied.
pub fn resolve_with_calibration(globals: &Globals, name: &str) -> anyhow::Result<Arch> {
    let db = globals.db()?;
    let mut arch = db.get(name)?.clone();
    if let Ok(dir) = globals.cache_dir() {
        arch.calibration = CalibrationStore::new(&dir).newest_for_key(arch.key());
    }
    Ok(arch)
}

fn show(globals: &Globals, name: &str, format: Format) -> anyhow::Result<ExitCode> {
    let arch = resolve_with_calibration(globals, name)?;
    match format {
        Format::Json => print_json(&ArchReport {
            schema_version: SCHEMA_VERSION,
            arch,
        })?,
        Format::Table => print!("{}", describe(&arch)),
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
pub fn describe(a: &Arch) -> String {
    let mark = |estimated: bool| if estimated { " (estimated)" } else { "" };
    let est = |field: ArchField| mark(a.estimated.contains(&field));
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
                est(ArchField::SmCount),
                sm.tensor_cores,
                sm.warp_size
            ),
        ],
        vec![
            "SM clock".into(),
            format!(
                "{:.0} MHz boost{}, {:.0} MHz sustained{}",
                sm.boost_clock_mhz,
                est(ArchField::SmBoostClock),
                sm.sustained_clock_mhz,
                est(ArchField::SmSustainedClock)
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
                est(ArchField::MemoryBusWidth),
                m.memory_clock_mhz,
                est(ArchField::MemoryClock),
                m.bandwidth_bytes_per_s / 1e12,
                est(ArchField::MemoryBandwidth)
            ),
        ],
        vec![
            "transactions".into(),
            format!("{} B sector, {} B line", m.sector_bytes, m.line_bytes),
        ],
        vec![
            "L2".into(),
            format!(
                "{:.1} MiB{}, {:.2} TB/s{}",
                a.l2.size_bytes as f64 / 1048576.0,
                est(ArchField::L2Size),
                a.l2.bandwidth_bytes_per_s / 1e12,
                est(ArchField::L2Bandwidth)
            ),
        ],
    ];
    for ins in &a.tensor_instructions {
        let ext = |e: carver_arch::Extent| match e {
            carver_arch::Extent::Fixed(v) => v.to_string(),
            carver_arch::Extent::Range(r) => format!("{}..{} step {}", r.min, r.max, r.step),
        };
        rows.push(vec![
            format!("tensor {}", ins.family),
            format!(
                "m{} n{} k{} for {}",
                ext(ins.m),
                ext(ins.n),
                ins.k,
                ins.dtypes
                    .iter()
                    .map(|d| d.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ]);
    }
    for class in ComputeClass::ALL {
        if let Some(p) = a.peak.get(&class) {
            let clock = p.quoted_clock_mhz(&a.sm);
            let estimated = mark(a.peak_is_estimated(class));
            rows.push(vec![
                format!("peak {class}"),
                format!("{:.1} TFLOP/s dense at {clock:.0} MHz{estimated}", p.tflops),
            ]);
        }
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

/// `--arch auto`: the model of this machine's first GPU, queried live, with its calibration.
#[cfg(feature = "gpu")]
pub fn detect_for_planning(globals: &Globals) -> anyhow::Result<Arch> {
    let db = globals.db()?;
    let cache = globals.cache_dir().ok();
    Ok(carver_gpu::detect_arch(&db, 0, cache.as_deref())?)
}

#[cfg(not(feature = "gpu"))]
pub fn detect_for_planning(_globals: &Globals) -> anyhow::Result<Arch> {
    anyhow::bail!(
        "--arch auto needs live GPU detection, which this build of carver leaves out (built without \
         the `gpu` feature); name the GPU instead, for example --arch h100"
    )
}
