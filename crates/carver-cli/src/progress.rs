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
    shown: Mutex<Option<Shown>>,
}

/// What is drawn now: the bars of the shape being tuned, or the calibration spinner.
enum Shown {
    Tune {
        compile: ProgressBar,
        bench: ProgressBar,
    },
    Calibration(ProgressBar),
}

impl Shown {
    fn clear(self) {
        match self {
            Self::Tune { compile, bench } => {
                compile.finish_and_clear();
                bench.finish_and_clear();
            }
            Self::Calibration(spinner) => spinner.finish_and_clear(),
        }
    }

    /// Runs `f` with every bar lifted, so that a line printed meanwhile is not drawn over.
    fn suspend(&self, f: impl FnOnce()) {
        match self {
            Self::Tune { compile, bench } => bench.suspend(|| compile.suspend(f)),
            Self::Calibration(spinner) => spinner.suspend(f),
        }
    }
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
    /// Takes away what is drawn (the flow's phase is over).
    fn clear(&self) {
        if let Ok(mut shown) = self.shown.lock()
            && let Some(shown) = shown.take()
        {
            shown.clear();
        }
    }
}

impl Progress for Terminal {
    fn shape_started(&self, shape: &str) {
        if let Ok(mut shown) = self.shown.lock() {
            *shown = Some(Shown::Tune {
                compile: bar("compile", shape, TUNE_BAR),
                bench: bar("benchmark", shape, TUNE_BAR),
            });
        }
    }

    fn tune(&self, event: TuneProgress) {
        let Ok(shown) = self.shown.lock() else {
            return;
        };
        let Some(Shown::Tune { compile, bench }) = shown.as_ref() else {
            return;
        };
        match event {
            TuneProgress::Compiling { total } => compile.set_length(total as u64),
            TuneProgress::Compiled { done, .. } => compile.set_position(done as u64),
            TuneProgress::Benchmarking { total } => {
                compile.finish();
                bench.set_length(total as u64);
            }
            TuneProgress::Benchmarked { done, .. } => bench.set_position(done as u64),
            TuneProgress::WorkerLost { candidate, reason } => bench.suspend(|| {
                eprintln!(
                    "warning: candidate {candidate} lost its worker: {}",
                    crate::output::escape(&reason)
                );
            }),
        }
    }

    fn shape_finished(&self) {
        self.clear();
    }

    fn calibration_step(&self, step: &CalibrationStep) {
        let Ok(mut shown) = self.shown.lock() else {
            return;
        };
        if !matches!(shown.as_ref(), Some(Shown::Calibration(_))) {
            let spinner = bar("", "", "{spinner} [{pos}/{len}] {msg} ({elapsed})");
            spinner.enable_steady_tick(std::time::Duration::from_millis(200));
            *shown = Some(Shown::Calibration(spinner));
        }
        let Some(Shown::Calibration(spinner)) = shown.as_ref() else {
            return;
        };
        spinner.set_length(step.total as u64);
        spinner.set_position(step.index as u64);
        spinner.set_message(step.label.clone());
        if spinner.is_hidden() {
            // Not a terminal (a log file): one line per step instead of a bar.
            eprintln!("[{}/{}] {}", step.index + 1, step.total, step.label);
        }
    }

    fn calibration_finished(&self) {
        self.clear();
    }

    fn warning(&self, message: &str) {
        // Warnings quote stored names and reasons.
        let print = || eprintln!("warning: {}", crate::output::escape(message));
        match self.shown.lock() {
            Ok(shown) => match shown.as_ref() {
                Some(shown) => shown.suspend(print),
                None => print(),
            },
            Err(_) => print(),
        }
    }
}
