//! The worker side: owns the CUDA context, the input sets and cuBLAS, and answers requests.

use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::Arc;

use carver::{DType, Layout};
use carver_arch::ComputeCapability;
use cudarc::cublas::{CudaBlas, result as cublas_result, sys as cublas_sys};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig,
    PushKernelArg, sys,
};
use cudarc::nvrtc::Ptx;

use super::lt::LtFp8;
use super::protocol::{CandidateMeasurement, RepackInfo, Reply, Request, WorkerInfo};
use super::{GemmProblem, Timing, TimingOptions};
use crate::cuda::compile_ptx;
use crate::driver::{driver_err, guarded, init_driver};
use crate::error::GpuError;
use crate::sm90::{
    GemmOutput, KernelSpec, LoadedKernel, OperandRows, RepackKernel, SplitKReduce, SplitKShape,
    TmaMap, encode_tma_maps, operand_rows, sha256_hex,
};
use crate::timing::EventTimer;

/// The worker's helpers after the ones it shares with the calibration (`#line` keeps NVRTC's
/// line numbers those of util.cu).
const UTIL: &str = concat!(
    include_str!("../cuda/common.cuh"),
    "#line 1 \"util.cu\"\n",
    include_str!("util.cu")
);
/// The only compute capability the worker runs on (cuda-sm90 kernels).
const WORKER_CC: ComputeCapability = ComputeCapability { major: 9, minor: 0 };

/// The worker's helper kernels (random inputs, NaN poison, the error of an output) compiled to
/// PTX for compute capability 9.0. Needs libnvrtc, not a GPU.
pub fn compile_worker_helpers() -> Result<String, GpuError> {
    compile_ptx(
        UTIL,
        "carver_tune_util.cu",
        WORKER_CC,
        "tuning worker",
        "the tuning worker compiles its input generators at run time",
    )
}

/// Writes one reply line and flushes it (the parent waits for each line).
fn send(output: &mut impl Write, reply: &Reply) -> Result<(), GpuError> {
    let io = |e: std::io::Error| GpuError::Worker(format!("cannot write a reply: {e}"));
    writeln!(
        output,
        "{}",
        serde_json::to_string(reply).expect("serializes")
    )
    .map_err(io)?;
    output.flush().map_err(io)
}

/// Serves requests from `input` until `Exit` or end of input, one reply line per request.
/// Meant for a process of its own (`carver tune --worker`): after a candidate faults, the reply
/// says so and this returns, since the CUDA context cannot be used again.
pub fn serve_worker(input: impl BufRead, mut output: impl Write) -> Result<(), GpuError> {
    let mut bench: Option<WorkerBench> = None;
    for line in input.lines() {
        let line = line.map_err(|e| GpuError::Worker(format!("cannot read a request: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let request: Request = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                let reply = Reply::Error {
                    message: format!("not a request: {e}"),
                };
                send(&mut output, &reply)?;
                continue;
            }
        };
        let (reply, stop) = match request {
            Request::Exit => return Ok(()),
            Request::Setup {
                device,
                problem,
                timing,
            } => {
                bench = None;
                match guarded("CUDA libraries", "tuning worker setup", || {
                    WorkerBench::new(device, problem, timing)
                }) {
                    Ok(b) => {
                        let info = b.info.clone();
                        bench = Some(b);
                        (Reply::Ready(info), false)
                    }
                    Err(e) => (
                        Reply::Error {
                            message: e.to_string(),
                        },
                        false,
                    ),
                }
            }
            Request::Cublas => match bench.as_mut() {
                None => (no_setup(), false),
                Some(b) => match guarded("cuBLAS", "cublasGemmEx", || b.time_cublas()) {
                    Ok(t) => (Reply::Cublas(t), false),
                    Err(e) => (
                        Reply::Error {
                            message: e.to_string(),
                        },
                        true,
                    ),
                },
            },
            Request::Candidate {
                cubin,
                cubin_sha256,
                spec,
                best_s,
            } => match bench.as_mut() {
                None => (no_setup(), false),
                Some(b) => match guarded("CUDA libraries", "candidate", || {
                    b.candidate(&cubin, &cubin_sha256, &spec, best_s)
                }) {
                    Ok(Ok(m)) => (Reply::Candidate(m), false),
                    Ok(Err(reason)) => (
                        Reply::Rejected {
                            reason,
                            context_lost: false,
                        },
                        false,
                    ),
                    Err(e) => {
                        // A launch or synchronization error: after a fault the context is gone.
                        let lost = b.context_lost();
                        (
                            Reply::Rejected {
                                reason: e.to_string(),
                                context_lost: lost,
                            },
                            lost,
                        )
                    }
                },
            },
        };
        send(&mut output, &reply)?;
        if stop {
            return Ok(());
        }
    }
    Ok(())
}

