"""carver.recommend and recommend_many give what `carver recommend --format json` prints."""

import json

import pytest

import carver
from conftest import REPO, without_timing

CASES = [
    # (CLI arguments, the same as keyword arguments)
    (["--arch", "h100", "--target", "triton"], dict(arch="h100", target="triton")),
    (["--arch", "h100", "--target", "tilelang", "--dtype", "bf16", "--layout", "rc"],
     dict(arch="h100", target="tilelang", dtype="bf16", layout="rc")),
    (["--arch", "a100", "--target", "generic", "--dtype", "f32", "--layout", "cc", "--topk", "3"],
     dict(arch="a100", target="generic", dtype="f32", layout="cc", topk=3)),
    (["--arch", "h100", "--target", "cuda-sm90", "--batch", "4"],
     dict(arch="h100", target="cuda-sm90", batch=4)),
    (["--arch", "h100", "--target", "triton", "--dtype", "e4m3", "--out-dtype", "bf16"],
     dict(arch="h100", target="triton", dtype="e4m3", out_dtype="bf16")),
    (["--arch", "l40s", "--target", "triton", "--topk", "16"],
     dict(arch="l40s", target="triton", topk=16)),
]
SHAPES = [(4096, 4096, 4096), (16, 12288, 4096), (333, 777, 999)]


@pytest.mark.parametrize("cli_args,kwargs", CASES)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_hints_equal_the_clis_json(cli_json, cli_args, kwargs, m, n, k):
    code, doc, err = cli_json("recommend", "--m", str(m), "--n", str(n), "--k", str(k), *cli_args)
    assert code == 0, err
    hints = carver.recommend(m, n, k, **kwargs)
    assert [h.to_dict() for h in hints] == doc["results"][0]["hints"]
    assert len(hints) == kwargs.get("topk", 8)


def test_typed_attributes_are_the_dicts_fields():
    for h in carver.recommend(2048, 2048, 2048, target="triton", topk=4):
        d = h.to_dict()
        p, t = d["prediction"], d["tile"]
        assert h.rank == d["rank"] and h.config == d["config"]
        assert h.time_us == p["time_us"] == h.prediction.time_us
        assert h.tflops == p["tflops"] and h.bound == p["bound"] == h.prediction.bound
        assert h.breakdown.to_dict() == p["breakdown"] == h.prediction.breakdown.to_dict()
        assert h.breakdown.compute_us == p["breakdown"]["compute_us"]
        assert h.prediction.to_dict() == p
        assert h.prediction.grid == p["grid"] and h.prediction.waves == p["waves"]
        assert h.tile.to_dict() == t
        assert (h.tile.block_m, h.tile.block_n, h.tile.block_k) == (t["block_m"], t["block_n"], t["block_k"])
        assert h.tile.group == t["raster"]["group"] and h.tile.mma == t["mma"]
        assert h.tile.stages == h.config["num_stages"]
        assert h.tile.warps == h.config["num_warps"]
        assert h.tile == carver.recommend(2048, 2048, 2048, target="triton", topk=4)[h.rank - 1].tile
        assert "time_us" in repr(h)


def test_swapped_tiles_say_so():
    # Decode on carver's own Hopper family takes the swapped path (A and B trade places in the
    # wgmma): `swap_ab` is in the tile and the native config; a large shape's top-1 is not swapped.
    decode = carver.recommend(1, 12288, 4096, arch="h100", target="cuda-sm90", topk=1)[0]
    assert decode.tile.swap_ab is True
    assert decode.to_dict()["tile"]["swap_ab"] is True and decode.config["swap_ab"] is True
    assert decode.tile.block_m < 64 and decode.tile.warps_m == 1
    large = carver.recommend(4096, 4096, 4096, arch="h100", target="cuda-sm90", topk=1)[0]
    assert large.tile.swap_ab is False
    # Absent from the JSON when false, as before the field existed.
    assert "swap_ab" not in large.to_dict()["tile"] and "swap_ab" not in large.config
    assert carver.recommend(64, 64, 64, target="triton", topk=1)[0].tile.swap_ab is False


