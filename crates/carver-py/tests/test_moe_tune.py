"""carver.moe_tune without a GPU or PyTorch: the tuning loop with an injected recommender and
measurer, the resumable state, the vLLM file, argument checks and the progress display."""

import io
import json
import os

import pytest

from carver import moe_tune as mt
from carver.moe_kernel import config_key, default_config, tuner_space

DEV = "NVIDIA_H100_80GB_HBM3"


def cfg(bm=64, bn=64, bk=64, g=1, w=4, s=3):
    return {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": g,
            "num_warps": w, "num_stages": s}


CANDS = [cfg(16), cfg(32), cfg(64), cfg(128)]


class FakeRec:
    def __init__(self):
        self.calls = []

    def __call__(self, problem, arch, batch_sizes, candidates):
        self.calls.append((arch, list(batch_sizes), candidates))
        return {"file_name": "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json", "device_name": DEV,
                "seconds": 0.001,
                "batches": {m: [{"config": c, "predicted_us": 1.0} for c in CANDS[:candidates]] for m in batch_sizes}}


class FakeMeas:
    """The config whose BLOCK_SIZE_M is closest to m (at least 16) is fastest."""
    device_name = DEV
    tol = 2e-2

    def __init__(self, fail_at=None, wrong=()):
        self.timed, self.prepared, self.fail_at, self.wrong = [], [], fail_at, set(wrong)

    def prepare(self, configs):
        self.prepared.append(list(configs))
        return {config_key(c): {"ok": True} for c in configs}

    def time(self, m, configs):
        if self.fail_at == m:
            raise KeyboardInterrupt
        self.timed.append(m)
        return [10.0 + abs(c["BLOCK_SIZE_M"] - max(16, m)) for c in configs]

    def check(self, m, c):
        return 0.5 if config_key(c) in self.wrong else 1e-3


def problem(**kw):
    args = dict(experts=8, topk=2, hidden=4096, intermediate=14336, tp=2)
    args.update(kw)
    return mt.Problem(**args)


def run(tmp_path, meas=None, rec=None, **kw):
    kw.setdefault("batch_sizes", [1, 16, 64, 256])
    kw.setdefault("candidates", 4)
    kw.setdefault("explore", 0)
    return mt.tune(problem(), str(tmp_path), recommender=rec or FakeRec(), measurer=meas or FakeMeas(),
                   progress_stream=io.StringIO(), **kw)


def test_writes_vllm_file(tmp_path):
    res = run(tmp_path)
    assert os.path.basename(res["path"]) == "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json"
    with open(res["path"]) as f:
        doc = json.load(f)
    assert list(doc) == ["1", "16", "64", "256"]
    assert doc["1"]["BLOCK_SIZE_M"] == 16 and doc["64"]["BLOCK_SIZE_M"] == 64 and doc["256"]["BLOCK_SIZE_M"] == 128
    assert all(set(v) == set(mt.SIX) for v in doc.values())
    assert os.path.exists(res["state_path"]) and not [p for p in os.listdir(tmp_path) if ".tmp." in p]


def test_resume_skips_finished(tmp_path):
    meas = FakeMeas(fail_at=64)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, meas=meas)
    assert meas.timed == [1, 16]
    state = json.load(open(tmp_path / "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json.state.json"))
    assert sorted(state["done"], key=int) == ["1", "16"]
    meas2, rec2 = FakeMeas(), FakeRec()
    res = run(tmp_path, meas=meas2, rec=rec2)
    assert meas2.timed == [64, 256]
    assert rec2.calls[0][1] == [64, 256]
    assert sorted(res["results"]) == [1, 16, 64, 256]
    # a third run has nothing to do and asks carver nothing
    meas3, rec3 = FakeMeas(), FakeRec()
    run(tmp_path, meas=meas3, rec=rec3)
    assert meas3.timed == [] and rec3.calls == []


def test_restart_discards_state(tmp_path):
    run(tmp_path)
    meas = FakeMeas()
    run(tmp_path, meas=meas, restart=True)
    assert meas.timed == [1, 16, 64, 256]


def test_refuses_other_problem_state(tmp_path):
    res = run(tmp_path)
    st = json.load(open(res["state_path"]))
    st["problem"]["topk"] = 4
    json.dump(st, open(res["state_path"], "w"))
    with pytest.raises(mt.StateMismatchError, match="topk: state has 4, this run 2"):
        run(tmp_path)