/// Refuses a cubin that is not the one the parent checked: the file may have been replaced
/// between the parent's check and this read.
fn check_image(path: &Path, image: &[u8], expected_sha256: &str) -> Result<(), String> {
    let found = sha256_hex(image);
    if found == expected_sha256 {
        Ok(())
    } else {
        Err(format!(
            "{} changed after it was checked (SHA-256 {found}, expected {expected_sha256}); not loaded",
            path.display()
        ))
    }
}

fn no_setup() -> Reply {
    Reply::Error {
        message: "no setup request came first".into(),
    }
}

/// One input set: A and B (bytes of 16-bit or fp8 elements), and their device addresses.
struct InputSet {
    a: CudaSlice<u8>,
    b: CudaSlice<u8>,
    a_ptr: sys::CUdeviceptr,
    b_ptr: sys::CUdeviceptr,
}

/// The padded copies of the operands whose rows are not 16-byte aligned (one buffer each, shared
/// by all input sets) and the kernel that fills them from the current set before every launch.
struct Repacker {
    kernel: RepackKernel,
    a: Option<Padded>,
    b: Option<Padded>,
}

struct Padded {
    _buf: CudaSlice<u16>,
    ptr: sys::CUdeviceptr,
}

/// The worker's device state: input sets, output and reference, cuBLAS, helper kernels and
/// the timer.
struct WorkerBench {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    _util: Arc<CudaModule>,
    fill: CudaFunction,
    fill_fp8: CudaFunction,
    fp8_to_16: CudaFunction,
    poison: CudaFunction,
    diff: CudaFunction,
    blas: CudaBlas,
    /// fp8 problems: exact 16-bit copies of one set's A and B, which the reference runs on, and
    /// cuBLASLt's fp8 GEMM, the baseline.
    fp8: Option<Fp8Baseline>,
    problem: GemmProblem,
    timing: TimingOptions,
    sets: Vec<InputSet>,
    /// One matrix of A and of B as the kernel reads it: in place, or (`repacked()`) from
    /// `repacker`'s copies (the batch's matrices follow each other).
    operands: (OperandRows, OperandRows),
    repacker: Option<Repacker>,
    /// The split-K reduction, loaded for the first split candidate.
    reduce: Option<SplitKReduce>,
    /// The split-K workspace, grown to the largest split candidate's.
    workspace: Option<CudaSlice<f32>>,
    c: CudaSlice<u16>,
    c_ptr: sys::CUdeviceptr,
    reference: CudaSlice<u16>,
    ref_ptr: sys::CUdeviceptr,
    sums: CudaSlice<f64>,
    bad: CudaSlice<u64>,
    timer: EventTimer,
    info: WorkerInfo,
    seed: u64,
}

struct Fp8Baseline {
    a16: CudaSlice<u16>,
    b16: CudaSlice<u16>,
    lt: LtFp8,
}

fn is_bf16(t: DType) -> i32 {
    i32::from(t == DType::Bf16)
}

fn cuda_type(t: DType) -> cublas_sys::cudaDataType_t {
    match t {
        DType::Bf16 => cublas_sys::cudaDataType_t::CUDA_R_16BF,
        _ => cublas_sys::cudaDataType_t::CUDA_R_16F,
    }
}

