"""Bad input raises a carver.CarverError subclass with the library's message (the one the CLI
prints for the same mistake), and no Rust panic reaches Python."""

import pytest

import carver


def cli_error(cli, *args):
    """The CLI's message for a bad argument (clap wraps the library's in `invalid value`)."""
    code, _, err = cli("recommend", *args)
    assert code != 0
    return err


@pytest.mark.parametrize(
    "kwargs,flag,value",
    [
        (dict(dtype="f17"), "--dtype", "f17"),
        (dict(target="trition"), "--target", "trition"),
        (dict(layout="rx"), "--layout", "rx"),
        (dict(layout="row"), "--layout", "row"),
        (dict(topk=0), "--topk", "0"),
        (dict(topk=1025), "--topk", "1025"),
        (dict(topk=-1), "--topk", "-1"),
        (dict(out_dtype="f8"), "--out-dtype", "f8"),
    ],
)
def test_bad_values_raise_the_clis_message(cli, kwargs, flag, value):
    # `--flag=value`: clap would read a separate `-1` as a flag.
    err = cli_error(cli, "--m", "64", "--n", "64", "--k", "64", f"{flag}={value}")
    with pytest.raises(carver.InvalidInputError) as e:
        carver.recommend(64, 64, 64, **kwargs)
    assert isinstance(e.value, ValueError) and isinstance(e.value, carver.CarverError)
    assert f"': {e.value}\n" in err, (str(e.value), err)


def test_unknown_arch_lists_the_known_ones(cli):
    code, _, err = cli("recommend", "--arch", "h1000", "--m", "64", "--n", "64", "--k", "64")
    assert code == 1
    with pytest.raises(carver.UnknownArchError) as e:
        carver.recommend(64, 64, 64, arch="h1000")
    assert err.strip() == f"error: {e.value}"
    assert "h100-sxm" in str(e.value) and isinstance(e.value, carver.InvalidInputError)
    with pytest.raises(carver.UnknownArchError):
        carver.arch("h1000")
    with pytest.raises(carver.UnknownArchError):
        carver.recommend_many([(64, 64, 64)], arch=["h100", "h1000"])


@pytest.mark.parametrize("value", [4096.0, 1.5, "64", None, True, [64]])
def test_non_integer_sizes_are_type_errors(value):
    with pytest.raises(carver.ArgumentTypeError) as e:
        carver.recommend(value, 64, 64)
    assert isinstance(e.value, TypeError)
    assert str(e.value) == (f"M = {value!r} ({type(value).__name__}) is not an integer; "
                            "accepted: an int from 1 to 2147483647")


@pytest.mark.parametrize("m,message", [
    (0, "invalid problem size: M is 0; every size must be at least 1"),
    (-3, "invalid problem size: M is -3; every size must be at least 1"),
    (2**31, "invalid problem size: M = 2147483648 exceeds the largest supported size 2147483647"),
    (2**80, "invalid problem size: M = 1208925819614629174706176 exceeds the largest supported size 2147483647"),
])
def test_sizes_out_of_range(m, message):
    with pytest.raises(carver.InvalidInputError) as e:
        carver.recommend(m, 64, 64)
    assert str(e.value) == message


def test_other_argument_types():
    with pytest.raises(carver.ArgumentTypeError, match=r"topk = 2.0 \(float\) is not an integer"):
        carver.recommend(64, 64, 64, topk=2.0)
    with pytest.raises(carver.ArgumentTypeError, match=r"arch = 3 \(int\) is not a string"):
        carver.recommend(64, 64, 64, arch=3)
    with pytest.raises(carver.ArgumentTypeError, match=r"shapes\[1\]: N = 2.5 \(float\)"):
        carver.recommend_many([(64, 64, 64), (64, 2.5, 64)])
    with pytest.raises(carver.ArgumentTypeError, match=r"\(64, 64\) \(tuple\) is not a shape"):
        carver.recommend_many([(64, 64)])
    with pytest.raises(carver.InvalidInputError, match=r"shapes\[0\]: missing `k`"):
        carver.recommend_many([{"m": 1, "n": 2}])
    with pytest.raises(carver.ArgumentTypeError, match=r"configs\[0\]: \{1, 2\} \(set\) is not JSON data"):
        carver.price(64, 64, 64, [{1, 2}])
    with pytest.raises(TypeError):
        carver.recommend(64, 64)  # Python's own check of the signature
    with pytest.raises(TypeError):
        carver.recommend(64, 64, 64, not_an_option=1)


def test_a_bad_problem_for_price_raises_before_pricing():
    with pytest.raises(carver.InvalidInputError, match="K is 0"):
        carver.price(64, 64, 0, [{}])


def test_a_hardware_db_directory_that_does_not_exist(tmp_path):
    with pytest.raises(carver.InvalidInputError, match="does not exist"):
        carver.arch_list(hardware_db=tmp_path / "missing")


def test_the_error_classes_are_the_documented_ones():
    assert issubclass(carver.InvalidInputError, carver.CarverError)
    assert issubclass(carver.InvalidInputError, ValueError)
    assert issubclass(carver.UnknownArchError, carver.InvalidInputError)
    assert issubclass(carver.ArgumentTypeError, TypeError)
    assert issubclass(carver.GpuError, RuntimeError)
    assert issubclass(carver.MissingDependencyError, ImportError)
    assert issubclass(carver.CarverWarning, UserWarning)
    for cls in (carver.CarverError, carver.InvalidInputError, carver.GpuError):
        assert cls.__module__ == "carver" and cls.__doc__