def test_a_list_of_shapes_equals_a_shapes_file(cli_json):
    path = REPO / "eval" / "dev-shapes.json"
    code, doc, err = cli_json("recommend", "--shapes", str(path), "--arch", "h100,a100",
                              "--target", "triton")
    assert code == 0, err
    rows = json.loads(path.read_text())["shapes"]
    shapes = [{"name": r["name"], "M": r["M"], "N": r["N"], "K": r["K"]} for r in rows]
    got = carver.recommend_many(shapes, arch="h100,a100", target="triton")
    assert len(got) == 2 * len(rows)
    assert without_timing(got.to_dict()) == without_timing(doc)
    assert got.schema_version == carver.SCHEMA_VERSION == doc["schema_version"]
    assert got.carver_version == doc["carver_version"] == carver.__version__
    first = got[0]
    assert (first.name, first.m, first.n, first.k, first.batch) == (rows[0]["name"], rows[0]["M"], rows[0]["N"], rows[0]["K"], 1)
    assert first.arch == "h100-sxm" and got[1].arch.startswith("a100")
    assert first.ok and first.error is None and first.measured is None
    assert [h.to_dict() for h in first.hints] == doc["results"][0]["hints"]
    assert got[-1].to_dict() == got.results[-1].to_dict()


def test_bad_shapes_are_answered_in_place_like_the_cli(cli_json, tmp_path):
    shapes = [(64, 64, 64), (0, 64, 64), (64, 64, 2**31), (32, 32, 32, 3)]
    csv = tmp_path / "shapes.csv"
    csv.write_text("M,N,K,batch\n" + "\n".join(f"{s[0]},{s[1]},{s[2]},{s[3] if len(s) > 3 else 1}" for s in shapes))
    code, doc, _ = cli_json("recommend", "--shapes", str(csv), "--target", "generic")
    assert code == 1, "the CLI exits 1 when a shape failed"
    got = carver.recommend_many(shapes, target="generic")
    assert without_timing(got.to_dict()) == without_timing(doc)
    assert [r.ok for r in got] == [True, False, False, True]
    assert got[1].error == "invalid problem size: M is 0; every size must be at least 1"
    assert "exceeds the largest supported size" in got[2].error
    assert got[3].batch == 3 and got[3].hints


def test_one_shape_with_an_error_raises_the_clis_message_for_it(cli, tmp_path):
    # The CLI refuses --n 0 while parsing; a shapes file's row reaches the library, as here.
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("M,N,K\n64,0,64\n")
    code, _, err = cli("recommend", "--shapes", str(shapes))
    assert code == 1
    with pytest.raises(carver.InvalidInputError) as e:
        carver.recommend(64, 0, 64, target="generic")
    assert str(e.value) == "invalid problem size: N is 0; every size must be at least 1"
    assert f": {e.value}" in err
    assert isinstance(e.value, ValueError)


def test_dtype_objects_are_read_by_their_name():
    class Float16:  # what str(torch.float16) looks like
        def __str__(self):
            return "torch.float16"

    a = carver.recommend(512, 512, 512, dtype=Float16(), topk=2)
    b = carver.recommend(512, 512, 512, dtype="f16", topk=2)
    assert [h.to_dict() for h in a] == [h.to_dict() for h in b]


def test_numpy_like_integers_are_sizes():
    class Index:
        def __index__(self):
            return 256

    a = carver.recommend(Index(), 256, Index(), topk=2)
    assert [h.to_dict() for h in a] == [h.to_dict() for h in carver.recommend(256, 256, 256, topk=2)]


def test_price_gives_the_recommendations_own_prediction():
    for m, n, k in [(1024, 2048, 4096), (1536, 4096, 1201)]:
        hints = carver.recommend(m, n, k, target="triton", arch="h200")
        priced = carver.price(m, n, k, [h.config for h in hints], target="triton", arch="h200")
        assert all(p.ok and p.error is None for p in priced)
        assert priced[0].tile == hints[0].tile and priced[0].config == hints[0].config
        for p, h in zip(priced, hints):
            if h.prediction.hedged_registers is None:
                assert p.to_dict()["prediction"] == h.to_dict()["prediction"] and p.time_us == h.time_us
            else:
                # price() prices as estimated; the hedge assumed one block more per SM.
                assert p.prediction.hedged_registers is None
                assert p.prediction.registers_per_thread == h.prediction.registers_per_thread
                assert p.prediction.blocks_per_sm == h.prediction.blocks_per_sm - 1


