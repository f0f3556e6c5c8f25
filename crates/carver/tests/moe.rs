//! The fused-MoE recommender: file names, legality, whole-file keys and invariants.

use carver::TopK;
use carver::moe::{
    BATCH_SIZES, Engine, MoeConfig, MoeDtype, MoeTemplate, Routing, are_twins, check_moe_config,
    config_file_name, exceeds_registers, legal_space, recommend_moe, recommend_moe_file,
    whole_space,
};
use carver_arch::HardwareDb;
use proptest::prelude::*;

fn db() -> HardwareDb {
    HardwareDb::embedded().unwrap()
}

/// `t` in fp8 w8a8 with [128, 128] block scales (DeepSeek-V3's and Qwen3's fp8 checkpoints).
fn block_scaled_fp8(t: MoeTemplate) -> MoeTemplate {
    t.with_dtype(MoeDtype::Fp8W8a8)
        .with_block_shape(Some([128, 128]))
}

#[test]
fn file_names_are_the_engines_own() {
    let db = db();
    let h100 = db.get("h100").unwrap();
    let h200 = db.get("h200").unwrap();
    let mixtral = MoeTemplate::new(8, 2, 4096, 14336)
        .with_tp(2)
        .validate(h100)
        .unwrap();
    assert_eq!(
        config_file_name(&mixtral, h100, Engine::Vllm),
        "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json"
    );
    let ds = block_scaled_fp8(MoeTemplate::new(256, 8, 7168, 2048))
        .validate(h200)
        .unwrap();
    assert_eq!(
        config_file_name(&ds, h200, Engine::Vllm),
        "E=256,N=2048,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"
    );
    assert_eq!(
        config_file_name(&ds, h200, Engine::Sglang),
        "E=256,N=2048,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"
    );
    let per_tensor = MoeTemplate::new(128, 8, 4096, 1536)
        .with_dtype(MoeDtype::Fp8W8a8)
        .validate(h100)
        .unwrap();
    assert_eq!(
        config_file_name(&per_tensor, h100, Engine::Vllm),
        "E=128,N=1536,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
    );
}

#[test]
fn a_whole_file_has_exactly_the_ladder() {
    let db = db();
    let h100 = db.get("h100").unwrap();
    let t = MoeTemplate::new(8, 2, 4096, 14336).with_tp(2);
    let start = std::time::Instant::now();
    let file = recommend_moe_file(&t, h100, None, TopK::DEFAULT).unwrap();
    let elapsed = start.elapsed();
    let keys: Vec<u64> = file.batches.iter().map(|b| b.m).collect();
    assert_eq!(keys, BATCH_SIZES);
    assert!(file.batches.iter().all(|b| b.hints.len() == 8));
    // Debug builds are ~20x slower than release (11 ms there); this only catches blow-ups.
    assert!(elapsed.as_secs_f64() < 5.0, "{elapsed:?}");
}

#[test]
fn block_quantized_fp8_keeps_vllms_filter() {
    let db = db();
    let h100 = db.get("h100").unwrap();
    let p = block_scaled_fp8(MoeTemplate::new(256, 8, 7168, 2048))
        .validate(h100)
        .unwrap();
    let legal = legal_space(&p, h100);
    assert!(!legal.is_empty());
    assert!(
        legal
            .iter()
            .all(|c| c.block_k % 128 == 0 && c.block_n % 128 == 0)
    );
}

#[test]
fn shared_memory_bounds_the_space() {
    let db = db();
    let h100 = db.get("h100").unwrap();
    let p = MoeTemplate::new(8, 2, 4096, 14336).validate(h100).unwrap();
    for c in whole_space() {
        let fits = c.smem_bytes(&p) <= h100.smem_per_block();
        assert_eq!(check_moe_config(&c, &p, h100).is_ok(), fits, "{c:?}");
    }
}

