//! `carver arch detect` and `carver arch calibrate`: the parts of `carver arch` that need a GPU.
//!
//! Built only with the `gpu` feature (on by default); without it both commands say so and fail.

use std::process::ExitCode;

use crate::Globals;
use crate::output::Format;

#[cfg(not(feature = "gpu"))]
const NO_GPU_SUPPORT: &str = "this carver was built without GPU support (the `gpu` feature of carver-cli); \
     rebuild with default features to use it, or plan offline with `--arch h100` \
     (or any name from `carver arch list`)";

/// `carver arch detect`: every GPU of this machine, modelled and matched to the database.
pub fn detect(globals: &Globals, format: Format) -> anyhow::Result<ExitCode> {
    #[cfg(feature = "gpu")]
    {
        live::detect(globals, format)
    }
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (globals, format);
        anyhow::bail!("`carver arch detect` is not available: {NO_GPU_SUPPORT}")
    }
}

/// `carver arch calibrate`: measure this GPU's ceilings and store them under its UUID.
pub fn calibrate(globals: &Globals, device: usize, format: Format) -> anyhow::Result<ExitCode> {
    #[cfg(feature = "gpu")]
    {
        live::calibrate(globals, device, format)
    }
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (globals, device, format);
        anyhow::bail!("`carver arch calibrate` is not available: {NO_GPU_SUPPORT}")
    }
}

#[cfg(feature = "gpu")]
mod live {
    use std::process::ExitCode;

    use carver_arch::CalibrationStore;
    use carver_gpu::{CalibrationOptions, DetectedGpu, MeasuredFigure};
    use carver_schema::{CalibrateReport, DetectReport, SCHEMA_VERSION};
    use indicatif::{ProgressBar, ProgressStyle};

    use crate::Globals;
    use crate::arch::describe;
    use crate::output::{Format, print_json, table};

    pub fn detect(globals: &Globals, format: Format) -> anyhow::Result<ExitCode> {
        let db = globals.db()?;
        let cache_dir = globals.cache_dir()?;
        let gpus = carver_gpu::detect_all(&db, Some(&cache_dir))?;
        match format {
            Format::Json => print_json(&DetectReport {
                schema_version: SCHEMA_VERSION,
                gpus: gpus.iter().map(Into::into).collect(),
            })?,
            Format::Table => {
                for (i, gpu) in gpus.iter().enumerate() {
                    if i > 0 {
                        println!();
                    }
                    print!("{}", summary(gpu));
                    print!("{}", describe(&gpu.arch));
                }
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
            None => {
                "no hardware-db entry; figures the device does not report are estimated from its \
                     compute capability (marked below)"
                    .into()
            }
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

    pub fn calibrate(globals: &Globals, device: usize, format: Format) -> anyhow::Result<ExitCode> {
        let db = globals.db()?;
        let store = CalibrationStore::new(&globals.cache_dir()?);
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{pos}/{len}] {msg} ({elapsed})")
                .expect("the progress template is valid"),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        let mut on_step = |step: carver_gpu::Step| {
            bar.set_length(step.total as u64);
            bar.set_position(step.index as u64);
            bar.set_message(step.label);
            if bar.is_hidden() {
                // Not a terminal (a log file): one line per step instead of a bar.
                eprintln!("[{}/{}] {}", step.index + 1, step.total, step.label);
            }
        };
        let outcome =
            carver_gpu::calibrate(&db, device, &CalibrationOptions::default(), &mut on_step);
        bar.finish_and_clear();
        let outcome = outcome?;
        let path = store.save(&outcome.calibration)?;
        eprintln!(
            "stored the calibration of {} in {}",
            outcome.device.uuid,
            path.display()
        );
        match format {
            Format::Json => print_json(&CalibrateReport {
                schema_version: SCHEMA_VERSION,
                device_index: outcome.device.index as u64,
                device_name: outcome.device.name.clone(),
                uuid: outcome.device.uuid.clone(),
                matched: outcome.device.matched.clone(),
                stored_at: path.display().to_string(),
                figures: outcome.figures.iter().map(Into::into).collect(),
                calibration: (&outcome.calibration).into(),
            })?,
            Format::Table => {
                println!(
                    "GPU {}: {} ({}), driver {}",
                    outcome.device.index,
                    outcome.device.name,
                    outcome.device.uuid,
                    outcome.device.driver_version
                );
                print!("{}", figures_table(&outcome.figures));
                println!();
                for f in &outcome.figures {
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
                vec![
                    f.label.clone(),
                    scaled(f.measured, &f.unit),
                    format!(
                        "{}{}",
                        scaled(f.spec, &f.unit),
                        if f.spec_is_estimate {
                            " (estimated)"
                        } else {
                            ""
                        }
                    ),
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
}
