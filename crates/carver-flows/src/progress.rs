//! How a long flow reports what it is doing: the front end implements [`Progress`] (the CLI
//! draws bars on a terminal and prints lines to a log; the Python package may do either) and
//! the flow calls it. Every method has a default that does nothing.

/// A step of a calibration run: `index` of `total`, and what it measures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalibrationStep {
    pub index: usize,
    pub total: usize,
    pub label: String,
}

/// A phase of tuning one shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TuneProgress {
    /// `total` candidates are being compiled.
    Compiling {
        total: usize,
    },
    Compiled {
        done: usize,
        total: usize,
    },
    /// The compiled candidates are being checked and timed.
    Benchmarking {
        total: usize,
    },
    Benchmarked {
        done: usize,
        total: usize,
    },
    /// A candidate's worker process died or hung; tuning goes on with the others.
    WorkerLost {
        candidate: String,
        reason: String,
    },
}

/// What a flow tells its front end while it runs.
pub trait Progress: Sync {
    /// Tuning of the shape labelled `shape` (e.g. `4096x4096x4096`) has started.
    fn shape_started(&self, _shape: &str) {}
    fn tune(&self, _event: TuneProgress) {}
    /// The current shape is done (its bars can go).
    fn shape_finished(&self) {}
    fn calibration_step(&self, _step: &CalibrationStep) {}
    /// The calibration is over (measured, or failed).
    fn calibration_finished(&self) {}
    /// Something the user should know that does not stop the flow (a damaged database moved
    /// aside, an unreadable calibration file).
    fn warning(&self, _message: &str) {}
}

/// Reports nothing.
pub struct Silent;

impl Progress for Silent {}
