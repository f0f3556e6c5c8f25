//! What a block's start costs carver's own Hopper kernel (docs/RESULTS.md, "A block's start";
//! measured with `benches/sm90/block_start.py` on the H200): a launched grid pays every block's
//! start each wave, a persistent grid pays it once and runs on into its next tile's stages.
//! The tiles and grids are the probe's: W waves of one block per SM, 132 x W tiles.

use carver::{Family, MatmulTemplate, Prediction, predict_native};
use carver_arch::HardwareDb;
use serde_json::{Value, json};

/// The H200's predicted time of `config` on the probe's grid of `waves` waves of `iters`
/// iterations (block K 64).
fn priced(config: &Value, waves: u64, iters: u64) -> Prediction {
    let db = HardwareDb::embedded().unwrap();
    let (bm, bn) = (
        config["block_m"].as_u64().unwrap(),
        config["block_n"].as_u64().unwrap(),
    );
    let (m, n) = if config["swap_ab"] == json!(true) {
        (bm, bn * 132 * waves)
    } else {
        (bm * 11 * waves, bn * 12)
    };
    let template = MatmulTemplate::new(m, n, 64 * iters).with_family(Family::CudaSm90);
    predict_native(&template, db.get("h200").unwrap(), config)
        .unwrap()
        .1
}

/// Microseconds one more wave adds, from 2 to 8 waves.
fn per_wave(config: &Value, iters: u64) -> f64 {
    (priced(config, 8, iters).time_us - priced(config, 2, iters).time_us) / 6.0
}

fn tile_128x128(persistent: bool) -> Value {
    json!({"block_m": 128, "block_n": 128, "block_k": 64, "stages": 4, "consumers": 1,
        "group_m": 8, "cluster_m": 1, "persistent": persistent})
}

fn swapped_16x128(persistent: bool) -> Value {
    json!({"block_m": 16, "block_n": 128, "block_k": 64, "stages": 8, "consumers": 1,
        "group_m": 1, "cluster_m": 1, "swap_ab": true, "persistent": persistent})
}

#[test]
fn a_launched_grid_pays_every_blocks_start_each_wave() {
    // Measured: a wave of launched 128 x 128 blocks took 1.01 us more than a wave of tiles of the
    // persistent grid (1.61 us for the swapped 16 x 128); the model without the start priced
    // 0.19 and 0.22 us.
    for (tile, measured) in [
        (tile_128x128 as fn(bool) -> Value, 1.01),
        (swapped_16x128, 1.61),
    ] {
        for iters in [1, 4, 16] {
            let gap = per_wave(&tile(false), iters) - per_wave(&tile(true), iters);
            assert!(
                gap > 0.7 && gap < 1.5 * measured,
                "{}: {gap} us a wave at {iters} iterations",
                tile(false)
            );
        }
    }
}

#[test]
fn a_persistent_grid_of_small_tiles_pays_no_fill_per_tile() {
    // Measured: 0.66 us a wave of persistent 16 x 128 tiles at one iteration (0.49 us of it the
    // iteration); the model that exposed the next tile's fill priced 1.45.
    let wave = per_wave(&swapped_16x128(true), 1);
    assert!(wave < 0.9, "{wave} us");
}

#[test]
fn the_start_is_latency_in_the_breakdown() {
    // Eight waves of launched blocks expose eight starts; the persistent grid one.
    let launched = priced(&tile_128x128(false), 8, 4);
    let persistent = priced(&tile_128x128(true), 8, 4);
    let start_us = 1_600.0 / 1830.0;
    assert!(
        launched.breakdown.latency_us - persistent.breakdown.latency_us > 6.0 * start_us,
        "{} against {}",
        launched.breakdown.latency_us,
        persistent.breakdown.latency_us
    );
}
