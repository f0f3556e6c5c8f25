//! A validated matmul problem: what the policy, the families and the cost model read. Made by
//! [`MatmulTemplate::validate`](crate::MatmulTemplate::validate), so every size is in range and
//! every dtype supported.

use carver_arch::{Arch, ComputeClass};
use serde::{Deserialize, Serialize};

use crate::dtype::{DType, Layout};

/// A validated problem: what the policy and the cost model read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub batch: u64,
    pub layout_a: Layout,
    pub layout_b: Layout,
    pub a: DType,
    pub b: DType,
    pub c: DType,
    pub acc: DType,
    pub class: ComputeClass,
    pub aligned_a: bool,
    pub aligned_b: bool,
    pub aligned_c: bool,
}

impl Problem {
    /// Useful multiply-add work, in FLOP.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }

    /// Bytes of A + B + C: the least any kernel must move through DRAM.
    pub fn compulsory_bytes(&self) -> f64 {
        let b = self.batch as f64;
        b * (self.m as f64 * self.k as f64 * f64::from(self.a.bytes())
            + self.k as f64 * self.n as f64 * f64::from(self.b.bytes())
            + self.m as f64 * self.n as f64 * f64::from(self.c.bytes()))
    }

    /// The least time any kernel can take for this problem on `arch`, in seconds: its useful
    /// work at the dense peak of its compute class, or its compulsory bytes at the memory
    /// bandwidth, whichever is longer. When A, B and C fit in L2 together, repeated runs (as
    /// timing does) may find them there, so the L2 bandwidth bounds the memory side. A GPU
    /// without a peak for the class is bounded by memory alone.
    ///
    /// The one roofline of carver: measured times below it are not believable.
    pub fn roofline_time_s(&self, arch: &Arch) -> f64 {
        let compute = arch
            .peak_flops(self.class)
            .map_or(0.0, |peak| self.flops() / peak);
        let bytes = self.compulsory_bytes();
        let bandwidth = if bytes <= arch.l2.size_bytes as f64 {
            arch.dram_bandwidth().max(arch.l2_bandwidth())
        } else {
            arch.dram_bandwidth()
        };
        compute.max(bytes / bandwidth)
    }

    /// Input element size in bytes (A's; B's is the same size).
    pub fn in_bytes(&self) -> u32 {
        self.a.bytes()
    }
}

#[cfg(test)]
mod tests {
    use crate::{DType, MatmulTemplate};
    use carver_arch::HardwareDb;

    #[test]
    fn the_roofline_is_the_slower_of_compute_and_memory() {
        let db = HardwareDb::embedded().unwrap();
        let h100 = db.get("h100").unwrap();
        // 4096^3 f16: 137 GFLOP at 989.4 TFLOP/s is 139 us; 96 MiB at 3.35 TB/s is 30 us.
        let square = MatmulTemplate::new(4096, 4096, 4096)
            .with_dtype(DType::F16)
            .validate(h100)
            .unwrap();
        let t = square.roofline_time_s(h100);
        assert!((t - square.flops() / 989.4e12).abs() < 1e-9, "{t}");
        // 1 x 4096 x 65536: 512 MiB of B cannot sit in L2, so DRAM bounds it.
        let skinny = MatmulTemplate::new(1, 4096, 65536)
            .with_dtype(DType::F16)
            .validate(h100)
            .unwrap();
        let t = skinny.roofline_time_s(h100);
        assert!(
            (t - skinny.compulsory_bytes() / 3.35e12).abs() < 1e-9,
            "{t}"
        );
        // 1 x 4096 x 4096: 32 MiB fits in the 50 MiB L2, so its bandwidth bounds it.
        let small = MatmulTemplate::new(1, 4096, 4096)
            .with_dtype(DType::F16)
            .validate(h100)
            .unwrap();
        let t = small.roofline_time_s(h100);
        assert!(
            (t - small.compulsory_bytes() / h100.l2_bandwidth()).abs() < 1e-12,
            "{t}"
        );
    }
}
