//! Every document of the schema, built by hand and pinned as JSON: a renamed, removed or
//! reordered field fails here, and has to be accepted deliberately (`cargo insta review`) and
//! weighed against `SCHEMA_VERSION`.
//!
//! The values are representative, not measured.

use std::collections::BTreeMap;

use carver_schema::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

/// Pins `doc` and checks that it reads back unchanged (what a tool reading carver's output does).
fn pin<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(name: &str, doc: &T) {
    insta::assert_json_snapshot!(name, doc);
    let text = serde_json::to_string(doc).unwrap();
    let back: T = serde_json::from_str(&text).unwrap();
    assert_eq!(&back, doc, "{name} does not survive a JSON round trip");
}

fn triton_hint(rank: usize, repack_us: f64) -> Hint {
    Hint {
        rank,
        config: json!({
            "kwargs": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64,
                       "GROUP_SIZE_M": 8, "SPLIT_K": 1},
            "num_warps": 8,
            "num_stages": 4
        }),
        tile: Tile {
            block_m: 128,
            block_n: 256,
            block_k: 64,
            warps_m: 2,
            warps_n: 4,
            producer_warps: 0,
            stages: 4,
            raster: Raster {
                order: RasterOrder::GroupedRows,
                group: 8,
            },
            split_k: 1,
            cluster_m: 1,
            cluster_n: 1,
            persistent: false,
            mma: InstructionFamily::Wgmma,
            swap_ab: false,
        },
        prediction: Prediction {
            time_us: 241.25,
            tflops: 569.5,
            bound: Bound::L2,
            smem_bytes: 196608,
            registers_per_thread: 232,
            hedged_registers: None,
            threads: 256,
            blocks_per_sm: 1,
            grid: 512,
            waves: 3.878787878787879,
            breakdown: Breakdown {
                compute_us: 139.0,
                smem_us: 98.5,
                l2_us: 212.75,
                dram_us: 61.0,
                latency_us: 12.5,
                epilogue_us: 4.0,
                split_k_us: 0.0,
                overhead_us: 5.0,
                repack_us,
                dram_bytes: 201326592.0,
                l2_bytes: 1610612736.0,
                wave_efficiency: 0.9696969696969697,
                padding_efficiency: 1.0,
            },
        },
    }
}

fn device_key() -> DeviceKey {
    DeviceKey {
        name: "NVIDIA H100 80GB HBM3".into(),
        uuid: "GPU-5e0c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b".into(),
        driver_version: "580.159.04".into(),
    }
}

fn shape(name: Option<&str>, m: u64, n: u64, k: u64) -> ShapeSpec {
    ShapeSpec {
        name: name.map(Into::into),
        m,
        n,
        k,
        batch: 1,
    }
}

#[test]
fn recommend_output() {
    let problem = ProblemSpec {
        dtype_a: "f16".into(),
        dtype_b: "f16".into(),
        dtype_c: "f16".into(),
        dtype_acc: "f32".into(),
        layout_a: "row".into(),
        layout_b: "row".into(),
    };
    pin(
        "recommend_output",
        &RecommendOutput {
            schema_version: SCHEMA_VERSION,
            carver_version: "0.1.0".into(),
            results: vec![
                RecommendResult {
                    shape: shape(Some("attn_qkv"), 4096, 4096, 4096),
                    arch: "h100-sxm".into(),
                    target: "triton".into(),
                    problem: problem.clone(),
                    hints: vec![triton_hint(1, 0.0), triton_hint(2, 3.5)],
                    error: None,
                    measured: Some(MeasuredWinner {
                        config: json!({"block_m": 128, "block_n": 256}),
                        measured_time_us: 230.5,
                        cublas_time_us: Some(235.0),
                        device_name: "NVIDIA H100 80GB HBM3".into(),
                        device_uuid: "GPU-5e0c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b".into(),
                        measured_at_unix_s: 1_700_000_000,
                        carver_version: "0.1.0".into(),
                    }),
                    elapsed_us: 35.0,
                },
                RecommendResult {
                    shape: shape(None, 0, 4096, 4096),
                    arch: "a100-sxm4-80gb".into(),
                    target: "triton".into(),
                    problem,
                    hints: vec![],
                    error: Some("m = 0: every dimension must be at least 1".into()),
                    measured: None,
                    elapsed_us: 1.0,
                },
            ],
        },
    );
}