def test_register_hedges_say_so():
    # holdout9's odd.k1201 on the H200 (A staged): 64x256x64 with 8 warps is estimated at 136
    # registers (one block per SM) and compiled at 126 (two); the top-8 hedges it at 128.
    hints = carver.recommend(1536, 4096, 1201, target="triton", arch="h200")
    assert hints[0].prediction.hedged_registers is None
    hedge = [h for h in hints if h.config["kwargs"]["BLOCK_SIZE_N"] == 256 and h.config["num_warps"] == 8
             and h.config["kwargs"]["BLOCK_SIZE_K"] == 64 and h.config["num_stages"] == 3]
    assert len(hedge) == 1
    p = hedge[0].prediction
    assert (p.registers_per_thread, p.hedged_registers, p.blocks_per_sm) == (136, 128, 2)
    assert hedge[0].to_dict()["prediction"]["hedged_registers"] == 128
    # Absent from the JSON when there is no hedge, as before the field existed.
    assert "hedged_registers" not in hints[0].to_dict()["prediction"]


def test_price_reports_an_illegal_config_in_place():
    good = carver.recommend(1024, 1024, 1024, target="triton", topk=1)[0].config
    bad = {"kwargs": dict(good["kwargs"], BLOCK_SIZE_M=48), "num_warps": 4, "num_stages": 3}
    priced = carver.price(1024, 1024, 1024, [bad, good], target="triton")
    assert not priced[0].ok and priced[0].tile is None and priced[0].time_us is None
    assert "BLOCK_SIZE_M = 48" in priced[0].error and "power of two" in priced[0].error
    assert priced[0].to_dict() == {"config": bad, "tile": None, "prediction": None, "error": priced[0].error}
    assert priced[1].ok


def test_arch_list_and_arch_equal_the_cli(cli_json):
    code, doc, _ = cli_json("arch", "list")
    assert code == 0 and carver.arch_list() == doc["gpus"]
    code, doc, _ = cli_json("arch", "show", "h100")
    assert code == 0 and carver.arch("h100") == doc["arch"]
    assert carver.arch("a100-sxm4-80gb")["gpu"]["key"] == "a100-sxm4-80gb"


def test_detect_without_a_gpu_raises_gpu_error_with_the_clis_message(cli):
    code, out, err = cli("arch", "detect", "--format", "json")
    if code == 0:
        assert carver.detect() == json.loads(out)["gpus"]
        return
    with pytest.raises(carver.GpuError) as e:
        carver.detect()
    assert isinstance(e.value, RuntimeError)
    assert err.strip() == f"error: {e.value}"
    with pytest.raises(carver.GpuError):
        carver.recommend(64, 64, 64, arch="auto")


def test_a_hardware_db_directory_is_read_like_the_clis(cli_json, tmp_path):
    # A user GPU file: the shipped H100 under another key, with a smaller L2.
    text = (REPO / "hardware-db" / "h100-sxm.toml").read_text()
    text = text.replace('key = "h100-sxm"', 'key = "h100-small-l2"')
    text = "\n".join(l for l in text.splitlines() if not l.startswith("aliases"))
    text = text.replace("size_bytes = 52428800", "size_bytes = 4194304")
    (tmp_path / "h100-small-l2.toml").write_text(text)
    code, doc, err = cli_json("--hardware-db", str(tmp_path), "recommend", "--arch", "h100-small-l2",
                              "--m", "4096", "--n", "4096", "--k", "4096", "--target", "triton")
    assert code == 0, err
    hints = carver.recommend(4096, 4096, 4096, arch="h100-small-l2", target="triton",
                             hardware_db=tmp_path)
    assert [h.to_dict() for h in hints] == doc["results"][0]["hints"]
    code, doc, err = cli_json("--hardware-db", str(tmp_path), "arch", "show", "h100-small-l2")
    described = carver.arch("h100-small-l2", hardware_db=tmp_path)
    assert described == doc["arch"] and described["l2"]["size_bytes"] == 4194304
    with pytest.raises(carver.UnknownArchError):
        carver.recommend(64, 64, 64, arch="h100-small-l2")


