"""carver.recommend_moe gives what `carver moe --format json` prints, and its errors."""

import json

import pytest

import carver

MIXTRAL = dict(experts=8, topk=2, hidden=4096, intermediate=14336, tp=2)
CLI = ["moe", "--experts", "8", "--topk", "2", "--hidden", "4096", "--intermediate", "14336",
       "--tp", "2", "--arch", "h100"]


def test_to_dict_equals_the_clis_json(cli):
    code, out, err = cli(*CLI, "--batch-sizes", "1,64,4096", "--format", "json")
    assert code == 0, err
    got = carver.recommend_moe(**MIXTRAL, arch="h100", batch_sizes=[1, 64, 4096])
    assert got.to_dict() == json.loads(out)
    assert got.file_name == "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json"
    assert got.device_name == "NVIDIA_H100_80GB_HBM3"
    assert [b.m for b in got.batches] == [1, 64, 4096]
    hint = got.batches[0].hints[0]
    assert hint.rank == 1 and hint.predicted_us > 0
    assert set(hint.config) == {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M",
                                "num_warps", "num_stages"}


def test_vllm_config_equals_the_file(cli):
    code, out, err = cli(*CLI)
    assert code == 0, err
    got = carver.recommend_moe(**MIXTRAL)
    assert got.vllm_config() == json.loads(out)
    assert list(got.vllm_config()) == ["1", "2", "4", "8", "16", "24", "32", "48", "64", "96",
                                       "128", "256", "512", "1024", "1536", "2048", "3072", "4096"]


@pytest.mark.parametrize("kwargs,field", [
    (dict(experts=8, topk=9, hidden=4096, intermediate=14336), "topk"),
    (dict(experts=0, topk=1, hidden=4096, intermediate=14336), "experts"),
    (dict(experts=8, topk=2, hidden=4096, intermediate=14336, tp=3), "intermediate"),
    (dict(experts=8, topk=2, hidden=4096, intermediate=14336, dtype="int4"), "dtype"),
    (dict(experts=8, topk=2, hidden=4096, intermediate=14336, dtype="fp8_w8a8",
          block_shape=[64, 64]), "block_shape"),
    (dict(experts=2, topk=1, hidden=4096, intermediate=1024, routing=[1.0, float("nan")]),
     "routing"),
])
def test_bad_layers_raise_naming_the_field(kwargs, field):
    with pytest.raises(carver.InvalidInputError, match=field):
        carver.recommend_moe(**kwargs)


def test_an_unknown_gpu_raises():
    with pytest.raises(carver.UnknownArchError):
        carver.recommend_moe(**MIXTRAL, arch="h999")


def test_moe_from_hf(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"num_local_experts": 8, "num_experts_per_tok": 2,
                                "hidden_size": 4096, "intermediate_size": 14336}))
    assert carver.moe_from_hf(path) == dict(experts=8, topk=2, hidden=4096, intermediate=14336)
    path.write_text(json.dumps({"hidden_size": 4096}))
    with pytest.raises(carver.InvalidInputError, match="mixture-of-experts"):
        carver.moe_from_hf(path)