fn h100_description(calibrated: bool) -> ArchDescription {
    let peak = |tflops, per_tc: Option<f64>, per_sm: Option<f64>, clock: Option<f64>| Peak {
        tflops,
        flops_per_clock_per_tensor_core: per_tc,
        flops_per_clock_per_sm: per_sm,
        clock_mhz: clock,
    };
    ArchDescription {
        gpu: GpuIdentity {
            key: "h100-sxm".into(),
            name: "NVIDIA H100 80GB HBM3".into(),
            aliases: vec!["h100".into()],
            vendor: "nvidia".into(),
            architecture: "hopper".into(),
            compute_capability: "9.0".into(),
            sources: vec!["NVIDIA H100 datasheet".into()],
        },
        sm: Multiprocessor {
            count: 132,
            warp_size: 32,
            boost_clock_mhz: 1980.0,
            sustained_clock_mhz: 1830.0,
            max_threads: 2048,
            max_blocks: 32,
            max_threads_per_block: 1024,
            tensor_cores: 4,
        },
        registers: RegisterFile {
            per_sm: 65536,
            per_block: 65536,
            per_thread_max: 255,
            allocation_unit: 256,
        },
        shared_memory: SharedMemory {
            per_sm_bytes: 233472,
            per_block_default_bytes: 49152,
            per_block_optin_bytes: 232448,
            reserved_per_block_bytes: 1024,
            banks: 32,
            bank_width_bytes: 4,
            bytes_per_clock_per_sm: 128,
        },
        memory: DeviceMemory {
            kind: "HBM3".into(),
            capacity_bytes: 85899345920,
            bus_width_bits: 5120,
            memory_clock_mhz: 2619.0,
            bandwidth_bytes_per_s: 3.35e12,
            sector_bytes: 32,
            line_bytes: 128,
            segment_efficiency: Vec::new(),
        },
        l2: L2Cache {
            size_bytes: 52428800,
            bandwidth_bytes_per_s: 7.85e12,
            request_coalescing: Some(2.0),
        },
        tensor_instructions: vec![
            TensorInstruction {
                family: InstructionFamily::Wgmma,
                dtypes: vec![ComputeClass::F16, ComputeClass::Bf16],
                m: Extent::Fixed(64),
                n: Extent::Range(StepRange {
                    min: 8,
                    max: 256,
                    step: 8,
                }),
                k: 16,
                step_cycles: None,
            },
            TensorInstruction {
                family: InstructionFamily::MmaSync,
                dtypes: vec![ComputeClass::Int8],
                m: Extent::Fixed(16),
                n: Extent::Fixed(8),
                k: 32,
                step_cycles: None,
            },
        ],
        // Inserted out of order: the JSON lists classes in declaration order (f16 first).
        peak: BTreeMap::from([
            (
                ComputeClass::Fp32,
                peak(66.9, None, Some(256.0), Some(1980.0)),
            ),
            (ComputeClass::F16, peak(989.4, Some(1024.0), None, None)),
            (ComputeClass::Bf16, peak(989.4, Some(1024.0), None, None)),
        ]),
        estimated: vec!["l2.bandwidth_bytes_per_s".into()],
        origin: Origin::Embedded {
            file: "h100-sxm.toml".into(),
        },
        calibration: calibrated.then(calibration),
    }
}

fn calibration() -> Calibration {
    Calibration {
        format: 1,
        uuid: "GPU-5e0c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b".into(),
        device_name: "NVIDIA H100 80GB HBM3".into(),
        base_key: Some("h100-sxm".into()),
        driver_version: None,
        carver_version: "0.1.0".into(),
        measured_at_unix_s: 1_700_000_000,
        dram_bandwidth_bytes_per_s: Some(3.0e12),
        l2_bandwidth_bytes_per_s: None,
        smem_bandwidth_bytes_per_s: Some(3.1e13),
        peak_tflops: BTreeMap::from([(ComputeClass::Bf16, 700.5), (ComputeClass::F16, 701.25)]),
        method: BTreeMap::from([("dram_bandwidth_bytes_per_s".into(), "copy kernel".into())]),
    }
}

