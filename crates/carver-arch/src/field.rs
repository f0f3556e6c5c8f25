//! The figures of a hardware description that can be marked as estimates (`Arch::estimated`),
//! named in files and JSON by their dotted path (`"l2.bandwidth_bytes_per_s"`).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::class::ComputeClass;

/// Declares the figures named by a fixed path once: the enum's unit variants and their paths.
macro_rules! arch_fields {
    ($($variant:ident => $path:literal,)*) => {
        /// A figure of an [`crate::Arch`] that may be an estimate rather than a published or
        /// queried value. Written as its dotted path; ordered by that path, so a set of them
        /// is listed the way it was before the paths were typed.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ArchField {
            $(
                #[doc = concat!("`", $path, "`")]
                $variant,
            )*
            /// `peak.<class>`: the whole peak entry of a compute class.
            Peak(ComputeClass),
            /// `peak.<class>.tflops`: the peak figure of a compute class.
            PeakTflops(ComputeClass),
        }

        impl ArchField {
            /// Every figure named by a fixed path, with its path.
            const FIXED: &'static [(ArchField, &'static str)] = &[$((ArchField::$variant, $path),)*];

            /// The dotted path (`"sm.sustained_clock_mhz"`, `"peak.bf16"`,
            /// `"peak.tf32.tflops"`).
            pub fn path(self) -> Cow<'static, str> {
                match self {
                    $(Self::$variant => Cow::Borrowed($path),)*
                    Self::Peak(class) => Cow::Owned(format!("{PEAK_PREFIX}{class}")),
                    Self::PeakTflops(class) => {
                        Cow::Owned(format!("{PEAK_PREFIX}{class}{TFLOPS_SUFFIX}"))
                    }
                }
            }
        }
    };
}

arch_fields! {
    GpuName => "gpu.name",
    GpuArchitecture => "gpu.architecture",
    GpuComputeCapability => "gpu.compute_capability",
    SmCount => "sm.count",
    SmWarpSize => "sm.warp_size",
    SmBoostClock => "sm.boost_clock_mhz",
    SmSustainedClock => "sm.sustained_clock_mhz",
    SmMaxThreads => "sm.max_threads",
    SmMaxBlocks => "sm.max_blocks",
    SmMaxThreadsPerBlock => "sm.max_threads_per_block",
    SmTensorCores => "sm.tensor_cores",
    RegistersPerSm => "registers.per_sm",
    RegistersPerBlock => "registers.per_block",
    RegistersPerThreadMax => "registers.per_thread_max",
    RegistersAllocationUnit => "registers.allocation_unit",
    SharedMemoryPerSm => "shared_memory.per_sm_bytes",
    SharedMemoryPerBlockDefault => "shared_memory.per_block_default_bytes",
    SharedMemoryPerBlockOptin => "shared_memory.per_block_optin_bytes",
    SharedMemoryReservedPerBlock => "shared_memory.reserved_per_block_bytes",
    SharedMemoryBytesPerClockPerSm => "shared_memory.bytes_per_clock_per_sm",
    MemoryKind => "memory.kind",
    MemoryCapacity => "memory.capacity_bytes",
    MemoryBusWidth => "memory.bus_width_bits",
    MemoryClock => "memory.memory_clock_mhz",
    MemoryBandwidth => "memory.bandwidth_bytes_per_s",
    L2Size => "l2.size_bytes",
    L2Bandwidth => "l2.bandwidth_bytes_per_s",
    TensorInstructions => "tensor_instructions",
}

const PEAK_PREFIX: &str = "peak.";
const TFLOPS_SUFFIX: &str = ".tflops";

impl ArchField {
    /// The compute class a peak field is about.
    pub fn peak_class(self) -> Option<ComputeClass> {
        match self {
            Self::Peak(class) | Self::PeakTflops(class) => Some(class),
            _ => None,
        }
    }

    /// Every accepted name, for error messages.
    fn accepted_names() -> String {
        let classes = ComputeClass::ALL.map(|c| c.as_str()).join(", ");
        let mut names: Vec<&str> = Self::FIXED.iter().map(|(_, path)| *path).collect();
        names.extend(["peak.<class>", "peak.<class>.tflops"]);
        format!("{} (<class>: {classes})", names.join(", "))
    }
}

impl fmt::Display for ArchField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path())
    }
}

/// An `estimated` entry that names no figure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownArchField(pub String);

impl fmt::Display for UnknownArchField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` in `estimated` is not a figure that can be estimated; accepted: {}",
            self.0,
            ArchField::accepted_names()
        )
    }
}

impl std::error::Error for UnknownArchField {}

impl FromStr for ArchField {
    type Err = UnknownArchField;
    fn from_str(s: &str) -> Result<Self, UnknownArchField> {
        if let Some((field, _)) = Self::FIXED.iter().find(|(_, path)| *path == s) {
            return Ok(*field);
        }
        let unknown = || UnknownArchField(s.to_string());
        let rest = s.strip_prefix(PEAK_PREFIX).ok_or_else(unknown)?;
        let (class, tflops) = match rest.strip_suffix(TFLOPS_SUFFIX) {
            Some(class) => (class, true),
            None => (rest, false),
        };
        // Exact spelling only: the paths are written by carver, and a file must match them.
        let class = ComputeClass::ALL
            .into_iter()
            .find(|c| c.as_str() == class)
            .ok_or_else(unknown)?;
        Ok(if tflops {
            Self::PeakTflops(class)
        } else {
            Self::Peak(class)
        })
    }
}

impl Ord for ArchField {
    fn cmp(&self, other: &Self) -> Ordering {
        self.path().cmp(&other.path())
    }
}

impl PartialOrd for ArchField {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for ArchField {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.path())
    }
}

impl<'de> Deserialize<'de> for ArchField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_parses_back_to_its_field() {
        let mut fields: Vec<ArchField> = ArchField::FIXED.iter().map(|(f, _)| *f).collect();
        for class in ComputeClass::ALL {
            fields.extend([ArchField::Peak(class), ArchField::PeakTflops(class)]);
        }
        for field in fields {
            let path = field.path();
            assert!(!path.is_empty(), "{field:?}");
            assert_eq!(path.parse::<ArchField>(), Ok(field), "{path}");
        }
        assert_eq!(
            "peak.tf32.tflops".parse(),
            Ok(ArchField::PeakTflops(ComputeClass::Tf32))
        );
        assert_eq!(ArchField::Peak(ComputeClass::Bf16).to_string(), "peak.bf16");
    }

    #[test]
    fn unknown_names_are_refused_with_the_accepted_ones() {
        for bad in [
            "l2.latency_ns",
            "peak.fp16",
            "peak.BF16",
            "peak.bf16.clock_mhz",
            "gpu.key",
            "",
        ] {
            let err = bad.parse::<ArchField>().unwrap_err().to_string();
            assert!(err.contains(&format!("`{bad}`")), "{err}");
            assert!(err.contains("l2.bandwidth_bytes_per_s"), "{err}");
            assert!(err.contains("peak.<class>.tflops"), "{err}");
            assert!(err.contains("bf16, tf32"), "{err}");
        }
    }

    #[test]
    fn fields_sort_by_path() {
        let mut fields = [
            ArchField::SmSustainedClock,
            ArchField::PeakTflops(ComputeClass::Tf32),
            ArchField::L2Bandwidth,
            ArchField::Peak(ComputeClass::F16),
            ArchField::Peak(ComputeClass::Bf16),
            ArchField::MemoryClock,
        ];
        fields.sort();
        let paths: Vec<String> = fields.iter().map(ToString::to_string).collect();
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(paths, sorted);
    }
}