def test_a_measured_winner_is_reported_as_the_cli_reports_it(cli, cli_json, tmp_path, empty_cache):
    # One tuning result for 4096^3 f16 on an H100, imported with the CLI into the shared cache.
    winner = {"kwargs": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64,
                         "GROUP_SIZE_M": 8, "SPLIT_K": 1}, "num_warps": 8, "num_stages": 3}
    record = {
        "key": {"device": {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-00000000-0000-0000-0000-000000000001",
                           "driver_version": "580.159.04"},
                "carver_version": carver.__version__, "target": "triton", "kernel_hash": "test",
                "problem": {"m": 4096, "n": 4096, "k": 4096, "batch": 1, "dtype_a": "f16",
                            "dtype_b": "f16", "dtype_c": "f16", "dtype_acc": "f32",
                            "layout_a": "row", "layout_b": "row"}},
        "winner": winner,
        "candidates": [{"config": winner, "model_rank": 1, "predicted_time_s": 2.4e-4,
                        "measured_time_s": 2.5e-4, "failure": None}],
        "cublas_time_s": 2.3e-4, "measured_at_unix_s": 1767225600,
        "method": {"timer": "cuda-events", "statistic": "median"},
    }
    lines = [json.dumps({"format": "carver-tuning-results", "format_version": 1,
                         "exported_by": "test", "records": 1}), json.dumps(record)]
    path = tmp_path / "results.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, _, err = cli("cache", "import", str(path))
    assert code == 0, err
    code, doc, err = cli_json("recommend", "--m", "4096", "--n", "4096", "--k", "4096",
                              "--target", "triton")
    assert code == 0, err
    measured = doc["results"][0]["measured"]
    assert measured["config"] == winner and measured["measured_time_us"] == pytest.approx(250.0)
    got = carver.recommend_many([(4096, 4096, 4096)], target="triton")
    assert got[0].measured == measured
    assert without_timing(got.to_dict()) == without_timing(doc)


def test_the_flows_warnings_are_carver_warnings(cli, empty_cache):
    # A tuning database that cannot be read costs the measured winners only, with a warning.
    (empty_cache / "tuning.sqlite3").write_bytes(b"this is not an SQLite database" * 100)
    code, _, err = cli("recommend", "--m", "64", "--n", "64", "--k", "64")
    assert code == 0
    warned = [line[len("warning: "):] for line in err.splitlines() if line.startswith("warning: ")]
    assert warned, err
    with pytest.warns(carver.CarverWarning) as record:
        hints = carver.recommend(64, 64, 64, target="generic")
    assert hints
    assert [str(w.message) for w in record] == warned


def test_blank_environment_variables_count_as_unset(cli_json, monkeypatch):
    code, doc, _ = cli_json("arch", "list")
    monkeypatch.setenv("CARVER_HARDWARE_DB", "  ")
    monkeypatch.setenv("CARVER_CACHE_DIR", "")
    assert carver.arch_list() == doc["gpus"]
    assert len(carver.recommend(256, 256, 256, topk=2)) == 2


def test_recommendations_from_many_threads_match_one_thread():
    # The module runs its flows without the interpreter lock and allocates with mimalloc, whose
    # thread-locals a module loaded with dlopen must place dynamically: threads that recommend at
    # once get what one thread gets.
    from concurrent.futures import ThreadPoolExecutor

    shapes = [(m, n, k) for m in (1, 96, 4096) for n, k in ((4096, 4096), (14336, 4096), (1000, 3000))]
    targets = ("triton", "tilelang", "cuda-sm90", "generic")

    def run(job):
        (m, n, k), target = job
        return [h.to_dict() for h in carver.recommend(m, n, k, target=target, arch="h100")]

    jobs = [(s, t) for s in shapes for t in targets]
    alone = [run(j) for j in jobs]
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(run, jobs * 3))
    assert together == alone * 3
