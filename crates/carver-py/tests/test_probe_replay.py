"""benches/moe/probe_replay.py scores carver's per-GEMM predictions against probe files: the
config pairs it orders as measured (ties left out) and its top-1 among the probed configs."""

import json
import os
import sys

import carver
from carver.moe_kernel import config_key

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "benches", "moe"))

import probe_replay  # noqa: E402

ARGS = {"experts": 256, "topk": 8, "hidden": 7168, "n": 128, "tokens": 1}
CONFIGS = [
    {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
     "num_warps": 4, "num_stages": s}
    for n, s in ((32, 5), (64, 4), (128, 3))
]


def probe_file(tmp_path, times):
    """A probe file of CONFIGS with (gate/up, down) microseconds `times`, in probe_gemms' format."""
    rows = [{"config": c, "gate_up_us": g, "down_us": d} for c, (g, d) in zip(CONFIGS, times)]
    path = tmp_path / "probe.json"
    path.write_text(json.dumps({"args": dict(ARGS, dtype="bf16"), "rows": rows}))
    return str(path)


def test_pairs_are_ordered_as_the_model_prices_them_and_ties_are_left_out(tmp_path):
    priced = probe_replay.probe_points(probe_file(tmp_path, [(10, 10)] * 3), "h200")[1]
    predicted = {k: p for k, _, p in priced}
    order = sorted(predicted, key=lambda k: predicted[k][0])
    # Measured in the model's order: every gate/up pair is ordered as measured.
    times = {k: (10.0 * (i + 1), 5.0) for i, k in enumerate(order)}
    points = [(k, times[k], predicted[k]) for k in order]
    assert probe_replay.orderings(points, (0,)) == (3, 3)
    # The reverse order: none is; equal down GEMMs are ties, left out.
    reverse = [(k, (10.0 * (3 - i), 5.0), predicted[k]) for i, k in enumerate(order)]
    assert probe_replay.orderings(reverse, (0,)) == (0, 3)
    assert probe_replay.orderings(reverse, (1,)) == (0, 0)


def test_the_layer_top1_is_the_best_measured_over_the_models_pick(tmp_path, capsys):
    path = probe_file(tmp_path, [(20, 10), (25, 10), (40, 10)])
    probe_replay.main([path])
    out = capsys.readouterr().out
    rec = carver.recommend_moe(256, 8, 7168, 128, arch="h200", batch_sizes=[1], candidates=1024)
    rank = {config_key(h.config): h.predicted_us for h in rec.batches[0].hints}
    pick = min((config_key(c) for c in CONFIGS), key=rank.get)
    sums = dict(zip((config_key(c) for c in CONFIGS), (30, 35, 50)))
    assert f"top-1 {30 / sums[pick]:.3f} ({pick})" in out
    assert out.strip().splitlines()[-1].startswith("all: ordered as measured:")
