//! How the CLI shows a flow's progress: bars on a terminal, one line per step in a log, and
//! warnings on standard error.

use std::io::IsTerminal;
use std::sync::Mutex;

use carver_flows::Progress;
use carver_flows::progress::{CalibrationStep, TuneProgress};
use indicatif::{ProgressBar, ProgressStyle};

/// Progress on standard error.
#[derive(Default)]
pub struct Terminal {
    bars: Mutex<Option<Bars>>,
}

/// The bars of the shape being tuned, or the calibration spinner.
struct Bars {
    compile: ProgressBar,
    bench: ProgressBar,
}

fn bar(prefix: &str, label: &str, template: &str) -> ProgressBar {
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new(0)
    } else {
        ProgressBar::hidden()
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(prefix.to_string());
    bar.set_message(label.to_string());
    bar
}

const TUNE_BAR: &str = "{prefix:>10} [{bar:30}] {pos}/{len} {msg}";

impl Terminal {
    fn with_bars(&self, f: impl FnOnce(&Bars)) {
        if let Ok(bars) = self.bars.lock()
            && let Some(bars) = bars.as_ref()
        {
            f(bars);
        }
    }
}

impl Progress for Terminal {
    fn shape_started(&self, shape: &str) {
        if let Ok(mut bars) = self.bars.lock() {
            *bars = Some(Bars {
                compile: bar("compile", shape, TUNE_BAR),
                bench: bar("benchmark", shape, TUNE_BAR),
            });
        }
    }

    fn tune(&self, event: TuneProgress) {
        self.with_bars(|b| match event {
            TuneProgress::Compiling { total } => b.compile.set_length(total as u64),
            TuneProgress::Compiled { done, .. } => b.compile.set_position(done as u64),
            TuneProgress::Benchmarking { total } => {
                b.compile.finish();
                b.bench.set_length(total as u64);
            }
            TuneProgress::Benchmarked { done, .. } => b.bench.set_position(done as u64),
            TuneProgress::WorkerLost { candidate, reason } => b.bench.suspend(|| {
                eprintln!(
                    "warning: candidate {candidate} lost its worker: {}",
                    crate::output::escape(&reason)
                );
            }),
        });
    }

    fn shape_finished(&self) {
        if let Ok(mut bars) = self.bars.lock()
            && let Some(b) = bars.take()
        {
            b.compile.finish_and_clear();
            b.bench.finish_and_clear();
        }
    }

    fn calibration_step(&self, step: &CalibrationStep) {
        let Ok(mut bars) = self.bars.lock() else {
            return;
        };
        let spinner = &bars
            .get_or_insert_with(|| {
                let spinner = bar("", "", "{spinner} [{pos}/{len}] {msg} ({elapsed})");
                spinner.enable_steady_tick(std::time::Duration::from_millis(200));
                Bars {
                    compile: spinner,
                    bench: ProgressBar::hidden(),
                }
            })
            .compile;
        spinner.set_length(step.total as u64);
        spinner.set_position(step.index as u64);
        spinner.set_message(step.label.clone());
        if spinner.is_hidden() {
            // Not a terminal (a log file): one line per step instead of a bar.
            eprintln!("[{}/{}] {}", step.index + 1, step.total, step.label);
        }
    }

    fn calibration_finished(&self) {
        if let Ok(mut bars) = self.bars.lock()
            && let Some(b) = bars.take()
        {
            b.compile.finish_and_clear();
        }
    }

    fn warning(&self, message: &str) {
        // Warnings quote stored names and reasons.
        let print = || eprintln!("warning: {}", crate::output::escape(message));
        // Over drawn bars the line would be overwritten: lift them while it is printed.
        match self.bars.lock() {
            Ok(bars) => match bars.as_ref() {
                Some(b) => b.bench.suspend(|| b.compile.suspend(print)),
                None => print(),
            },
            Err(_) => print(),
        }
    }
}
