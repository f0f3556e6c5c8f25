"""benches/stored.py: stored runs read the same whether xz-compressed, gzipped or plain."""

import gzip
import importlib.util
import json
import lzma
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SPEC = importlib.util.spec_from_file_location("stored", ROOT / "benches/stored.py")
stored = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(stored)

DOC = {"schema_version": 1, "results": [{"shape": {"m": 1}, "us": 2.5}]}


def test_every_form_loads_the_same_document(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(DOC))
    with gzip.open(tmp_path / "b.json.gz", "wt") as f:
        json.dump(DOC, f)
    (tmp_path / "c.json.xz").write_bytes(lzma.compress(json.dumps(DOC).encode()))
    for name in ["a.json", "b.json.gz", "c.json.xz"]:
        assert stored.load(tmp_path / name) == DOC


def test_find_matches_every_form_of_the_plain_name(tmp_path):
    for d in ["r1", "r2", "r3"]:
        (tmp_path / d).mkdir()
    (tmp_path / "r1" / "sweep.json").write_text("{}")
    (tmp_path / "r2" / "sweep.json.gz").write_bytes(gzip.compress(b"{}"))
    (tmp_path / "r3" / "sweep.json.xz").write_bytes(lzma.compress(b"{}"))
    (tmp_path / "r3" / "other.json.xz").write_bytes(lzma.compress(b"{}"))
    found = stored.find(str(tmp_path / "*" / "sweep.json"))
    assert [Path(p).parent.name for p in found] == ["r1", "r2", "r3"]
    assert [stored.stem(p) for p in found] == ["sweep", "sweep", "sweep"]


def test_a_corrupt_file_is_an_error_not_an_empty_run(tmp_path):
    (tmp_path / "bad.json.xz").write_bytes(b"not xz at all")
    with pytest.raises(lzma.LZMAError):
        stored.load(tmp_path / "bad.json.xz")


def test_the_stored_runs_are_xz():
    # The checkout travels to the GPU machine whole (64 MiB): runs are stored in the smaller form.
    gz = [p for pattern in ["benches/triton/runs/*/*.json.gz", "benches/moe/runs/*/*.json.gz"]
          for p in ROOT.glob(pattern)]
    assert gz == []
    assert list(ROOT.glob("benches/triton/runs/*/triton_sweep.json.xz"))
