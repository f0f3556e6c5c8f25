//! `carver arch calibrate`: measuring the ceilings the spec sheet only promises.
//!
//! DRAM bandwidth from a large device-to-device copy; L2 and shared-memory bandwidth from
//! NVRTC-compiled read kernels on every SM; tensor-core throughput from cuBLAS GEMMs on random
//! data. Every figure is the median of many runs timed with CUDA events after a warm-up.

mod gemm_check;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use carver_arch::{
    ArchField, CALIBRATION_FORMAT, CalibratedFigure, Calibration, ComputeCapability, ComputeClass,
    DERIVED_SMEM_BANDWIDTH_INPUTS, HardwareDb,
};
use cudarc::cublas::{CudaBlas, result as cublas_result, sys as cublas_sys};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DevicePtrMut,
    LaunchConfig, PushKernelArg, sys,
};
use cudarc::nvrtc::Ptx;
use serde::Serialize;

pub use gemm_check::{bf16_to_f32, dot_error, f16_to_f32};

use crate::cuda::compile_ptx;
use crate::detect::{DetectedGpu, detect};
use crate::driver::{driver_err, guarded};
use crate::error::GpuError;
use crate::timing::{EventTimer, RateSummary, RunCount, Timing, TimingPlan, Warmup};

/// The microbenchmarks after the helpers they share with the tuning worker (`#line` keeps
/// NVRTC's line numbers those of kernels.cu).
const KERNELS: &str = concat!(
    include_str!("../cuda/common.cuh"),
    "#line 1 \"kernels.cu\"\n",
    include_str!("kernels.cu")
);
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const MIB: f64 = 1024.0 * 1024.0;

/// Threads per block of the read kernels (the `SMEM_THREADS` of kernels.cu).
const READ_BLOCK_THREADS: u32 = 256;
/// Loads in flight per thread per iteration of `l2_read` (`L2_UNROLL`).
const L2_UNROLL: u64 = 8;
/// Loads per iteration of `smem_read`, and its shared memory per block.
const SMEM_LOADS_PER_ITER: u64 = 8;
const SMEM_BLOCK_BYTES: u64 = 16 * 1024;
/// Entries of each GEMM output compared with an f64 reference.
const GEMM_CHECKED_ENTRIES: usize = 64;
/// Largest accepted error of a checked GEMM entry, relative to sqrt(sum of squared products);
/// a 16-bit output rounds to about 0.4% of that, garbage lands near 1.
const GEMM_TOLERANCE: f64 = 0.02;

/// How much to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct CalibrationOptions {
    /// Size of the copied buffer (read once and written once per run).
    pub dram_copy_bytes: u64,
    /// Bytes each L2 or shared-memory kernel launch reads (sets the launch's length).
    pub l2_bytes_per_launch: u64,
    pub smem_bytes_per_launch: u64,
    /// M = N = K of the GEMMs.
    pub gemm_size: u32,
    pub warmup_runs: usize,
    pub bandwidth_runs: usize,
    pub gemm_runs: usize,
}

impl Default for CalibrationOptions {
    fn default() -> Self {
        Self {
            dram_copy_bytes: 2 << 30,
            l2_bytes_per_launch: 8 << 30,
            smem_bytes_per_launch: 32 << 30,
            gemm_size: 8192,
            warmup_runs: 5,
            bandwidth_runs: 50,
            gemm_runs: 30,
        }
    }
}

/// One measured ceiling beside the model's figure for it.
#[derive(Clone, Debug, Serialize)]
pub struct MeasuredFigure {
    /// The calibration field it fills (`dram_bandwidth_bytes_per_s`, `peak_tflops.bf16`, ...).
    pub field: CalibratedFigure,
    pub label: String,
    /// `B/s` or `TFLOP/s`.
    pub unit: String,
    /// Median over the runs.
    pub measured: f64,
    /// Slowest and fastest run.
    pub slowest: f64,
    pub fastest: f64,
    pub runs: usize,
    /// The model's figure before calibration (vendor or estimate).
    pub spec: f64,
    pub spec_is_estimate: bool,
    pub method: String,
}

