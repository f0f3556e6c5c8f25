"""Shared fixtures: the `carver` binary the package is compared with, an empty cache directory
for both, and Triton (real, or a stub of `triton.Config` where the wheel could not install)."""

import json
import os
import pathlib
import subprocess
import sys
import types

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def empty_cache(tmp_path, monkeypatch):
    """The CLI and the package read the same (empty) cache, so neither reports a measured
    winner or a calibration the other does not."""
    cache = tmp_path / "carver-cache"
    cache.mkdir()
    monkeypatch.setenv("CARVER_CACHE_DIR", str(cache))
    monkeypatch.delenv("CARVER_HARDWARE_DB", raising=False)
    return cache


def _binary():
    given = os.environ.get("CARVER_BIN")
    if given:
        return pathlib.Path(given)
    found = [REPO / "target" / p / "carver" for p in ("release", "debug")]
    found = [p for p in found if p.exists()]
    if not found:
        return None
    return max(found, key=lambda p: p.stat().st_mtime)


@pytest.fixture(scope="session")
def carver_bin():
    path = _binary()
    if path is None or not path.exists():
        pytest.fail(
            "no carver binary to compare with: set CARVER_BIN or build one "
            "(cargo build -p carver-cli)"
        )
    return str(path)


@pytest.fixture
def cli(carver_bin):
    """Runs the binary; returns (exit status, stdout, stderr)."""

    def run(*args):
        p = subprocess.run([carver_bin, *args], capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    return run


@pytest.fixture
def cli_json(cli):
    def run(*args):
        code, out, err = cli(*args, "--format", "json")
        assert out, f"carver {' '.join(args)} printed no JSON (exit {code}): {err}"
        return code, json.loads(out), err

    return run


@pytest.fixture
def python_m():
    """Runs `python -m carver` with this interpreter; returns (exit status, stdout, stderr)."""

    def run(*args, stdin=None):
        p = subprocess.run([sys.executable, "-m", "carver", *args], capture_output=True,
                           text=True, timeout=120, input=stdin)
        return p.returncode, p.stdout, p.stderr

    return run


def without_timing(doc):
    """A recommendation document without its wall-clock fields (`elapsed_us`)."""
    if isinstance(doc, dict):
        return {k: without_timing(v) for k, v in doc.items() if k != "elapsed_us"}
    if isinstance(doc, list):
        return [without_timing(v) for v in doc]
    return doc


def real_triton():
    try:
        import triton  # noqa: F401
        from triton.runtime.autotuner import Autotuner  # noqa: F401
    except ImportError:
        return None
    return triton


@pytest.fixture
def triton_or_stub(monkeypatch):
    """Triton when installed; else a stub with `triton.Config`'s attributes (kwargs, num_warps,
    num_stages), enough to check the conversion (scripts/test falls back to it when the wheel
    does not install)."""
    triton = real_triton()
    if triton is not None:
        return triton

    class Config:
        def __init__(self, kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None,
                     pre_hook=None, ir_override=None):
            self.kwargs, self.num_warps, self.num_stages = kwargs, num_warps, num_stages

    stub = types.ModuleType("triton")
    stub.Config = Config
    monkeypatch.setitem(sys.modules, "triton", stub)
    return stub