#[test]
fn spilling_configs_stay_in_the_space_but_are_never_recommended() {
    let db = db();
    let h100 = db.get("h100").unwrap();
    let t = MoeTemplate::new(8, 2, 4096, 14336).with_tp(2);
    let p = t.validate(h100).unwrap();
    // A 256 x 256 fp32 accumulator over 4 warps is 512 registers a thread: Triton spills it.
    let spills: Vec<_> = legal_space(&p, h100)
        .into_iter()
        .filter(|c| exceeds_registers(c, &p, h100))
        .collect();
    assert!(
        spills
            .iter()
            .any(|c| c.block_m == 256 && c.block_n == 256 && c.num_warps == 4)
    );
    assert!(
        !spills
            .iter()
            .any(|c| c.block_m == 16 && c.block_n == 64 && c.num_warps == 4)
    );
    let file = recommend_moe_file(&t, h100, None, TopK::new(64).unwrap()).unwrap();
    for b in &file.batches {
        assert_eq!(b.hints.len(), 64);
        for h in &b.hints {
            assert!(
                !exceeds_registers(&h.config, &p, h100),
                "M {}: {:?}",
                b.m,
                h.config
            );
        }
    }
}

#[test]
fn block_scaled_fp8_counts_the_product_and_the_scales() {
    // Compiled by Triton 3.6 for sm_90 in fp8 block mode (and measured on the H100,
    // benches/moe/runs/h100-2026-11-25-fp8-qwen3-30b): 128 x 128 with 4 warps spills (255
    // registers, 96 spilled); 128 x 128 with 8 warps does not spill but reaches 255 registers,
    // its 34 scale loads a thread partly issued after the product's wait; 64 x 128 with 4 warps
    // needs 231 and 64 x 128 with 8 warps 163. In bf16 none of them comes near the limit.
    let db = db();
    let h100 = db.get("h100").unwrap();
    let t = MoeTemplate::new(128, 8, 2048, 768);
    let bf16 = t.validate(h100).unwrap();
    let fp8 = block_scaled_fp8(t).validate(h100).unwrap();
    let config = |block_m, block_n, num_warps| carver::moe::MoeConfig {
        block_m,
        block_n,
        block_k: 128,
        group_m: 1,
        num_warps,
        num_stages: 3,
    };
    assert!(exceeds_registers(&config(128, 128, 4), &fp8, h100));
    assert!(exceeds_registers(&config(128, 128, 8), &fp8, h100));
    assert!(!exceeds_registers(&config(64, 128, 4), &fp8, h100));
    assert!(!exceeds_registers(&config(64, 128, 8), &fp8, h100));
    assert!(!exceeds_registers(&config(32, 256, 8), &fp8, h100));
    for (m, n, w) in [(128, 128, 4), (128, 128, 8), (64, 128, 4)] {
        assert!(!exceeds_registers(&config(m, n, w), &bf16, h100));
    }
}

#[test]
fn group_size_twins_do_not_crowd_the_top_k() {
    let db = db();
    let h100 = db.get("h100").unwrap();
    let t = MoeTemplate::new(8, 2, 4096, 14336).with_tp(2);
    // At M = 1 every expert has one row block: GROUP_SIZE_M changes nothing the model prices.
    let hints = recommend_moe(&t, h100, 1, TopK::new(8).unwrap()).unwrap();
    for (i, h) in hints.iter().enumerate() {
        for a in &hints[..i] {
            assert!(
                !are_twins((a.time_us, &a.config), (h.time_us, &h.config)),
                "{:?} and {:?}",
                a.config,
                h.config
            );
        }
    }
    // The file's choice is the fastest predicted config, twins or not.
    let all = recommend_moe(&t, h100, 1, TopK::new(1024).unwrap()).unwrap();
    let fastest = all.iter().map(|h| h.time_us).fold(f64::INFINITY, f64::min);
    assert_eq!(hints[0].time_us, fastest);
    assert_eq!(hints[0].config, all[0].config);
}

/// Where the model prices a tile's 4- and 8-warp forms alike, the 8-warp form ranks first:
/// each of its threads holds half the accumulators and gathered row pointers (Triton 3.6:
/// 116 registers against 214 for 128 x 128 x 64), and the stored sweeps time it faster.
#[test]
fn warp_ties_go_to_more_warps() {
    let db = db();
    let h200 = db.get("h200").unwrap();
    // Mixtral-8x7B at 512 tokens: every block runs a long K loop, so no block's own path binds,
    // and 128 x 128 x 64's two warp counts are priced alike.
    let t = MoeTemplate::new(8, 2, 4096, 14336);
    let hints = recommend_moe(&t, h200, 512, TopK::new(1024).unwrap()).unwrap();
    let mut tied_tiles = Vec::new();
    for (i, h) in hints.iter().enumerate() {
        for later in &hints[i + 1..] {
            // The same config but for its warp count.
            let but_warps = |c: &MoeConfig| MoeConfig { num_warps: 0, ..*c };
            if but_warps(&h.config) == but_warps(&later.config)
                && h.time_us == later.time_us
                && h.config.num_warps != later.config.num_warps
            {
                tied_tiles.push((h.config.block_m, h.config.block_n, h.config.block_k));
                assert!(
                    h.config.num_warps > later.config.num_warps,
                    "{:?} ranked before {:?}",
                    h.config,
                    later.config
                );
            }
        }
    }
    assert!(
        tied_tiles.contains(&(128, 128, 64)),
        "128 x 128 x 64 has no tie between warp counts to check (ties: {tied_tiles:?})"
    );
}

