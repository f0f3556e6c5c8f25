"""benches/sm90/reference_summary.py: where the model's picks land against a `carver tune
--reference` run's reduced space."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SPEC = importlib.util.spec_from_file_location(
    "reference_summary", ROOT / "benches/sm90/reference_summary.py")
rs = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(rs)


def run(tmp_path, shapes):
    results = [{"shape": {"name": name, "m": 1, "n": 4096, "k": 4096},
                "candidates": [{"model_rank": rank, "measured_time_us": t,
                                "predicted_time_us": t and 2 * t} for rank, t in cands]}
               for name, cands in shapes]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"results": results}))
    return str(path)


def test_ratios_are_the_reference_best_over_the_picks(tmp_path, capsys):
    path = run(tmp_path, [
        # Top-1 10 us, rank 2 8 us, the best of the rest (rank 9) 6 us; rank 3 failed.
        ("a", [(1, 10.0), (2, 8.0), (3, None), (9, 6.0), (10, 7.0)]),
        # The top-1 is the best.
        ("b", [(1, 5.0), (2, 6.0), (9, 5.5)]),
        # No reference beyond the picks: not a measurement, left out.
        ("c", [(1, 5.0), (2, 6.0)]),
        # Top-1 failed: left out.
        ("d", [(2, 6.0), (9, 5.0)]),
    ])
    rows = rs.main(["--topk", "8", path])
    assert [(r[0], r[4], r[7]) for r in rows] == [("a", 4, 9), ("b", 3, 1)]
    assert rows[0][5] == pytest.approx(0.6) and rows[0][6] == pytest.approx(0.75)
    assert rows[1][5] == rows[1][6] == 1.0
    assert "over 2 shapes" in capsys.readouterr().out


def test_runs_without_a_measurement_are_refused(tmp_path):
    with pytest.raises(SystemExit, match="no run holds"):
        rs.main([run(tmp_path, [("c", [(1, 5.0)])])])


def test_fidelity_compares_every_timed_prediction_with_its_measurement(tmp_path, capsys):
    # Predictions are twice the measured times: ranked alike, 100% off.
    path = run(tmp_path, [("a", [(1, 10.0), (2, 8.0), (3, None), (9, 6.0), (10, 7.0)]),
                          ("few", [(1, 5.0), (2, 6.0)])])
    rows = rs.shape_fidelity(path)
    assert [(r[0], r[1]) for r in rows] == [("a", 4)]
    assert rows[0][2] == pytest.approx(1.0) and rows[0][3] == pytest.approx(1.0)
    rs.main([path])
    assert "spearman 1.000, median |error| 100.0%" in capsys.readouterr().out


def test_another_binarys_picks_are_looked_up_in_the_run(tmp_path, capsys):
    cfg = lambda bm, group: {"block_m": bm, "block_n": 128, "block_k": 64, "stages": 4,  # noqa: E731
                             "consumers": 1, "group_m": group, "cluster_m": 1, "persistent": False}
    results = [{"shape": {"name": "a", "m": 64, "n": 4096, "k": 4096}, "dtype": "bf16",
                "candidates": [{"model_rank": 1, "config": cfg(64, 1), "measured_time_us": 10.0},
                               {"model_rank": 9, "config": cfg(128, 8), "measured_time_us": 8.0},
                               {"model_rank": 10, "config": dict(cfg(192, 8), split_k=1),
                                "measured_time_us": 9.0}]}]
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"results": results}))
    # The other binary picks 192 (timed, with split_k written), 128 in group 1 (timed in group 8
    # only), and 256 (never timed).
    hints = [{"config": cfg(192, 8)}, {"config": cfg(128, 1)}, {"config": cfg(256, 8)}]
    fake = tmp_path / "carver"
    fake.write_text("#!/usr/bin/env python3\nimport json\n"
                    f"print(json.dumps({{'results': [{{'hints': {hints!r}}}]}}))\n")
    fake.chmod(0o755)
    assert rs.other_picks(str(run), 3, str(fake), "h200") == [("a", 8.0 / 9.0, 8.0 / 9.0, 2)]
    assert rs.other_picks(str(run), 3, str(fake), "h200", any_group=True) == [("a", 8.0 / 9.0, 1.0, 1)]
    rs.main(["--carver", str(fake), "--any-group", str(run)])
    assert "1 picks not timed (a pick in another group stands for one not timed)" in capsys.readouterr().out