#[test]
fn arch_list() {
    pin(
        "arch_list",
        &ArchList {
            schema_version: SCHEMA_VERSION,
            gpus: vec![
                ArchSummary {
                    key: "h100-sxm".into(),
                    name: "NVIDIA H100 80GB HBM3".into(),
                    architecture: "hopper".into(),
                    compute_capability: "9.0".into(),
                    sm_count: 132,
                    dram_bandwidth_bytes_per_s: 3.35e12,
                    l2_size_bytes: 52428800,
                    smem_per_block_optin_bytes: 232448,
                    f16_tflops: Some(989.4),
                    origin: "embedded".into(),
                },
                ArchSummary {
                    key: "my-gpu".into(),
                    name: "My GPU".into(),
                    architecture: "ampere".into(),
                    compute_capability: "8.6".into(),
                    sm_count: 84,
                    dram_bandwidth_bytes_per_s: 9.36e11,
                    l2_size_bytes: 6291456,
                    smem_per_block_optin_bytes: 101376,
                    f16_tflops: None,
                    origin: "user-file".into(),
                },
            ],
        },
    );
}

#[test]
fn arch_report() {
    pin(
        "arch_report",
        &ArchReport {
            schema_version: SCHEMA_VERSION,
            arch: h100_description(false),
        },
    );
}

#[test]
fn arch_report_calibrated() {
    pin(
        "arch_report_calibrated",
        &ArchReport {
            schema_version: SCHEMA_VERSION,
            arch: h100_description(true),
        },
    );
}

#[test]
fn origins() {
    pin(
        "origins",
        &vec![
            Origin::Unknown,
            Origin::UserFile {
                path: "/home/me/gpus/my-gpu.toml".into(),
            },
            Origin::Live {
                uuid: "GPU-5e0c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b".into(),
                base: Some("h100-sxm".into()),
            },
            Origin::Live {
                uuid: "GPU-00000000-0000-0000-0000-000000000000".into(),
                base: None,
            },
        ],
    );
}

fn detected_gpu() -> DetectedGpu {
    let uuid = "GPU-5e0c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b";
    let mut arch = h100_description(true);
    arch.origin = Origin::Live {
        uuid: uuid.into(),
        base: Some("h100-sxm".into()),
    };
    DetectedGpu {
        index: 0,
        name: "NVIDIA H100 80GB HBM3".into(),
        uuid: uuid.into(),
        driver_version: "580.159.04".into(),
        cuda_driver_version: "13.0".into(),
        power_limit_w: Some(700.0),
        matched: Some("h100-sxm".into()),
        arch,
        driver_query: DriverQuery {
            index: 0,
            name: "NVIDIA H100 80GB HBM3".into(),
            uuid: uuid.into(),
            compute_capability: "9.0".into(),
            sm_count: 132,
            warp_size: 32,
            max_threads_per_sm: 2048,
            max_blocks_per_sm: 32,
            max_threads_per_block: 1024,
            shared_memory_per_block_default_bytes: 49152,
            shared_memory_per_block_optin_bytes: 232448,
            shared_memory_per_sm_bytes: 233472,
            shared_memory_reserved_per_block_bytes: 1024,
            registers_per_sm: 65536,
            registers_per_block: 65536,
            l2_size_bytes: 52428800,
            memory_clock_mhz: 2619.0,
            memory_bus_width_bits: 5120,
            max_sm_clock_mhz: 1980.0,
            total_memory_bytes: 85028779008,
            cuda_driver_version: 13000,
        },
        nvml_query: NvmlQuery {
            name: "NVIDIA H100 80GB HBM3".into(),
            uuid: uuid.into(),
            driver_version: "580.159.04".into(),
            max_sm_clock_mhz: 1980,
            max_memory_clock_mhz: 2619,
            power_limit_w: None,
        },
    }
}

#[test]
fn detect_report() {
    pin(
        "detect_report",
        &DetectReport {
            schema_version: SCHEMA_VERSION,
            gpus: vec![detected_gpu()],
        },
    );
}

