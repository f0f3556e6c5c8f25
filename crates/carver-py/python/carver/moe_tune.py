"""Measured refinement of carver's fused-MoE config file on this machine's GPU.

    python -m carver.moe_tune --experts 8 --topk 2 --hidden 4096 --intermediate 14336 --tp 2 \\
        --output configs/

For every batch size of vLLM's ladder, carver's top-k configs for the layer (the model only,
`carver.recommend_moe(..., candidates=k)`) and up to `--explore` structural neighbours of its
first picks (BLOCK_SIZE_K doubled for BLOCK_SIZE_N halved, one more or fewer stage, ...) are timed with carver's fused-MoE Triton kernel
(`carver.moe_kernel`: both GEMMs of the layer with one config, uniform random routing with a
fixed seed per batch size, warm-up, CUDA events, median of several rounds, the candidates
interleaved in a fresh order every round so clock drift favours none). The winner's output is
checked against the PyTorch reference of the layer, and the measured file is written in vLLM's
name and format (`E=..,N=..,device_name=...json`), the device name as vLLM spells this GPU.

Resumable: after each batch size the state (`<file>.state.json` next to the output) is written
atomically; a rerun skips the batch sizes it holds. A state for another problem (experts, N,
hidden, top-k, dtype, block shape or device) is refused; `--restart` discards it.

From Python: `carver.moe_tune.tune(Problem(...), output_dir)`; the timer and the recommender
can be replaced (see `tune`), which is how the tests run it without a GPU.
"""

import argparse
import json
import math
import os
import random
import statistics
import sys
import time

from ._carver import InvalidInputError, MissingDependencyError

__all__ = ["BATCH_SIZES", "Problem", "TuneError", "StateMismatchError", "tune", "recommend",
           "vllm_file_name", "vllm_device_name", "load_state", "write_json_atomic", "Progress",
           "GpuMeasurer", "precompile", "main"]

STATE_SCHEMA = 1
# vLLM's tuner batch sizes (benchmarks/kernels/benchmark_moe.py), the keys of its config files.
BATCH_SIZES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)
DTYPES = ("bf16", "fp16", "fp8_w8a8")


class TuneError(RuntimeError):
    """A tuning run cannot go on (no GPU, a wrong result, ...): the message says why."""


class StateMismatchError(TuneError):
    """The state file next to the output belongs to another problem."""


# ---------------------------------------------------------------------------------------------
# The problem
# ---------------------------------------------------------------------------------------------

