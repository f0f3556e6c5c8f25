//! The one GPU timing harness, used by the calibration and by the tuning worker: a warm-up,
//! then CUDA events around each run (recorded in batches and read after one synchronization),
//! summarized by the median.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaEvent, CudaStream, sys};
use serde::{Deserialize, Serialize};

use crate::driver::driver_err;
use crate::error::GpuError;

/// Timed runs between two synchronizations.
const EVENT_BATCH: usize = 16;
/// Warm-up runs at most, when warming up by time (for very short operations).
const MAX_WARMUP_RUNS: usize = 5000;
/// While warming up by time, the clock is read after the first run and every this many.
const WARMUP_CHECK_EVERY: usize = 8;

/// Times of one timed operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub runs: usize,
    /// Timing stopped early because the operation was far behind the best.
    pub early_stopped: bool,
}

impl Timing {
    /// The summary of `times_s` (seconds); an error when there are none or one is not a
    /// positive finite number, which means the timer failed.
    pub fn from_times(times_s: &[f64], early_stopped: bool) -> Result<Self, GpuError> {
        if times_s.is_empty() || times_s.iter().any(|t| !(t.is_finite() && *t > 0.0)) {
            return Err(GpuError::Implausible {
                what: "timing",
                reason: format!("CUDA events returned unusable times {times_s:?}"),
            });
        }
        Ok(Self {
            median_s: median(times_s),
            min_s: times_s.iter().copied().fold(f64::INFINITY, f64::min),
            max_s: times_s.iter().copied().fold(0.0, f64::max),
            runs: times_s.len(),
            early_stopped,
        })
    }
}

/// A figure computed from repeated timings of the same amount of work.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateSummary {
    /// Work over the median time.
    pub median: f64,
    /// Work over the slowest run.
    pub min: f64,
    /// Work over the fastest run.
    pub max: f64,
    pub runs: usize,
}

impl RateSummary {
    /// Rates of `work` units done in each run of `timing`.
    pub fn of(work: f64, timing: &Timing) -> Self {
        Self {
            median: work / timing.median_s,
            min: work / timing.max_s,
            max: work / timing.min_s,
            runs: timing.runs,
        }
    }
}

/// The median of `values`; NaN when there are none.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// How long to warm up before timing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Warmup {
    /// Exactly this many runs.
    Runs(usize),
    /// Runs until this much wall time has passed (at least one, at most [`MAX_WARMUP_RUNS`]).
    For(Duration),
}

/// How many runs to time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum RunCount {
    Exactly(usize),
    /// As many as fit in `measure` at the warm-up's pace, within `min..=max`.
    Fill {
        measure: Duration,
        min: usize,
        max: usize,
    },
}

/// Stop timing once the running median is this far behind the best time so far.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct EarlyStop {
    pub best_s: f64,
    /// Stop when the median exceeds `ratio` x `best_s`...
    pub ratio: f64,
    /// ...after at least this many runs.
    pub min_runs: usize,
}

/// What to time and for how long.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct TimingPlan {
    pub warmup: Warmup,
    pub runs: RunCount,
    pub early_stop: Option<EarlyStop>,
}

/// CUDA events on one stream, reused for every timing.
pub(crate) struct EventTimer {
    stream: Arc<CudaStream>,
    /// Start and stop of each run of a batch.
    events: Vec<CudaEvent>,
}

impl EventTimer {
    pub fn new(ctx: &Arc<CudaContext>, stream: Arc<CudaStream>) -> Result<Self, GpuError> {
        let timed = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let events = (0..2 * EVENT_BATCH)
            .map(|_| ctx.new_event(timed).map_err(driver_err("cuEventCreate")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { stream, events })
    }

    fn sync(&self) -> Result<(), GpuError> {
        self.stream
            .synchronize()
            .map_err(driver_err("cuStreamSynchronize"))
    }

    /// Warms up, then times runs of `op(i)` on the timer's stream with CUDA events. `i` counts
    /// every run, warm-up included, so callers can rotate input sets with it.
    pub fn time(
        &self,
        plan: &TimingPlan,
        mut op: impl FnMut(usize) -> Result<(), GpuError>,
    ) -> Result<Timing, GpuError> {
        let started = Instant::now();
        let mut i = 0usize;
        match plan.warmup {
            Warmup::Runs(n) => {
                for _ in 0..n {
                    op(i)?;
                    i += 1;
                }
                self.sync()?;
            }
            Warmup::For(duration) => loop {
                op(i)?;
                i += 1;
                if i == 1 || i % WARMUP_CHECK_EVERY == 0 || i >= MAX_WARMUP_RUNS {
                    self.sync()?;
                    if started.elapsed() >= duration || i >= MAX_WARMUP_RUNS {
                        break;
                    }
                }
            },
        }
        let target = match plan.runs {
            RunCount::Exactly(n) => n,
            RunCount::Fill { measure, min, max } => {
                let per_run = started.elapsed().as_secs_f64() / i.max(1) as f64;
                let fitting = (measure.as_secs_f64() / per_run.max(1e-7)) as usize;
                // A `min` above `max` wins rather than panicking in `clamp`.
                fitting.min(max).max(min)
            }
        };
        let mut times: Vec<f64> = Vec::with_capacity(target);
        let mut early_stopped = false;
        while times.len() < target {
            let batch = EVENT_BATCH.min(target - times.len());
            for j in 0..batch {
                self.events[2 * j]
                    .record(&self.stream)
                    .map_err(driver_err("cuEventRecord"))?;
                op(i)?;
                i += 1;
                self.events[2 * j + 1]
                    .record(&self.stream)
                    .map_err(driver_err("cuEventRecord"))?;
            }
            // A fault surfaces at the synchronization, before any time of the batch is read.
            self.sync()?;
            for j in 0..batch {
                let ms = self.events[2 * j]
                    .elapsed_ms(&self.events[2 * j + 1])
                    .map_err(driver_err("cuEventElapsedTime"))?;
                times.push(f64::from(ms) / 1e3);
            }
            if let Some(stop) = plan.early_stop
                && times.len() >= stop.min_runs
                && median(&times) > stop.ratio * stop.best_s
            {
                early_stopped = true;
                break;
            }
        }
        Timing::from_times(&times, early_stopped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn timings_summarize_their_runs() {
        let t = Timing::from_times(&[1e-3, 4e-3, 2e-3], false).unwrap();
        assert_eq!(
            (t.median_s, t.min_s, t.max_s, t.runs),
            (2e-3, 1e-3, 4e-3, 3)
        );
        let s = RateSummary::of(10.0, &t);
        assert_eq!(s.median, 10.0 / 2e-3);
        assert_eq!(s.min, 10.0 / 4e-3);
        assert_eq!(s.max, 10.0 / 1e-3);
        assert_eq!(s.runs, 3);
        let t = Timing::from_times(&[1e-3, 2e-3, 3e-3, 4e-3], true).unwrap();
        assert_eq!(RateSummary::of(10.0, &t).median, 10.0 / 2.5e-3);
        assert!(t.early_stopped);
    }

    #[test]
    fn broken_timings_give_no_figure() {
        for times in [&[][..], &[1e-3, 0.0], &[1e-3, f64::NAN], &[-1e-3]] {
            assert!(
                matches!(
                    Timing::from_times(times, false),
                    Err(GpuError::Implausible { what: "timing", .. })
                ),
                "{times:?}"
            );
        }
    }
}