/// What `calibrate` measured, and the calibration to store.
#[derive(Clone, Debug, Serialize)]
pub struct CalibrationOutcome {
    pub device: DetectedGpu,
    pub figures: Vec<MeasuredFigure>,
    pub calibration: Calibration,
}

/// A step of the calibration, reported before it starts.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// From 0.
    pub index: usize,
    pub total: usize,
    pub label: &'static str,
}

const STEPS: [&str; 6] = [
    "compiling microbenchmarks (NVRTC)",
    "DRAM bandwidth (device copy)",
    "L2 bandwidth",
    "shared-memory bandwidth",
    "bf16 GEMM (cuBLAS)",
    "f16 GEMM (cuBLAS)",
];

/// Measures GPU `index`. Nothing is stored: save `calibration` with
/// [`carver_arch::CalibrationStore::save`].
pub fn calibrate(
    db: &HardwareDb,
    index: usize,
    options: &CalibrationOptions,
    progress: &mut dyn FnMut(Step),
) -> Result<CalibrationOutcome, GpuError> {
    // The spec figures come from the uncalibrated model.
    let device = detect(db, index, None)?;
    for (library, present, why) in [
        (
            "libnvrtc (CUDA NVRTC)",
            // SAFETY: only tries to dlopen the candidate names.
            unsafe { cudarc::nvrtc::sys::is_culib_present() },
            "calibration compiles its L2 and shared-memory microbenchmarks at run time",
        ),
        (
            "libcublas (CUDA cuBLAS)",
            unsafe { cudarc::cublas::sys::is_culib_present() },
            "calibration measures tensor-core throughput with cuBLAS GEMMs",
        ),
    ] {
        if !present {
            return Err(GpuError::MissingLibrary { library, why });
        }
    }
    let figures = guarded("CUDA libraries", "calibration", || {
        measure(&device, options, progress)
    })?;
    let mut calibration = Calibration {
        format: CALIBRATION_FORMAT,
        uuid: device.uuid.clone(),
        device_name: device.name.clone(),
        base_key: device.matched.clone(),
        driver_version: Some(device.driver_version.clone()),
        carver_version: env!("CARGO_PKG_VERSION").to_string(),
        measured_at_unix_s: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        dram_bandwidth_bytes_per_s: None,
        l2_bandwidth_bytes_per_s: None,
        smem_bandwidth_bytes_per_s: None,
        peak_tflops: Default::default(),
        method: Default::default(),
    };
    for f in &figures {
        calibration.record(f.field, f.measured, f.method.clone());
    }
    Ok(CalibrationOutcome {
        device,
        figures,
        calibration,
    })
}

/// The calibration microbenchmarks compiled to PTX for a compute capability (the driver
/// finishes the compilation when the module is loaded). Needs libnvrtc, not a GPU.
pub fn compile_calibration_kernels(cc: ComputeCapability) -> Result<String, GpuError> {
    compile_ptx(
        KERNELS,
        "carver_calibrate.cu",
        cc,
        "calibration",
        "calibration compiles its L2 and shared-memory microbenchmarks at run time",
    )
}

/// The open device, its stream, the compiled microbenchmarks and the timer.
struct Microbench {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
    timer: EventTimer,
    sms: u32,
}

impl Microbench {
    fn function(&self, name: &'static str) -> Result<CudaFunction, GpuError> {
        self.module
            .load_function(name)
            .map_err(driver_err("cuModuleGetFunction"))
    }