class Problem:
    """One MoE layer: E experts, top-k per token, hidden size K, intermediate size (whole model;
    N = intermediate / tp per shard), dtype, and fp8's block shape ([128, 128]) or None."""

    def __init__(self, experts, topk, hidden, intermediate, tp=1, dtype="bf16", block_shape=None):
        for name, v in (("experts", experts), ("topk", topk), ("hidden", hidden),
                        ("intermediate", intermediate), ("tp", tp)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise InvalidInputError(f"{name} must be an integer, got {v!r}")
            if v < 1:
                raise InvalidInputError(f"{name} must be >= 1, got {v}")
        if topk > experts:
            raise InvalidInputError(f"topk ({topk}) is greater than experts ({experts})")
        if intermediate % tp:
            raise InvalidInputError(f"intermediate ({intermediate}) is not divisible by tp ({tp})")
        if dtype not in DTYPES:
            raise InvalidInputError(f"dtype {dtype!r} is not supported; accepted: {', '.join(DTYPES)}")
        if block_shape is not None:
            bs = list(block_shape)
            if dtype != "fp8_w8a8":
                raise InvalidInputError("block_shape is only for dtype fp8_w8a8")
            if len(bs) != 2 or any(isinstance(b, bool) or not isinstance(b, int) or b < 16 or b & (b - 1) for b in bs):
                raise InvalidInputError(f"block_shape must be two powers of two >= 16, like [128, 128]; got {block_shape!r}")
            block_shape = bs
        self.experts, self.topk, self.hidden, self.intermediate, self.tp = experts, topk, hidden, intermediate, tp
        self.dtype, self.block_shape = dtype, block_shape
        self.n = intermediate // tp
        for name, v in (("hidden", hidden), ("intermediate / tp", self.n)):
            if v % 16:
                raise InvalidInputError(f"{name} ({v}) must be a multiple of 16 for the kernel's vectorised loads")

    def identity(self, device_name):
        """What a state file must match to be resumed."""
        return {"experts": self.experts, "n": self.n, "hidden": self.hidden, "topk": self.topk,
                "dtype": self.dtype, "block_shape": self.block_shape, "device": device_name}

    def to_dict(self):
        return {"experts": self.experts, "topk": self.topk, "hidden": self.hidden,
                "intermediate": self.intermediate, "tp": self.tp, "n": self.n, "dtype": self.dtype,
                "block_shape": self.block_shape}


def vllm_device_name(torch_name):
    """vLLM's spelling of a CUDA device name in config file names: spaces become underscores."""
    return torch_name.replace(" ", "_")


def vllm_file_name(experts, n, device_name, dtype="bf16", block_shape=None):
    """`E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3[,dtype=fp8_w8a8][,block_shape=[128,128]].json`."""
    name = f"E={experts},N={n},device_name={device_name}"
    if dtype == "fp8_w8a8":
        name += ",dtype=fp8_w8a8"
    if block_shape is not None:
        name += f",block_shape=[{block_shape[0]},{block_shape[1]}]"
    return name + ".json"


def check_batch_sizes(batch_sizes):
    if not batch_sizes:
        raise InvalidInputError("batch_sizes is empty")
    out = []
    for b in batch_sizes:
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise InvalidInputError(f"batch sizes must be positive integers, got {b!r}")
        if b not in out:
            out.append(b)
    return sorted(out)


# ---------------------------------------------------------------------------------------------
# carver's model-only answer (every call to carver.recommend_moe is here)
# ---------------------------------------------------------------------------------------------

SIX = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")


def recommend(problem, arch, batch_sizes, candidates):
    """carver's ranked configs per batch size: {"file_name", "device_name", "batches": {m: [
    {"config": {six keys}, "predicted_us": float or None}, ...] best first}, "seconds"}."""
    import carver

    fn = getattr(carver, "recommend_moe", None)
    if fn is None:
        raise TuneError("this carver build has no recommend_moe (MoE support): rebuild the package")
    t0 = time.perf_counter()
    rec = fn(problem.experts, problem.topk, problem.hidden, problem.intermediate, tp=problem.tp,
             dtype=problem.dtype, block_shape=problem.block_shape, arch=arch,
             batch_sizes=list(batch_sizes), candidates=candidates)
    secs = time.perf_counter() - t0
    batches = {}
    for b in rec.batches:
        hints = sorted(b.hints, key=lambda h: h.rank)
        batches[int(b.m)] = [{"config": {k: int(h.config[k]) for k in SIX},
                              "predicted_us": getattr(h, "predicted_us", None)} for h in hints]
    return {"file_name": rec.file_name, "device_name": rec.device_name, "batches": batches, "seconds": secs}


# ---------------------------------------------------------------------------------------------
# State and files
# ---------------------------------------------------------------------------------------------

def write_json_atomic(path, obj, indent=None):
    """Write JSON to a temporary file in the same folder, flush it to disk, then rename it."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=indent)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_state(path, identity):
    """The saved state at `path` for this problem, or None when there is none. Raises
    StateMismatchError when it belongs to another problem, TuneError when unreadable."""
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            st = json.load(f)
    except (OSError, ValueError) as e:
        raise TuneError(f"cannot read the state file {path} ({e}); delete it or pass --restart") from e
    if not isinstance(st, dict) or st.get("schema") != STATE_SCHEMA or not isinstance(st.get("done"), dict):
        raise TuneError(f"{path} is not a carver.moe_tune state (schema {STATE_SCHEMA}); delete it or pass --restart")
    theirs = st.get("problem") or {}
    diff = [f"{k}: state has {theirs.get(k)!r}, this run {v!r}" for k, v in identity.items() if theirs.get(k) != v]
    if diff:
        raise StateMismatchError(
            f"the state file {path} is for another problem ({'; '.join(diff)}); it was not resumed. "
            "Pass --restart to discard it, or another --output folder")
    return st


def vllm_file_content(done):
    """{"1": {six keys}, "2": ...} ordered by batch size, as vLLM writes its files."""
    return {str(m): {k: done[str(m)]["winner"][k] for k in SIX}
            for m in sorted(int(x) for x in done)}


# ---------------------------------------------------------------------------------------------
# Progress display (stderr, no dependency)
# ---------------------------------------------------------------------------------------------

def _fmt_s(s):
    if s is None or not math.isfinite(s):
        return "?"
    s = int(round(s))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class Progress:
    """A one-line progress bar on a stream: redrawn in place on a terminal, one line per update
    otherwise (logs). `clock` is injectable for tests."""

    def __init__(self, total, stream=None, width=24, clock=time.monotonic, label="moe_tune"):
        self.total, self.done, self.width, self.clock, self.label = total, 0, width, clock, label
        self.stream = stream if stream is not None else sys.stderr
        self.t0 = clock()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.timed = 0  # items that cost time (resumed ones do not count toward the ETA)
        self.timed_s = 0.0

    def line(self, note=""):
        frac = self.done / self.total if self.total else 1.0
        fill = int(round(frac * self.width))
        bar = "#" * fill + "-" * (self.width - fill)
        elapsed = self.clock() - self.t0
        eta = None
        if self.timed:
            eta = self.timed_s / self.timed * (self.total - self.done)
        return (f"[{self.label}] [{bar}] {self.done}/{self.total} elapsed {_fmt_s(elapsed)} "
                f"ETA {_fmt_s(eta) if self.done < self.total else '0s'}" + (f"  {note}" if note else ""))

    def draw(self, note=""):
        text = self.line(note)
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def advance(self, note="", seconds=None):
        self.done += 1
        if seconds is not None:
            self.timed += 1
            self.timed_s += seconds
        self.draw(note)

    def close(self):
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


# ---------------------------------------------------------------------------------------------
# The GPU measurer
# ---------------------------------------------------------------------------------------------

def _compile_worker(args):
    """Spawned worker: compile (and launch once, on a tiny problem with the same integer
    specialisation) one config, so Triton's on-disk cache holds its binary."""
    cfg, dtype, block_shape = args
    t0 = time.perf_counter()
    try:
        import torch
        from carver import moe_kernel as mk

        key = (dtype, tuple(block_shape) if block_shape else None)
        cache = _compile_worker.__dict__.setdefault("problems", {})
        if key not in cache:
            x, w1, w2, tw, ti = mk.random_problem(16, 2, 2, 256, 128, dtype="bf16" if dtype == "fp8_w8a8" else dtype,
                                                  seed=7)
            if dtype == "fp8_w8a8":
                q1, s1 = mk.quantize_weights_fp8(w1, block_shape)
                q2, s2 = mk.quantize_weights_fp8(w2, block_shape)
                cache[key] = (x, q1, q2, tw, ti, s1, s2)
            else:
                cache[key] = (x, w1, w2, tw, ti, None, None)
        x, w1, w2, tw, ti, s1, s2 = cache[key]
        mk.fused_moe(x, w1, w2, tw, ti, cfg, w1_scale=s1, w2_scale=s2, block_shape=block_shape)
        torch.cuda.synchronize()
        return {"ok": True, "seconds": time.perf_counter() - t0}
    except Exception as e:  # noqa: BLE001 - recorded against the config
        return {"ok": False, "seconds": time.perf_counter() - t0, "error": f"{type(e).__name__}: {e}"[:2000]}


def precompile(configs, dtype="bf16", block_shape=None, workers=None, log=None):
    """Compile `configs` in parallel worker processes (spawned; each warms Triton's on-disk
    cache, which this process then reads). Returns {config_key: result}. Falls back to nothing
    (compilation then happens at first launch) when processes cannot be started."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    from .moe_kernel import config_key

    uniq = {}
    for c in configs:
        uniq.setdefault(config_key(c), c)
    if not uniq:
        return {}
    workers = workers or min(16, os.cpu_count() or 1)
    # biggest tiles first: they compile slowest
    order = sorted(uniq.items(), key=lambda kv: -(kv[1]["BLOCK_SIZE_M"] * kv[1]["BLOCK_SIZE_N"] *
                                                    kv[1]["BLOCK_SIZE_K"] * kv[1]["num_stages"]))
    results = {}
    try:
        with ProcessPoolExecutor(max_workers=min(workers, len(order)), mp_context=mp.get_context("spawn")) as pool:
            futs = [(k, pool.submit(_compile_worker, (c, dtype, block_shape))) for k, c in order]
            for i, (k, f) in enumerate(futs):
                try:
                    results[k] = f.result()
                except Exception as e:  # noqa: BLE001 - a broken pool: the rest compile in-process
                    results[k] = {"ok": False, "error": f"worker failed: {type(e).__name__}: {e}"[:500]}
                if log and (i + 1) % 50 == 0:
                    log(f"compiled {i + 1}/{len(futs)}")
    except (OSError, RuntimeError) as e:
        if log:
            log(f"parallel compilation unavailable ({e}); configs compile at first launch")
    return results


class GpuMeasurer:
    """Times configs of one problem with the fused-MoE kernel on the current CUDA device."""

    def __init__(self, problem, seed=0, rounds=5, reps=10, warmup_ms=50.0, tol=None, workers=None, log=None):
        try:
            import torch
        except ImportError as e:
            raise MissingDependencyError(f"carver.moe_tune needs PyTorch with CUDA ({e}): pip install torch") from e
        from . import moe_kernel as mk

        mk._kernel()  # a clear MissingDependencyError without Triton
        if not torch.cuda.is_available():
            raise TuneError("no CUDA GPU is visible to PyTorch: carver.moe_tune times kernels on this machine's GPU "
                            "(carver.recommend_moe gives the model-only file without one)")
        self.torch, self.mk, self.p = torch, mk, problem
        self.seed, self.rounds, self.reps, self.warmup_ms = seed, rounds, reps, warmup_ms
        self.tol = tol if tol is not None else (6e-2 if problem.dtype == "fp8_w8a8" else 2e-2)
        self.workers, self.log = workers, log
        self.device_name = vllm_device_name(torch.cuda.get_device_name())
        self._weights = None
        self._runner_m = None
        self._runner = None
        self._timer = None

    def prepare(self, configs):
        return precompile(configs, self.p.dtype, self.p.block_shape, self.workers, self.log)

    def _ensure_weights(self):
        if self._weights is not None:
            return self._weights
        torch, mk, p = self.torch, self.mk, self.p
        base = "bf16" if p.dtype == "fp8_w8a8" else p.dtype
        _, w1, w2, _, _ = mk.random_problem(1, p.experts, p.topk, p.hidden, p.n, dtype=base, seed=self.seed)
        # Copies enough for one token's experts (the ladder's smallest batch) to miss the L2.
        w1s, w2s, s1, s2 = mk.timing_weights(w1, w2, p.dtype, p.block_shape, topk=p.topk, min_tokens=1)
        self._weights = (w1s, w2s, s1, s2)
        return self._weights

    def _runner_for(self, m):
        if self._runner_m == m:
            return self._runner
        torch, mk, p = self.torch, self.mk, self.p
        w1s, w2s, s1, s2 = self._ensure_weights()
        base = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8_w8a8": torch.bfloat16}[p.dtype]
        g = torch.Generator(device="cuda").manual_seed(self.seed * 100003 + m)
        x = torch.randn((m, p.hidden), generator=g, device="cuda", dtype=base)
        tw, ti = mk.random_routing(m, p.experts, p.topk, seed=self.seed * 100003 + m)
        if p.dtype == "fp8_w8a8":
            self._runner = mk.Fp8LayerRunner(x, w1s, w2s, s1, s2, tw, ti, p.block_shape)
        else:
            self._runner = mk.LayerRunner(x, w1s, w2s, tw, ti)
        self._runner_m = m
        return self._runner

    def time(self, m, configs):
        """Median microseconds per layer (both GEMMs) for each config, interleaved rounds."""
        torch = self.torch
        run = self._runner_for(m)
        n = len(configs)
        for c in configs:  # load every binary and settle the allocator
            run.launch(c, 0)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        while (time.perf_counter() - t0) * 1e3 < self.warmup_ms:
            run.launch(configs[0], 0)
            torch.cuda.synchronize()
        if self._timer is None:
            self._timer = self.mk.QueuedTimer(torch, self.reps)
        per = [[] for _ in range(n)]
        rng = random.Random(self.seed * 7919 + m)
        rot = [0]

        def launcher(c):
            def go(_r):
                run.launch(c, rot[0])
                rot[0] += 1
            return go

        for _ in range(self.rounds):
            order = list(range(n))
            rng.shuffle(order)
            for i in order:
                # back-to-back launches behind a GPU sleep that outlasts their host cost
                per[i].append(statistics.median(self._timer.run(launcher(configs[i]), self.reps)))
        return [statistics.median(x) for x in per]

    def check(self, m, config):
        """Relative error of the layer's output with `config` against the PyTorch reference."""
        torch, mk = self.torch, self.mk
        run = self._runner_for(m)
        out = run.layer(config, 0)
        ref = run.reference()
        err = mk.rel_error(out, ref)
        del ref
        return err


# ---------------------------------------------------------------------------------------------
# The tuning loop
# ---------------------------------------------------------------------------------------------

# Moves from a config to its structural neighbours, nearest first: the same bytes per stage
# spent deeper in K rather than wider in N (and back), then one parameter at a time. Measured on
# an H100 and an H200 (benches/moe/runs), the fastest config of a batch size is most often one
# or two such moves from the model's first picks (the model's ranking within one structure is
# what it knows least), so timing these is where a few measurements buy the most.
_MOVES = (
    {"BLOCK_SIZE_N": 0.5, "BLOCK_SIZE_K": 2.0}, {"BLOCK_SIZE_N": 2.0, "BLOCK_SIZE_K": 0.5},
    {"BLOCK_SIZE_K": 2.0}, {"BLOCK_SIZE_N": 0.5}, {"num_stages": -1}, {"num_stages": +1},
    {"num_warps": None}, {"GROUP_SIZE_M": None}, {"BLOCK_SIZE_M": 0.5}, {"BLOCK_SIZE_M": 2.0},
    {"BLOCK_SIZE_K": 0.5}, {"BLOCK_SIZE_N": 2.0},
)


# How much of carver's ranking exploration may draw neighbours from (its largest top-k).
RANKED_FOR_EXPLORE = 1024


def neighbours(config, legal_keys):
    """`config`'s structural neighbours that are in the legal space (`legal_keys`: config key ->
    config), nearest first."""
    from .moe_kernel import config_key

    out = []
    for move in _MOVES:
        c = dict(config)
        for k, f in move.items():
            if k == "num_warps":
                c[k] = 8 if c[k] == 4 else 4
            elif k == "GROUP_SIZE_M":
                c[k] = 16 if c[k] == 1 else 1
            elif k == "num_stages":
                c[k] = c[k] + f
            else:
                c[k] = int(c[k] * f)
        key = config_key(c)
        if key in legal_keys and key != config_key(config):
            out.append(legal_keys[key])
    return out


def explore_set(hints, explore, legal_keys):
    """Up to `explore` neighbours of the model's first picks (those of its first pick, then its
    second, ...), none of them among the picks."""
    from .moe_kernel import config_key

    seen = {config_key(h["config"]) for h in hints}
    out = []
    for h in hints:
        for c in neighbours(h["config"], legal_keys):
            if len(out) >= explore:
                return out
            k = config_key(c)
            if k not in seen:
                seen.add(k)
                out.append(c)
    return out


def tune(problem, output_dir, *, batch_sizes=BATCH_SIZES, candidates=8, explore=16, arch=None, restart=False,
         recommender=None, measurer=None, device_name=None, progress_stream=None, log=None, clock=time.monotonic):
    """Measure carver's top-`candidates` per batch size, and up to `explore` structural
    neighbours of its first picks, and write the measured vLLM file.

    recommender(problem, arch, batch_sizes, candidates) -> recommend()'s dict (default: carver's).
    measurer: an object with prepare(configs), time(m, configs) -> [us], check(m, config) -> rel
    error, and `tol` (default: GpuMeasurer on this GPU). device_name: vLLM's spelling (default:
    the measurer's). Returns a summary dict (path, state path, per batch size results, seconds)."""
    if not isinstance(candidates, int) or isinstance(candidates, bool) or candidates < 1:
        raise InvalidInputError(f"candidates must be a positive integer, got {candidates!r}")
    if not isinstance(explore, int) or isinstance(explore, bool) or explore < 0:
        raise InvalidInputError(f"explore must be a non-negative integer, got {explore!r}")
    batch_sizes = check_batch_sizes(list(batch_sizes))
    log = log or (lambda msg: print(f"[moe_tune] {msg}", file=progress_stream or sys.stderr, flush=True))
    t_start = clock()
    if measurer is None:
        measurer = GpuMeasurer(problem, log=log)
    device_name = device_name or getattr(measurer, "device_name", None)
    if not device_name:
        raise InvalidInputError("device_name is needed (vLLM's spelling, e.g. NVIDIA_H100_80GB_HBM3)")
    if arch is None:
        arch = arch_for_device(device_name)
    fname = vllm_file_name(problem.experts, problem.n, device_name, problem.dtype, problem.block_shape)
    out_path = os.path.join(output_dir, fname)
    state_path = out_path + ".state.json"
    ident = problem.identity(device_name)
    state = None if restart else load_state(state_path, ident)
    if state is None:
        state = {"schema": STATE_SCHEMA, "problem": ident, "shape": problem.to_dict(), "arch": arch,
                 "candidates": candidates, "done": {}, "seconds": {}}
    todo = [m for m in batch_sizes if str(m) not in state["done"]]
    rec = None
    if todo:
        recommender = recommender or recommend
        # With exploration, carver's whole ranking: neighbours are taken only among the configs it
        # ranks (legal on this GPU, none that would spill), never from a rule written here.
        rec = recommender(problem, arch, todo, max(candidates, RANKED_FOR_EXPLORE) if explore else candidates)
        state["seconds"]["recommend"] = rec.get("seconds")
        missing = [m for m in todo if not rec["batches"].get(m)]
        if missing:
            raise TuneError(f"carver returned no configs for batch sizes {missing}")
        t_c = clock()
        from .moe_kernel import config_key as _key

        extra = {}
        for m in todo:
            ranked = rec["batches"][m]
            legal = {_key(h["config"]): h["config"] for h in ranked}
            extra[m] = explore_set(ranked[:candidates], explore, legal)
        allc = [h["config"] for m in todo for h in rec["batches"][m][:candidates]]
        allc += [c for m in todo for c in extra[m]]
        compiled = measurer.prepare(allc) or {}
        state["seconds"]["compile"] = state["seconds"].get("compile", 0.0) + (clock() - t_c)
        failed = {k for k, r in compiled.items() if not r.get("ok")}
    prog = Progress(len(batch_sizes), stream=progress_stream, clock=clock)
    prog.done = len(batch_sizes) - len(todo)
    if prog.done:
        log(f"resuming {state_path}: {prog.done} of {len(batch_sizes)} batch sizes already measured")
    prog.draw("starting")
    from .moe_kernel import config_key

    for m in todo:
        t_m = clock()
        hints = rec["batches"][m][:candidates]
        cfgs, keys = [], []
        for c in [h["config"] for h in hints] + extra[m]:
            k = config_key(c)
            if k in failed or k in keys:
                continue
            cfgs.append(c)
            keys.append(k)
        if not cfgs:
            raise TuneError(f"batch size {m}: none of carver's {len(hints)} configs compiled")
        times = measurer.time(m, cfgs)
        if len(times) != len(cfgs):
            raise TuneError(f"the measurer returned {len(times)} times for {len(cfgs)} configs")
        ranked = sorted(range(len(cfgs)), key=lambda i: times[i])
        winner, err = None, None
        for i in ranked:  # the fastest config whose output is right
            e = measurer.check(m, cfgs[i])
            if e is not None and e < measurer.tol:
                winner, err = i, e
                break
            log(f"batch size {m}: {keys[i]} computed a wrong result (relative error {e}); skipped")
        if winner is None:
            raise TuneError(f"batch size {m}: no candidate computed the right result")
        state["done"][str(m)] = {
            "winner": cfgs[winner], "winner_key": keys[winner], "winner_us": times[winner], "rel_err": err,
            "winner_from": ("carver" if keys[winner] in {config_key(h["config"]) for h in hints}
                            else "explored"),
            "carver_top1_key": config_key(hints[0]["config"]),
            "carver_top1_us": (times[keys.index(config_key(hints[0]["config"]))]
                               if config_key(hints[0]["config"]) in keys else None),
            "times_us": dict(zip(keys, times)),
            "seconds": clock() - t_m,
        }
        write_json_atomic(state_path, state)
        prog.advance(f"M={m}: {keys[winner]} {times[winner]:.1f} us", seconds=clock() - t_m)
    prog.close()
    content = vllm_file_content(state["done"])
    # only the requested batch sizes (a state can hold more)
    content = {k: v for k, v in content.items() if int(k) in batch_sizes}
    write_json_atomic(out_path, content, indent=4)
    total = clock() - t_start
    log(f"wrote {out_path} ({len(content)} batch sizes) in {_fmt_s(total)}")
    return {"path": out_path, "state_path": state_path, "file_name": fname, "seconds": total,
            "carver_file_name": rec.get("file_name") if rec else None,
            "results": {int(k): v for k, v in state["done"].items() if int(k) in batch_sizes}}


def arch_for_device(device_name):
    """carver's arch name for a CUDA device name (vLLM's spelling), for the model-only ranking."""
    n = device_name.upper()
    for key, arch in (("H200", "h200"), ("H100", "h100"), ("H800", "h800"), ("H20", "h20"), ("A100", "a100"),
                      ("L40S", "l40s"), ("B200", "b200")):
        if key in n:
            return arch
    raise InvalidInputError(f"cannot tell carver's arch for device {device_name!r}: pass --arch")


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

def _positive(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}")
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def _int_list(s):
    try:
        out = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}")
    if not out or any(v < 1 for v in out):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {s!r}")
    return out