#[test]
fn calibrate_report() {
    pin(
        "calibrate_report",
        &CalibrateReport {
            schema_version: SCHEMA_VERSION,
            device_index: 0,
            device_name: "NVIDIA H100 80GB HBM3".into(),
            uuid: "GPU-5e0c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b".into(),
            matched: Some("h100-sxm".into()),
            stored_at: "/home/me/.cache/carver/calibration/GPU-5e0c1a2b.json".into(),
            figures: vec![
                MeasuredFigure {
                    field: "dram_bandwidth_bytes_per_s".into(),
                    label: "DRAM bandwidth".into(),
                    unit: "B/s".into(),
                    measured: 3.0e12,
                    slowest: 2.95e12,
                    fastest: 3.02e12,
                    runs: 50,
                    spec: 3.35e12,
                    spec_is_estimate: false,
                    method: "device-to-device copy of 2 GiB".into(),
                },
                MeasuredFigure {
                    field: "peak_tflops.bf16".into(),
                    label: "bf16 tensor throughput".into(),
                    unit: "TFLOP/s".into(),
                    measured: 700.5,
                    slowest: 690.0,
                    fastest: 705.25,
                    runs: 30,
                    spec: 989.4,
                    spec_is_estimate: true,
                    method: "cublasGemmEx 8192^3".into(),
                },
            ],
            calibration: calibration(),
        },
    );
}

fn measurement(early_stopped: bool) -> CandidateMeasurement {
    CandidateMeasurement {
        registers: 168,
        local_bytes: 0,
        blocks_per_sm: 1,
        grid: 132,
        rel_error: 1.5e-4,
        timing: Timing {
            median_s: 2.305e-4,
            min_s: 2.29e-4,
            max_s: 2.41e-4,
            runs: if early_stopped { 10 } else { 400 },
            early_stopped,
        },
    }
}

fn sm90_config() -> serde_json::Value {
    json!({"block_m": 128, "block_n": 256, "block_k": 64, "stages": 4, "consumers": 2,
           "group_m": 8, "cluster_m": 1, "persistent": true})
}

#[test]
fn tune_report() {
    let tuned = TuneShapeResult {
        shape: shape(None, 333, 777, 999),
        dtype: "bf16".into(),
        layout: "rr".into(),
        source: "tuned".into(),
        winner: Some(sm90_config()),
        winner_time_us: Some(230.5),
        winner_tflops: Some(2.2),
        cublas_time_us: Some(240.0),
        speedup_vs_cublas: Some(1.0412147505422993),
        winner_model_rank: Some(1),
        candidates: vec![
            TuneCandidate {
                model_rank: 1,
                label: "128x256x64 s4 c2 g8 persistent r168 rr".into(),
                config: sm90_config(),
                predicted_time_us: 225.0,
                measured_time_us: Some(230.5),
                tflops: Some(2.2),
                details: Some(measurement(false)),
                compile_s: Some(3.25),
                from_cache: Some(false),
                failure: None,
            },
            TuneCandidate {
                model_rank: 2,
                label: "128x128x64 s6 c2 g8 r0 rr".into(),
                config: json!({"block_m": 128, "block_n": 128}),
                predicted_time_us: 250.0,
                measured_time_us: None,
                tflops: None,
                details: None,
                compile_s: Some(0.0),
                from_cache: Some(true),
                failure: Some("wrong result: relative error 0.5".into()),
            },
        ],
        compile_wall_s: Some(6.5),
        bench_wall_s: Some(2.0),
        total_wall_s: Some(8.75),
        stored: Some("inserted".into()),
        repack: Some(RepackReport {
            operands: vec!["A".into(), "B".into()],
            time_us: Some(4.5),
        }),
        matched_shape: None,
        error: None,
        // Its rows need the padded copies, which an emitted kernel does not make.
        emit: Some(EmitReport {
            directory: None,
            files: vec![],
            rerun: false,
            error: Some("the emitted kernel reads A and B in place, so it takes 16-byte-aligned rows only (K, and N for row-major B, multiples of 8); this problem has K = 999 (rows of A) and N = 777 (rows of row-major B), whose rows carver copies into padded buffers before every launch; the tuning result itself is unaffected".into()),
        }),
    };
    let from_database = TuneShapeResult {
        shape: shape(Some("square"), 4096, 4096, 4096),
        source: "database".into(),
        candidates: vec![TuneCandidate {
            details: None,
            compile_s: None,
            from_cache: None,
            ..tuned.candidates[0].clone()
        }],
        compile_wall_s: None,
        bench_wall_s: None,
        total_wall_s: Some(0.001),
        stored: None,
        repack: None,
        matched_shape: Some(shape(None, 1024, 1024, 1024)),
        emit: Some(EmitReport {
            directory: Some("kernels/4096x4096x4096_bf16_rr".into()),
            files: vec![
                "kernel.cu".into(),
                "kernel.cubin".into(),
                "launch.json".into(),
            ],
            rerun: true,
            error: None,
        }),
        ..tuned.clone()
    };
    let failed = TuneShapeResult {
        shape: shape(None, 0, 0, 0),
        dtype: "bf16".into(),
        layout: "rr".into(),
        source: "error".into(),
        winner: None,
        winner_time_us: None,
        winner_tflops: None,
        cublas_time_us: None,
        speedup_vs_cublas: None,
        winner_model_rank: None,
        candidates: vec![],
        compile_wall_s: None,
        bench_wall_s: None,
        total_wall_s: None,
        stored: None,
        repack: None,
        matched_shape: None,
        error: Some("line 3: `x` is not a number".into()),
        emit: None,
    };
    pin(
        "tune_report",
        &TuneReport {
            schema_version: SCHEMA_VERSION,
            carver_version: "0.1.0".into(),
            device: device_key(),
            results: vec![tuned, from_database, failed],
        },
    );
}

