"""benches/sm90/config_variants.py, the paired-variant timing of stored cuda-sm90 winners, run
against a stand-in `carver` that answers `bench` from the configuration it is given: the shapes
it takes and in which order, the configurations it times, the order it times them in, and the
table it prints."""

import gzip
import importlib.util
import json
import stat
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SPEC = importlib.util.spec_from_file_location("config_variants", ROOT / "benches/sm90/config_variants.py")
cv = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(cv)


def winner(block_m=96, stages=11, **extra):
    base = dict(block_m=block_m, block_n=64, block_k=64, stages=stages, consumers=1, group_m=1,
                cluster_m=1, persistent=False, swap_ab=True)
    return dict(base, **extra)


def stored(tmp_path, rows, name="run.json.gz"):
    results = [{"shape": {"name": n, "m": m, "n": 5120, "k": 5120, "batch": b}, "layout": "rr",
                "dtype": "bf16", "speedup_vs_cublas": s, "winner": w}
               for n, m, b, s, w in rows]
    path = tmp_path / name
    with gzip.open(path, "wt") as f:
        json.dump({"results": results}, f)
    return str(path)


def test_variants_parse_or_say_what_is_accepted():
    assert cv.parse_variants("stages=8, cluster_m=2") == [("stages=8", "stages", 8),
                                                          ("cluster_m=2", "cluster_m", 2)]
    for bad in ["stages", "stages=", "=8", "stages=eight", "stages=-1"]:
        with pytest.raises(SystemExit, match="expected FIELD=VALUE"):
            cv.parse_variants(bad)


def test_the_base_drops_clusters_and_a_variant_changes_one_field():
    base = cv.base_config(winner(cluster_m=2, cluster_n=4))
    assert base["cluster_m"] == 1 and "cluster_n" not in base
    assert cv.variant_config(base, None) == base
    deeper = cv.variant_config(base, ("stages=8", "stages", 8))
    assert deeper == dict(base, stages=8)
    assert base["stages"] == 11  # the base is not changed in place


def test_the_order_rotates_so_that_no_variant_always_runs_first():
    items = ["base", "a", "b"]
    assert [cv.rotated(items, i)[0] for i in range(4)] == ["base", "a", "b", "base"]
    assert sorted(cv.rotated(items, 5)) == sorted(items)


def test_shapes_are_taken_worst_first_once_each_within_the_m_range(tmp_path):
    a = stored(tmp_path, [("mid", 96, 1, 0.8, winner()), ("big", 4096, 1, 0.7, winner()),
                          ("batched", 64, 2, 0.5, winner()), ("lost", 32, 1, 0.6, None),
                          ("decode", 1, 1, 0.9, winner(block_m=8))])
    b = stored(tmp_path, [("mid-again", 96, 1, 0.1, winner())], "other.json.gz")
    picked = cv.shapes([a, b], 1, 512)
    assert [s["name"] for _, s, _, _, _ in picked] == ["mid", "decode"]
    assert [s["name"] for _, s, _, _, _ in cv.shapes([a], 100, 5000)] == ["big"]


def test_a_run_times_every_variant_of_every_shape_and_tabulates_them(tmp_path, capsys):
    # The stand-in: each stage makes a launch 1 us slower; cuBLAS takes 10 us; 4 stages fail.
    fake = tmp_path / "carver"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "config = json.loads(sys.argv[sys.argv.index('--config') + 1])\n"
        "if config['stages'] == 4:\n"
        "    print(json.dumps({'measured_time_us': None, 'cublas_time_us': 10.0,"
        " 'failure': 'too shallow'}))\n"
        "else:\n"
        "    print(json.dumps({'measured_time_us': 10.0 + config['stages'],"
        " 'cublas_time_us': 10.0}))\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    runs = stored(tmp_path, [("mid", 96, 1, 0.8, winner(stages=11)),
                             ("small", 16, 1, 0.9, winner(block_m=16, stages=12))])
    out = tmp_path / "pairs.jsonl"
    rows = cv.main(["--bin", str(fake), "--out", str(out), "--variants", "stages=8,stages=4", runs])
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 6
    # The first shape starts with the base, the second with the first variant.
    assert [line["variant"] for line in lines] == ["base", "stages=8", "stages=4",
                                                   "stages=8", "stages=4", "base"]
    assert all(line["config"]["cluster_m"] == 1 for line in lines)
    shape, _, times = rows[0]
    assert shape["name"] == "mid"
    assert times == {"base": (21.0, 10.0), "stages=8": (18.0, 10.0)}
    printed = capsys.readouterr()
    assert "mid stages=4: too shallow" in printed.err
    assert "stages=8: geomean t(base)/t(stages=8) 1.194 over 2" in printed.out


def test_a_binary_variant_parses_to_its_label_and_path():
    assert cv.parse_variants("bin:wait=/x/carver,stages=8") == [("wait", "bin", "/x/carver"),
                                                                ("stages=8", "stages", 8)]
    for bad in ["bin:=/x/carver", "bin:wait=", "bin:wait"]:
        with pytest.raises(SystemExit, match="bin:LABEL=PATH"):
            cv.parse_variants(bad)


def test_a_binary_variant_times_the_stored_winner_unchanged_with_that_binary(tmp_path, capsys):
    # Two stand-ins that differ only in speed; each records the cache it was given.
    def stand_in(name, time_us):
        path = tmp_path / name
        path.write_text(
            f"#!{sys.executable}\n"
            "import json, sys\n"
            f"open({str(tmp_path / (name + '.caches'))!r}, 'a').write("
            "sys.argv[sys.argv.index('--cache-dir') + 1] + '\\n')\n"
            f"print(json.dumps({{'measured_time_us': {time_us}, 'cublas_time_us': 10.0}}))\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return path

    old, new = stand_in("old", 20.0), stand_in("new", 16.0)
    runs = stored(tmp_path, [("mid", 96, 1, 0.8, winner(cluster_m=2))])
    out = tmp_path / "pairs.jsonl"
    cv.main(["--bin", str(old), "--out", str(out), "--as-stored", "--variants",
             f"bin:new={new}", runs])
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["variant"] for line in lines] == ["base", "new"]
    # The configuration is the stored one, cluster included, in both.
    assert all(line["config"] == winner(cluster_m=2) for line in lines)
    old_caches = (tmp_path / "old.caches").read_text().split()
    new_caches = (tmp_path / "new.caches").read_text().split()
    assert len(old_caches) == len(new_caches) == 1 and old_caches != new_caches
    assert "new: geomean t(base)/t(new) 1.250 over 1" in capsys.readouterr().out


def test_shapes_can_be_limited_to_winners_with_few_tile_rows(tmp_path):
    runs = stored(tmp_path, [("one-row", 96, 1, 0.8, winner(block_m=96)),
                             ("two-rows", 97, 1, 0.7, winner(block_m=96)),
                             ("decode", 1, 1, 0.9, winner(block_m=8))])
    assert [s["name"] for _, s, _, _, _ in cv.shapes([runs], 1, 512, 1)] == ["one-row", "decode"]
    assert len(cv.shapes([runs], 1, 512)) == 3
