//! A validated matmul problem: what the policy, the families and the cost model read. Made by
//! [`MatmulTemplate::validate`](crate::MatmulTemplate::validate), so every size is in range and
//! every dtype supported.

use carver_arch::ComputeClass;
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

    /// Input element size in bytes (A's; B's is the same size).
    pub fn in_bytes(&self) -> u32 {
        self.a.bytes()
    }
}
