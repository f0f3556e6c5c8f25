//! Invariants of the recommender, checked over random problems.

use carver::family::check_config;
use carver::{DType, Family, Layout, MatmulTemplate, TileConfig, TopK, recommend_hints};
use carver_arch::{Arch, HardwareDb};
use proptest::prelude::*;

fn db() -> HardwareDb {
    HardwareDb::embedded().expect("embedded database loads")
}

fn dim() -> impl Strategy<Value = u64> {
    prop_oneof![1u64..=64, 1u64..=4096, 4096u64..=32768]
}

fn target() -> impl Strategy<Value = Family> {
    prop_oneof![
        Just(Family::Triton),
        Just(Family::TileLang),
        Just(Family::Generic),
        Just(Family::CudaSm90)
    ]
}

fn arch_key() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("h100-sxm"),
        Just("h200"),
        Just("a100-sxm4-80gb"),
        Just("l40s"),
        Just("rtx-4090")
    ]
}

fn template(m: u64, n: u64, k: u64, t: Family, dtype: DType, b_col: bool) -> MatmulTemplate {
    MatmulTemplate::new(m, n, k)
        .with_dtype(dtype)
        .with_family(t)
        .with_layouts(Layout::Row, if b_col { Layout::Col } else { Layout::Row })
}

/// A copy of `arch` with DRAM and L2 bandwidth scaled by `factor`.
fn faster_memory(arch: &Arch, factor: f64) -> Arch {
    let mut a = arch.clone();
    a.memory.bandwidth_bytes_per_s *= factor;
    a.l2.bandwidth_bytes_per_s *= factor;
    a
}