    /// A grid that keeps every SM busy for the grid-stride fill kernels.
    fn fill_config(&self) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (self.sms * 8, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Random 32-bit words in `buf`.
    fn fill_u32(&self, buf: &mut CudaSlice<u32>, seed: u64) -> Result<(), GpuError> {
        let f = self.function("fill_u32")?;
        let n = buf.len() as u64;
        let mut launch = self.stream.launch_builder(&f);
        launch.arg(buf).arg(&n).arg(&seed);
        // SAFETY: the kernel writes exactly `n` elements of `buf`.
        unsafe { launch.launch(self.fill_config()) }
            .map_err(driver_err("cuLaunchKernel(fill_u32)"))?;
        self.sync()
    }

    /// Random 16-bit floats (bf16 when `bf16`, else f16) uniform in [-1, 1) in `buf`.
    fn fill_16(&self, buf: &mut CudaSlice<u16>, seed: u64, bf16: bool) -> Result<(), GpuError> {
        let f = self.function("fill_16")?;
        let n = buf.len() as u64;
        let bf16 = i32::from(bf16);
        let mut launch = self.stream.launch_builder(&f);
        launch.arg(buf).arg(&n).arg(&seed).arg(&bf16);
        // SAFETY: the kernel writes exactly `n` elements of `buf`.
        unsafe { launch.launch(self.fill_config()) }
            .map_err(driver_err("cuLaunchKernel(fill_16)"))?;
        self.sync()
    }

    fn poison(&self, buf: &mut CudaSlice<u16>) -> Result<(), GpuError> {
        let f = self.function("poison_u16")?;
        let n = buf.len() as u64;
        let mut launch = self.stream.launch_builder(&f);
        launch.arg(buf).arg(&n);
        // SAFETY: writes exactly `n` elements of `buf`.
        unsafe { launch.launch(self.fill_config()) }
            .map_err(driver_err("cuLaunchKernel(poison)"))?;
        self.sync()
    }

    fn sync(&self) -> Result<(), GpuError> {
        self.stream
            .synchronize()
            .map_err(driver_err("cuStreamSynchronize"))
    }

    fn ensure_free(&self, what: &'static str, needed_bytes: u64) -> Result<(), GpuError> {
        let (free, _) = self
            .ctx
            .mem_get_info()
            .map_err(driver_err("cuMemGetInfo"))?;
        if (free as u64) < needed_bytes {
            return Err(GpuError::OutOfMemory {
                what,
                needed_bytes,
                free_bytes: free as u64,
            });
        }
        Ok(())
    }

    fn alloc<T: cudarc::driver::DeviceRepr>(&self, len: usize) -> Result<CudaSlice<T>, GpuError> {
        // SAFETY: every buffer is filled (or poisoned) before it is read.
        unsafe { self.stream.alloc::<T>(len) }.map_err(driver_err("cuMemAlloc"))
    }

    /// Runs `op` `warmup` times, then times `runs` more runs with CUDA events; `field` names
    /// the figure in errors.
    fn time(
        &self,
        field: CalibratedFigure,
        warmup: usize,
        runs: usize,
        mut op: impl FnMut() -> Result<(), GpuError>,
    ) -> Result<Timing, GpuError> {
        let plan = TimingPlan {
            warmup: Warmup::Runs(warmup),
            runs: RunCount::Exactly(runs),
            early_stop: None,
        };
        self.timer.time(&plan, |_| op()).map_err(|e| match e {
            GpuError::Implausible { what, reason } => GpuError::Implausible {
                what,
                reason: format!("{}: {reason}", label_and_unit(field).0),
            },
            other => other,
        })
    }
}

/// How a figure is shown: its label and unit (`B/s` or `TFLOP/s`).
fn label_and_unit(field: CalibratedFigure) -> (String, &'static str) {
    match field {
        CalibratedFigure::DramBandwidth => ("DRAM bandwidth".into(), "B/s"),
        CalibratedFigure::L2Bandwidth => ("L2 bandwidth".into(), "B/s"),
        CalibratedFigure::SmemBandwidth => ("shared-memory bandwidth".into(), "B/s"),
        CalibratedFigure::PeakTflops(class) => (format!("{class} tensor throughput"), "TFLOP/s"),
    }
}

/// A measured figure: `work` units (bytes, or TFLOP) done in each run of `timing`.
fn figure(
    field: CalibratedFigure,
    work: f64,
    timing: &Timing,
    spec: f64,
    spec_is_estimate: bool,
    method: String,
) -> MeasuredFigure {
    let s = RateSummary::of(work, timing);
    let (label, unit) = label_and_unit(field);
    MeasuredFigure {
        field,
        label,
        unit: unit.into(),
        measured: s.median,
        slowest: s.min,
        fastest: s.max,
        runs: s.runs,
        spec,
        spec_is_estimate,
        method,
    }
}

fn measure(
    device: &DetectedGpu,
    options: &CalibrationOptions,
    progress: &mut dyn FnMut(Step),
) -> Result<Vec<MeasuredFigure>, GpuError> {
    let mut step = 0;
    let mut next = |progress: &mut dyn FnMut(Step)| {
        progress(Step {
            index: step,
            total: STEPS.len(),
            label: STEPS[step],
        });
        step += 1;
    };
    let arch = &device.arch;
    next(progress);
    let ctx = CudaContext::new(device.index).map_err(driver_err("cuDevicePrimaryCtxRetain"))?;
    // One stream and no cross-stream sharing: cudarc's per-buffer event tracking would only add
    // event records around the timed work.
    // SAFETY: every buffer below is used on `stream` alone.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().map_err(driver_err("cuStreamCreate"))?;
    let ptx = Ptx::from_src(compile_calibration_kernels(arch.gpu.compute_capability)?);
    let module = ctx
        .load_module(ptx)
        .map_err(driver_err("cuModuleLoadData"))?;
    let timer = EventTimer::new(&ctx, stream.clone())?;
    let bench = Microbench {
        ctx,
        stream,
        module,
        timer,
        sms: arch.sm.count,
    };
    let mut figures = Vec::new();

    next(progress);
    figures.push(measure_dram(&bench, device, options)?);
    next(progress);
    figures.push(measure_l2(&bench, device, options)?);
    next(progress);
    figures.push(measure_smem(&bench, device, options)?);
    for input in GemmInput::ALL {
        next(progress);
        if arch.supports(input.class()) {
            figures.push(measure_gemm(&bench, device, options, input)?);
        }
    }
    Ok(figures)
}

fn measure_dram(
    bench: &Microbench,
    device: &DetectedGpu,
    o: &CalibrationOptions,
) -> Result<MeasuredFigure, GpuError> {
    let words = (o.dram_copy_bytes / 4) as usize;
    let bytes = words as u64 * 4;
    bench.ensure_free("the DRAM copy (two buffers)", 2 * bytes)?;
    let mut src = bench.alloc::<u32>(words)?;
    let mut dst = bench.alloc::<u32>(words)?;
    bench.fill_u32(&mut src, 0x0d7a_3c0f)?;
    let times = bench.time(
        CalibratedFigure::DramBandwidth,
        o.warmup_runs,
        o.bandwidth_runs,
        || {
            bench
                .stream
                .memcpy_dtod(&src, &mut dst)
                .map_err(driver_err("cuMemcpyDtoDAsync"))
        },
    )?;
    // The copy really happened: both ends of the buffers agree.
    let probe = 4096.min(words);
    for range in [0..probe, words - probe..words] {
        let s = bench
            .stream
            .clone_dtoh(&src.slice(range.clone()))
            .map_err(driver_err("cuMemcpyDtoH"))?;
        let d = bench
            .stream
            .clone_dtoh(&dst.slice(range))
            .map_err(driver_err("cuMemcpyDtoH"))?;
        bench.sync()?;
        if s != d {
            return Err(GpuError::Implausible {
                what: "DRAM copy",
                reason: "the destination does not hold the source after the copy".into(),
            });
        }
    }
    let arch = &device.arch;
    Ok(figure(
        CalibratedFigure::DramBandwidth,
        2.0 * bytes as f64,
        &times,
        arch.memory.bandwidth_bytes_per_s,
        arch.estimated.contains(&ArchField::MemoryBandwidth),
        format!(
            "device-to-device copy of {:.2} GiB (cuMemcpyDtoDAsync), bytes read + written, median of {} runs after {} warm-up, CUDA events",
            bytes as f64 / GIB,
            o.bandwidth_runs,
            o.warmup_runs
        ),
    ))
}

/// Blocks of `READ_BLOCK_THREADS` threads that fill one SM.
fn read_blocks_per_sm(device: &DetectedGpu, smem_per_block: u64) -> u32 {
    let a = &device.arch;
    let by_threads = a.sm.max_threads / READ_BLOCK_THREADS;
    let by_smem = if smem_per_block == 0 {
        u32::MAX
    } else {
        (a.shared_memory.per_sm_bytes / (smem_per_block + a.shared_memory.reserved_per_block_bytes))
            as u32
    };
    by_threads.min(by_smem).min(a.sm.max_blocks).max(1)
}

fn measure_l2(
    bench: &Microbench,
    device: &DetectedGpu,
    o: &CalibrationOptions,
) -> Result<MeasuredFigure, GpuError> {
    let arch = &device.arch;
    // A power of two (so threads can wrap with a mask) no larger than a quarter of L2.
    let quarter = (arch.l2.size_bytes / 4).max(1 << 20);
    let buffer_bytes = 1u64 << (63 - quarter.leading_zeros());
    let vectors = buffer_bytes / 16;
    let mask =
        u32::try_from(vectors - 1).map_err(|_| GpuError::BadQuery("L2 is too large".into()))?;
    let mut buf = bench.alloc::<u32>((buffer_bytes / 4) as usize)?;
    bench.fill_u32(&mut buf, 0x12c0_ffee)?;
    let mut sink = bench.alloc::<u32>(1)?;
    bench.fill_u32(&mut sink, 1)?;
    let blocks = bench.sms * read_blocks_per_sm(device, 0);
    let threads = u64::from(blocks) * u64::from(READ_BLOCK_THREADS);
    let bytes_per_iter = threads * L2_UNROLL * 16;
    let iters = o.l2_bytes_per_launch.div_ceil(bytes_per_iter).max(1);
    let iters_u32 =
        u32::try_from(iters).map_err(|_| GpuError::BadQuery("L2 launch too long".into()))?;
    let f = bench.function("l2_read")?;
    let cfg = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (READ_BLOCK_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let times = bench.time(
        CalibratedFigure::L2Bandwidth,
        o.warmup_runs,
        o.bandwidth_runs,
        || {
            let mut launch = bench.stream.launch_builder(&f);
            launch.arg(&buf).arg(&mask).arg(&iters_u32).arg(&mut sink);
            // SAFETY: reads stay inside `buf` (index & mask), the sink has one element.
            unsafe { launch.launch(cfg) }
                .map(|_| ())
                .map_err(driver_err("cuLaunchKernel(l2_read)"))
        },
    )?;
    Ok(figure(
        CalibratedFigure::L2Bandwidth,
        (iters * bytes_per_iter) as f64,
        &times,
        arch.l2.bandwidth_bytes_per_s,
        arch.estimated.contains(&ArchField::L2Bandwidth),
        format!(
            "NVRTC kernel reading a {:.0} MiB buffer (L2 is {:.0} MiB) with 16-byte ld.global.cg loads (L2 only), {} blocks x {} threads on all {} SMs, {} independent loads per thread per iteration, median of {} launches after {} warm-up, CUDA events",
            buffer_bytes as f64 / MIB,
            arch.l2.size_bytes as f64 / MIB,
            blocks,
            READ_BLOCK_THREADS,
            bench.sms,
            L2_UNROLL,
            o.bandwidth_runs,
            o.warmup_runs
        ),
    ))
}

fn measure_smem(
    bench: &Microbench,
    device: &DetectedGpu,
    o: &CalibrationOptions,
) -> Result<MeasuredFigure, GpuError> {
    let arch = &device.arch;
    let per_sm = read_blocks_per_sm(device, SMEM_BLOCK_BYTES);
    let blocks = bench.sms * per_sm;
    let threads = u64::from(blocks) * u64::from(READ_BLOCK_THREADS);
    let bytes_per_iter = threads * SMEM_LOADS_PER_ITER * 16;
    let iters = o.smem_bytes_per_launch.div_ceil(bytes_per_iter).max(1);
    let iters_u32 =
        u32::try_from(iters).map_err(|_| GpuError::BadQuery("smem launch too long".into()))?;
    let mut sink = bench.alloc::<u32>(blocks as usize)?;
    bench.fill_u32(&mut sink, 2)?;
    let f = bench.function("smem_read")?;
    let cfg = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (READ_BLOCK_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let seed: u32 = 0x5151_7e57;
    let times = bench.time(
        CalibratedFigure::SmemBandwidth,
        o.warmup_runs,
        o.bandwidth_runs,
        || {
            let mut launch = bench.stream.launch_builder(&f);
            launch.arg(&iters_u32).arg(&seed).arg(&mut sink);
            // SAFETY: static shared memory only; the sink has one element per block.
            unsafe { launch.launch(cfg) }
                .map(|_| ())
                .map_err(driver_err("cuLaunchKernel(smem_read)"))
        },
    )?;
    // The model's own figure, not a calibration this run is about to replace.
    let spec = arch.derived_smem_bandwidth();
    Ok(figure(
        CalibratedFigure::SmemBandwidth,
        (iters * bytes_per_iter) as f64,
        &times,
        spec,
        DERIVED_SMEM_BANDWIDTH_INPUTS
            .iter()
            .any(|f| arch.estimated.contains(f)),
        format!(
            "NVRTC kernel of conflict-free 16-byte ld.volatile.shared loads (a warp reads 512 consecutive bytes), {} blocks x {} threads ({} per SM, 16 KiB each) on all {} SMs, median of {} launches after {} warm-up, CUDA events",
            blocks, READ_BLOCK_THREADS, per_sm, bench.sms, o.bandwidth_runs, o.warmup_runs
        ),
    ))
}

/// The 16-bit input types whose tensor throughput the calibration measures with cuBLAS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GemmInput {
    Bf16,
    F16,
}

impl GemmInput {
    const ALL: [GemmInput; 2] = [Self::Bf16, Self::F16];

    fn class(self) -> ComputeClass {
        match self {
            Self::Bf16 => ComputeClass::Bf16,
            Self::F16 => ComputeClass::F16,
        }
    }

    fn cuda_type(self) -> cublas_sys::cudaDataType_t {
        match self {
            Self::Bf16 => cublas_sys::cudaDataType_t::CUDA_R_16BF,
            Self::F16 => cublas_sys::cudaDataType_t::CUDA_R_16F,
        }
    }

    fn to_f32(self) -> fn(u16) -> f32 {
        match self {
            Self::Bf16 => bf16_to_f32,
            Self::F16 => f16_to_f32,
        }
    }
}

fn measure_gemm(
    bench: &Microbench,
    device: &DetectedGpu,
    o: &CalibrationOptions,
    input: GemmInput,
) -> Result<MeasuredFigure, GpuError> {
    let (class, data_type, to_f32) = (input.class(), input.cuda_type(), input.to_f32());
    let bf16 = input == GemmInput::Bf16;
    let n = o.gemm_size as usize;
    let elements = n * n;
    bench.ensure_free("the GEMM operands", 3 * 2 * elements as u64)?;
    let mut a = bench.alloc::<u16>(elements)?;
    let mut b = bench.alloc::<u16>(elements)?;
    let mut c = bench.alloc::<u16>(elements)?;
    bench.fill_16(&mut a, 0xa11ce, bf16)?;
    bench.fill_16(&mut b, 0xb0b, bf16)?;
    bench.poison(&mut c)?;
    let blas = CudaBlas::new(bench.stream.clone()).map_err(|source| GpuError::Cublas {
        call: "cublasCreate",
        source,
    })?;
    let dim = i32::try_from(n).map_err(|_| GpuError::BadQuery("GEMM size too large".into()))?;
    let alpha = 1.0f32;
    let beta = 0.0f32;
    let run = |a_ptr: sys::CUdeviceptr, b_ptr: sys::CUdeviceptr, c_ptr: sys::CUdeviceptr| {
        // SAFETY: column-major n x n operands of `data_type`, all allocated with n * n elements;
        // alpha and beta are f32 as CUBLAS_COMPUTE_32F requires.
        unsafe {
            cublas_result::gemm_ex(
                *blas.handle(),
                cublas_sys::cublasOperation_t::CUBLAS_OP_N,
                cublas_sys::cublasOperation_t::CUBLAS_OP_N,
                dim,
                dim,
                dim,
                (&alpha as *const f32).cast(),
                a_ptr as *const _,
                data_type,
                dim,
                b_ptr as *const _,
                data_type,
                dim,
                (&beta as *const f32).cast(),
                c_ptr as *mut _,
                data_type,
                dim,
                cublas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|source| GpuError::Cublas {
            call: "cublasGemmEx",
            source,
        })
    };
    let times = {
        let (a_ptr, _a_guard) = a.device_ptr(&bench.stream);
        let (b_ptr, _b_guard) = b.device_ptr(&bench.stream);
        let (c_ptr, _c_guard) = c.device_ptr_mut(&bench.stream);
        // Check the first result before timing: the output was poisoned, so an unwritten entry
        // fails too.
        run(a_ptr, b_ptr, c_ptr)?;
        bench.sync()?;
        bench.time(
            CalibratedFigure::PeakTflops(class),
            o.warmup_runs,
            o.gemm_runs,
            || run(a_ptr, b_ptr, c_ptr),
        )?
    };
    check_gemm(bench, &a, &b, &c, n, to_f32, class)?;
    let flops = 2.0 * (n as f64).powi(3);
    let arch = &device.arch;
    let spec = arch.peak.get(&class).map(|p| p.tflops).unwrap_or(f64::NAN);
    Ok(figure(
        CalibratedFigure::PeakTflops(class),
        flops / 1e12,
        &times,
        spec,
        arch.peak_is_estimated(class),
        format!(
            "cuBLAS cublasGemmEx {class} x {class} -> {class}, fp32 compute, M = N = K = {n} (2 x {n}^3 FLOP), uniform [-1, 1) inputs, {GEMM_CHECKED_ENTRIES} output entries checked against an f64 reference, median of {} runs after {} warm-up, CUDA events",
            o.gemm_runs, o.warmup_runs
        ),
    ))
}

/// Compares sampled entries of C = A B (column-major) with an f64 reference.
fn check_gemm(
    bench: &Microbench,
    a: &CudaSlice<u16>,
    b: &CudaSlice<u16>,
    c: &CudaSlice<u16>,
    n: usize,
    to_f32: fn(u16) -> f32,
    class: ComputeClass,
) -> Result<(), GpuError> {
    let host = |s: &CudaSlice<u16>| {
        bench
            .stream
            .clone_dtoh(s)
            .map_err(driver_err("cuMemcpyDtoH"))
    };
    let (a, b, c) = (host(a)?, host(b)?, host(c)?);
    // Copies into pageable memory finish before they return; the sync makes that explicit.
    bench.sync()?;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize % n
    };
    let mut worst = 0.0f64;
    for _ in 0..GEMM_CHECKED_ENTRIES {
        let (i, j) = (next(), next());
        let a_row: Vec<f32> = (0..n).map(|k| to_f32(a[i + k * n])).collect();
        let b_col: Vec<f32> = (0..n).map(|k| to_f32(b[k + j * n])).collect();
        worst = worst.max(dot_error(&a_row, &b_col, to_f32(c[i + j * n])));
    }
    if worst > GEMM_TOLERANCE {
        return Err(GpuError::Implausible {
            what: "GEMM",
            reason: format!(
                "the {class} cuBLAS result is wrong: an entry is off by {worst:.3} of the dot product's scale (at most {GEMM_TOLERANCE} accepted)"
            ),
        });
    }
    Ok(())
}
