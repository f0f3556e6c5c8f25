//! The recommender and the kernel generator agree on the cuda-sm90 family: every point of the
//! family's space the recommender accepts, the generator accepts with the same shared memory,
//! and every point the recommender rejects for a rule of the family, the generator rejects with
//! the same reason. No GPU and no NVRTC needed.

use carver::family::{ConfigError, Sm90Params, Sm90Rules, Sm90Violation, check_config};
use carver::{DType, Family, Layout, MatmulTemplate, Problem, recommend_hints};
use carver_arch::{Arch, HardwareDb};
use carver_gpu::sm90::KernelSpec;

fn h100() -> Arch {
    HardwareDb::embedded().unwrap().get("h100").unwrap().clone()
}

fn template(
    m: u64,
    n: u64,
    k: u64,
    input: DType,
    output: DType,
    layout_b: Layout,
) -> MatmulTemplate {
    MatmulTemplate::new(m, n, k)
        .with_dtype(input)
        .with_output(output)
        .with_layouts(Layout::Row, layout_b)
        .with_family(Family::CudaSm90)
}

fn spec_for(params: Sm90Params, p: &Problem) -> KernelSpec {
    KernelSpec {
        params,
        input: p.a,
        output: p.c,
        layout_b: p.layout_b,
    }
}

/// Every (input, output, B layout) the family runs, on a large and a skinny problem.
fn problems(arch: &Arch) -> Vec<Problem> {
    let mut out = Vec::new();
    for (m, n, k) in [(4096, 4096, 4096), (64, 12288, 4096), (333, 777, 999)] {
        for input in [DType::Bf16, DType::F16] {
            for output in [DType::Bf16, DType::F16] {
                for layout_b in [Layout::Row, Layout::Col] {
                    let t = template(m, n, k, input, output, layout_b);
                    out.push(t.validate(arch).unwrap());
                }
            }
        }
    }
    out
}

#[test]
fn every_point_the_recommender_accepts_the_generator_accepts() {
    let arch = h100();
    let family = Family::CudaSm90.rules();
    let (mut accepted, mut rejected_by_both, mut beyond_the_gpu) = (0, 0, 0);
    for p in problems(&arch) {
        for params in carver::family::space(&Sm90Rules, &p, &arch)
            .iter()
            .map(Sm90Params::from_tile)
        {
            let spec = spec_for(params, &p);
            match check_config(family, &params.to_tile(), &p, &arch) {
                Ok(res) => {
                    accepted += 1;
                    assert_eq!(spec.check(), Ok(()), "{}", spec.label());
                    assert_eq!(
                        res.smem_bytes,
                        u64::from(spec.dynamic_smem_bytes()),
                        "{}",
                        spec.label()
                    );
                    assert_eq!(
                        res.registers_per_thread,
                        spec.accumulators_per_thread() + 40,
                        "{}",
                        spec.label()
                    );
                }
                Err(ConfigError::Sm90(violation)) => {
                    rejected_by_both += 1;
                    assert_eq!(
                        spec.check(),
                        Err(ConfigError::Sm90(violation)),
                        "{}",
                        spec.label()
                    );
                }
                // The generator knows nothing of the GPU: it instantiates what the H100 cannot
                // hold, and the driver refuses it at load time.
                Err(ConfigError::SharedMemory { needed, .. }) => {
                    beyond_the_gpu += 1;
                    assert_eq!(spec.check(), Ok(()), "{}", spec.label());
                    assert_eq!(needed, u64::from(spec.dynamic_smem_bytes()));
                }
                // The recommender counts every thread at a consumer's registers, though
                // `setmaxnreg` leaves the producer fewer: it is stricter than the kernel here.
                Err(ConfigError::RegistersPerBlock { .. }) => {
                    beyond_the_gpu += 1;
                    assert_eq!(spec.check(), Ok(()), "{}", spec.label());
                }
                Err(other) => panic!("{}: unexpected rejection: {other}", spec.label()),
            }
        }
    }
    assert!(accepted > 100, "{accepted}");
    assert!(rejected_by_both > 0, "{rejected_by_both}");
    assert!(beyond_the_gpu > 0, "{beyond_the_gpu}");
}