#[test]
fn bench_report() {
    pin(
        "bench_report",
        &BenchReport {
            schema_version: SCHEMA_VERSION,
            device: device_key(),
            shape: shape(None, 4096, 4096, 4096),
            dtype: "bf16".into(),
            layout: "rc".into(),
            config_source: "argument".into(),
            config: sm90_config(),
            label: "128x256x64 s4 c2 g8 persistent r168 rc".into(),
            predicted_time_us: 225.0,
            measured_time_us: Some(230.5),
            tflops: Some(596.25),
            cublas_time_us: Some(240.0),
            cublas_tflops: Some(572.5),
            speedup_vs_cublas: Some(1.0412147505422993),
            details: Some(measurement(true)),
            repack: None,
            failure: None,
        },
    );
}

fn enum_arg(name: &str, value: u32) -> EnumArg {
    EnumArg {
        name: name.into(),
        value,
    }
}

fn tensor_map(operand: &str, dims: [u64; 3], box_dim: [u32; 3]) -> EmitParam {
    EmitParam {
        name: format!("tma_{}", operand.to_lowercase()),
        kind: EmitParamKind::TensorMap,
        size_bytes: 128,
        align_bytes: 64,
        tensor_map: Some(TensorMapEncoding {
            global_address: operand.into(),
            note: format!("{operand}: dims innermost first"),
            data_type: enum_arg("CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", 9),
            rank: 3,
            global_dim: dims.to_vec(),
            global_strides_bytes: vec![dims[0] * 2, dims[0] * dims[1] * 2],
            box_dim: box_dim.to_vec(),
            element_strides: vec![1, 1, 1],
            interleave: enum_arg("CU_TENSOR_MAP_INTERLEAVE_NONE", 0),
            swizzle: enum_arg("CU_TENSOR_MAP_SWIZZLE_128B", 3),
            l2_promotion: enum_arg("CU_TENSOR_MAP_L2_PROMOTION_L2_256B", 3),
            oob_fill: enum_arg("CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE", 0),
        }),
        buffer: None,
        bytes: None,
        value: None,
        float_value: None,
        note: format!("tensor map of {operand}, by value"),
    }
}

fn pointer_param(name: &str, buffer: &str, bytes: u64) -> EmitParam {
    EmitParam {
        name: name.into(),
        kind: EmitParamKind::DevicePointer,
        size_bytes: 8,
        align_bytes: 8,
        tensor_map: None,
        buffer: Some(buffer.into()),
        bytes: Some(bytes),
        value: None,
        float_value: None,
        note: buffer.into(),
    }
}

fn int_param(name: &str, value: i64) -> EmitParam {
    EmitParam {
        name: name.into(),
        kind: EmitParamKind::I32,
        size_bytes: 4,
        align_bytes: 4,
        tensor_map: None,
        buffer: None,
        bytes: None,
        value: Some(value),
        float_value: None,
        note: name.into(),
    }
}

fn buffer(name: &str, role: &str, dtype: &str, shape: &[u64], elem_bytes: u64) -> EmitBuffer {
    EmitBuffer {
        name: name.into(),
        role: role.into(),
        dtype: dtype.into(),
        shape: shape.to_vec(),
        bytes: shape.iter().product::<u64>() * elem_bytes,
        alignment_bytes: 16,
        layout: format!("{name}, densely stored"),
    }
}

