//! What the CUDA driver and NVML report about one device, as plain data.
//!
//! Keeping the raw answers separate from the code that asks for them lets the merge into an
//! [`carver_arch::Arch`] be tested with made-up devices on machines without a GPU.

use carver_arch::ComputeCapability;
use serde::{Deserialize, Serialize};

/// Device attributes from the CUDA driver (`cuDeviceGetAttribute` and friends).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DriverQuery {
    /// CUDA device ordinal.
    pub index: usize,
    pub name: String,
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, the form NVML uses.
    pub uuid: String,
    pub compute_capability: ComputeCapability,
    pub sm_count: u32,
    pub warp_size: u32,
    pub max_threads_per_sm: u32,
    pub max_blocks_per_sm: u32,
    pub max_threads_per_block: u32,
    pub shared_memory_per_block_default_bytes: u64,
    pub shared_memory_per_block_optin_bytes: u64,
    pub shared_memory_per_sm_bytes: u64,
    pub shared_memory_reserved_per_block_bytes: u64,
    pub registers_per_sm: u32,
    pub registers_per_block: u32,
    pub l2_size_bytes: u64,
    /// Peak memory clock as the driver reports it (kHz / 1000).
    pub memory_clock_mhz: f64,
    pub memory_bus_width_bits: u32,
    /// Maximum SM clock as the driver reports it (kHz / 1000).
    pub max_sm_clock_mhz: f64,
    pub total_memory_bytes: u64,
    /// `cuDriverGetVersion`, e.g. 13000 for CUDA 13.0.
    pub cuda_driver_version: i32,
}

/// What NVML adds for the same device (found by UUID).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NvmlQuery {
    pub name: String,
    pub uuid: String,
    /// Kernel-mode driver version (`580.159.04`).
    pub driver_version: String,
    pub max_sm_clock_mhz: u32,
    pub max_memory_clock_mhz: u32,
    /// Enforced power limit; `None` where the board does not report one.
    pub power_limit_w: Option<f64>,
}

/// Formats the 16 UUID bytes of `cuDeviceGetUuid` the way NVML and `nvidia-smi` print them.
pub fn format_uuid(bytes: &[u8; 16]) -> String {
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        hex[0..4].concat(),
        hex[4..6].concat(),
        hex[6..8].concat(),
        hex[8..10].concat(),
        hex[10..16].concat()
    )
}

/// `13000` -> `"13.0"`.
pub fn format_cuda_version(version: i32) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_is_formatted_like_nvml() {
        let bytes = [
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
            0xcd, 0xef,
        ];
        assert_eq!(
            format_uuid(&bytes),
            "GPU-12345678-9abc-def0-0123-456789abcdef"
        );
    }

    #[test]
    fn cuda_version_is_major_dot_minor() {
        assert_eq!(format_cuda_version(13000), "13.0");
        assert_eq!(format_cuda_version(12080), "12.8");
    }
}