def test_refuses_garbage_state(tmp_path):
    res = run(tmp_path)
    open(res["state_path"], "w").write("{not json")
    with pytest.raises(mt.TuneError, match="--restart"):
        run(tmp_path)


def test_wrong_winner_is_skipped(tmp_path):
    res = run(tmp_path, meas=FakeMeas(wrong=[config_key(cfg(16))]), batch_sizes=[1])
    assert res["results"][1]["winner"]["BLOCK_SIZE_M"] == 32


def test_all_wrong_is_an_error(tmp_path):
    with pytest.raises(mt.TuneError, match="no candidate"):
        run(tmp_path, meas=FakeMeas(wrong=[config_key(c) for c in CANDS]), batch_sizes=[1])


def test_precompiles_all_candidates_once(tmp_path):
    meas = FakeMeas()
    run(tmp_path, meas=meas)
    assert len(meas.prepared) == 1 and len(meas.prepared[0]) == 16


def test_arch_from_device(tmp_path):
    rec = FakeRec()
    run(tmp_path, rec=rec)
    assert rec.calls[0][0] == "h100"
    assert mt.arch_for_device("NVIDIA_H200") == "h200"
    with pytest.raises(mt.InvalidInputError, match="--arch"):
        mt.arch_for_device("Some_GPU")


@pytest.mark.parametrize("kw,msg", [
    (dict(topk=9), "topk \\(9\\) is greater than experts"),
    (dict(experts=0), "experts must be >= 1"),
    (dict(tp=3), "not divisible by tp"),
    (dict(dtype="int4"), "dtype 'int4' is not supported"),
    (dict(block_shape=[128, 128]), "only for dtype fp8_w8a8"),
    (dict(dtype="fp8_w8a8", block_shape=[100, 128]), "powers of two"),
    (dict(hidden=4100), "multiple of 16"),
    (dict(experts=2.5), "must be an integer"),
])
def test_bad_problem(kw, msg):
    with pytest.raises(mt.InvalidInputError, match=msg):
        problem(**kw)


def test_bad_tune_arguments(tmp_path):
    with pytest.raises(mt.InvalidInputError, match="candidates"):
        run(tmp_path, candidates=0)
    with pytest.raises(mt.InvalidInputError, match="batch sizes"):
        run(tmp_path, batch_sizes=[0, 4])


def test_file_names():
    assert mt.vllm_file_name(256, 256, "NVIDIA_H200", "fp8_w8a8", [128, 128]) == \
        "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"
    assert mt.vllm_device_name("NVIDIA H100 80GB HBM3") == DEV


def test_cli_argument_errors(capsys):
    for argv, msg in [
        (["--experts", "8", "--topk", "2", "--hidden", "4096", "--intermediate", "14336"], "--output"),
        (["--experts", "0", "--topk", "2", "--hidden", "4096", "--intermediate", "14336", "-o", "x"], "positive"),
        (["--experts", "8", "--topk", "9", "--hidden", "4096", "--intermediate", "14336", "-o", "x"], "greater than"),
        (["--experts", "8", "--topk", "2", "--hidden", "4096", "--intermediate", "14336", "-o", "x",
          "--block-shape", "128,128"], "--dtype fp8_w8a8"),
        (["--experts", "8", "--topk", "2", "--hidden", "4096", "--intermediate", "14336", "-o", "x",
          "--batch-sizes", "1,a"], "integers"),
    ]:
        with pytest.raises(SystemExit) as ex:
            mt.main(argv)
        assert ex.value.code == 2
        assert msg in capsys.readouterr().err


def test_progress_lines():
    t = [0.0]
    buf = io.StringIO()
    p = mt.Progress(4, stream=buf, clock=lambda: t[0])
    p.done = 1  # resumed
    p.draw("start")
    t[0] = 10.0
    p.advance("M=16", seconds=10.0)
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("[moe_tune] [######------------------] 1/4")
    assert "2/4" in lines[1] and "ETA 20s" in lines[1] and "M=16" in lines[1]


def test_default_config_rule():
    assert default_config(8, 8) == cfg(16, 32, 64, 1, 4, 3)
    assert default_config(9, 8) == cfg(64, 64, 32, 8, 4, 3)
    assert default_config(64, 128)["BLOCK_SIZE_M"] == 16
    assert default_config(1, 8, "fp8_w8a8", [128, 128]) == cfg(64, 128, 128, 32, 4, 3)


