//! `reference_configs`: the model's picks first, then the reduced whole space a tuning run
//! measures them against (`carver tune --reference`).

use std::collections::{HashMap, HashSet};

use carver::policy::{REFERENCE_GROUP, variant_depth};
use carver::{
    DType, Family, Layout, MatmulTemplate, TileConfig, TopK, rank_every_config, recommend_hints,
    reference_configs,
};
use carver_arch::HardwareDb;
use proptest::prelude::*;

fn template(m: u64, n: u64, k: u64, family: Family) -> MatmulTemplate {
    MatmulTemplate::new(m, n, k)
        .with_family(family)
        .with_layouts(Layout::Row, Layout::Row)
}

/// The tile without its depth and launch order.
fn structure(t: &TileConfig) -> TileConfig {
    let mut s = *t;
    s.stages = 0;
    s.raster.group = 0;
    s
}

fn plain(t: &TileConfig) -> bool {
    !t.persistent && t.cluster_m * t.cluster_n == 1
}

/// Checks every invariant of the reference list of one problem; returns its length.
fn check(tpl: &MatmulTemplate, arch_key: &str) -> usize {
    let db = HardwareDb::embedded().expect("embedded database loads");
    let arch = db.get(arch_key).expect("known arch");
    let topk = TopK::DEFAULT;
    let picks = recommend_hints(tpl, arch, topk).expect("picks");
    let reference = reference_configs(tpl, arch, topk).expect("reference");
    // The picks come first, as recommend_hints ranks them.
    assert!(
        reference.len() > picks.len(),
        "the reduced space adds configurations"
    );
    for (p, r) in picks.iter().zip(&reference) {
        assert_eq!((p.rank, &p.tile), (r.rank, &r.tile));
    }
    // Ranks run 1, 2, ... with no configuration twice.
    assert!(reference.iter().enumerate().all(|(i, h)| h.rank == i + 1));
    let distinct: HashSet<_> = reference.iter().map(|h| h.tile).collect();
    assert_eq!(
        distinct.len(),
        reference.len(),
        "a configuration is listed twice"
    );
    // The rest: plain structures at their deepest legal ring (in the reference group) or its
    // depth variant, by predicted time.
    let every = rank_every_config(tpl, arch).expect("whole space");
    let shallowest = tpl.family.rules().stage_range().0;
    let mut deepest: HashMap<(TileConfig, u32), u32> = HashMap::new();
    for h in every.iter().filter(|h| plain(&h.tile)) {
        let d = deepest
            .entry((structure(&h.tile), h.tile.raster.group))
            .or_default();
        *d = (*d).max(h.tile.stages);
    }
    let rest = &reference[picks.len()..];
    for h in rest {
        let t = &h.tile;
        assert!(plain(t), "{t:?} has a cluster or persistence");
        let in_group = deepest.contains_key(&(structure(t), REFERENCE_GROUP));
        assert_eq!(
            t.raster.group,
            if in_group { REFERENCE_GROUP } else { 1 },
            "{t:?}"
        );
        let d = deepest[&(structure(t), t.raster.group)];
        assert!(
            t.stages == d || Some(t.stages) == variant_depth(d, shallowest),
            "{t:?}"
        );
    }
    assert!(
        rest.windows(2)
            .all(|w| w[0].prediction.time_us <= w[1].prediction.time_us)
    );
    // Every plain structure of the space is there, at least at its deepest ring.
    let listed: HashSet<TileConfig> = reference.iter().map(|h| structure(&h.tile)).collect();
    for h in every.iter().filter(|h| plain(&h.tile)) {
        assert!(
            listed.contains(&structure(&h.tile)),
            "{:?} is missing",
            h.tile
        );
    }
    // And nothing the rule admits is left out: the reference is the picks and every
    // configuration of the space at a structure's deepest ring or its variant, in its group.
    let admitted = every.iter().filter(|h| {
        let t = &h.tile;
        let group = if deepest.contains_key(&(structure(t), REFERENCE_GROUP)) {
            REFERENCE_GROUP
        } else {
            1
        };
        plain(t)
            && t.raster.group == group
            && deepest
                .get(&(structure(t), group))
                .is_some_and(|&d| t.stages == d || Some(t.stages) == variant_depth(d, shallowest))
    });
    let expected: HashSet<TileConfig> = admitted
        .map(|h| h.tile)
        .chain(picks.iter().map(|p| p.tile))
        .collect();
    assert_eq!(
        distinct, expected,
        "the reference is not the picks and the reduced space"
    );
    reference.len()
}

#[test]
fn cuda_sm90_reference_is_a_few_hundred_structures_not_the_whole_space() {
    for (m, n, k) in [(1, 12288, 4096), (96, 5120, 5120), (4096, 4096, 4096)] {
        let tpl = template(m, n, k, Family::CudaSm90);
        let len = check(&tpl, "h200");
        let db = HardwareDb::embedded().unwrap();
        let whole = rank_every_config(&tpl, db.get("h200").unwrap())
            .unwrap()
            .len();
        // About one configuration in forty of the whole space.
        assert!(
            (300..=2000).contains(&len) && len * 10 < whole,
            "{m}x{n}x{k}: {len} of {whole}"
        );
    }
}

#[test]
fn the_reference_holds_for_fp8_and_batches_too() {
    let fp8 = MatmulTemplate::new(256, 8192, 8192)
        .with_family(Family::CudaSm90)
        .with_dtype(DType::E4m3)
        .with_layouts(Layout::Row, Layout::Col);
    check(&fp8, "h200");
    check(
        &template(512, 1024, 128, Family::CudaSm90).with_batch(32),
        "h100-sxm",
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn the_reference_holds_its_invariants_for_every_target(
        m in prop_oneof![1u64..=64, 65u64..=8192],
        n in 64u64..=16384,
        k in 64u64..=16384,
        family in prop_oneof![Just(Family::CudaSm90), Just(Family::Triton)],
    ) {
        check(&template(m, n, k, family), "h100-sxm");
    }
}
