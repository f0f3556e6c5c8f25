//! DRAM traffic of short tile rows: the L2 fills 32-byte sectors, so a tile row of 64 bytes
//! (half a 128-byte line) fetches nothing it does not use (`cost::row_fetch`;
//! docs/RESULTS.md, "At decode the queue never fills": on the H200 every config of a decode
//! GEMM read the same 100.8 MB). The same bytes stream slower, at the arch's measured
//! `memory.segment_efficiency` (`cost::row_fetch`; docs/RESULTS.md, "Narrow rows stream
//! slower from DRAM").

use carver::{DType, Family, Layout, MatmulTemplate, Prediction, predict_native};
use carver_arch::HardwareDb;
use serde_json::json;

fn decode(block_n: u32, block_k: u32, dtype: DType) -> Prediction {
    decode_on("h200", block_n, block_k, dtype)
}

fn decode_on(arch: &str, block_n: u32, block_k: u32, dtype: DType) -> Prediction {
    let db = HardwareDb::embedded().unwrap();
    let t = MatmulTemplate::new(16, 12288, 4096)
        .with_dtype(dtype)
        .with_layouts(Layout::Row, Layout::Row)
        .with_family(Family::Triton);
    let config = json!({"kwargs": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": block_n,
        "BLOCK_SIZE_K": block_k, "GROUP_SIZE_M": 8, "SPLIT_K": 1}, "num_warps": 4, "num_stages": 4});
    predict_native(&t, db.get(arch).unwrap(), &config)
        .unwrap()
        .1
}

#[test]
fn rows_of_whole_sectors_waste_no_dram_bytes() {
    // B's rows: 32 columns of fp16 (64 bytes) against 64 (128 bytes).
    let narrow = decode(32, 64, DType::F16);
    let wide = decode(64, 64, DType::F16);
    let ratio = narrow.breakdown.dram_bytes / wide.breakdown.dram_bytes;
    assert!(
        (ratio - 1.0).abs() < 0.01,
        "narrow / wide DRAM bytes {ratio}"
    );
    // The whole of B (100.7 MB) is read once either way, not twice.
    assert!(narrow.breakdown.dram_bytes < 1.05 * 12288.0 * 4096.0 * 2.0);
}

#[test]
fn narrow_rows_stream_slower_where_the_arch_measured_it() {
    // A decode GEMM streams B: 64-byte rows take 1 / 0.74 of the DRAM time of 128-byte ones on
    // the H200, the same bytes.
    let (narrow, wide) = (decode(32, 64, DType::F16), decode(64, 64, DType::F16));
    let ratio = narrow.breakdown.dram_us / wide.breakdown.dram_us;
    assert!(
        (ratio - 1.0 / 0.74).abs() < 0.02,
        "narrow / wide DRAM time {ratio}"
    );
    assert!(
        narrow.time_us > 1.1 * wide.time_us,
        "{} against {}",
        narrow.time_us,
        wide.time_us
    );
    // The A100's description lists no segment rates: the same time.
    let (narrow, wide) = (
        decode_on("a100-sxm4-80gb", 32, 64, DType::F16),
        decode_on("a100-sxm4-80gb", 64, 64, DType::F16),
    );
    let ratio = narrow.breakdown.dram_us / wide.breakdown.dram_us;
    assert!(
        (ratio - 1.0).abs() < 0.01,
        "narrow / wide DRAM time {ratio}"
    );
}