/// A split-K decode GEMM of 2 matrices: the GEMM, then the reduction.
#[test]
fn emitted_kernel() {
    let workspace = 2 * 4 * 4096 * 4;
    pin(
        "emitted_kernel",
        &EmittedKernel {
            schema_version: SCHEMA_VERSION,
            carver_version: "0.1.0".into(),
            target: "cuda-sm90".into(),
            device: EmitDevice {
                name: "NVIDIA H100 80GB HBM3".into(),
                compute_capability: "9.0".into(),
                sm_count: 132,
            },
            problem: TuneProblem {
                m: 1,
                n: 4096,
                k: 8192,
                batch: 2,
                dtype_a: "bf16".into(),
                dtype_b: "bf16".into(),
                dtype_c: "bf16".into(),
                dtype_acc: "f32".into(),
                layout_a: "row".into(),
                layout_b: "row".into(),
            },
            config: json!({"block_m": 64, "block_n": 128, "block_k": 64, "stages": 6,
                           "consumers": 1, "group_m": 8, "cluster_m": 1, "persistent": false,
                           "split_k": 4}),
            label: "64x128x64 s6 c1 g8 k4 rr bf16".into(),
            measured_time_us: Some(21.5),
            cublas_time_us: Some(24.0),
            build: EmitBuild {
                arch: "sm_90a".into(),
                compiler: "NVRTC 13.0".into(),
                options: vec!["--gpu-architecture=sm_90a".into(), "-std=c++17".into()],
            },
            buffers: vec![
                buffer("A", "input", "bf16", &[2, 1, 8192], 2),
                buffer("B", "input", "bf16", &[2, 8192, 4096], 2),
                buffer("C", "output", "bf16", &[2, 1, 4096], 2),
                buffer("workspace", "scratch", "f32", &[2, 4, 1, 4096], 4),
            ],
            workspace_bytes: workspace,
            kernels: vec![
                EmitLaunch {
                    entry_point: "carver_sm90_gemm".into(),
                    source_file: "kernel.cu".into(),
                    cubin_file: "kernel.cubin".into(),
                    cubin_sha256: "ab".repeat(32),
                    grid: [256, 1, 1],
                    block: [256, 1, 1],
                    cluster: [1, 1, 1],
                    cluster_compiled_in: false,
                    dynamic_smem_bytes: 148480,
                    set_max_dynamic_smem: true,
                    blocks_per_sm: Some(1),
                    params: vec![
                        tensor_map("A", [8192, 1, 2], [64, 64, 1]),
                        tensor_map("B", [4096, 8192, 2], [64, 64, 1]),
                        pointer_param("c", "C", 2 * 4096 * 2),
                        pointer_param("partials", "workspace", workspace),
                        int_param("M", 1),
                        int_param("N", 4096),
                        int_param("K", 8192),
                        int_param("batch", 2),
                        EmitParam {
                            name: "alpha".into(),
                            kind: EmitParamKind::F32,
                            size_bytes: 4,
                            align_bytes: 4,
                            tensor_map: None,
                            buffer: None,
                            bytes: None,
                            value: None,
                            float_value: Some(1.0),
                            note: "C = alpha A B".into(),
                        },
                    ],
                },
                EmitLaunch {
                    entry_point: "carver_sm90_splitk_reduce".into(),
                    source_file: "splitk_reduce.cu".into(),
                    cubin_file: "splitk_reduce.cubin".into(),
                    cubin_sha256: "cd".repeat(32),
                    grid: [16, 2, 1],
                    block: [256, 1, 1],
                    cluster: [1, 1, 1],
                    cluster_compiled_in: false,
                    dynamic_smem_bytes: 0,
                    set_max_dynamic_smem: false,
                    blocks_per_sm: None,
                    params: vec![
                        pointer_param("partials", "workspace", workspace),
                        pointer_param("c", "C", 2 * 4096 * 2),
                        int_param("M", 1),
                        int_param("N", 4096),
                        int_param("ldw", 4096),
                        int_param("splits", 4),
                        int_param("batch", 2),
                        int_param("out_bf16", 1),
                    ],
                },
            ],
            grid_rule: "carver_sm90_gemm: grid.x = 1 x units, units = ceil(ceil(M / 64) / 1) x ceil(N / 128) x 4 (split_k) x batch.".into(),
        },
    );
}