impl WorkerBench {
    fn new(device: usize, problem: GemmProblem, timing: TimingOptions) -> Result<Self, GpuError> {
        let count = init_driver()?;
        if device >= count {
            return Err(GpuError::NoSuchDevice {
                index: device,
                count,
            });
        }
        for (library, present, why) in [
            (
                "libnvrtc (CUDA NVRTC)",
                // SAFETY: only tries to dlopen the candidate names.
                unsafe { cudarc::nvrtc::sys::is_culib_present() },
                "the tuning worker compiles its input generators at run time",
            ),
            (
                "libcublas (CUDA cuBLAS)",
                unsafe { cublas_sys::is_culib_present() },
                "every candidate is checked against cuBLAS and timed beside it",
            ),
        ] {
            if !present {
                return Err(GpuError::MissingLibrary { library, why });
            }
        }
        if let Err(v) = carver::family::Sm90Params::check_operands(
            problem.input,
            problem.output,
            problem.layout_b,
        ) {
            return Err(GpuError::Unsupported {
                what: format!(
                    "{} -> {} with {}-major B",
                    problem.input, problem.output, problem.layout_b
                ),
                reason: v.to_string(),
            });
        }
        let ctx = CudaContext::new(device).map_err(driver_err("cuDevicePrimaryCtxRetain"))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(driver_err("cuDeviceGetAttribute"))?;
        let name = ctx.name().map_err(driver_err("cuDeviceGetName"))?;
        if (major, minor) != (9, 0) {
            return Err(GpuError::Unsupported {
                what: format!("GPU {device} ({name}, compute capability {major}.{minor})"),
                reason: "carver's native kernel family (cuda-sm90) needs a Hopper GPU, compute capability 9.0".into(),
            });
        }
        let attr = |a: sys::CUdevice_attribute| {
            ctx.attribute(a)
                .map_err(driver_err("cuDeviceGetAttribute"))
                .map(|v| v.max(0) as u64)
        };
        let sms = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let l2_bytes = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?;
        // SAFETY: one stream, no buffer shared across streams.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(driver_err("cuStreamCreate"))?;

        let util = ctx
            .load_module(Ptx::from_src(compile_worker_helpers()?))
            .map_err(driver_err("cuModuleLoadData"))?;
        let load = |name: &str| {
            util.load_function(name)
                .map_err(driver_err("cuModuleGetFunction"))
        };
        let (fill, poison, diff) = (load("fill_16")?, load("poison_u16")?, load("diff_16")?);
        let (fill_fp8, fp8_to_16) = (load("fill_fp8")?, load("fp8_to_16")?);

        let (m, n, k) = (problem.m, problem.n, problem.k);
        let elem = u64::from(problem.input.bytes());
        let batch = problem.batch;
        if batch == 0 {
            return Err(GpuError::Unsupported {
                what: "a batch of 0 matrices".into(),
                reason: "the batch holds at least one matrix".into(),
            });
        }
        let set_elems = batch * (m * k + k * n);
        let set_bytes = set_elems * elem;
        let c_bytes = batch * m * n * 2;
        let operands = operand_rows(problem.layout_b, m, n, k);
        let rows_aligned = !(operands.0.repacked() || operands.1.repacked());
        if let Err(v) = carver::family::Sm90Params::check_rows(problem.input, k, rows_aligned) {
            return Err(GpuError::Unsupported {
                what: format!("{} rows of {k} elements", problem.input),
                reason: v.to_string(),
            });
        }
        // fp8: 16-bit copies of one set for the reference.
        let reference_copies = if elem == 1 { set_elems * 2 } else { 0 };
        let padded_bytes: u64 = [operands.0, operands.1]
            .iter()
            .filter(|o| o.repacked())
            .map(|o| batch * o.padded_elems() * 2)
            .sum();
        let wanted = ((timing.l2_multiple * l2_bytes as f64) / set_bytes as f64).ceil() as u64;
        let (free, _) = ctx.mem_get_info().map_err(driver_err("cuMemGetInfo"))?;
        let budget = (free as u64) * 7 / 10;
        let fixed = 2 * c_bytes + padded_bytes + reference_copies;
        if fixed + 2 * set_bytes > budget {
            return Err(GpuError::OutOfMemory {
                what: "two input sets, the output, the reference and padded copies of A or B",
                needed_bytes: fixed + 2 * set_bytes,
                free_bytes: free as u64,
            });
        }
        let sets_n = wanted.clamp(2, 64).min((budget - fixed) / set_bytes) as usize;

        let alloc = |len: u64| {
            // SAFETY: every buffer is filled, poisoned or zeroed before it is read.
            unsafe { stream.alloc::<u16>(len as usize) }.map_err(driver_err("cuMemAlloc"))
        };
        let alloc_bytes = |len: u64| {
            // SAFETY: every input buffer is filled before it is read.
            unsafe { stream.alloc::<u8>(len as usize) }.map_err(driver_err("cuMemAlloc"))
        };
        let mut sets = Vec::with_capacity(sets_n);
        for _ in 0..sets_n {
            let a = alloc_bytes(batch * m * k * elem)?;
            let b = alloc_bytes(batch * k * n * elem)?;
            let a_ptr = a.device_ptr(&stream).0;
            let b_ptr = b.device_ptr(&stream).0;
            sets.push(InputSet { a, b, a_ptr, b_ptr });
        }
        let repacker = if operands.0.repacked() || operands.1.repacked() {
            let padded = |o: &OperandRows| -> Result<Option<Padded>, GpuError> {
                if !o.repacked() {
                    return Ok(None);
                }
                let buf = alloc(batch * o.padded_elems())?;
                let ptr = buf.device_ptr(&stream).0;
                Ok(Some(Padded { _buf: buf, ptr }))
            };
            Some(Repacker {
                kernel: RepackKernel::load(&ctx)?,
                a: padded(&operands.0)?,
                b: padded(&operands.1)?,
            })
        } else {
            None
        };
        let c = alloc(batch * m * n)?;
        let reference = alloc(batch * m * n)?;
        let c_ptr = c.device_ptr(&stream).0;
        let ref_ptr = reference.device_ptr(&stream).0;
        let sums = stream
            .alloc_zeros::<f64>(2)
            .map_err(driver_err("cuMemAlloc"))?;
        let bad = stream
            .alloc_zeros::<u64>(1)
            .map_err(driver_err("cuMemAlloc"))?;
        let blas = CudaBlas::new(stream.clone()).map_err(|source| GpuError::Cublas {
            call: "cublasCreate",
            source,
        })?;
        let fp8 = if elem == 1 {
            Some(Fp8Baseline {
                a16: alloc(batch * m * k)?,
                b16: alloc(batch * k * n)?,
                lt: LtFp8::new(stream.clone(), &problem)?,
            })
        } else {
            None
        };
        let timer = EventTimer::new(&ctx, stream.clone())?;
        let info = WorkerInfo {
            device_name: name,
            compute_capability: (major as u32, minor as u32),
            sms,
            l2_bytes,
            input_sets: sets_n,
            set_bytes,
            repack: None,
        };
        let mut bench = Self {
            ctx,
            stream,
            _util: util,
            fill,
            fill_fp8,
            fp8_to_16,
            poison,
            diff,
            blas,
            fp8,
            problem,
            timing,
            sets,
            operands,
            repacker,
            reduce: None,
            workspace: None,
            c,
            c_ptr,
            reference,
            ref_ptr,
            sums,
            bad,
            timer,
            info,
            seed: 0x5eed_0000,
        };
        for i in 0..bench.sets.len() {
            bench.refill(i)?;
        }
        bench.sync()?;
        bench.check_the_check()?;
        if bench.repacker.is_some() {
            let n = bench.sets.len();
            let timing = bench
                .timer
                .time(&bench.timing.plan(None), |i| bench.repack(i % n))?;
            let (a, b) = bench.operands;
            bench.info.repack = Some(RepackInfo {
                operands: [("A", a), ("B", b)]
                    .into_iter()
                    .filter(|(_, o)| o.repacked())
                    .map(|(name, _)| name.to_string())
                    .collect(),
                bytes: [a, b]
                    .iter()
                    .filter(|o| o.repacked())
                    .map(|o| o.copy_bytes() * bench.problem.batch)
                    .sum(),
                timing,
            });
        }
        Ok(bench)
    }

