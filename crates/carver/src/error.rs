use thiserror::Error;

use crate::family::{ConfigError, ProblemRejected, UnknownFamily};

/// Why a recommendation could not be made.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CarverError {
    /// A field of a fused-MoE layer (`MoeTemplate`) that cannot be used.
    #[error("invalid MoE layer: {field} {reason}")]
    InvalidMoe { field: String, reason: String },

    #[error("invalid problem size: {0}")]
    InvalidShape(String),

    #[error("{dtype} is not supported by {arch}: {reason}")]
    UnsupportedDtype {
        dtype: String,
        arch: String,
        reason: String,
    },

    #[error(transparent)]
    UnsupportedByTarget(#[from] ProblemRejected),

    #[error(transparent)]
    UnknownTarget(#[from] UnknownFamily),

    #[error("top-k = {0}: accepted 1 to {max} configurations", max = crate::TopK::MAX)]
    TopKOutOfRange(usize),

    #[error("top-k `{0}` is not a whole number: accepted 1 to {max}", max = crate::TopK::MAX)]
    TopKNotANumber(String),

    #[error(
        "no legal configuration of target `{target}` fits {arch} for this problem: every configuration of its space breaks a tile rule of the family or exceeds the shared memory, registers or threads of this GPU"
    )]
    NoLegalConfig { target: String, arch: String },

    /// One given configuration (in the target's own parameters) cannot be used.
    #[error("this configuration of target `{target}` cannot run on {arch}: {reason}")]
    IllegalConfig {
        target: String,
        arch: String,
        reason: ConfigError,
    },
}
