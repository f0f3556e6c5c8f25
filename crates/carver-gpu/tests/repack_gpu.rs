//! On a Hopper GPU: the cuda-sm90 copy kernel that pads rows of unaligned operands to 16 bytes
//! copies every element to its place, for row lengths of every residue modulo 8 elements; and
//! how it compares with the driver's pitched copy (`cuMemcpy2DAsync` with the unaligned row
//! length as source pitch), which is checked and timed on the same buffers and printed (run
//! with `--nocapture`). Skips, saying why, without a Hopper GPU.

use std::sync::Arc;

use carver_gpu::sm90::{OperandRows, RepackKernel};
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