#[test]
fn bad_layers_name_their_field() {
    let db = db();
    let h100 = db.get("h100").unwrap();
    let cases = [
        (MoeTemplate::new(8, 9, 4096, 14336), "topk"),
        (MoeTemplate::new(0, 1, 4096, 14336), "experts"),
        (
            MoeTemplate::new(8, 2, 4096, 14336).with_tp(3),
            "intermediate",
        ),
        (
            MoeTemplate::new(8, 2, 4096, 14336).with_block_shape(Some([128, 128])),
            "block_shape",
        ),
        (
            MoeTemplate::new(8, 2, 4096, 14336)
                .with_dtype(MoeDtype::Fp8W8a8)
                .with_block_shape(Some([64, 64])),
            "block_shape",
        ),
        (
            MoeTemplate::new(2, 1, 4096, 14336)
                .with_routing(Routing::Histogram(vec![1.0, f64::NAN])),
            "routing",
        ),
        (
            MoeTemplate::new(2, 1, 4096, 14336).with_routing(Routing::Histogram(vec![1.0])),
            "routing",
        ),
    ];
    for (t, field) in cases {
        let err = t.validate(h100).unwrap_err().to_string();
        assert!(err.contains(field), "{err}");
    }
    assert!(
        "int4"
            .parse::<MoeDtype>()
            .unwrap_err()
            .to_string()
            .contains("dtype")
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn every_recommendation_is_legal_and_padded_rows_cover_the_tokens(
        experts in 1u32..300,
        topk_frac in 0.0f64..1.0,
        hidden in prop::sample::select(vec![1024u64, 2048, 4096, 7168]),
        inter in prop::sample::select(vec![512u64, 1536, 2048, 14336]),
        m in 1u64..5000,
        fp8 in any::<bool>(),
    ) {
        let db = db();
        let h100 = db.get("h100").unwrap();
        let topk = 1 + ((f64::from(experts - 1)) * topk_frac) as u32;
        let t = MoeTemplate::new(experts, topk, hidden, inter)
            .with_dtype(if fp8 { MoeDtype::Fp8W8a8 } else { MoeDtype::Bf16 });
        let p = t.validate(h100).unwrap();
        let hints = recommend_moe(&t, h100, m, TopK::new(4).unwrap()).unwrap();
        prop_assert!(!hints.is_empty());
        for h in &hints {
            prop_assert!(h.config.in_space());
            prop_assert!(check_moe_config(&h.config, &p, h100).is_ok());
            prop_assert!(h.time_us.is_finite() && h.time_us > 0.0);
            let tokens = (m * u64::from(topk)) as f64;
            prop_assert!(h.gate_up.padded_rows >= tokens * (1.0 - 1e-9), "{} < {tokens}", h.gate_up.padded_rows);
        }
        // The fastest first; twins of a config ranked above them come after every config that
        // has none; each part in time order.
        prop_assert!(hints.iter().all(|h| hints[0].time_us <= h.time_us + 1e-9));
        let twin_above: Vec<bool> = (0..hints.len())
            .map(|i| hints[..i].iter().any(|a| are_twins((a.time_us, &a.config), (hints[i].time_us, &hints[i].config))))
            .collect();
        prop_assert!(twin_above.windows(2).all(|w| w[0] <= w[1]), "{twin_above:?}");
        for part in [false, true] {
            let times: Vec<f64> = hints.iter().zip(&twin_above).filter(|(_, t)| **t == part).map(|(h, _)| h.time_us).collect();
            prop_assert!(times.windows(2).all(|w| w[0] <= w[1] + 1e-9));
        }
    }
}
