//! Why one configuration is not legal: a rule of its family, a limit of the GPU, or a native
//! parameter dict that does not describe a configuration.

use thiserror::Error;

use super::Family;
use super::sm90::Sm90Violation;

/// Why a configuration cannot be used. Every message says what was wrong and what is accepted.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum ConfigError {
    /// A rule of carver's own `cuda-sm90` family, the one its kernel generator enforces too.
    #[error(transparent)]
    Sm90(#[from] Sm90Violation),

    /// A tile rule of a family carver recommends for but does not generate (Triton, TileLang,
    /// generic).
    #[error("{what}")]
    Rule { family: Family, what: String },

    /// (The GPU is named by whoever reports the error; the policy checks every tile it walks,
    /// and this keeps the check free of allocations.)
    #[error("needs {needed} B of shared memory; this GPU allows {allowed} B per block")]
    SharedMemory { needed: u64, allowed: u64 },

    #[error(
        "needs about {needed} registers per thread; at most {allowed} exist (the compiler would spill)"
    )]
    Registers { needed: u32, allowed: u32 },

    #[error("{threads} threads per block; at most {allowed} are allowed")]
    Threads { threads: u32, allowed: u32 },

    #[error("{needed} registers per block; at most {allowed} exist")]
    RegistersPerBlock { needed: u64, allowed: u32 },

    #[error("no block of this configuration fits on an SM")]
    NoBlockPerSm,

    /// One field of a native parameter dict is missing or unusable.
    #[error("native parameter `{field}` {reason}")]
    Native { field: String, reason: String },

    /// The native parameter dict as a whole does not parse.
    #[error("not a {family} parameter dict: {reason}")]
    NativeFormat { family: Family, reason: String },
}

impl ConfigError {
    /// A tile rule of `family`, in words.
    pub fn rule(family: Family, what: impl Into<String>) -> Self {
        Self::Rule {
            family,
            what: what.into(),
        }
    }

    /// A native field that is missing or unusable.
    pub fn native(field: &str, reason: impl Into<String>) -> Self {
        Self::Native {
            field: field.to_string(),
            reason: reason.into(),
        }
    }
}

/// A problem a family cannot run at all on a GPU (a dtype, layout or instruction it lacks).
#[derive(Clone, Debug, Error, PartialEq)]
#[error("target `{family}` cannot run this problem: {reason}")]
pub struct ProblemRejected {
    pub family: Family,
    pub reason: String,
}

/// A family name that is not one of carver's.
#[derive(Clone, Debug, Error, PartialEq)]
#[error("unknown target `{0}` (accepted: triton, tilelang, cuda-sm90, generic)")]
pub struct UnknownFamily(pub String);
