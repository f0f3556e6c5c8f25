"""carver.triton: triton.Config conversion, the autotuning decorator on Triton's Autotuner (its
key handling, pruning and benchmarking path, with a fake kernel and a fake clock: no GPU), and
the pruning hook for a config list of one's own."""

import subprocess
import sys

import pytest

import carver
import carver.triton as ct
from conftest import real_triton

needs_triton = pytest.mark.skipif(real_triton() is None, reason="triton is not installed")
SPLIT_SHAPE = (64, 4096, 16384)  # a skinny long-K shape whose top-k includes split-K configs


def test_configs_are_the_recommendations_as_triton_configs(triton_or_stub):
    hints = carver.recommend(4096, 4096, 4096, target="triton", topk=8)
    configs = ct.configs(4096, 4096, 4096, topk=8)
    assert len(configs) == 8
    for c, h in zip(configs, hints):
        assert isinstance(c, triton_or_stub.Config)
        assert c.kwargs == h.config["kwargs"]
        assert (c.num_warps, c.num_stages) == (h.config["num_warps"], h.config["num_stages"])
        assert list(c.kwargs) == list(ct.META)


def test_configs_take_recommends_options(triton_or_stub):
    hints = carver.recommend(8, 6144, 4096, target="triton", arch="a100", dtype="bf16", topk=3)
    configs = ct.configs(8, 6144, 4096, arch="a100", dtype="bf16", topk=3)
    assert [c.kwargs for c in configs] == [h.config["kwargs"] for h in hints]


def test_the_kernels_own_names(triton_or_stub):
    c = ct.configs(1024, 1024, 1024, topk=1, block_m="BM", block_n="BN", block_k="BK",
                   group_m="GROUP", split_k="SPLITS")[0]
    h = carver.recommend(1024, 1024, 1024, target="triton", topk=1)[0].config["kwargs"]
    assert c.kwargs == {"BM": h["BLOCK_SIZE_M"], "BN": h["BLOCK_SIZE_N"], "BK": h["BLOCK_SIZE_K"],
                        "GROUP": h["GROUP_SIZE_M"], "SPLITS": h["SPLIT_K"]}