/// Fails unless every hint is predicted no slower on `better` than on `arch`, both priced as
/// estimated (a register hedge's hint assumes one more block).
fn no_hint_slower_on(
    tpl: &MatmulTemplate,
    arch: &Arch,
    better: &Arch,
    hints: &[carver::Hint],
) -> Result<(), TestCaseError> {
    for h in hints {
        let (_, before) = carver::predict_native(tpl, arch, &h.config).unwrap();
        let (_, p) = carver::predict_native(tpl, better, &h.config).unwrap();
        prop_assert!(
            p.time_us <= before.time_us * (1.0 + 1e-9),
            "{}: {} > {}",
            h.config,
            p.time_us,
            before.time_us
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// Every hint is legal for its target and fits the arch's shared memory, registers and threads.
    #[test]
    fn every_hint_is_legal_and_fits(m in dim(), n in dim(), k in dim(), t in target(), key in arch_key(),
                                    bf16 in any::<bool>(), b_col in any::<bool>()) {
        let db = db();
        let arch = db.get(key).unwrap();
        let tpl = template(m, n, k, t, if bf16 { DType::Bf16 } else { DType::F16 }, b_col);
        let Ok(problem) = tpl.validate(arch) else {
            // Only cuda-sm90 rejects problems here, and only on archs without wgmma (unaligned
            // operands are repacked, not refused).
            prop_assert_eq!(t, Family::CudaSm90);
            prop_assert!(arch.gpu.compute_capability.major != 9, "refused on {}", key);
            return Ok(());
        };
        let hints = recommend_hints(&tpl, arch, TopK::DEFAULT).unwrap();
        prop_assert!(!hints.is_empty() && hints.len() <= 8);
        for (i, h) in hints.iter().enumerate() {
            prop_assert_eq!(h.rank, i + 1);
            let res = check_config(t.rules(), &h.tile, &problem, arch);
            prop_assert!(res.is_ok(), "illegal hint {:?}: {:?}", h.tile, res);
            let p = &h.prediction;
            prop_assert!(p.smem_bytes <= arch.shared_memory.per_block_optin_bytes);
            prop_assert!(p.registers_per_thread <= arch.registers.per_thread_max);
            prop_assert!(p.threads <= arch.sm.max_threads_per_block);
            prop_assert!(p.blocks_per_sm >= 1);
            prop_assert!(p.time_us.is_finite() && p.time_us > 0.0);
            // No configuration beats the arch's own roofline.
            let peak = arch.peak_flops(problem.class).unwrap();
            prop_assert!(p.tflops * 1e12 <= peak * 1.0001, "{} TFLOP/s beats the peak", p.tflops);
            // The native config parses back to the same tile.
            let back = t.rules().parse_native(&h.config, &problem, arch).unwrap();
            prop_assert_eq!(back, h.tile);
        }
        // Ranked by the order `select` promises: the first is the fastest prediction of the
        // configurations priced as estimated (a register hedge assumes one block more per SM).
        let fastest = hints
            .iter()
            .filter(|h| h.prediction.hedged_registers.is_none())
            .map(|h| h.prediction.time_us)
            .fold(f64::INFINITY, f64::min);
        prop_assert_eq!(hints[0].prediction.time_us, fastest);
    }

    /// The same question always gets the same answer.
    #[test]
    fn ranking_is_deterministic(m in dim(), n in dim(), k in dim(), t in target()) {
        let db = db();
        let arch = db.get("h100").unwrap();
        let tpl = template(m, n, k, t, DType::F16, false);
        let a = recommend_hints(&tpl, arch, TopK::DEFAULT);
        let b = recommend_hints(&tpl, arch, TopK::DEFAULT);
        prop_assert_eq!(a, b);
    }

    /// More memory bandwidth or more SMs never predicts a slower time for any configuration, and
    /// the best hint gets no slower beyond the policy's 1% preference for deeper pipelines.
    #[test]
    fn more_hardware_is_never_slower(m in dim(), n in dim(), k in dim(), t in target()) {
        let db = db();
        let arch = db.get("h100").unwrap();
        let tpl = template(m, n, k, t, DType::F16, false);
        let Ok(base) = recommend_hints(&tpl, arch, TopK::DEFAULT) else { return Ok(()) };
        let mut more_sms = arch.clone();
        more_sms.sm.count *= 2;
        for p in more_sms.peak.values_mut() {
            p.tflops *= 2.0;
        }
        for bigger in [faster_memory(arch, 2.0), more_sms] {
            no_hint_slower_on(&tpl, arch, &bigger, &base)?;
            let best = recommend_hints(&tpl, &bigger, TopK::new(1).unwrap()).unwrap()[0].prediction.time_us;
            prop_assert!(best <= base[0].prediction.time_us * 1.01 + 1e-9);
        }
    }

    /// A shorter wait between a warp's `mma.sync` k-steps (`tensor_instructions[].step_cycles`)
    /// never predicts a slower time, and without the figure no step is waited for at all.
    #[test]
    fn a_shorter_k_step_wait_is_never_slower(m in dim(), n in dim(), k in dim(), t in target()) {
        let db = db();
        let arch = db.get("h200").unwrap();
        let tpl = template(m, n, k, t, DType::F16, false);
        let Ok(base) = recommend_hints(&tpl, arch, TopK::DEFAULT) else { return Ok(()) };
        let with_wait = |scale: Option<f64>| {
            let mut a = arch.clone();
            for i in &mut a.tensor_instructions {
                i.step_cycles = i.step_cycles.and_then(|c| scale.map(|s| c * s));
            }
            a
        };
        for shorter in [with_wait(Some(0.5)), with_wait(None)] {
            no_hint_slower_on(&tpl, arch, &shorter, &base)?;
        }
    }

    /// Hints in their JSON form (carver-schema's) survive a round trip unchanged.
    #[test]
    fn hints_round_trip_through_json(m in dim(), n in dim(), k in dim(), t in target()) {
        let db = db();
        let arch = db.get("h100").unwrap();
        let tpl = template(m, n, k, t, DType::Bf16, false);
        let Ok(hints) = recommend_hints(&tpl, arch, TopK::new(4).unwrap()) else { return Ok(()) };
        let hints: Vec<carver_schema::Hint> = hints.iter().map(Into::into).collect();
        let text = serde_json::to_string(&hints).unwrap();
        let back: Vec<carver_schema::Hint> = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(back, hints);
    }

    /// Pricing only what a top-k ranking can pick (best bound first, stopping at the threshold)
    /// ranks exactly as pricing the whole space does, for any k.
    #[test]
    fn pruned_pricing_ranks_as_the_whole_space(m in dim(), n in dim(), k in dim(), t in target(),
                                                key in arch_key(), topk in 1usize..=16,
                                                b_col in any::<bool>()) {
        let db = db();
        let arch = db.get(key).unwrap();
        let tpl = template(m, n, k, t, DType::F16, b_col);
        let Ok(problem) = tpl.validate(arch) else { return Ok(()) };
        let family = t.rules();
        let all = carver::policy::candidates(family, &problem, arch);
        let pruned = carver::policy::candidates_for_topk(family, &problem, arch, Some(topk));
        prop_assert!(pruned.len() <= all.len());
        let tiles = |c: &[carver::policy::Candidate]| {
            let window = carver::rank::window_for(family, &problem, arch);
            carver::rank::select(c, topk, window).iter().map(|c| (c.tile, c.time_us)).collect::<Vec<_>>()
        };
        prop_assert_eq!(tiles(&pruned), tiles(&all));
    }

    /// A structure's shallower depth variant, offered to the top-k as a hedge, is never
    /// predicted faster than the depth the policy prefers for it, so the first pick stays the
    /// policy's; each structure has at most that one variant, at `policy::variant_depth` of
    /// the preferred depth.
    #[test]
    fn depth_variants_trail_their_structure(m in dim(), n in dim(), k in dim(), t in target(),
                                            key in arch_key(), b_col in any::<bool>()) {
        let db = db();
        let arch = db.get(key).unwrap();
        let tpl = template(m, n, k, t, DType::F16, b_col);
        let Ok(problem) = tpl.validate(arch) else { return Ok(()) };
        let all = carver::policy::candidates_for_topk(t.rules(), &problem, arch, Some(8));
        // Register hedges have their own invariant (`register_hedges_assume_one_more_block`).
        let all: Vec<_> = all.into_iter().filter(|c| c.hedged_registers.is_none()).collect();
        let structure = |c: &carver::policy::Candidate| TileConfig { stages: 0, ..c.tile };
        for c in &all {
            let twins: Vec<_> = all.iter().filter(|o| structure(o) == structure(c)).collect();
            prop_assert!(twins.len() <= 2, "{} depths of {:?}", twins.len(), c.tile);
            let deeper = twins.iter().find(|o| o.tile.stages > c.tile.stages);
            prop_assert_eq!(c.depth_variant, deeper.is_some(), "{:?}", c.tile);
            if let Some(deeper) = deeper {
                let shallowest = t.rules().stage_range().0;
                prop_assert_eq!(
                    carver::policy::variant_depth(deeper.tile.stages, shallowest),
                    Some(c.tile.stages)
                );
                prop_assert!(deeper.time_us <= c.time_us,
                    "variant {:?} ({} us) beats its structure ({} us)", c.tile, c.time_us, deeper.time_us);
            }
        }
    }

    /// A register hedge is a configuration the family's estimate keeps one block per SM short,
    /// by no more than the family's measured error: its time assumes exactly one more block,
    /// beats its structure's own, and it is never the first pick.
    #[test]
    fn register_hedges_assume_one_more_block(m in dim(), n in dim(), k in dim(), t in target(),
                                             key in arch_key(), b_col in any::<bool>()) {
        let db = db();
        let arch = db.get(key).unwrap();
        let tpl = template(m, n, k, t, DType::F16, b_col);
        let Ok(problem) = tpl.validate(arch) else { return Ok(()) };
        let family = t.rules();
        let all = carver::policy::candidates_for_topk(family, &problem, arch, Some(8));
        for c in all.iter().filter(|c| c.hedged_registers.is_some()) {
            let assumed = c.hedged_registers.unwrap();
            let margin = family.register_estimate_margin(&c.tile, &problem);
            prop_assert!(margin.is_some(), "{:?} hedged by a family without a margin", c.tile);
            prop_assert!(assumed < c.res.registers_per_thread);
            prop_assert!(f64::from(c.res.registers_per_thread) <= f64::from(assumed) * margin.unwrap());
            let estimated = carver::cost::blocks_per_sm(&c.tile, c.res, arch);
            prop_assert_eq!(carver::cost::blocks_per_sm(&c.tile, c.priced_resources(), arch), estimated + 1);
            let own = all.iter().filter(|o| o.hedged_registers.is_none() && !o.depth_variant
                && TileConfig { stages: 0, ..o.tile } == TileConfig { stages: 0, ..c.tile });
            for o in own {
                prop_assert!(c.time_us < o.time_us, "hedge {:?} not faster than {:?}", c.tile, o.tile);
            }
        }
        if let Ok(hints) = recommend_hints(&tpl, arch, TopK::new(8).unwrap()) {
            prop_assert_eq!(hints[0].prediction.hedged_registers, None);
            for h in &hints {
                if let Some(r) = h.prediction.hedged_registers {
                    prop_assert!(r < h.prediction.registers_per_thread);
                }
            }
        }
    }

    /// The bound the policy prunes with never exceeds the time the model predicts for any
    /// pipeline depth or launch order of the structure.
    #[test]
    fn lower_bound_is_below_every_priced_time(m in dim(), n in dim(), k in dim(), t in target(),
                                               key in arch_key()) {
        let db = db();
        let arch = db.get(key).unwrap();
        let tpl = template(m, n, k, t, DType::Bf16, false);
        let Ok(problem) = tpl.validate(arch) else { return Ok(()) };
        let family = t.rules();
        let Some(pricer) = carver::cost::Pricer::new(family, &problem, arch) else { return Ok(()) };
        for c in carver::policy::candidates(family, &problem, arch) {
            let bound = pricer.lower_bound(&pricer.terms(&c.tile), &c.tile) * 1e6;
            prop_assert!(bound <= c.time_us * (1.0 + 1e-9), "{:?}: bound {} > {}", c.tile, bound, c.time_us);
        }
    }
}

/// A case the property above once missed: a group's L2 bound counted the SMs its tiles keep
/// busy before clusters round the launch up (64 x 128 tiles in clusters of two along M launch
/// twice the blocks of one tile row), so it pruned a cluster that the top-8 picks.
#[test]
fn pruning_stays_exact_where_clusters_round_the_launch_up() {
    let db = db();
    let arch = db.get("h100-sxm").unwrap();
    let tpl = template(64, 6144, 8192, Family::CudaSm90, DType::F16, false);
    let problem = tpl.validate(arch).unwrap();
    let family = Family::CudaSm90.rules();
    let window = carver::rank::window_for(family, &problem, arch);
    let picks = |c: &[carver::policy::Candidate]| {
        carver::rank::select(c, 8, window)
            .iter()
            .map(|c| (c.tile, c.time_us))
            .collect::<Vec<_>>()
    };
    let all = carver::policy::candidates(family, &problem, arch);
    let pruned = carver::policy::candidates_for_topk(family, &problem, arch, Some(8));
    assert_eq!(picks(&pruned), picks(&all));
}
