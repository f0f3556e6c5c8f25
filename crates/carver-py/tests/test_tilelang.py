"""carver.tilelang.configs: the dicts `@tilelang.autotune(configs=...)` takes."""

import pytest

import carver
import carver.tilelang as cl


def test_configs_are_the_recommendations_native_dicts():
    hints = carver.recommend(4096, 4096, 4096, target="tilelang", topk=8)
    configs = cl.configs(4096, 4096, 4096)
    assert configs == [h.config for h in hints]
    for c in configs:
        assert set(c) == set(cl.KEYS)
        assert isinstance(c["enable_rasteration"], bool)
        assert c["thread_num"] in (128, 256)


def test_options_pass_through():
    hints = carver.recommend(333, 777, 999, target="tilelang", arch="a100", dtype="bf16",
                             layout="rc", topk=3)
    assert cl.configs(333, 777, 999, arch="a100", dtype="bf16", layout="rc", topk=3) == \
        [h.config for h in hints]


def test_keys_are_renamed_or_dropped_for_the_kernels_parameters():
    base = cl.configs(1024, 1024, 1024, topk=4)
    renamed = cl.configs(1024, 1024, 1024, topk=4,
                         names={"thread_num": "threads", "enable_rasteration": None})
    for b, r in zip(base, renamed):
        assert r["threads"] == b["thread_num"]
        assert "thread_num" not in r and "enable_rasteration" not in r
        assert {k: v for k, v in r.items() if k != "threads"} == \
            {k: v for k, v in b.items() if k not in ("thread_num", "enable_rasteration")}


@pytest.mark.parametrize("names,error,message", [
    ({"threads": "t"}, carver.InvalidInputError, "names renames 'threads', not a key"),
    ({"thread_num": 3}, carver.ArgumentTypeError, "names maps 'thread_num' to 3"),
    ({"thread_num": "block_M"}, carver.InvalidInputError, "two keys the name 'block_M'"),
    (["thread_num"], carver.ArgumentTypeError, "is not a dict"),
])
def test_bad_names(names, error, message):
    with pytest.raises(error, match=message):
        cl.configs(64, 64, 64, names=names)


def test_errors_are_recommends():
    with pytest.raises(carver.InvalidInputError, match="top-k = 0"):
        cl.configs(64, 64, 64, topk=0)
    with pytest.raises(carver.ArgumentTypeError):
        cl.configs(64.0, 64, 64)