fn tune_record() -> TuneRecord {
    TuneRecord {
        key: TuneKey {
            device: device_key(),
            carver_version: "0.1.0".into(),
            target: "cuda-sm90".into(),
            kernel_hash: "9f2c4e".into(),
            problem: TuneProblem {
                m: 4096,
                n: 4096,
                k: 4096,
                batch: 1,
                dtype_a: "bf16".into(),
                dtype_b: "bf16".into(),
                dtype_c: "bf16".into(),
                dtype_acc: "f32".into(),
                layout_a: "row".into(),
                layout_b: "row".into(),
            },
        },
        winner: sm90_config(),
        candidates: vec![
            MeasuredCandidate {
                config: sm90_config(),
                model_rank: 1,
                predicted_time_s: 2.25e-4,
                measured_time_s: Some(2.305e-4),
                failure: None,
            },
            MeasuredCandidate {
                config: json!({"block_m": 64}),
                model_rank: 2,
                predicted_time_s: 2.5e-4,
                measured_time_s: None,
                failure: Some("did not compile".into()),
            },
        ],
        cublas_time_s: Some(2.4e-4),
        measured_at_unix_s: 1_700_000_000,
        method: json!({"timer": "cuda-events", "statistic": "median"}),
    }
}

#[test]
fn tune_record_and_cache_documents() {
    let record = tune_record();
    pin("tune_record", &record);
    pin(
        "cache_list",
        &CacheList {
            schema_version: SCHEMA_VERSION,
            database: "/home/me/.cache/carver/tune.sqlite".into(),
            results: vec![CacheEntry {
                id: 7,
                key: record.key.clone(),
                winner: record.winner.clone(),
                winner_time_s: 2.305e-4,
                cublas_time_s: record.cublas_time_s,
                candidates: 2,
                failed_candidates: 1,
                measured_at_unix_s: record.measured_at_unix_s,
            }],
            skipped: vec![],
        },
    );
    pin(
        "cache_show",
        &CacheShow {
            schema_version: SCHEMA_VERSION,
            results: vec![StoredTuneRecord {
                id: 7,
                record: record.clone(),
            }],
            skipped: vec![],
        },
    );
    pin(
        "cache_import",
        &CacheImport {
            schema_version: SCHEMA_VERSION,
            file: "results.jsonl".into(),
            report: ImportReport {
                inserted: 3,
                replaced: 1,
                kept_existing: 1,
                conflicts: vec![ImportConflict {
                    line: 4,
                    key: record.key.clone(),
                    existing_winner: json!({"block_m": 64}),
                    existing_time_s: 2.5e-4,
                    incoming_winner: record.winner.clone(),
                    incoming_time_s: 2.305e-4,
                    kept: ConflictResolution::Incoming,
                }],
                bad_rows: vec![BadRow {
                    line: 6,
                    reason: "not JSON".into(),
                }],
                expected_records: 6,
                records_in_file: 6,
                ..ImportReport::default()
            },
        },
    );
    pin(
        "cache_clear",
        &CacheClear {
            schema_version: SCHEMA_VERSION,
            deleted: 2,
            dry_run: false,
            would_delete: vec![],
        },
    );
    pin(
        "cache_recover",
        &CacheRecover {
            schema_version: SCHEMA_VERSION,
            file: "/home/me/.cache/carver/tuning.sqlite3.moved-aside-1767225600".into(),
            database: "/home/me/.cache/carver/tuning.sqlite3".into(),
            report: SalvageReport {
                rows_found: 989,
                inserted: 986,
                replaced: 0,
                kept_existing: 2,
                bad_rows: vec![SkippedRow {
                    id: 17,
                    reason: "candidates is not valid: EOF while parsing a list (column 812)".into(),
                }],
                bad_rows_not_listed: 0,
                unreadable_pages: 3,
                notes: vec![],
            },
        },
    );
}

/// A reader of version 1 must accept documents with fields it does not know (a later carver may
/// add optional ones without bumping the version).
#[test]
fn unknown_fields_are_accepted() {
    let mut doc = serde_json::to_value(ArchReport {
        schema_version: SCHEMA_VERSION,
        arch: h100_description(false),
    })
    .unwrap();
    doc["arch"]["sm"]["added_later"] = json!(1);
    doc["added_later"] = json!("x");
    let back: ArchReport = serde_json::from_value(doc).unwrap();
    assert_eq!(back.arch, h100_description(false));
}
