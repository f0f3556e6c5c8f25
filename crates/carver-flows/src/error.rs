use std::path::PathBuf;

use thiserror::Error;

/// Why a flow could not run. Each says what was wrong and what is accepted; the model's,
/// the hardware database's, the tuning database's and the GPU's own errors pass through whole.
#[derive(Debug, Error)]
pub enum FlowError {
    #[error(transparent)]
    Arch(#[from] carver_arch::ArchError),

    #[error(transparent)]
    Model(#[from] carver::CarverError),

    #[error(transparent)]
    TuneDb(#[from] carver_tunedb::TuneDbError),

    #[cfg(feature = "gpu")]
    #[error(transparent)]
    Gpu(#[from] carver_gpu::GpuError),

    /// `carver tune --emit DIR` with a DIR that cannot hold emitted kernels.
    #[cfg(feature = "gpu")]
    #[error("--emit: {0}")]
    Emit(#[from] carver_gpu::sm90::EmitError),

    /// A shapes file that cannot be used at all (one bad row is reported by row instead).
    #[error("shapes file {}: {reason}", path.display())]
    ShapesFile { path: PathBuf, reason: String },

    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. `read` or `write`.
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// `carver cache show` was given something that is neither an id nor a shape.
    #[error(
        "`{0}` is neither a result id (the ID column of `carver cache list`) nor a shape MxNxK \
         such as 4096x4096x4096"
    )]
    BadSelector(String),

    #[error(
        "no stored tuning result matches `{selector}`{filters}; `carver cache list` shows what is stored"
    )]
    NothingMatches { selector: String, filters: String },

    /// `cache clear` without confirmation.
    #[error(
        "refusing to delete {count} stored tuning results{filters} without --yes (they cost GPU \
         time to measure again); --dry-run lists them; add --yes, or narrow the selection with \
         --device, --target, --shape or --id"
    )]
    ClearNotConfirmed { count: u64, filters: String },

    /// `cache remove` of an id that is not stored.
    #[error(
        "no stored tuning result has id {id}; nothing was removed (`carver cache list` shows the \
         ids)"
    )]
    NoSuchResult { id: i64 },

    /// `cache show` found only rows it cannot read.
    #[error(
        "the stored results matching `{selector}` cannot be read ({reasons}); `carver cache \
         remove ID` deletes a damaged row"
    )]
    OnlyDamaged { selector: String, reasons: String },

    /// An export destination that is not a regular file, or cannot be written.
    #[error("cannot write the export to {}: {reason}", path.display())]
    ExportTarget { path: PathBuf, reason: String },

    /// A Hugging Face config or routing histogram that cannot be used for an MoE layer.
    #[error("{file}: {reason}")]
    MoeInput { file: String, reason: String },

    /// A configuration given on the command line or by a caller that is not JSON.
    #[error("the configuration is not JSON: {0}")]
    ConfigNotJson(String),

    /// A flow that needs a GPU, in a build without GPU support.
    #[error(
        "{what} is not available: this carver was built without GPU support (the `gpu` feature); \
         rebuild with it to use a GPU, or plan offline with --arch h100 (or any name from \
         `carver arch list`)"
    )]
    NoGpuSupport { what: &'static str },

    /// Tuning needs carver's own kernel family, which runs on Hopper only.
    #[error(
        "GPU {device} ({name}) has compute capability {capability}; carver's native kernel \
         family (cuda-sm90) needs a Hopper GPU (9.0). Rank configurations for other kernel \
         families offline with `carver recommend --target triton`"
    )]
    NotHopper {
        device: usize,
        name: String,
        capability: String,
    },

    /// `carver bench` without a configuration, and none stored for the problem.
    #[error(
        "no tuned result for {problem} on this GPU in the tuning database; run `carver tune` \
         first or pass a configuration"
    )]
    NoTunedResult { problem: String },
}
