"""benches/triton/pool_replay.py: the GPU a run belongs to, and how shape runs are pooled."""

import importlib.util
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SPEC = importlib.util.spec_from_file_location("pool_replay", ROOT / "benches/triton/pool_replay.py")
pr = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(pr)


def test_a_runs_gpu_is_the_start_of_its_directory_name():
    assert pr.arch_of("benches/triton/runs/h200-2026-11-28-holdout24") == "h200"
    assert pr.arch_of("benches/triton/runs/h100-2026-11-22-sweep3") == "h100"


def test_pooling_takes_geomeans_and_worsts_over_every_shape_run():
    n, top1, worst1, best, worst_best = pr.pool([("h200", 1.0, 1.0), ("h100", 0.25, 0.5)])
    assert n == 2 and top1 == pytest.approx(0.5) and worst1 == 0.25
    assert best == pytest.approx(math.sqrt(0.5)) and worst_best == 0.5


def test_no_stored_sweep_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="no triton_sweep"):
        pr.main(["carver", "--runs", str(tmp_path)])
