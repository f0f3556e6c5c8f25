"""Timing a key's configs in interleaved rounds, for `carver.triton.autotune`.

Triton's `Autotuner` times its configs one after another, each with `do_bench`. carver's picks
for a key are often within a few percent of each other, and a GPU's clock and temperature drift
over the second that sequential timing takes, so the config timed first or last can win by
drift alone (measured on an H100: the decorator's winner was 5-8% behind the best of the same
eight picks on 3 of 32 keys; docs/RESULTS.md, issue 13). Here every config is timed in each of
several short rounds, in a rotated order, and ranked by the median of its round medians, the
way benches/triton/harness.py times configs. As in `do_bench`, the L2 cache is cleared before
every launch.

The loop takes the device as an object (events, synchronize, clear_cache), so its logic is
tested without a GPU.
"""

import math

ROUNDS = 5
# Per config: about 10 ms of warm-up and 20 ms per round, so five rounds spend what `do_bench`
# spends (25 ms warm-up, 100 ms of repetitions).
WARMUP_MS = 10.0
ROUND_MS = 20.0
MAX_REPS = 200


def _median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _quantile(xs, q):
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _reps(budget_ms, estimate_ms):
    if not estimate_ms > 0:
        return MAX_REPS
    return max(1, min(MAX_REPS, int(budget_ms / estimate_ms)))


class TritonDevice:
    """The active Triton driver's device: events, synchronize and the L2-clearing buffer."""

    def __init__(self):
        from triton.runtime.driver import driver

        self._driver = driver.active
        self._interface = self._driver.get_device_interface()
        self._cache = self._driver.get_empty_cache_for_benchmark()

    def event(self):
        return self._interface.Event(enable_timing=True)

    def synchronize(self):
        self._interface.synchronize()

    def clear_cache(self):
        self._driver.clear_cache(self._cache)


def failures():
    """The exceptions that make Triton's autotuner give a config an infinite time (a config the
    GPU cannot run), as the installed Triton names them."""
    found = []
    try:
        from triton.runtime.errors import OutOfResources

        found.append(OutOfResources)
    except ImportError:
        pass
    try:
        from triton.runtime.errors import PTXASError

        found.append(PTXASError)
    except ImportError:
        pass
    try:
        from triton.compiler.errors import CompileTimeAssertionFailure

        found.append(CompileTimeAssertionFailure)
    except ImportError:
        pass
    return tuple(found)


def time_interleaved(calls, device, *, rounds=ROUNDS, round_ms=ROUND_MS, warmup_ms=WARMUP_MS,
                     skip=()):
    """Times each `(key, fn)` of `calls`; returns {key: [median, 20th, 80th percentile]} in ms,
    the shape Triton's autotuner compares. `fn` raising one of `skip` (the first call compiles)
    gets [inf, inf, inf]; anything else propagates."""
    inf = [math.inf] * 3
    result = {}
    live = []
    for key, fn in calls:
        try:
            fn()
            device.synchronize()
        except skip:
            result[key] = list(inf)
            continue
        live.append((key, fn))

    reps = {}
    for key, fn in live:
        start, end = device.event(), device.event()
        start.record()
        for _ in range(3):
            device.clear_cache()
            fn()
        end.record()
        device.synchronize()
        estimate = start.elapsed_time(end) / 3
        reps[key] = _reps(round_ms, estimate)
        for _ in range(_reps(warmup_ms, estimate)):
            fn()
    device.synchronize()

    round_medians = {key: [] for key, _ in live}
    pooled = {key: [] for key, _ in live}
    for r in range(rounds):
        shift = r % len(live) if live else 0
        order = live[shift:] + live[:shift]
        events = []
        for key, fn in order:
            pairs = [(device.event(), device.event()) for _ in range(reps[key])]
            for start, end in pairs:
                device.clear_cache()
                start.record()
                fn()
                end.record()
            events.append((key, pairs))
        device.synchronize()
        for key, pairs in events:
            times = [start.elapsed_time(end) for start, end in pairs]
            round_medians[key].append(_median(times))
            pooled[key].extend(times)

    for key, _ in live:
        result[key] = [_median(round_medians[key]), _quantile(pooled[key], 0.2),
                       _quantile(pooled[key], 0.8)]
    return result
