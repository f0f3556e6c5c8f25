"""The decorator's interleaved timing (`carver._interleaved`), on a simulated GPU clock."""

import math

import pytest

from carver import _interleaved
from carver import triton as ct

from test_triton import FakeKernel, Tensor, needs_triton


class Clock:
    """A GPU that runs each launch synchronously: time advances by the launch's duration,
    scaled by a drift that grows with every launch (a GPU warming up)."""

    def __init__(self, drift_per_launch=0.0):
        self.now = 0.0
        self.launches = 0
        self.drift = drift_per_launch
        self.order = []

    def spend(self, ms):
        self.now += ms * (1.0 + self.drift * self.launches)
        self.launches += 1


class Event:
    def __init__(self, clock):
        self.clock = clock
        self.at = None

    def record(self):
        self.at = self.clock.now

    def elapsed_time(self, other):
        return other.at - self.at


class Device:
    def __init__(self, clock, clear_ms=0.01):
        self.clock = clock
        self.clear_ms = clear_ms
        self.clears = 0

    def event(self):
        return Event(self.clock)

    def synchronize(self):
        pass

    def clear_cache(self):
        self.clears += 1
        self.clock.now += self.clear_ms


def launch(clock, name, ms):
    def fn():
        clock.order.append(name)
        clock.spend(ms)
    return fn


def test_each_config_gets_its_own_time_and_the_l2_is_cleared_before_each_timed_launch():
    clock = Clock()
    device = Device(clock)
    calls = [(name, launch(clock, name, ms)) for name, ms in (("a", 0.5), ("b", 0.25), ("c", 1.0))]
    got = _interleaved.time_interleaved(calls, device, rounds=3, round_ms=5, warmup_ms=2)
    assert set(got) == {"a", "b", "c"}
    for name, ms in (("a", 0.5), ("b", 0.25), ("c", 1.0)):
        assert got[name] == pytest.approx([ms, ms, ms])
    assert device.clears > 0


def test_rounds_rotate_the_order():
    clock = Clock()
    calls = [(name, launch(clock, name, 1.0)) for name in "abc"]
    _interleaved.time_interleaved(calls, Device(clock), rounds=3, round_ms=1, warmup_ms=1)
    # 1 compile + 3 estimate + 1 warm-up launch each, then rounds of one rep each.
    timed = clock.order[3 * 5:]
    assert timed == list("abc") + list("bca") + list("cab")


def test_a_config_the_gpu_cannot_run_is_infinite_and_other_errors_propagate():
    class OutOfResources(Exception):
        pass

    clock = Clock()

    def too_big():
        raise OutOfResources("shared memory")

    calls = [("ok", launch(clock, "ok", 1.0)), ("big", too_big)]
    got = _interleaved.time_interleaved(calls, Device(clock), rounds=2, skip=(OutOfResources,))
    assert got["big"] == [math.inf] * 3 and got["ok"][0] == pytest.approx(1.0)

    with pytest.raises(OutOfResources):
        _interleaved.time_interleaved(calls, Device(clock), rounds=2, skip=())


def test_drift_does_not_pick_the_winner():
    # Timed one after another on a warming GPU, the first config looks fastest although the
    # second is 2% faster; timed in rotated rounds, the faster one wins.
    def run(interleaved):
        clock = Clock(drift_per_launch=2e-4)
        calls = [("first", launch(clock, "first", 1.00)), ("second", launch(clock, "second", 0.98))]
        if interleaved:
            return _interleaved.time_interleaved(calls, Device(clock), rounds=5, round_ms=20)
        return {k: _interleaved.time_interleaved([(k, fn)], Device(clock), rounds=5, round_ms=20)[k]
                for k, fn in calls}

    sequential = run(False)
    assert sequential["first"][0] < sequential["second"][0]
    interleaved = run(True)
    assert interleaved["second"][0] < interleaved["first"][0]


@needs_triton
def test_the_decorator_times_a_keys_configs_together_and_launches_the_fastest(monkeypatch):
    clock = Clock()
    device = Device(clock)
    monkeypatch.setattr(_interleaved, "TritonDevice", lambda: device)

    class TimedKernel(FakeKernel):
        def run(self, *args, **kwargs):
            super().run(*args, **kwargs)
            clock.order.append(tuple(kwargs[k] for k in ct.META))
            clock.spend(float(kwargs["BLOCK_SIZE_K"]) / 64 + kwargs["num_stages"] / 100)

    kernel = TimedKernel()
    tuned = ct.autotune(arch="h100", dtype_arg="a_ptr")(kernel)
    assert tuned.carver_interleave
    a, b, c = Tensor(), Tensor(), Tensor()
    tuned.run(a, b, c, 4096, 4096, 4096, 4096, grid=(1,))
    expected = ct.configs(4096, 4096, 4096)
    best = min(expected, key=lambda c: c.kwargs["BLOCK_SIZE_K"] / 64 + c.num_stages / 100)
    assert tuned.best_config.kwargs == best.kwargs and tuned.best_config.num_stages == best.num_stages
    assert set(tuned.configs_timings) == set(expected)
    # Launched in rounds: the launches of one config come in at least one run per round (one
    # after another, each config's launches would be one run).
    runs = 1 + sum(1 for x, y in zip(clock.order, clock.order[1:]) if x != y)
    assert runs >= 8 * _interleaved.ROUNDS
    final = kernel.launches[-1]
    assert {k: final[k] for k in ct.META} == best.kwargs
    # The same key again: nothing is timed.
    launches = len(kernel.launches)
    tuned.run(a, b, c, 4096, 4096, 4096, 4096, grid=(1,))
    assert len(kernel.launches) == launches + 1


@needs_triton
def test_a_do_bench_of_ones_own_or_interleave_false_gives_tritons_sequential_timing():
    seen = []

    def do_bench(kernel_call, quantiles):
        seen.append(kernel_call)
        return [1.0, 1.0, 1.0]

    tuned = ct.autotune(arch="h100", dtype_arg="a_ptr", do_bench=do_bench)(FakeKernel())
    assert not tuned.carver_interleave
    tuned.run(Tensor(), Tensor(), Tensor(), 512, 512, 512, 512, grid=(1,))
    assert len(seen) == 8
    assert not ct.autotune(arch="h100", interleave=False)(FakeKernel()).carver_interleave
