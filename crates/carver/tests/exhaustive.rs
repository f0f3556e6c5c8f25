//! `rank_every_config`: the whole legal space of a family, ranked, for exhaustive tuning runs.

use carver::family::check_config;
use carver::{DType, Family, Layout, MatmulTemplate, TopK, rank_every_config, recommend_hints};
use carver_arch::HardwareDb;

#[test]
fn every_config_is_legal_ranked_and_holds_the_recommended_ones() {
    let db = HardwareDb::embedded().unwrap();
    let h100 = db.get("h100").unwrap();
    for family in [Family::CudaSm90, Family::Triton, Family::TileLang] {
        for (m, n, k) in [(4096, 4096, 4096), (1, 8192, 4096), (333, 777, 999)] {
            let t = MatmulTemplate::new(m, n, k)
                .with_dtype(DType::Bf16)
                .with_layouts(Layout::Row, Layout::Col)
                .with_family(family);
            let problem = t.validate(h100).unwrap();
            let all = rank_every_config(&t, h100).unwrap();
            for (i, h) in all.iter().enumerate() {
                assert_eq!(h.rank, i + 1);
                check_config(family.rules(), &h.tile, &problem, h100).unwrap();
            }
            assert!(
                all.windows(2)
                    .all(|w| w[0].prediction.time_us <= w[1].prediction.time_us)
            );
            // The policy prunes and keeps one depth and order per structure, so each of its
            // picks is a point of the whole space with the same prediction, and the whole
            // space's best is at least as fast as its first pick.
            let top = recommend_hints(&t, h100, TopK::DEFAULT).unwrap();
            for h in &top {
                let same = all.iter().find(|a| a.tile == h.tile).unwrap_or_else(|| {
                    panic!("{family} {m}x{n}x{k}: {:?} not in the whole space", h.tile)
                });
                assert_eq!(same.prediction.time_us, h.prediction.time_us);
            }
            assert!(all[0].prediction.time_us <= top[0].prediction.time_us);
        }
    }
}

#[test]
fn a_space_with_no_legal_point_is_an_error() {
    let db = HardwareDb::embedded().unwrap();
    let a100 = db.get("a100").unwrap();
    let t = MatmulTemplate::new(4096, 4096, 4096)
        .with_dtype(DType::Bf16)
        .with_family(Family::CudaSm90);
    assert!(rank_every_config(&t, a100).is_err());
}
