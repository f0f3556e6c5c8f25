//! On a Hopper GPU: the cuda-sm90 copy kernel that pads rows of unaligned operands to 16 bytes
//! copies every element to its place, for row lengths of every residue modulo 8 elements; how
//! it compares with the driver's pitched copy (`cuMemcpy2DAsync` with the unaligned row length
//! as source pitch), checked and timed on the same buffers and printed (run with
//! `--nocapture`); and the GEMM on repacked operands against an exact reference. Skips, saying
//! why, without a Hopper GPU.

use std::sync::Arc;

use carver::family::Sm90Params;
use carver::{DType, Layout};
use carver_gpu::sm90::{
    GemmDims, GemmOutput, KernelSpec, LoadedKernel, OperandRows, RepackKernel, compile_kernel,
    encode_tma_maps, operand_rows,
};
use cudarc::cublas::{CudaBlas, result as cublas_result, sys as cublas_sys};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, sys};

/// The context of GPU 0 when it is a Hopper GPU.
fn hopper_or_skip() -> Option<Arc<CudaContext>> {
    if let Err(e) = carver_gpu::device_count() {
        eprintln!("skipped: no GPU here ({e})");
        return None;
    }
    let ctx = CudaContext::new(0).expect("GPU 0 opens");
    let cc = ctx.compute_capability().expect("compute capability");
    if cc != (9, 0) {
        eprintln!("skipped: the GPU is compute capability {cc:?}, cuda-sm90 needs 9.0");
        return None;
    }
    Some(ctx)
}

/// Deterministic 16-bit values, none zero (a zero would hide a missed element).
fn values(n: usize, seed: u64) -> Vec<u16> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 48) as u16 | 1
        })
        .collect()
}

fn ptr(s: &CudaSlice<u16>, stream: &CudaStream) -> sys::CUdeviceptr {
    s.device_ptr(stream).0
}

/// The driver's pitched copy of `rows` from a dense source into rows `ld` apart.
fn driver_copy(
    stream: &CudaStream,
    src: sys::CUdeviceptr,
    dst: sys::CUdeviceptr,
    rows: &OperandRows,
) -> sys::CUresult {
    let copy = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: src,
        srcArray: std::ptr::null_mut(),
        srcPitch: rows.cols as usize * 2,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst,
        dstArray: std::ptr::null_mut(),
        dstPitch: rows.ld as usize * 2,
        WidthInBytes: rows.cols as usize * 2,
        Height: rows.rows as usize,
    };
    // SAFETY: both buffers are live device allocations of the sizes the descriptor names.
    unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream.cu_stream()) }
}

/// Rows of `got` (`ld` apart) that differ from the dense `want`, as the first bad (row, column).
fn first_mismatch(want: &[u16], got: &[u16], rows: &OperandRows) -> Option<(u64, u64)> {
    for r in 0..rows.rows {
        for c in 0..rows.cols {
            if want[(r * rows.cols + c) as usize] != got[(r * rows.ld + c) as usize] {
                return Some((r, c));
            }
        }
    }
    None
}

