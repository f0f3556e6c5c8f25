use thiserror::Error;

/// Everything that can go wrong while building a hardware model.
#[derive(Debug, Error)]
pub enum ArchError {
    #[error("{path}: cannot parse hardware description: {reason}")]
    Parse { path: String, reason: String },

    #[error("{path}: field `{field}` {reason}")]
    Invalid {
        path: String,
        field: String,
        reason: String,
    },

    /// A number outside what any GPU (or the description it is checked against) can have.
    #[error("{path}: field `{field}` is {value}; accepted: {accepted}")]
    OutOfRange {
        path: String,
        field: String,
        value: String,
        accepted: String,
    },

    #[error("unknown GPU `{name}`{}; known GPUs: {}", closest.as_ref().map(|c| format!(" (did you mean `{c}`?)")).unwrap_or_default(), known.join(", "))]
    UnknownGpu {
        name: String,
        closest: Option<String>,
        known: Vec<String>,
    },

    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },

    #[error("hardware database directory `{path}` does not exist or is not a directory")]
    MissingDbDir { path: String },

    #[error("{path}: bad calibration file: {reason}")]
    Calibration { path: String, reason: String },

    #[error("no cache directory could be determined: set CARVER_CACHE_DIR or pass --cache-dir")]
    NoCacheDir,
}