    /// Copies the operands of input set `set` that need it into their padded buffers (nothing
    /// when A and B are both aligned).
    fn repack(&self, set: usize) -> Result<(), GpuError> {
        let Some(r) = &self.repacker else {
            return Ok(());
        };
        let s = &self.sets[set];
        // The batch's matrices are stacked: their rows are copied as one operand's.
        let stacked = |o: &OperandRows| OperandRows {
            rows: o.rows * self.problem.batch,
            ..*o
        };
        for (src, dst, rows) in [
            (s.a_ptr, &r.a, stacked(&self.operands.0)),
            (s.b_ptr, &r.b, stacked(&self.operands.1)),
        ] {
            if let Some(dst) = dst {
                // SAFETY: `src` holds the dense operand, `dst` its padded copy (allocated for
                // `rows`); both are cudaMalloc'ed (256-byte aligned) and distinct.
                unsafe { r.kernel.launch(&self.stream, src, dst.ptr, &rows)? };
            }
        }
        Ok(())
    }

    /// Where the kernel reads A and B of input set `set`: the set itself, or the padded copies.
    fn operand_ptrs(&self, set: usize) -> (sys::CUdeviceptr, sys::CUdeviceptr) {
        let s = &self.sets[set];
        let r = self.repacker.as_ref();
        (
            r.and_then(|r| r.a.as_ref()).map_or(s.a_ptr, |p| p.ptr),
            r.and_then(|r| r.b.as_ref()).map_or(s.b_ptr, |p| p.ptr),
        )
    }