def _block_shape(s):
    v = _int_list(s)
    if len(v) != 2:
        raise argparse.ArgumentTypeError(f"expected two integers like 128,128, got {s!r}")
    return v


def build_parser():
    ap = argparse.ArgumentParser(prog="python -m carver.moe_tune", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experts", "-E", type=_positive, required=True, help="number of experts")
    ap.add_argument("--topk", type=_positive, required=True, help="experts per token")
    ap.add_argument("--hidden", type=_positive, required=True, help="hidden size (K of the gate/up GEMM)")
    ap.add_argument("--intermediate", type=_positive, required=True,
                    help="expert intermediate size of the whole model (moe_intermediate_size)")
    ap.add_argument("--tp", type=_positive, default=1, help="tensor-parallel degree: N = intermediate / tp")
    ap.add_argument("--dtype", choices=DTYPES, default="bf16")
    ap.add_argument("--block-shape", type=_block_shape, help="fp8 block scales, e.g. 128,128")
    ap.add_argument("--batch-sizes", type=_int_list, default=list(BATCH_SIZES), help="comma-separated (default: vLLM's ladder)")
    ap.add_argument("--candidates", "-k", type=_positive, default=8, help="carver's top-k timed per batch size")
    ap.add_argument("--explore", type=int, default=16,
                    help="structural neighbours of carver's first picks also timed per batch size (0: none)")
    ap.add_argument("--arch", help="carver's arch for the ranking (default: from the GPU's name)")
    ap.add_argument("--output", "-o", required=True, help="folder for the vLLM file and its state file")
    ap.add_argument("--restart", action="store_true", help="discard a saved state instead of resuming it")
    ap.add_argument("--rounds", type=_positive, default=5, help="interleaved timing rounds")
    ap.add_argument("--reps", type=_positive, default=10, help="launches per config per round")
    ap.add_argument("--workers", type=_positive, help="compile processes (default: min(16, CPUs))")
    ap.add_argument("--seed", type=int, default=0, help="routing and data seed")
    return ap


def main(argv=None):
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.block_shape is not None and args.dtype != "fp8_w8a8":
        ap.error("--block-shape needs --dtype fp8_w8a8")
    try:
        problem = Problem(args.experts, args.topk, args.hidden, args.intermediate, tp=args.tp, dtype=args.dtype,
                          block_shape=args.block_shape)
    except InvalidInputError as e:
        ap.error(str(e))
    try:
        meas = GpuMeasurer(problem, seed=args.seed, rounds=args.rounds, reps=args.reps, workers=args.workers)
        if args.explore < 0:
            ap.error("--explore must be >= 0")
        res = tune(problem, args.output, batch_sizes=args.batch_sizes, candidates=args.candidates,
                   explore=args.explore, arch=args.arch,
                   restart=args.restart, measurer=meas)
    except (TuneError, MissingDependencyError, InvalidInputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: rerun the same command to resume", file=sys.stderr)
        return 130
    print(res["path"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