#[test]
fn every_hint_instantiates() {
    let arch = h100();
    for layout_b in [Layout::Row, Layout::Col] {
        for (m, n, k) in [(4096, 4096, 4096), (16, 8192, 8192), (1000, 999, 1001)] {
            let t = template(m, n, k, DType::Bf16, DType::Bf16, layout_b);
            let p = t.validate(&arch).unwrap();
            for hint in recommend_hints(&t, &arch, carver::TopK::new(16).unwrap()).unwrap() {
                let spec = spec_for(Sm90Params::from_tile(&hint.tile), &p);
                assert_eq!(spec.check(), Ok(()), "{}", spec.label());
            }
        }
    }
}

#[test]
fn points_outside_the_space_are_rejected_by_both_for_the_same_reason() {
    let arch = h100();
    let family = Family::CudaSm90.rules();
    let good = Sm90Params {
        block_m: 128,
        block_n: 128,
        block_k: 64,
        stages: 4,
        consumers: 2,
        group_m: 8,
        cluster_m: 1,
        persistent: false,
        split_k: 1,
        swap_ab: false,
    };
    let bad = [
        (
            Sm90Params {
                consumers: 3,
                ..good
            },
            Sm90Violation::Consumers { consumers: 3 },
        ),
        (
            Sm90Params {
                block_m: 96,
                ..good
            },
            Sm90Violation::BlockM {
                block_m: 96,
                consumers: 2,
            },
        ),
        (
            Sm90Params {
                block_n: 144,
                ..good
            },
            Sm90Violation::RowMajorBlockN { block_n: 144 },
        ),
        (
            Sm90Params {
                block_n: 264,
                ..good
            },
            Sm90Violation::BlockN { block_n: 264 },
        ),
        (
            Sm90Params {
                block_k: 128,
                ..good
            },
            Sm90Violation::BlockK {
                block_k: 128,
                elem_bytes: 2,
            },
        ),
        (
            Sm90Params { stages: 1, ..good },
            Sm90Violation::Stages { stages: 1 },
        ),
        (Sm90Params { group_m: 0, ..good }, Sm90Violation::GroupM),
        (
            Sm90Params {
                cluster_m: 3,
                ..good
            },
            Sm90Violation::ClusterM { cluster_m: 3 },
        ),
        (
            Sm90Params {
                split_k: 17,
                ..good
            },
            Sm90Violation::SplitK { split_k: 17 },
        ),
        (
            Sm90Params {
                block_m: 256,
                block_n: 256,
                consumers: 1,
                ..good
            },
            Sm90Violation::Accumulators { accumulators: 512 },
        ),
    ];
    let p = template(4096, 4096, 4096, DType::Bf16, DType::Bf16, Layout::Row)
        .validate(&arch)
        .unwrap();
    assert_eq!(spec_for(good, &p).check(), Ok(()));
    for (params, violation) in bad {
        let expected = Err(ConfigError::Sm90(violation));
        assert_eq!(
            family.check_rules(&params.to_tile(), &p, &arch),
            expected,
            "{params:?}"
        );
        assert_eq!(spec_for(params, &p).check(), expected, "{params:?}");
    }
    // A split with no K tiles of its own is refused for the problem (K = 4096: 64 tiles).
    let too_split = Sm90Params {
        split_k: 16,
        ..good
    };
    assert_eq!(family.check_rules(&too_split.to_tile(), &p, &arch), Ok(()));
    let short_k = template(4096, 4096, 512, DType::Bf16, DType::Bf16, Layout::Row)
        .validate(&arch)
        .unwrap();
    assert_eq!(
        family.check_rules(&too_split.to_tile(), &short_k, &arch),
        Err(ConfigError::Sm90(Sm90Violation::SplitBeyondK {
            split_k: 16,
            k_tiles: 8,
            block_k: 64
        }))
    );
}