    /// The comparison must be able to fail: an unwritten (poisoned) output is caught, and two
    /// products of different inputs differ by far more than the tolerance.
    fn check_the_check(&mut self) -> Result<(), GpuError> {
        let broken = |reason: String| GpuError::Implausible {
            what: "correctness check",
            reason,
        };
        self.reference_into(0, self.ref_ptr)?;
        self.poison_output()?;
        if self.compare()?.is_ok() {
            return Err(broken("a NaN-poisoned output passed".into()));
        }
        self.reference_into(1, self.c_ptr)?;
        match self.compare()? {
            Ok(e) if e > 10.0 * self.timing.tolerance => Ok(()),
            Ok(e) => Err(broken(format!(
                "the products of two different input sets differ by only {e:.2e}"
            ))),
            Err(reason) => Err(broken(format!("cuBLAS output rejected: {reason}"))),
        }
    }

    fn sync(&self) -> Result<(), GpuError> {
        self.stream
            .synchronize()
            .map_err(driver_err("cuStreamSynchronize"))
    }

    /// Whether the context still works (after a fault it does not).
    fn context_lost(&self) -> bool {
        self.ctx.synchronize().is_err() || self.stream.synchronize().is_err()
    }

    fn grid_config(&self) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (self.info.sms * 4, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Fresh random A and B in set `i`.
    fn refill(&mut self, i: usize) -> Result<(), GpuError> {
        let input = self.problem.input;
        let elem = u64::from(input.bytes());
        let (kernel, flag, name) = if input.is_fp8() {
            (
                &self.fill_fp8,
                i32::from(input == DType::E5m2),
                "cuLaunchKernel(fill_fp8)",
            )
        } else {
            (&self.fill, is_bf16(input), "cuLaunchKernel(fill_16)")
        };
        let cfg = self.grid_config();
        for which in 0..2 {
            self.seed += 1;
            let seed = self.seed;
            let set = &self.sets[i];
            let (ptr, bytes) = if which == 0 {
                (set.a_ptr, set.a.len() as u64)
            } else {
                (set.b_ptr, set.b.len() as u64)
            };
            let len = bytes / elem;
            let mut launch = self.stream.launch_builder(kernel);
            launch.arg(&ptr).arg(&len).arg(&seed).arg(&flag);
            // SAFETY: writes exactly `len` elements of the buffer at `ptr`.
            unsafe { launch.launch(cfg) }.map_err(driver_err(name))?;
        }
        Ok(())
    }

    /// The reference of set `set` into `c`: cuBLAS on the operands, or for fp8 on their exact
    /// copies in the output's 16-bit type (cuBLAS takes no bf16 inputs into an f16 output),
    /// times the problem's alpha.
    fn reference_into(&self, set: usize, c: sys::CUdeviceptr) -> Result<(), GpuError> {
        let Some(fp8) = &self.fp8 else {
            return self.cublas_into(set, c);
        };
        let s = &self.sets[set];
        let cfg = self.grid_config();
        let e5m2 = i32::from(self.problem.input == DType::E5m2);
        let copy_type = self.problem.output;
        let bf16 = is_bf16(copy_type);
        let copies = [
            (
                s.a_ptr,
                s.a.len() as u64,
                fp8.a16.device_ptr(&self.stream).0,
            ),
            (
                s.b_ptr,
                s.b.len() as u64,
                fp8.b16.device_ptr(&self.stream).0,
            ),
        ];
        for (src, len, dst) in copies {
            let mut launch = self.stream.launch_builder(&self.fp8_to_16);
            launch.arg(&src).arg(&dst).arg(&len).arg(&e5m2).arg(&bf16);
            // SAFETY: reads `len` fp8 elements, writes as many 16-bit ones (sized alike).
            unsafe { launch.launch(cfg) }.map_err(driver_err("cuLaunchKernel(fp8_to_16)"))?;
        }
        let (a16, b16) = (copies[0].2, copies[1].2);
        self.gemm_ex(a16, b16, copy_type, c, self.problem.alpha())
    }

    fn poison_output(&mut self) -> Result<(), GpuError> {
        let len = self.c.len() as u64;
        let cfg = self.grid_config();
        let mut launch = self.stream.launch_builder(&self.poison);
        launch.arg(&mut self.c).arg(&len);
        // SAFETY: writes exactly `len` elements.
        unsafe { launch.launch(cfg) }.map_err(driver_err("cuLaunchKernel(poison_u16)"))?;
        Ok(())
    }

    /// cuBLAS: C = A B for row-major A and C, into `c` (a device pointer of M x N elements).
    fn cublas_into(&self, set: usize, c: sys::CUdeviceptr) -> Result<(), GpuError> {
        let s = &self.sets[set];
        self.gemm_ex(s.a_ptr, s.b_ptr, self.problem.input, c, 1.0)
    }

    /// cuBLAS on operands of type `input` at `a` and `b`: C = alpha A B, row-major A and C.
    fn gemm_ex(
        &self,
        a_ptr: sys::CUdeviceptr,
        b_ptr: sys::CUdeviceptr,
        input: DType,
        c: sys::CUdeviceptr,
        alpha: f32,
    ) -> Result<(), GpuError> {
        let p = &self.problem;
        let dim = |v: u64| {
            i32::try_from(v).map_err(|_| GpuError::Unsupported {
                what: format!("a size of {v}"),
                reason: "cuBLAS takes sizes below 2^31".into(),
            })
        };
        let (m, n, k) = (dim(p.m)?, dim(p.n)?, dim(p.k)?);
        // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS sees an N x M result.
        let (op_b, ldb) = match p.layout_b {
            Layout::Row => (cublas_sys::cublasOperation_t::CUBLAS_OP_N, n),
            Layout::Col => (cublas_sys::cublasOperation_t::CUBLAS_OP_T, k),
        };
        let beta = 0.0f32;
        if p.batch > 1 {
            let batch = dim(p.batch)?;
            let stride = |rows: u64, cols: u64| (rows * cols) as i64;
            // SAFETY: the buffers hold `batch` stacked K x N, M x K and M x N matrices of the
            // given types; alpha and beta are f32 as CUBLAS_COMPUTE_32F requires.
            return unsafe {
                cublas_result::gemm_strided_batched_ex(
                    *self.blas.handle(),
                    op_b,
                    cublas_sys::cublasOperation_t::CUBLAS_OP_N,
                    n,
                    m,
                    k,
                    (&alpha as *const f32).cast(),
                    b_ptr as *const _,
                    cuda_type(input),
                    ldb,
                    stride(p.k, p.n),
                    a_ptr as *const _,
                    cuda_type(input),
                    k,
                    stride(p.m, p.k),
                    (&beta as *const f32).cast(),
                    c as *mut _,
                    cuda_type(p.output),
                    n,
                    stride(p.m, p.n),
                    batch,
                    cublas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    cublas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            }
            .map_err(|source| GpuError::Cublas {
                call: "cublasGemmStridedBatchedEx",
                source,
            });
        }
        // SAFETY: the buffers hold K x N, M x K and M x N elements of the given types; alpha and
        // beta are f32 as CUBLAS_COMPUTE_32F requires.
        unsafe {
            cublas_result::gemm_ex(
                *self.blas.handle(),
                op_b,
                cublas_sys::cublasOperation_t::CUBLAS_OP_N,
                n,
                m,
                k,
                (&alpha as *const f32).cast(),
                b_ptr as *const _,
                cuda_type(input),
                ldb,
                a_ptr as *const _,
                cuda_type(input),
                k,
                (&beta as *const f32).cast(),
                c as *mut _,
                cuda_type(p.output),
                n,
                cublas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|source| GpuError::Cublas {
            call: "cublasGemmEx",
            source,
        })
    }

    /// Times the baseline (`GemmProblem::baseline`): cuBLAS, or cuBLASLt's fp8 GEMM.
    fn time_cublas(&mut self) -> Result<Timing, GpuError> {
        let c = self.c_ptr;
        let n = self.sets.len();
        let alpha = self.problem.alpha();
        self.timer
            .time(&self.timing.plan(None), |i| match &self.fp8 {
                Some(fp8) => {
                    let s = &self.sets[i % n];
                    // SAFETY: the set holds the problem's fp8 operands, `c` its output.
                    unsafe { fp8.lt.run(s.a_ptr, s.b_ptr, c, alpha) }
                }
                None => self.cublas_into(i % n, c),
            })
    }

    /// Relative Frobenius error of `c` against `reference`, or why the output is unusable.
    fn compare(&mut self) -> Result<Result<f64, String>, GpuError> {
        self.stream
            .memset_zeros(&mut self.sums)
            .map_err(driver_err("cuMemsetD8"))?;
        self.stream
            .memset_zeros(&mut self.bad)
            .map_err(driver_err("cuMemsetD8"))?;
        let len = self.c.len() as u64;
        let bf16 = is_bf16(self.problem.output);
        let cfg = self.grid_config();
        let mut launch = self.stream.launch_builder(&self.diff);
        launch
            .arg(&self.c)
            .arg(&self.reference)
            .arg(&len)
            .arg(&bf16)
            .arg(&mut self.sums)
            .arg(&mut self.bad);
        // SAFETY: reads `len` elements of both outputs, writes 2 f64 and 1 u64.
        unsafe { launch.launch(cfg) }.map_err(driver_err("cuLaunchKernel(diff_16)"))?;
        let sums = self
            .stream
            .clone_dtoh(&self.sums)
            .map_err(driver_err("cuMemcpyDtoH"))?;
        let bad = self
            .stream
            .clone_dtoh(&self.bad)
            .map_err(driver_err("cuMemcpyDtoH"))?;
        self.sync()?;
        if bad[0] > 0 {
            return Ok(Err(format!(
                "wrong result: {} of {} outputs are NaN or infinite (unwritten outputs keep the NaN poison)",
                bad[0], len
            )));
        }
        if sums[1] <= 0.0 {
            return Ok(Err("the cuBLAS reference is all zeros".into()));
        }
        Ok(Ok((sums[0] / sums[1]).sqrt()))
    }

    /// For a split-K candidate, the workspace (its address) and the reduction's shape, the
    /// reduction kernel loaded and the workspace grown as needed; `None` without a split, or
    /// why the candidate cannot run.
    #[allow(clippy::type_complexity)]
    fn split_k_reduction(
        &mut self,
        spec: &KernelSpec,
    ) -> Result<Result<Option<(sys::CUdeviceptr, SplitKShape)>, String>, GpuError> {
        let p = self.problem;
        let bytes = spec.params.workspace_bytes(p.m, p.n, p.batch);
        if bytes == 0 {
            return Ok(Ok(None));
        }
        if self.reduce.is_none() {
            self.reduce = Some(SplitKReduce::load(&self.ctx)?);
        }
        let elems = bytes / 4;
        if self
            .workspace
            .as_ref()
            .is_none_or(|w| (w.len() as u64) < elems)
        {
            self.workspace = None;
            let (free, _) = self
                .ctx
                .mem_get_info()
                .map_err(driver_err("cuMemGetInfo"))?;
            if bytes > (free as u64) * 7 / 10 {
                return Ok(Err(format!(
                    "its split-K workspace needs {bytes} B; {free} B of GPU memory are free"
                )));
            }
            // SAFETY: the GEMM writes every element the reduction reads before it reads it.
            let ws = unsafe { self.stream.alloc::<f32>(elems as usize) }
                .map_err(driver_err("cuMemAlloc"))?;
            self.workspace = Some(ws);
        }
        let ptr = self
            .workspace
            .as_ref()
            .map(|w| w.device_ptr(&self.stream).0)
            .unwrap_or_default();
        Ok(Ok(Some((
            ptr,
            SplitKShape {
                m: p.m,
                n: p.n,
                ldw: spec.params.workspace_ld(p.n),
                splits: spec.params.split_k,
                batch: p.batch,
                out_bf16: p.output == DType::Bf16,
            },
        ))))
    }

    /// One whole GEMM: the kernel, then with split-K the reduction into C.
    ///
    /// # Safety
    /// As [`LoadedKernel::launch`]; `split` from [`Self::split_k_reduction`] for this kernel.
    unsafe fn gemm(
        &self,
        kernel: &LoadedKernel,
        maps: &(TmaMap, TmaMap),
        out: GemmOutput,
        split: Option<(sys::CUdeviceptr, SplitKShape)>,
        grid: u32,
    ) -> Result<(), GpuError> {
        // SAFETY: the caller's guarantees.
        unsafe {
            kernel.launch(
                &self.stream,
                maps,
                out,
                self.problem.dims(),
                self.problem.alpha(),
                grid,
            )?
        };
        if let (Some((partials, shape)), Some(reduce)) = (split, &self.reduce) {
            // SAFETY: the kernel just wrote the workspace the shape describes; C holds
            // batch x M x N elements.
            unsafe { reduce.launch(&self.stream, partials, out.c, &shape)? };
        }
        Ok(())
    }

    fn candidate(
        &mut self,
        cubin: &Path,
        cubin_sha256: &str,
        spec: &KernelSpec,
        best_s: Option<f64>,
    ) -> Result<Result<CandidateMeasurement, String>, GpuError> {
        let p = self.problem;
        if (spec.input, spec.output, spec.layout_b) != (p.input, p.output, p.layout_b) {
            return Ok(Err(format!(
                "the kernel was built for {} -> {} with {}-major B, the problem is {} -> {} with {}-major B",
                spec.input, spec.output, spec.layout_b, p.input, p.output, p.layout_b
            )));
        }
        let image = match std::fs::read(cubin) {
            Ok(b) => b,
            Err(e) => return Ok(Err(format!("cannot read {}: {e}", cubin.display()))),
        };
        if let Err(reason) = check_image(cubin, &image, cubin_sha256) {
            return Ok(Err(reason));
        }
        let mut kernel = match LoadedKernel::load(&self.ctx, spec, image) {
            Ok(k) => k,
            Err(e) => return Ok(Err(format!("cannot load: {e}"))),
        };
        if let Err(e) = kernel.query_cluster_occupancy(&self.stream) {
            return Ok(Err(format!("cannot place its clusters: {e}")));
        }
        if kernel.local_bytes > 0 {
            return Ok(Err(format!(
                "uses {} bytes of local memory per thread (spilled registers or a stack array); rejected",
                kernel.local_bytes
            )));
        }
        if let Err(v) = spec.params.check_k(p.k) {
            return Ok(Err(v.to_string()));
        }
        let grid = kernel.grid(p.m, p.n, p.batch, self.info.sms)?;
        let (a_rows, b_rows) = self.operands;
        let maps: Vec<(TmaMap, TmaMap)> = (0..self.sets.len())
            .map(|i| {
                let (a, b) = self.operand_ptrs(i);
                encode_tma_maps(spec, a, b, &a_rows, &b_rows, p.batch)
            })
            .collect::<Result<_, _>>()?;
        let split = match self.split_k_reduction(spec)? {
            Ok(split) => split,
            Err(reason) => return Ok(Err(reason)),
        };
        let out = GemmOutput {
            c: self.c_ptr,
            partials: split.map_or(0, |(ptr, _)| ptr),
        };

        // Check on fresh inputs against cuBLAS, the output poisoned first.
        self.refill(0)?;
        self.reference_into(0, self.ref_ptr)?;
        self.poison_output()?;
        self.repack(0)?;
        // SAFETY: the maps describe set 0's live buffers (or their copies, just filled); `c`
        // holds batch x M x N elements, the workspace what the split needs.
        unsafe {
            self.gemm(&kernel, &maps[0], out, split, grid)?;
        }
        self.sync()?;
        let rel_error = match self.compare()? {
            Ok(e) => e,
            Err(reason) => return Ok(Err(reason)),
        };
        if rel_error.is_nan() || rel_error >= self.timing.tolerance {
            return Ok(Err(format!(
                "wrong result: relative error {rel_error:.3e} against cuBLAS (at most {:.0e} accepted)",
                self.timing.tolerance
            )));
        }

        let n_sets = maps.len();
        // The copies and the split-K reduction belong to the operation: they run, and are
        // timed, with every launch.
        let timing = self.timer.time(&self.timing.plan(best_s), |i| {
            self.repack(i % n_sets)?;
            // SAFETY: as above, for set i.
            unsafe { self.gemm(&kernel, &maps[i % n_sets], out, split, grid) }
        })?;
        Ok(Ok(CandidateMeasurement {
            registers: kernel.registers,
            local_bytes: kernel.local_bytes,
            blocks_per_sm: kernel.blocks_per_sm,
            grid,
            rel_error,
            timing,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_without_setup_says_so_and_keeps_serving() {
        let input = b"{\"op\":\"cublas\"}\nnot json\n{\"op\":\"exit\"}\n{\"op\":\"cublas\"}\n";
        let mut out = Vec::new();
        serve_worker(&input[..], &mut out).unwrap();
        let replies: Vec<Reply> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // Two replies: the exit request ends the loop before the last line.
        assert_eq!(replies.len(), 2, "{replies:?}");
        for r in replies {
            assert!(matches!(r, Reply::Error { .. }), "{r:?}");
        }
    }

    #[test]
    fn a_cubin_is_loaded_only_with_the_bytes_the_parent_checked() {
        let path = Path::new("/cache/kernels/k.cubin");
        let image = b"\x7fELF a cubin";
        assert_eq!(check_image(path, image, &sha256_hex(image)), Ok(()));
        let err = check_image(path, b"\x7fELF another", &sha256_hex(image)).unwrap_err();
        assert!(err.contains("changed after it was checked"), "{err}");
        assert!(err.contains("/cache/kernels/k.cubin"), "{err}");
    }
}
