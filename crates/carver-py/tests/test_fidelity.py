"""benches/triton/fidelity.py, the harness's model-fidelity report, against the package's own
`carver.price` (the same model the harness scores)."""

import importlib.util

import pytest

import carver
from conftest import REPO


def load_fidelity():
    spec = importlib.util.spec_from_file_location("fidelity", REPO / "benches" / "triton" / "fidelity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


F = load_fidelity()


def test_ranks_share_ties_and_spearman_matches_known_values():
    assert F.ranks([10, 20, 20, 5]) == [2.0, 3.5, 3.5, 1.0]
    assert F.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert F.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # d = (0, 0, 1, -1): 1 - 6 * 2 / (4 * 15) = 0.8
    assert F.spearman([1, 2, 3, 4], [1, 2, 4, 3]) == pytest.approx(0.8)
    assert F.spearman([1, 2], [2, 1]) is None
    assert F.spearman([1, 1, 1], [1, 2, 3]) is None
    with pytest.raises(ValueError):
        F.spearman([1, 2, 3], [1, 2])


def test_median_abs_rel_error():
    assert F.median_abs_rel_error([110, 90, 300], [100, 100, 100]) == pytest.approx(0.1)


def sweep_shape(m, n, k, scale, reverse=False):
    hints = carver.recommend(m, n, k, arch="h100", target="triton", topk=12)
    times = [h.prediction.time_us * scale for h in hints]
    if reverse:
        times = times[::-1]
    configs = [{"config": h.config, "status": "timed", "final_us": t} for h, t in zip(hints, times)]
    configs.append({"config": hints[0].config, "status": "compile_failed", "final_us": None})
    return {"name": f"s{m}", "M": m, "N": n, "K": k, "configs": configs}


def test_a_sweep_the_model_orders_exactly_scores_one_and_its_error_is_the_scale():
    shape = sweep_shape(4096, 4096, 4096, scale=2.0)
    row = F.shape_fidelity(shape, carver.price, "h100")
    assert row["configs"] == 12 and row["priced"] == 12
    assert row["spearman"] == pytest.approx(1.0)
    assert row["median_abs_rel_error"] == pytest.approx(0.5)
    flipped = F.shape_fidelity(sweep_shape(4096, 4096, 4096, 1.0, reverse=True), carver.price, "h100")
    assert flipped["spearman"] < 0
    both = F.sweep_fidelity({"shapes": [shape, sweep_shape(512, 1024, 2048, 2.0)]}, carver.price, "h100")
    assert both["median_spearman"] == pytest.approx(1.0) and len(both["shapes"]) == 2
