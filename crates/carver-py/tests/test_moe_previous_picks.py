"""benches/moe/top1_picks.py writes the file the MoE harness's --previous reads: every layer of a
model set, every batch size of vLLM's ladder, carver's first pick as a config key."""

import json
import os
import subprocess
import sys

import carver

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MOE_BENCH = os.path.join(ROOT, "benches", "moe")
sys.path.insert(0, MOE_BENCH)

import harness  # noqa: E402  (stdlib only at import time)


def test_top1_picks_are_carvers_first_picks_in_the_harness_format(tmp_path):
    out = tmp_path / "picks.json"
    subprocess.run([sys.executable, os.path.join(MOE_BENCH, "top1_picks.py"), "--set", "holdout6",
                    "--arch", "h100", "--dtype", "fp8_w8a8", "--block-shape", "128,128", "--out", str(out)],
                   check=True, capture_output=True, text=True)
    picks = json.loads(out.read_text())
    problems = harness.load_problems(os.path.join(MOE_BENCH, "models.json"), "holdout6", None)
    assert sorted(picks) == sorted(p["label"] for p in problems)
    for p in problems:
        by_m = picks[p["label"]]
        assert sorted(int(m) for m in by_m) == sorted(harness.BATCH_SIZES)
        rec = carver.recommend_moe(p["experts"], p["topk"], p["hidden"], p["intermediate"], tp=p["tp"],
                                   dtype="fp8_w8a8", block_shape=[128, 128], arch="h100",
                                   batch_sizes=[4096], candidates=1)
        assert harness.parse_config_key(by_m["4096"]) == rec.batches[0].hints[0].config


def test_previous_picks_name_only_configs_of_the_harness_format():
    for name in os.listdir(os.path.join(MOE_BENCH, "picks")):
        with open(os.path.join(MOE_BENCH, "picks", name)) as f:
            for by_m in json.load(f).values():
                for key in by_m.values():
                    assert set(harness.parse_config_key(key)) == {
                        "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"}


def test_every_model_set_is_one_the_kernel_can_run():
    for name in harness.MODEL_SETS:
        assert harness.load_problems(os.path.join(MOE_BENCH, "models.json"), name, None), name


def test_a_layer_the_kernel_cannot_run_is_refused_before_any_gpu_time(tmp_path):
    # GPT-OSS-120B at TP 8: N = 360 is not a multiple of 16 (the kernel's vectorised loads).
    doc = {name: [] for name in harness.MODEL_SETS}
    doc["main"] = [{"name": "gpt-oss-120b", "experts": 128, "topk": 4, "hidden": 2880,
                    "intermediate": 2880, "tp": [8]}]
    path = tmp_path / "models.json"
    path.write_text(json.dumps(doc))
    try:
        harness.load_problems(str(path), "main", None)
    except harness.FatalError as e:
        assert "gpt-oss-120b/tp8" in str(e) and "multiple of 16" in str(e)
    else:
        raise AssertionError("a layer with N 360 was accepted")
