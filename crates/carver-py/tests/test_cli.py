"""`python -m carver` is the `carver` binary: same output, errors and exit status."""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, without_timing

SAME = [
    ["--help"],
    ["--version"],
    ["recommend", "--help"],
    ["tune", "--help"],
    ["arch", "list"],
    ["arch", "list", "--format", "json"],
    ["arch", "show", "h100", "--format", "json"],
    ["cache", "list", "--format", "json"],
    ["completions", "bash"],
    # Errors: clap's (exit 2) and the library's (exit 1).
    ["recommend", "--m", "64", "--n", "64", "--k", "64", "--topk", "0"],
    ["recommend", "--m", "64", "--n", "64"],
    ["recommend", "--arch", "h1000", "--m", "64", "--n", "64", "--k", "64"],
    ["recommend", "--m", "64", "--n", "0", "--k", "64", "--format", "json"],
    ["arch", "show", "nonesuch"],
    ["arch", "detect"],
    ["bench", "--m", "64", "--n", "64", "--k", "64"],
    ["no-such-command"],
]


@pytest.mark.parametrize("args", SAME, ids=lambda a: " ".join(a))
def test_python_m_carver_is_the_binary(cli, python_m, args):
    got, want = python_m(*args), cli(*args)
    if args[0] == "recommend" and "json" in args and want[1]:
        # Recommendations carry their own wall time.
        assert (got[0], got[2]) == (want[0], want[2])
        assert without_timing(json.loads(got[1])) == without_timing(json.loads(want[1]))
    else:
        assert got == want


def test_recommendations_are_the_same_documents(cli, python_m):
    args = ["recommend", "--shapes", str(REPO / "eval" / "holdout-shapes.json"), "--arch",
            "h100,l40s", "--target", "tilelang", "--format", "json"]
    code, out, err = python_m(*args)
    assert (code, err) == cli(*args)[::2]
    assert without_timing(json.loads(out)) == without_timing(json.loads(cli(*args)[1]))


def test_a_closed_pipe_ends_it_quietly():
    # `python -m carver ... | head -1`: no BrokenPipeError traceback, as with the binary.
    p = subprocess.Popen([sys.executable, "-m", "carver", "recommend", "--shapes",
                          str(REPO / "eval" / "dev-shapes.json")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()
    _, err = p.communicate(timeout=60)
    assert err == b""


def test_main_runs_in_process_and_returns_the_status(capfd):
    from carver.__main__ import main

    assert main(["arch", "show", "h100", "--format", "json"]) == 0
    out, _ = capfd.readouterr()
    assert json.loads(out)["arch"]["gpu"]["key"] == "h100-sxm"
    assert main(["recommend", "--topk", "0", "--m", "1", "--n", "1", "--k", "1"]) == 2
    assert "top-k = 0" in capfd.readouterr().err


def test_a_shape_that_fails_is_answered_in_place_by_both(cli, python_m, tmp_path):
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("M,N,K\n64,64,64\n64,0,64\n")
    args = ["recommend", "--shapes", str(shapes), "--format", "json"]
    got, want = python_m(*args), cli(*args)
    assert want[0] == 1 and "N is 0" in want[2]
    assert (got[0], got[2]) == (want[0], want[2])
    assert without_timing(json.loads(got[1])) == without_timing(json.loads(want[1]))


def test_blank_carver_variables_count_as_unset_in_both(carver_bin, tmp_path):
    # The binary's prepare_process, which python -m carver runs too.
    env = dict(os.environ, CARVER_HARDWARE_DB="  ", HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path))
    env.pop("CARVER_CACHE_DIR", None)
    args = ["arch", "show", "h100", "--format", "json"]
    run = lambda cmd: subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)  # noqa: E731
    got, want = run([sys.executable, "-m", "carver", *args]), run([carver_bin, *args])
    assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr)
    assert want.returncode == 0, want.stderr