def test_a_kernel_without_split_k_gets_only_configs_it_can_run(triton_or_stub):
    hints = carver.recommend(*SPLIT_SHAPE, target="triton", topk=8)
    assert any(h.config["kwargs"]["SPLIT_K"] > 1 for h in hints), "the shape no longer tests this"
    configs = ct.configs(*SPLIT_SHAPE, topk=8, split_k=None, group_m=None)
    assert len(configs) == 8
    for c in configs:
        assert set(c.kwargs) == {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"}
    natives = [ct.native(c, split_k=None, group_m=None) for c in configs]
    assert all(n["kwargs"]["SPLIT_K"] == 1 and n["kwargs"]["GROUP_SIZE_M"] == 1 for n in natives)
    assert len({str(n) for n in natives}) == 8, "no duplicates"


def test_bad_names(triton_or_stub):
    with pytest.raises(carver.ArgumentTypeError, match="the kernel's name for BLOCK_SIZE_M is None"):
        ct.configs(64, 64, 64, block_m=None)
    with pytest.raises(carver.InvalidInputError, match="top-k = 0"):
        ct.configs(64, 64, 64, topk=0)


def test_without_triton_the_error_says_how_to_install_it():
    code = ("import sys; sys.modules['triton'] = None\n"
            "import carver, carver.triton\n"
            "try:\n    carver.triton.configs(64, 64, 64)\n"
            "except ImportError as e:\n"
            "    assert isinstance(e, carver.MissingDependencyError), type(e)\n    print(e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "pip install triton" in p.stdout


# ---- the decorator --------------------------------------------------------------------------

KERNEL_ARGS = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "BLOCK_SIZE_M",
               "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "SPLIT_K"]


def kernel_source():
    """A @triton.jit kernel (Triton reads its source, so it lives in a file)."""
    import triton
    import triton.language as tl

    @triton.jit
    def matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, BLOCK_SIZE_M: tl.constexpr,
               BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
               GROUP_SIZE_M: tl.constexpr, SPLIT_K):
        pass

    return matmul


class FakeKernel:
    """What Triton's Autotuner needs of a kernel (`arg_names`, `run`, `fn`), recording launches
    instead of making them."""

    def __init__(self):
        self.arg_names = list(KERNEL_ARGS)
        self.launches = []

        def matmul(*args):
            pass

        self.fn = matmul

    def run(self, *args, **kwargs):
        self.launches.append(kwargs)


class Tensor:
    def __init__(self, dtype="torch.float16"):
        self.dtype = dtype


@needs_triton
def test_the_decorator_is_tritons_autotuner_keyed_on_the_sizes():
    from triton.runtime.autotuner import Autotuner

    tuned = ct.autotune(arch="h100")(kernel_source())
    assert isinstance(tuned, Autotuner) and type(tuned).__name__ == "CarverAutotuner"
    assert tuned.keys == ["M", "N", "K"]
    assert tuned.early_config_prune is not None
    args = dict(a_ptr=None, b_ptr=None, c_ptr=None, M=4096, N=4096, K=4096, stride_am=4096)
    got = tuned.carver_configs_for(args)
    want = ct.configs(4096, 4096, 4096)
    assert [(c.kwargs, c.num_warps, c.num_stages) for c in got] == \
        [(c.kwargs, c.num_warps, c.num_stages) for c in want]
    # Triton's own pruning path asks carver, for the call's shape.
    tuned.nargs = dict(args, M=16)
    pruned = tuned.prune_configs({})
    assert [c.kwargs for c in pruned] == [c.kwargs for c in ct.configs(16, 4096, 4096)]
    assert set(tuned.carver_configs) == {(4096, 4096, 4096, 1, "f16"), (16, 4096, 4096, 1, "f16")}


@needs_triton
def test_a_tuning_run_benchmarks_carvers_configs_per_key_and_launches_the_fastest():
    kernel = FakeKernel()
    timings = []

    def do_bench(kernel_call, quantiles):
        # The fake clock: a config's time is its BLOCK_SIZE_K (so the smallest wins).
        before = len(kernel.launches)
        kernel_call()
        launched = kernel.launches[before]
        timings.append(launched)
        t = float(launched["BLOCK_SIZE_K"]) + launched["num_stages"] / 100
        return [t, t, t]

    tuned = ct.autotune(arch="h100", dtype_arg="a_ptr", do_bench=do_bench)(kernel)
    a, b, c = Tensor(), Tensor(), Tensor()

    def call(m, n, k, **kw):
        tuned.run(a, b, c, m, n, k, k, grid=(1,), **kw)

    call(4096, 4096, 4096)
    expected = ct.configs(4096, 4096, 4096)
    assert len(timings) == 8
    assert [{k: t[k] for k in ct.META} for t in timings] == [c.kwargs for c in expected]
    best = min(expected, key=lambda c: c.kwargs["BLOCK_SIZE_K"] + c.num_stages / 100)
    final = kernel.launches[-1]
    assert {k: final[k] for k in ct.META} == best.kwargs
    assert (final["num_warps"], final["num_stages"]) == (best.num_warps, best.num_stages)
    assert tuned.best_config.kwargs == best.kwargs

    # The same key again: no new benchmarks.
    call(4096, 4096, 4096)
    assert len(timings) == 8 and len(tuned.cache) == 1
    # A new shape is a new key, tuned on its own configs.
    call(333, 777, 999)
    assert len(timings) == 16 and len(tuned.cache) == 2
    assert [{k: t[k] for k in ct.META} for t in timings[8:]] == \
        [c.kwargs for c in ct.configs(333, 777, 999)]
    # A new dtype of the tensors is a new key too (Triton adds them), and carver plans for it.
    a, b, c = Tensor("torch.bfloat16"), Tensor("torch.bfloat16"), Tensor("torch.bfloat16")
    call(4096, 4096, 4096)
    assert len(tuned.cache) == 3
    assert (4096, 4096, 4096, 1, "torch.bfloat16") in tuned.carver_configs
    assert [{k: t[k] for k in ct.META} for t in timings[16:]] == \
        [c.kwargs for c in ct.configs(4096, 4096, 4096, dtype="bf16")]
    # Sizes given as keyword arguments are read too.
    tuned.run(a, b, c, M=64, N=64, K=64, stride_am=64, grid=(1,))
    assert (64, 64, 64, 1, "torch.bfloat16") in tuned.carver_configs


@needs_triton
def test_a_call_with_non_integer_sizes_raises_naming_the_argument():
    tuned = ct.autotune(arch="h100", do_bench=lambda f, quantiles: [1, 1, 1])(FakeKernel())
    with pytest.raises(carver.ArgumentTypeError) as e:
        tuned.run(None, None, None, 4096.0, 4096, 4096, 4096, grid=(1,))
    assert str(e.value) == ("kernel `matmul`: argument `M` (the M size) is 4096.0 (float); "
                            "accepted: an integer from 1 to 2147483647")
    with pytest.raises(carver.InvalidInputError, match="M is 0"):
        tuned.run(None, None, None, 0, 4096, 4096, 4096, grid=(1,))


@needs_triton
@pytest.mark.parametrize("options,message", [
    (dict(m="rows"), "kernel `matmul` has no argument `rows` (named as the one holding M); "
                     "its arguments are: a_ptr, b_ptr, c_ptr, M, N, K, stride_am, BLOCK_SIZE_M"),
    (dict(block_k="BK"), "kernel `matmul` has no parameter `BK` for carver to set"),
    (dict(dtype_arg="x_ptr"), "kernel `matmul` has no argument `x_ptr` (named as the one holding dtype)"),
    (dict(key=["M", "N"]), "key = ['M', 'N'] lacks `K`"),
    (dict(key=["M", "N", "K", "Q"]), "key names `Q`, not arguments of kernel `matmul`"),
    (dict(batch="B"), "kernel `matmul` has no argument `B` (named as the one holding batch)"),
])
def test_bad_decorator_arguments_name_what_is_wrong(options, message):
    with pytest.raises(carver.InvalidInputError) as e:
        ct.autotune(arch="h100", **options)(kernel_source())
    assert message in str(e.value)


@needs_triton
def test_bad_options_are_reported_when_decorating():
    with pytest.raises(carver.UnknownArchError):
        ct.autotune(arch="h1000")
    with pytest.raises(carver.InvalidInputError, match="unknown dtype `f17`"):
        ct.autotune(dtype="f17")
    with pytest.raises(carver.InvalidInputError, match="use two letters"):
        ct.autotune(layout="row")
    with pytest.raises(carver.InvalidInputError, match="top-k = 0"):
        ct.autotune(topk=0)
    with pytest.raises(carver.ArgumentTypeError, match="decorates a @triton.jit kernel"):
        ct.autotune(arch="h100")(lambda x: x)
    with pytest.raises(carver.ArgumentTypeError, match="the argument holding M is given as 3"):
        ct.autotune(arch="h100", m=3)(kernel_source())


@needs_triton
def test_tritons_options_pass_through():
    tuned = ct.autotune(arch="h100", reset_to_zero=["c_ptr"], restore_value=["a_ptr"],
                        cache_results=True)(kernel_source())
    assert tuned.reset_to_zero == ["c_ptr"] and tuned.restore_value == ["a_ptr"]
    assert tuned.cache_results


@needs_triton
def test_a_kernel_in_heuristics_is_accepted():
    import triton

    wrapped = triton.heuristics({"SPLIT_K": lambda args: 1})(kernel_source())
    tuned = ct.autotune(arch="h100", split_k=None)(wrapped)
    assert all(c.kwargs.keys() == {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M"}
               for c in tuned.carver_configs_for(dict(M=16, N=4096, K=14336)))


# ---- the pruning hook -----------------------------------------------------------------------

def test_prune_keeps_the_fastest_predicted_of_ones_own_list(triton_or_stub):
    Config = triton_or_stub.Config
    shape = dict(M=2048, N=2048, K=2048)
    own = [
        Config({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 1,
                "SPLIT_K": 1}, num_warps=1, num_stages=2),
        Config({"BLOCK_SIZE_M": 48, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8,
                "SPLIT_K": 1}, num_warps=4, num_stages=3),  # not a power of two: not priced
        Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8,
                "SPLIT_K": 1}, num_warps=8, num_stages=3),
        Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32}, num_warps=4,
               num_stages=4),  # group and split-K from the call, or neutral
        Config({"BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32}, num_warps=4, num_stages=4),  # no M block
    ]
    hook = ct.prune(topk=3, arch="h100")
    kept = hook(own, shape)
    natives = [ct.native(c) for c in own]
    priced = carver.price(2048, 2048, 2048, [natives[i] for i in (0, 1, 2, 3)], target="triton")
    assert [p.ok for p in priced] == [True, False, True, True]
    by_time = sorted((0, 2, 3), key=lambda i: priced[(0, 1, 2, 3).index(i)].time_us)
    assert kept == [own[i] for i in by_time]
    assert len(hook.last_ranking) == 5 and hook.last_ranking[4][1] is None
    # Asked for more than can be priced: the unpriced follow, in the order given.
    assert ct.prune(topk=5, arch="h100")(own, shape)[3:] == [own[1], own[4]]


def test_prune_reads_sizes_from_keyword_arguments_and_checks_them(triton_or_stub):
    Config = triton_or_stub.Config
    own = [Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32}, num_warps=4,
                  num_stages=s) for s in (2, 3, 4)]
    hook = ct.prune(topk=1, arch="h100", m="rows")
    assert len(hook(own, {"N": 64}, rows=64, K=64)) == 1
    with pytest.raises(carver.InvalidInputError, match="the kernel has no argument `rows`"):
        hook(own, {"M": 64, "N": 64, "K": 64})
    with pytest.raises(carver.ArgumentTypeError, match="argument `K` \\(the K size\\) is '64'"):
        ct.prune(arch="h100")(own, {"M": 64, "N": 64, "K": "64"})


@needs_triton
def test_prune_plugs_into_triton_autotune():
    import triton

    own = [triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64,
                          "GROUP_SIZE_M": 8, "SPLIT_K": 1}, num_warps=8, num_stages=3)
           for bm in (16, 32, 64, 128)]
    tuned = triton.autotune(configs=own, key=["M", "N", "K"],
                            prune_configs_by={"early_config_prune": ct.prune(topk=2, arch="h100")})(kernel_source())
    tuned.nargs = dict(M=4096, N=4096, K=4096)
    pruned = tuned.prune_configs({})
    assert len(pruned) == 2 and all(c in own for c in pruned)
