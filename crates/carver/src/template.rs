//! The matmul template: what is computed, independent of how.
//!
//! `C[b] (M x N) = A[b] (M x K) @ B[b] (K x N)` for `b` in `0..batch`.

use carver_arch::{Arch, ComputeClass};
use serde::{Deserialize, Serialize};

use crate::dtype::{DType, Layout};
use crate::error::CarverError;
use crate::family::Family;
use crate::problem::Problem;

/// Largest size carver accepts for one dimension: 32-bit signed indexing is what the kernel
/// families assume for a single dimension.
pub const MAX_DIM: u64 = (1 << 31) - 1;

/// A matmul to be configured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatmulTemplate {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub batch: u64,
    pub layout_a: Layout,
    pub layout_b: Layout,
    pub dtype_a: DType,
    pub dtype_b: DType,
    pub dtype_c: DType,
    pub dtype_acc: DType,
    /// Whether each operand's leading dimension is a multiple of 16 bytes; `None` derives it
    /// from the sizes (a densely packed tensor).
    pub aligned_a: Option<bool>,
    pub aligned_b: Option<bool>,
    pub aligned_c: Option<bool>,
    /// Which kernel family the hints are for.
    pub family: Family,
}

impl MatmulTemplate {
    /// A row-major f16 matmul with fp32 accumulation and f16 output, for the generic family.
    pub fn new(m: u64, n: u64, k: u64) -> Self {
        Self {
            m,
            n,
            k,
            batch: 1,
            layout_a: Layout::Row,
            layout_b: Layout::Row,
            dtype_a: DType::F16,
            dtype_b: DType::F16,
            dtype_c: DType::F16,
            dtype_acc: DType::F32,
            aligned_a: None,
            aligned_b: None,
            aligned_c: None,
            family: Family::Generic,
        }
    }

    /// Sets A and B to `input` and picks the usual output and accumulator for it.
    pub fn with_dtype(mut self, input: DType) -> Self {
        self.dtype_a = input;
        self.dtype_b = input;
        (self.dtype_c, self.dtype_acc) = match input {
            DType::I8 => (DType::I32, DType::I32),
            DType::F32 | DType::Tf32 => (DType::F32, DType::F32),
            DType::E4m3 | DType::E5m2 => (DType::F16, DType::F32),
            other => (other, DType::F32),
        };
        self
    }

    pub fn with_family(mut self, family: Family) -> Self {
        self.family = family;
        self
    }

    pub fn with_layouts(mut self, a: Layout, b: Layout) -> Self {
        self.layout_a = a;
        self.layout_b = b;
        self
    }

    pub fn with_batch(mut self, batch: u64) -> Self {
        self.batch = batch;
        self
    }

    pub fn with_output(mut self, c: DType) -> Self {
        self.dtype_c = c;
        self
    }

    /// Checks the template against the arch and returns the validated problem.
    pub fn validate(&self, arch: &Arch) -> Result<Problem, CarverError> {
        for (name, v) in [
            ("M", self.m),
            ("N", self.n),
            ("K", self.k),
            ("batch", self.batch),
        ] {
            if v == 0 {
                return Err(CarverError::InvalidShape(format!(
                    "{name} is 0; every size must be at least 1"
                )));
            }
            if v > MAX_DIM {
                return Err(CarverError::InvalidShape(format!(
                    "{name} = {v} exceeds the largest supported size {MAX_DIM}"
                )));
            }
        }
        let elems = |a: u64, b: u64, what: &str| {
            a.checked_mul(b)
                .and_then(|x| x.checked_mul(self.batch))
                .filter(|&x| x <= 1 << 40)
                .ok_or_else(|| {
                    CarverError::InvalidShape(format!(
                        "{what} has {a} x {b} x batch {} elements, more than 2^40",
                        self.batch
                    ))
                })
        };
        elems(self.m, self.k, "A")?;
        elems(self.k, self.n, "B")?;
        elems(self.m, self.n, "C")?;

        let same_family =
            self.dtype_a == self.dtype_b || (self.dtype_a.is_fp8() && self.dtype_b.is_fp8());
        if !same_family {
            return Err(CarverError::UnsupportedDtype {
                dtype: format!("{} x {}", self.dtype_a, self.dtype_b),
                arch: arch.key().to_string(),
                reason: "A and B must have the same dtype (or both be fp8)".into(),
            });
        }
        let acc_ok = match self.dtype_a {
            DType::I8 => self.dtype_acc == DType::I32,
            DType::I32 => false,
            DType::F16 => matches!(self.dtype_acc, DType::F32 | DType::F16),
            _ => self.dtype_acc == DType::F32,
        };
        if !acc_ok {
            return Err(CarverError::UnsupportedDtype {
                dtype: format!("{} with {} accumulation", self.dtype_a, self.dtype_acc),
                arch: arch.key().to_string(),
                reason:
                    "accepted: f16/bf16/f32/tf32/fp8 inputs with f32 accumulation (f16 may also \
                         accumulate in f16), i8 inputs with i32 accumulation"
                        .into(),
            });
        }
        let c_ok = match self.dtype_a {
            DType::I8 => matches!(
                self.dtype_c,
                DType::I32 | DType::I8 | DType::F16 | DType::Bf16
            ),
            _ => matches!(self.dtype_c, DType::F16 | DType::Bf16 | DType::F32),
        };
        if !c_ok {
            return Err(CarverError::UnsupportedDtype {
                dtype: format!("{} output from {} inputs", self.dtype_c, self.dtype_a),
                arch: arch.key().to_string(),
                reason: "accepted outputs: f16, bf16, f32 (and i32/i8 for i8 inputs)".into(),
            });
        }
        let class = self.dtype_a.compute_class();
        if !arch.supports(class) {
            let have: Vec<&str> = ComputeClass::ALL
                .into_iter()
                .filter(|c| c.is_tensor() && arch.supports(*c))
                .map(|c| c.as_str())
                .collect();
            return Err(CarverError::UnsupportedDtype {
                dtype: self.dtype_a.to_string(),
                arch: arch.key().to_string(),
                reason: format!(
                    "{} has no tensor-core support for {class}; it supports {}",
                    arch.gpu.name,
                    have.join(", ")
                ),
            });
        }
        let aligned = |ld: u64, bytes: u32| ld * u64::from(bytes) % 16 == 0;
        let lda = match self.layout_a {
            Layout::Row => self.k,
            Layout::Col => self.m,
        };
        let ldb = match self.layout_b {
            Layout::Row => self.n,
            Layout::Col => self.k,
        };
        let problem = Problem {
            m: self.m,
            n: self.n,
            k: self.k,
            batch: self.batch,
            layout_a: self.layout_a,
            layout_b: self.layout_b,
            a: self.dtype_a,
            b: self.dtype_b,
            c: self.dtype_c,
            acc: self.dtype_acc,
            class,
            aligned_a: self.aligned_a.unwrap_or(aligned(lda, self.dtype_a.bytes())),
            aligned_b: self.aligned_b.unwrap_or(aligned(ldb, self.dtype_b.bytes())),
            aligned_c: self
                .aligned_c
                .unwrap_or(aligned(self.n, self.dtype_c.bytes())),
        };
        self.family.rules().check_problem(&problem, arch)?;
        Ok(problem)
    }
}