def test_tuner_space_filtered_by_shared_memory():
    full = tuner_space()
    assert len(full) >= 200
    assert all(c["num_stages"] * (c["BLOCK_SIZE_M"] + c["BLOCK_SIZE_N"]) * c["BLOCK_SIZE_K"] * 2 <= 232448 for c in full)
    assert cfg(256, 256, 256, 1, 8, 2) not in full and cfg(16, 32, 64, 1, 4, 2) in full
    assert len(tuner_space(group_sizes=(1, 16, 64))) * 4 == len(full) * 3


def test_neighbours_are_legal_structural_moves_nearest_first():
    legal = {config_key(c): c for c in tuner_space()}
    base = cfg(16, 256, 64, 1, 4, 5)
    near = mt.neighbours(base, legal)
    assert near[0] == cfg(16, 128, 128, 1, 4, 5)  # the same bytes per stage, deeper in K
    assert near[1] == cfg(16, 512 // 1, 32, 1, 4, 5) or near[1]["BLOCK_SIZE_K"] != 32  # 512/32: not in the space
    keys = [config_key(c) for c in near]
    assert len(keys) == len(set(keys)) and config_key(base) not in keys
    assert all(k in legal for k in keys)
    assert cfg(16, 256, 64, 1, 4, 4) in near and cfg(16, 256, 64, 1, 8, 5) in near
    assert cfg(16, 256, 64, 16, 4, 5) in near


def test_explored_neighbours_are_timed_and_can_win(tmp_path):
    class Meas(FakeMeas):
        def time(self, m, configs):
            self.timed.append([config_key(c) for c in configs])
            # fastest: BLOCK_SIZE_K 128 (carver's picks all have 64)
            return [5.0 if c["BLOCK_SIZE_K"] == 128 else 10.0 for c in configs]

    class WholeRanking(FakeRec):
        """carver's ranking: its four picks, then the rest of a legal space."""

        def __call__(self, problem, arch, batch_sizes, candidates):
            self.calls.append((arch, list(batch_sizes), candidates))
            rest = [c for c in tuner_space() if c not in CANDS]
            ranked = (CANDS + rest)[:candidates]
            return {"file_name": "f.json", "device_name": DEV, "seconds": 0.0,
                    "batches": {m: [{"config": c, "predicted_us": 1.0} for c in ranked] for m in batch_sizes}}

    meas, rec = Meas(), WholeRanking()
    res = run(tmp_path, meas=meas, rec=rec, batch_sizes=[1, 64], explore=6)
    # exploration asks for carver's whole ranking, and times only the first picks of it
    assert rec.calls[0][2] == mt.RANKED_FOR_EXPLORE
    for timed in meas.timed:
        assert len(timed) == 4 + 6 and len(set(timed)) == len(timed)
    for m in (1, 64):
        r = res["results"][m]
        assert r["winner"]["BLOCK_SIZE_K"] == 128 and r["winner_from"] == "explored"
    # explored configs are compiled with carver's, in one pass
    assert len(meas.prepared) == 1


def test_explore_must_be_a_non_negative_integer(tmp_path):
    for bad in (-1, 1.5, True):
        with pytest.raises(mt.InvalidInputError, match="explore"):
            run(tmp_path, explore=bad)


def test_neighbours_come_only_from_carvers_ranking(tmp_path):
    # A ranking of only the four picks leaves nothing to explore: no config of a rule of its own.
    meas = FakeMeas()
    run(tmp_path, meas=meas, batch_sizes=[1], explore=8)
    assert len(meas.prepared[0]) == 4


@pytest.mark.parametrize("dtype,block_shape", [("bf16", None), ("fp8_w8a8", None), ("fp8_w8a8", [128, 128])])
def test_carvers_ranking_lies_in_the_kernels_space(dtype, block_shape):
    # The same rules twice, in Rust (carver's space) and here (the kernel's and the harness's):
    # every config carver ranks must be one the kernel's space holds, on the H100's shared memory.
    import carver

    rec = carver.recommend_moe(8, 2, 4096, 14336, tp=2, dtype=dtype, block_shape=block_shape, arch="h100",
                               batch_sizes=[1, 4096], candidates=1024)
    space = {config_key(c) for c in tuner_space(smem_limit=232448, dtype=dtype, block_shape=block_shape)}
    ranked = {config_key(h.config) for b in rec.batches for h in b.hints}
    assert ranked and ranked <= space, sorted(ranked - space)[:5]
