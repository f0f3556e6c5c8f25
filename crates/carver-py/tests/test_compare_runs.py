"""benches/sm90/compare_runs.py, the comparison of two tune runs of one device call: which
configurations it pairs, how it groups them, and cuBLAS taken as the faster of its two timings."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SPEC = importlib.util.spec_from_file_location("compare_runs", ROOT / "benches/sm90/compare_runs.py")
cr = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(cr)


def config(block_m, block_n=64, split_k=1):
    return dict(block_m=block_m, block_n=block_n, block_k=64, stages=8, consumers=1, group_m=1,
                cluster_m=1, persistent=False, split_k=split_k, swap_ab=True)


def result(name, m, cublas, candidates):
    times = [t for _, t in candidates if t]
    return {"shape": {"name": name, "m": m, "n": 512, "k": 4096},
            "cublas_time_us": cublas, "winner_time_us": min(times) if times else None,
            "candidates": [{"config": c, "measured_time_us": t} for c, t in candidates]}


def write(directory, results, name="set.json"):
    directory.mkdir(exist_ok=True)
    (directory / name).write_text(json.dumps({"results": results}))


def test_pairs_only_configurations_timed_in_both_runs_and_groups_them(tmp_path):
    write(tmp_path / "new", [result("mid", 96, 10.0, [(config(96), 8.0), (config(64), 9.0),
                                                      (config(32), None)])])
    write(tmp_path / "old", [result("mid", 96, 12.0, [(config(96), 10.0), (config(32), 20.0),
                                                      (config(16), 5.0)])])
    paired, tuned = cr.compare(tmp_path / "new", tmp_path / "old", "streamed")
    # Only 96-row tiles ran in both; one tile row along M: streamed.
    assert paired == {"streamed": [pytest.approx(10.0 / 8.0)]}
    name, new, old = tuned[0]
    # cuBLAS is the faster of its two timings (10 us): the new winner 8 us, the old one 5 us.
    assert name == "set.json" and new == [(10.0 / 8.0, "mid")] and old == [(10.0 / 5.0, "mid")]


def test_groups_say_which_configurations_a_change_touches():
    shape = {"m": 200, "n": 512}
    assert cr.group_of(shape, config(96), "streamed") == "not streamed"
    assert cr.group_of(shape, config(208), "streamed") == "streamed"
    assert cr.group_of(shape, config(96, block_n=512), "streamed") == "streamed"
    assert cr.group_of(shape, config(96, split_k=3), "split") == "split"
    assert cr.group_of(shape, config(96), "swap") == "swapped"
    assert cr.group_of(shape, config(96), "none") == "all"


def test_runs_with_no_set_in_common_are_refused(tmp_path):
    write(tmp_path / "new", [], "a.json")
    write(tmp_path / "old", [], "b.json")
    with pytest.raises(SystemExit, match="no set of"):
        cr.main([str(tmp_path / "new"), str(tmp_path / "old")])