/// Median time of `reps` runs of `op(i)` in microseconds, each between two events.
fn median_us(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    reps: usize,
    mut op: impl FnMut(usize),
) -> f64 {
    let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    let (start, end) = (ctx.new_event(flags).unwrap(), ctx.new_event(flags).unwrap());
    for i in 0..10 {
        op(i);
    }
    let mut times: Vec<f64> = (0..reps)
        .map(|i| {
            start.record(stream).unwrap();
            op(i);
            end.record(stream).unwrap();
            stream.synchronize().unwrap();
            f64::from(start.elapsed_ms(&end).unwrap()) * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

#[test]
fn on_a_hopper_gpu_the_repack_kernel_pads_rows_exactly() {
    let Some(ctx) = hopper_or_skip() else { return };
    // SAFETY: one stream, no buffer shared across streams.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap();
    let kernel = RepackKernel::load(&ctx).unwrap();
    // Rows of 1 to 7 elements past a multiple of 8 (every start shift), short rows, a single
    // row, and the operands of the dev shapes odd.m333 (333x777x999) and odd.m1537
    // (1537x2049x3001): A is M x K, row-major B K x N.
    let cases: &[(u64, u64)] = &[
        (37, 1),
        (64, 3),
        (5, 9),
        (1, 999),
        (41, 1001),
        (17, 1002),
        (23, 1003),
        (19, 1004),
        (13, 1005),
        (11, 1006),
        (7, 1007),
        (333, 999),
        (999, 777),
        (1537, 3001),
        (3001, 2049),
    ];
    let mut table = Vec::new();
    for (i, &(r, c)) in cases.iter().enumerate() {
        let rows = OperandRows::dense(r, c);
        assert!(rows.repacked());
        let want = values((r * c) as usize, i as u64 + 1);
        let src = stream.clone_htod(&want).unwrap();
        let dst = stream
            .alloc_zeros::<u16>(rows.padded_elems() as usize)
            .unwrap();
        let drv = stream
            .alloc_zeros::<u16>(rows.padded_elems() as usize)
            .unwrap();
        let (src_p, dst_p, drv_p) = (ptr(&src, &stream), ptr(&dst, &stream), ptr(&drv, &stream));
        // SAFETY: sizes as allocated just above, distinct buffers.
        unsafe { kernel.launch(&stream, src_p, dst_p, &rows).unwrap() };
        let got = stream.clone_dtoh(&dst).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(first_mismatch(&want, &got, &rows), None, "{r} x {c}");

        let driver = driver_copy(&stream, src_p, drv_p, &rows);
        let driver_ok = driver == sys::CUresult::CUDA_SUCCESS && {
            let got = stream.clone_dtoh(&drv).unwrap();
            stream.synchronize().unwrap();
            first_mismatch(&want, &got, &rows).is_none()
        };
        if rows.copy_bytes() < 1 << 20 {
            if !driver_ok {
                table.push(format!(
                    "{r} x {c}: driver copy {driver:?}, correct: {driver_ok}"
                ));
            }
            continue;
        }
        // Timing: sources rotated over more than twice the L2 (50 MiB), as in `carver tune`.
        let bytes = (r * c * 2) as usize;
        let sets = (100usize << 20).div_ceil(bytes).max(2);
        let srcs: Vec<CudaSlice<u16>> = (0..sets)
            .map(|s| {
                stream
                    .clone_htod(&values((r * c) as usize, 100 + s as u64))
                    .unwrap()
            })
            .collect();
        let src_ps: Vec<_> = srcs.iter().map(|s| ptr(s, &stream)).collect();
        let kernel_us = median_us(&ctx, &stream, 100, |i| {
            // SAFETY: as above.
            unsafe {
                kernel
                    .launch(&stream, src_ps[i % sets], dst_p, &rows)
                    .unwrap()
            }
        });
        let driver_us = driver_ok.then(|| {
            median_us(&ctx, &stream, 100, |i| {
                assert_eq!(
                    driver_copy(&stream, src_ps[i % sets], drv_p, &rows),
                    sys::CUresult::CUDA_SUCCESS
                );
            })
        });
        let gbps = |us: f64| rows.copy_bytes() as f64 / us / 1e3;
        table.push(format!(
            "{r} x {c}: {} MB moved; repack kernel {kernel_us:.1} us ({:.0} GB/s); driver 2D copy {}",
            rows.copy_bytes() as f64 / 1e6,
            gbps(kernel_us),
            match driver_us {
                Some(us) => format!("{us:.1} us ({:.0} GB/s)", gbps(us)),
                None => format!("{driver:?}, correct: {driver_ok}"),
            }
        ));
    }
    eprintln!("{}", table.join("\n"));
}

/// Multiples of 1/16 in [-1, 1]: exact in bf16 and f16, and every product (a multiple of 1/256)
/// and partial sum of up to 3001 of them is exact in fp32, so any summation order gives the
/// exact product, and a correct kernel's output is that value correctly rounded.
fn sixteenths(n: usize, seed: u64) -> Vec<i32> {
    values(n, seed)
        .into_iter()
        .map(|v| i32::from(v % 33) - 16)
        .collect()
}

/// `n / 16` in `dtype` (exact for |n| <= 16).
fn encode(n: i32, dtype: DType) -> u16 {
    let v = n as f32 / 16.0;
    match dtype {
        DType::Bf16 => (v.to_bits() >> 16) as u16,
        _ => {
            if n == 0 {
                return 0;
            }
            let sign = if n < 0 { 0x8000u16 } else { 0 };
            let a = f64::from(v.abs());
            let e = a.log2().floor() as i32;
            let mant = ((a / 2f64.powi(e) - 1.0) * 1024.0) as u16;
            sign | (((e + 15) as u16) << 10) | mant
        }
    }
}

fn decode(h: u16, dtype: DType) -> f64 {
    match dtype {
        DType::Bf16 => f64::from(f32::from_bits(u32::from(h) << 16)),
        _ => {
            let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
            let e = i32::from((h >> 10) & 0x1f);
            let m = f64::from(h & 0x3ff);
            match e {
                0 => sign * m * 2f64.powi(-24),
                31 => f64::NAN,
                _ => sign * (1.0 + m / 1024.0) * 2f64.powi(e - 15),
            }
        }
    }
}

/// Half a unit in the last place of `dtype` at `x` (normal range).
fn half_ulp(x: f64, dtype: DType) -> f64 {
    let mantissa_bits = if dtype == DType::Bf16 { 7 } else { 10 };
    2f64.powi(x.abs().log2().floor() as i32 - mantissa_bits - 1)
}

/// The exact C = A B in units of 1/256 (A is M x K, `b` is K x N, both row-major).
fn exact_product(a: &[i32], b: &[i32], m: usize, n: usize, k: usize) -> Vec<i64> {
    let mut c = vec![0i64; m * n];
    let threads = std::thread::available_parallelism().map_or(2, |t| t.get());
    let rows_each = m.div_ceil(threads);
    std::thread::scope(|scope| {
        for (t, rows) in c.chunks_mut(rows_each * n).enumerate() {
            scope.spawn(move || {
                for (ri, row) in rows.chunks_mut(n).enumerate() {
                    let i = t * rows_each + ri;
                    for kk in 0..k {
                        let av = i64::from(a[i * k + kk]);
                        for (j, out) in row.iter_mut().enumerate() {
                            *out += av * i64::from(b[kk * n + j]);
                        }
                    }
                }
            });
        }
    });
    c
}

/// Outputs that are not the exact product correctly rounded, and the relative Frobenius error.
fn rounding_check(got: &[u16], exact: &[i64], dtype: DType) -> (usize, f64) {
    let (mut wrong, mut err, mut norm) = (0usize, 0.0f64, 0.0f64);
    for (&g, &e) in got.iter().zip(exact) {
        let x = e as f64 / 256.0;
        let y = decode(g, dtype);
        let ok = if x == 0.0 {
            y == 0.0
        } else {
            (y - x).abs() <= half_ulp(x, dtype)
        };
        wrong += usize::from(!ok);
        err += (y - x) * (y - x);
        norm += x * x;
    }
    (wrong, (err / norm).sqrt())
}

/// cuBLAS C = A B on the operands as stored (what `carver tune` checks candidates against).
#[allow(clippy::too_many_arguments)]
fn cublas(
    blas: &CudaBlas,
    a: sys::CUdeviceptr,
    b: sys::CUdeviceptr,
    c: sys::CUdeviceptr,
    (m, n, k): (usize, usize, usize),
    layout_b: Layout,
    dtype: DType,
) {
    let t = match dtype {
        DType::Bf16 => cublas_sys::cudaDataType_t::CUDA_R_16BF,
        _ => cublas_sys::cudaDataType_t::CUDA_R_16F,
    };
    let (op_b, ldb) = match layout_b {
        Layout::Row => (cublas_sys::cublasOperation_t::CUBLAS_OP_N, n),
        Layout::Col => (cublas_sys::cublasOperation_t::CUBLAS_OP_T, k),
    };
    let (alpha, beta) = (1.0f32, 0.0f32);
    // SAFETY: as in the tuning worker: row-major C = A B is column-major C^T = B^T A^T.
    unsafe {
        cublas_result::gemm_ex(
            *blas.handle(),
            op_b,
            cublas_sys::cublasOperation_t::CUBLAS_OP_N,
            n as i32,
            m as i32,
            k as i32,
            (&alpha as *const f32).cast(),
            b as *const _,
            t,
            ldb as i32,
            a as *const _,
            t,
            k as i32,
            (&beta as *const f32).cast(),
            c as *mut _,
            t,
            n as i32,
            cublas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            cublas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    }
    .unwrap();
}

#[test]
fn on_a_hopper_gpu_the_gemm_on_repacked_operands_is_exact() {
    let Some(ctx) = hopper_or_skip() else { return };
    // SAFETY: one stream, no buffer shared across streams.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap();
    let repack = RepackKernel::load(&ctx).unwrap();
    let blas = CudaBlas::new(stream.clone()).unwrap();
    let sms = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .unwrap() as u32;
    // A alone, B alone, both (row-major B), and column-major B (rows of length K for both).
    let problems = [
        (333, 1024, 1001, Layout::Row, DType::Bf16),
        (777, 777, 512, Layout::Row, DType::F16),
        (333, 777, 999, Layout::Row, DType::Bf16),
        (333, 1000, 1003, Layout::Col, DType::Bf16),
        (777, 1001, 998, Layout::Col, DType::F16),
    ];
    let mut failures = Vec::new();
    for (i, (m, n, k, layout_b, dtype)) in problems.into_iter().enumerate() {
        let a = sixteenths(m * k, 1000 + i as u64);
        let b = sixteenths(k * n, 2000 + i as u64);
        let exact = exact_product(&a, &b, m, n, k);
        let b_stored: Vec<i32> = match layout_b {
            Layout::Row => b.clone(),
            Layout::Col => (0..n * k).map(|x| b[(x % k) * n + x / k]).collect(),
        };
        let enc = |v: &[i32]| v.iter().map(|&x| encode(x, dtype)).collect::<Vec<u16>>();
        let a_dev = stream.clone_htod(&enc(&a)).unwrap();
        let b_dev = stream.clone_htod(&enc(&b_stored)).unwrap();
        let (a_rows, b_rows) = operand_rows(layout_b, m as u64, n as u64, k as u64);
        let mut ptrs = [ptr(&a_dev, &stream), ptr(&b_dev, &stream)];
        let mut padded = Vec::new();
        for (which, rows) in [a_rows, b_rows].iter().enumerate() {
            if rows.repacked() {
                let buf = stream
                    .alloc_zeros::<u16>(rows.padded_elems() as usize)
                    .unwrap();
                let dst = ptr(&buf, &stream);
                // SAFETY: the dense operand and its padded copy, sized for `rows`.
                unsafe { repack.launch(&stream, ptrs[which], dst, rows).unwrap() };
                ptrs[which] = dst;
                padded.push(buf);
            }
        }
        let spec = KernelSpec {
            params: Sm90Params {
                block_m: 128,
                block_n: 128,
                block_k: 64,
                stages: 4,
                consumers: 1,
                group_m: 8,
                cluster_m: 1,
                persistent: false,
                split_k: 1,
                swap_ab: false,
            },
            input: dtype,
            output: dtype,
            layout_b,
        };
        let compiled = compile_kernel(&spec).unwrap();
        let kernel = LoadedKernel::load(&ctx, &spec, compiled.cubin).unwrap();
        let grid = kernel.grid(m as u64, n as u64, 1, sms).unwrap();
        let maps = encode_tma_maps(&spec, ptrs[0], ptrs[1], &a_rows, &b_rows, 1).unwrap();
        let c = stream.alloc_zeros::<u16>(m * n).unwrap();
        let c_ref = stream.alloc_zeros::<u16>(m * n).unwrap();
        // SAFETY: the maps describe the live (padded) operands; `c` holds M x N elements.
        unsafe {
            kernel
                .launch(
                    &stream,
                    &maps,
                    GemmOutput {
                        c: ptr(&c, &stream),
                        partials: 0,
                    },
                    GemmDims {
                        m: m as u64,
                        n: n as u64,
                        k: k as u64,
                        batch: 1,
                    },
                    1.0,
                    grid,
                )
                .unwrap()
        };
        cublas(
            &blas,
            ptr(&a_dev, &stream),
            ptr(&b_dev, &stream),
            ptr(&c_ref, &stream),
            (m, n, k),
            layout_b,
            dtype,
        );
        let ours = stream.clone_dtoh(&c).unwrap();
        let theirs = stream.clone_dtoh(&c_ref).unwrap();
        stream.synchronize().unwrap();
        let (wrong, err) = rounding_check(&ours, &exact, dtype);
        let (cb_wrong, cb_err) = rounding_check(&theirs, &exact, dtype);
        let what = format!("{m}x{n}x{k} {layout_b}-major B {dtype}");
        eprintln!(
            "{what}: cuda-sm90 {wrong} of {} outputs not the exact product correctly rounded \
             (relative error {err:.2e}); cuBLAS {cb_wrong} (relative error {cb_err:.2e})",
            m * n
        );
        if wrong > 0 {
            failures.push(format!(
                "{what}: {wrong} outputs wrong, relative error {err:.2e}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_exact_reference_encodes_and_rounds_right() {
    for dtype in [DType::Bf16, DType::F16] {
        for n in -16..=16 {
            assert_eq!(
                decode(encode(n, dtype), dtype),
                f64::from(n) / 16.0,
                "{n} {dtype}"
            );
        }
    }
    // 1 + 1/256 lies between bf16 neighbours 1 and 1 + 1/128: both are within half an ulp.
    let x = [256 + 1];
    assert_eq!(rounding_check(&[0x3f80], &x, DType::Bf16).0, 0);
    assert_eq!(rounding_check(&[0x3f81], &x, DType::Bf16).0, 0);
    assert_eq!(rounding_check(&[0x3f82], &x, DType::Bf16).0, 1);
    // f16 holds 1 + 1/256 exactly (0x3c04); its neighbours are off by more than half an ulp.
    assert_eq!(rounding_check(&[0x3c04], &x, DType::F16).0, 0);
    assert_eq!(rounding_check(&[0x3c05], &x, DType::F16).0, 1);
    assert_eq!(rounding_check(&[0x0000], &[0], DType::F16).0, 0);
    // 2 x 3 times 3 x 2, against a direct sum.
    let (a, b) = (sixteenths(6, 1), sixteenths(6, 2));
    let c = exact_product(&a, &b, 2, 2, 3);
    for i in 0..2 {
        for j in 0..2 {
            let want: i64 = (0..3)
                .map(|kk| i64::from(a[i * 3 + kk]) * i64::from(b[kk * 2 + j]))
                .sum();
            assert_eq!(c[i * 2 + j], want);
        }
    }
}
