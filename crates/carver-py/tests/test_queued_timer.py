"""QueuedTimer (carver.moe_kernel), the timing loop of benches/moe/harness.py and moe_tune, on a
simulated GPU: a host that takes `host_us` to submit each launch and a GPU that takes `gpu_us` to
run it. Launches queued behind a long enough GPU sleep run back to back, and the events time the
GPU; with too short a sleep the queue drains and they time the host."""

import pytest

from carver import moe_kernel as mk


class SimulatedCuda:
    RATE = 1800.0  # GPU sleep cycles per microsecond

    def __init__(self, host_us, gpu_us):
        self.host_us, self.gpu_us = host_us, gpu_us
        self.host = 0.0  # host clock, us
        self.gpu = 0.0  # when the GPU's queue is done, us
        sim = self

        class Event:
            def __init__(self, enable_timing=True):
                self.t = None

            def record(self):
                sim.gpu = max(sim.gpu, sim.host)
                self.t = sim.gpu

            def synchronize(self):
                sim.host = max(sim.host, self.t)

            def elapsed_time(self, other):
                return (other.t - self.t) / 1e3  # ms, as torch's

        self.Event = Event

    def _sleep(self, cycles):
        self.gpu = max(self.gpu, self.host) + cycles / self.RATE

    def synchronize(self):
        self.host = max(self.host, self.gpu)

    def launch(self, _rep):
        self.host += self.host_us
        self.gpu = max(self.gpu, self.host) + self.gpu_us

    def perf_counter(self):
        return self.host / 1e6


class SimulatedTorch:
    def __init__(self, cuda):
        self.cuda = cuda


@pytest.fixture
def simulated(monkeypatch):
    def make(host_us, gpu_us):
        cuda = SimulatedCuda(host_us, gpu_us)
        monkeypatch.setattr(mk.time, "perf_counter", cuda.perf_counter)
        return cuda, mk.QueuedTimer(SimulatedTorch(cuda), 10)

    return make


def test_the_sleep_follows_the_host_cost_so_the_events_time_the_gpu(simulated):
    # A small fp8 layer on the H100: about 700 us of host work per launch, 77 us on the GPU.
    cuda, timer = simulated(700.0, 77.0)
    first = timer.run(cuda.launch, 10)
    assert max(first) > 600  # the first guess of the host cost (100 us) lets the queue drain
    for _ in range(30):
        timer.run(cuda.launch, 10)
    assert timer.run(cuda.launch, 10) == pytest.approx([77.0] * 10)


def test_long_launches_need_no_sleep(simulated):
    # One launch outlasts its host cost many times: the queue never drains, and only the first
    # rep carries the first submission's host time.
    cuda, timer = simulated(50.0, 5000.0)
    times = timer.run(cuda.launch, 5, est_us=5000.0)
    assert times[1:] == pytest.approx([5000.0] * 4)
    assert 5000.0 <= times[0] <= 5050.0
