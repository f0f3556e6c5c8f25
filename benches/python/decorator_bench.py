#!/usr/bin/env python3
"""carver's Python package on a GPU: the `carver.triton.autotune` decorator applied to the plain
Triton matmul of benches/triton (kernel.py), per shape of one or more shapes files.

Measures, printed as a table last and written to OUT/decorator_bench.json:
  (a) tuned    for each shape: the first call tunes (Triton's Autotuner benchmarks carver's top-8
               for the shape) and the result is checked against torch.matmul; then carver's 8
               picks and the decorator's winner are timed the way benches/triton/harness.py times
               configs (rotating inputs beyond L2, launches queued behind a GPU sleep, interleaved
               rounds, medians); ratio = best of the 8 / the winner (1.0: the decorator kept the
               fastest of its picks).
  (b) to-tuned time from the first call to a tuned kernel, each in a fresh process with an empty
               Triton cache: the decorator vs `triton.autotune` over the harness's reference space
               (benches/triton/space.py) for the same shape; and the decorator again with
               Triton's on-disk autotuning cache warm (`cache_results=True`).
  (c) overhead `carver.recommend` per call from Python (timeit) minus the recommend flow timed
               inside Rust (`carver._carver._time_recommend_flow`), per shape; no GPU needed.

(a) warms Triton's compile cache first with a pool of worker processes (the decorator's
compile time is what (b) measures), then tunes each shape in this process.

    python3 benches/python/decorator_bench.py --shapes eval/dev-shapes.json \
        --shapes eval/python-holdout-shapes.json --parts a,c --out OUT
    python3 benches/python/decorator_bench.py --shapes eval/dev-shapes.json --parts b \
        --to-tuned-shapes l2-7b.up.m32 --out OUT
"""

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TRITON_BENCH = os.path.join(REPO, "benches", "triton")
if TRITON_BENCH not in sys.path:
    sys.path.insert(0, TRITON_BENCH)

import space as SP  # noqa: E402

T0 = time.perf_counter()
TOPK = 8


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')} +{time.perf_counter() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def load_shapes(paths, only=None):
    shapes = []
    for p in paths:
        for s in SP.load_shapes(p):
            s["file"] = os.path.basename(p)
            shapes.append(s)
    if only:
        want = set(only)
        shapes = [s for s in shapes if s["name"] in want]
        missing = want - {s["name"] for s in shapes}
        if missing:
            raise SystemExit(f"error: shapes not in the files: {sorted(missing)}")
    return shapes


# ---- the decorated kernel -------------------------------------------------------------------

def split_k_pre_hook(nargs, reset_only=False):
    """Zero the split-K workspace before a launch that adds into it (the SPLIT_K = 1 path never
    reads it). Triton's Autotuner calls this before each benchmarked launch and once after."""
    if nargs["SPLIT_K"] > 1:
        nargs["ws_ptr"].zero_()


def heuristic_kernel(triton, kernel):
    # EVEN_K is derived from the config (kernel.py computes it per launch); under an autotuner
    # that is Triton's heuristics' job.
    return triton.heuristics({"EVEN_K": lambda a: a["K"] % a["BLOCK_SIZE_K"] == 0})(kernel.matmul_kernel)


def tuned_kernel(arch, cache_results=False):
    import triton
    import carver.triton
    import kernel

    return carver.triton.autotune(m="M", n="N", k="K", arch=arch, topk=TOPK, pre_hook=split_k_pre_hook,
                                  cache_results=cache_results)(heuristic_kernel(triton, kernel))


def reference_kernel(m, n, k):
    """`triton.autotune` over the harness's reference space for this shape."""
    import triton
    import kernel

    configs = [triton.Config(dict(c["kwargs"]), num_warps=c["num_warps"], num_stages=c["num_stages"])
               for c in SP.reference_space(m, n, k)[0]]
    tuned = triton.autotune(configs=configs, key=["M", "N", "K"], pre_hook=split_k_pre_hook)(
        heuristic_kernel(triton, kernel))
    return tuned, len(configs)


def problem(torch, m, n, k, seed=0):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    a = torch.randn((m, k), device="cuda", dtype=torch.float16, generator=g)
    b = torch.randn((k, n), device="cuda", dtype=torch.float16, generator=g)
    c = torch.empty((m, n), device="cuda", dtype=torch.float16)
    ws = torch.empty(m * n, device="cuda", dtype=torch.float32)
    return a, b, c, ws


def launch(tuned, a, b, c, ws):
    """c = a @ b through an autotuned kernel (tuning on the first call of a shape)."""
    import triton

    m, k = a.shape
    n = b.shape[1]

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_SIZE_M"]) * triton.cdiv(n, meta["BLOCK_SIZE_N"]), meta["SPLIT_K"])

    # A tuned key runs without the autotuner's hooks, so the workspace a split-K launch adds
    # into is zeroed here (kernel.py's contract); the result is then in the workspace.
    ws.zero_()
    tuned[grid](a, b, c, ws, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                c.stride(1))
    if tuned.best_config.kwargs["SPLIT_K"] > 1:
        c.copy_(ws.view(m, n))
    return c


def rel_err(torch, a, b, c):
    ref = torch.matmul(a.float(), b.float())
    return (torch.linalg.vector_norm(c.float() - ref) / torch.linalg.vector_norm(ref)).item()


# ---- (c) overhead ---------------------------------------------------------------------------

def part_c(shapes, arch, reps):
    import carver
    from carver import _carver

    rows = []
    for s in shapes:
        m, n, k = s["M"], s["N"], s["K"]

        def call():
            return carver.recommend(m, n, k, arch=arch, target="triton", topk=TOPK)

        call()
        py = min(timeit.repeat(call, number=reps, repeat=7)) / reps
        flow = min(_carver._time_recommend_flow(m, n, k, iterations=reps, arch=arch, target="triton", topk=TOPK)
                   for _ in range(7))
        model = carver.recommend_many([(m, n, k)], arch=arch, target="triton", topk=TOPK)[0].elapsed_us
        rows.append({"name": s["name"], "python_us": py * 1e6, "flow_us": flow * 1e6,
                     "overhead_us": (py - flow) * 1e6, "model_us": model})
    return rows


# ---- (a) tuned kernels ----------------------------------------------------------------------

def _compile_one(task):
    """Worker: compile one (shape, config) through the decorated path's exact call (same
    arguments, keyword meta-parameters and heuristics), on a small problem that Triton
    specializes alike, so this process's tuning finds the binary in the on-disk cache."""
    import torch
    import triton
    import kernel

    t0 = time.perf_counter()
    m, n, k = task["proxy"]
    a, b, c, ws = problem(torch, m, n, k)
    cfg = triton.Config(task["kwargs"], num_warps=task["num_warps"], num_stages=task["num_stages"])
    fn = heuristic_kernel(triton, kernel)

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_SIZE_M"]) * triton.cdiv(n, meta["BLOCK_SIZE_N"]), meta["SPLIT_K"])

    try:
        fn.run(a, b, c, ws, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
               grid=grid, warmup=False, **cfg.all_kwargs())
        torch.cuda.synchronize()
        return {"ok": True, "s": time.perf_counter() - t0}
    except Exception as e:  # noqa: BLE001 - reported, the tuner will see the same failure
        return {"ok": False, "s": time.perf_counter() - t0, "error": f"{type(e).__name__}: {e}"[:300]}


def warm_compile_cache(shapes, arch, workers):
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    import carver.triton
    import harness

    tasks, seen = [], set()
    for s in shapes:
        for c in carver.triton.configs(s["M"], s["N"], s["K"], arch=arch, topk=TOPK):
            proxy = harness.proxy_problem(s)
            key = (proxy, tuple(sorted(c.kwargs.items())), c.num_warps, c.num_stages)
            if key not in seen:
                seen.add(key)
                tasks.append({"proxy": proxy, "kwargs": c.kwargs, "num_warps": c.num_warps,
                              "num_stages": c.num_stages})
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        results = list(pool.map(_compile_one, tasks))
    failed = [r["error"] for r in results if not r["ok"]]
    log(f"compile cache warmed: {len(tasks)} builds on {workers} workers in {time.perf_counter() - t0:.1f}s, "
        f"{len(failed)} failed{': ' + failed[0] if failed else ''}")
    return {"builds": len(tasks), "failed": len(failed), "wall_s": time.perf_counter() - t0}


def time_configs(torch, kernel, timer, m, n, k, natives, rounds, seed):
    """Harness-style times (us) of native configs and cuBLAS on one shape: rotating input sets
    beyond 2x L2, launches queued behind a GPU sleep, interleaved rounds, median of medians."""
    l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 50 * 2**20)
    set_bytes = 2 * (m * k + k * n + m * n)
    n_sets = int(min(64, max(2, (2 * l2) // set_bytes + 1)))
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    As = [torch.randn((m, k), device="cuda", dtype=torch.float16, generator=gen) for _ in range(n_sets)]
    Bs = [torch.randn((k, n), device="cuda", dtype=torch.float16, generator=gen) for _ in range(n_sets)]
    Cs = [torch.empty((m, n), device="cuda", dtype=torch.float16) for _ in range(n_sets)]
    ws = torch.empty(m * n, device="cuda", dtype=torch.float32)
    rot = [0]

    def nxt():
        rot[0] += 1
        return rot[0] % n_sets

    items = []
    for cfg in natives:
        go = kernel.make_launcher(As, Bs, Cs, cfg, ws)
        items.append(lambda go=go: go(nxt()))
    items.append(lambda: torch.matmul(As[nxt()], Bs[rot[0] % n_sets], out=Cs[rot[0] % n_sets]))
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    est, host = [], []
    for i, f in enumerate(items):
        try:
            f()  # load and warm
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a pick that does not run is reported, not timed
            log(f"  config {natives[i] if i < len(natives) else 'cuBLAS'} failed: {type(e).__name__}: {e}")
            items[i] = None
            est.append(None)
            host.append(None)
            continue
        h0 = time.perf_counter()
        ev0.record()
        f()
        ev1.record()
        host.append((time.perf_counter() - h0) * 1e6)
        ev1.synchronize()
        est.append(max(1.0, ev0.elapsed_time(ev1) * 1e3))
    medians = [[] for _ in items]
    rng = random.Random(seed)
    import gc

    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            order = [i for i in range(len(items)) if items[i] is not None]
            rng.shuffle(order)
            for i in order:
                reps = int(min(20, max(3, math.ceil(1000.0 / est[i]))))
                times, _, _ = timer.run(items[i], reps, host[i], 2.0)
                medians[i].append(statistics.median(times))
    finally:
        gc.enable()
    del As, Bs, Cs, ws
    return [statistics.median(x) if x else None for x in medians]


def part_a(shapes, arch, args):
    import torch
    import carver.triton
    import harness
    import kernel

    compile_info = warm_compile_cache(shapes, arch, args.workers)
    timer = harness.Timer(torch, 20)
    rows = []
    for si, s in enumerate(shapes):
        m, n, k = s["M"], s["N"], s["K"]
        tuned = tuned_kernel(arch)
        a, b, c, ws = problem(torch, m, n, k, seed=si)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        launch(tuned, a, b, c, ws)
        torch.cuda.synchronize()
        first_s = time.perf_counter() - t0
        picks = list(tuned.carver_configs.values())[0]
        best = tuned.best_config
        c.fill_(float("nan"))
        launch(tuned, a, b, c, ws)
        err = rel_err(torch, a, b, c)
        del a, b, c, ws
        natives = [carver.triton.native(p) for p in picks]
        winner = carver.triton.native(best)
        times = time_configs(torch, kernel, timer, m, n, k, natives, args.rounds, seed=1000 + si)
        pick_us, cublas_us = times[:-1], times[-1]
        winner_us = pick_us[natives.index(winner)]
        best8_us = min(t for t in pick_us if t is not None)
        row = {"name": s["name"], "file": s["file"], "M": m, "N": n, "K": k, "rel_err": err,
               "ok": err < 1e-2, "first_call_warm_compile_s": first_s,
               "winner": winner, "winner_rank": natives.index(winner) + 1, "winner_us": winner_us,
               "best_of_8_us": best8_us, "ratio": best8_us / winner_us, "picks_us": pick_us,
               "cublas_us": cublas_us, "tflops": 2.0 * m * n * k / winner_us / 1e6,
               "triton_timings_ms": [[carver.triton.native(cfg), t] for cfg, t in tuned.configs_timings.items()]}
        rows.append(row)
        log(f"{s['name']}: rel_err {err:.1e}, first call {first_s:.2f}s, winner #{row['winner_rank']} "
            f"{winner_us:.1f} us, best of 8 {best8_us:.1f} us (ratio {row['ratio']:.3f}), cuBLAS {cublas_us:.1f} us")
    return {"compile": compile_info, "shapes": rows}


# ---- (b) time to a tuned kernel -------------------------------------------------------------

def to_tuned_child(args):
    """In a fresh process (empty or given Triton cache): seconds from the first call to a tuned
    kernel, as JSON on stdout."""
    import torch

    s = load_shapes(args.shapes, [args.child_shape])[0]
    m, n, k = s["M"], s["N"], s["K"]
    if args.child_method == "carver":
        tuned, n_configs = tuned_kernel(args.arch, cache_results=args.child_cache_results), TOPK
    else:
        tuned, n_configs = reference_kernel(m, n, k)
    a, b, c, ws = problem(torch, m, n, k)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    launch(tuned, a, b, c, ws)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    c.fill_(float("nan"))
    launch(tuned, a, b, c, ws)
    import carver.triton

    print(json.dumps({"seconds": seconds, "configs": n_configs, "rel_err": rel_err(torch, a, b, c),
                      "best": carver.triton.native(tuned.best_config),
                      "benchmarked": len(getattr(tuned, "configs_timings", {}) or {})}))


def run_child(args, shape, method, cache_dir, cache_results, timeout):
    env = dict(os.environ, TRITON_CACHE_DIR=cache_dir)
    cmd = [sys.executable, os.path.abspath(__file__), "--child-shape", shape, "--child-method", method,
           "--arch", args.arch]
    for p in args.shapes:
        cmd += ["--shapes", p]
    if cache_results:
        cmd.append("--child-cache-results")
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"seconds_at_least": timeout, "timed_out": True, "process_s": time.perf_counter() - t0}
    out = {"process_s": time.perf_counter() - t0}
    try:
        out.update(json.loads(p.stdout.strip().splitlines()[-1]))
    except (IndexError, json.JSONDecodeError):
        out["error"] = f"exit {p.returncode}: {p.stderr[-2000:]}"
    return out


def part_b(args):
    """The decorator's runs for every shape first (seconds each), then the reference autotuning
    (minutes each) for as many shapes as the time budget allows; one cut short by the budget
    is reported as a lower bound."""
    rows = []
    deadline = time.perf_counter() + args.b_budget_s
    for name in args.to_tuned_shapes:
        cache = tempfile.mkdtemp(prefix="carver-b-")
        shape = load_shapes(args.shapes, [name])[0]
        row = {"name": name, "reference_configs": len(SP.reference_space(shape["M"], shape["N"], shape["K"])[0])}
        row["carver_cold"] = run_child(args, name, "carver", cache, True, 120)
        log(f"{name}: decorator, cold cache: {row['carver_cold']}")
        row["carver_disk_cache"] = run_child(args, name, "carver", cache, True, 120)
        log(f"{name}: decorator, on-disk autotuning cache warm: {row['carver_disk_cache']}")
        rows.append(row)
    for row in rows:
        left = int(deadline - time.perf_counter())
        if left < 30:
            break
        row["reference_cold"] = run_child(args, row["name"], "reference",
                                          tempfile.mkdtemp(prefix="carver-b-ref-"), False, left)
        log(f"{row['name']}: triton.autotune over the reference space, cold cache: {row['reference_cold']}")
    return rows


# ---- report ---------------------------------------------------------------------------------

def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def print_tables(doc):
    a = doc.get("a")
    if a:
        print(f"\n(a) decorator per shape on {doc['device']}: winner = the decorator's pick, timed like the harness; "
              "ratio = best of carver's 8 / winner")
        print(f"{'shape':24} {'M':>6} {'N':>6} {'K':>6} {'ok':>3} {'first s':>8} {'rank':>4} {'winner us':>10} "
              f"{'best8 us':>9} {'ratio':>6} {'TFLOP/s':>8} {'cuBLAS us':>10}")
        for r in a["shapes"]:
            print(f"{r['name']:24} {r['M']:6} {r['N']:6} {r['K']:6} {'yes' if r['ok'] else 'NO':>3} "
                  f"{r['first_call_warm_compile_s']:8.2f} {r['winner_rank']:4} {r['winner_us']:10.1f} "
                  f"{r['best_of_8_us']:9.1f} {r['ratio']:6.3f} {r['tflops']:8.0f} {r['cublas_us']:10.1f}")
        for f in sorted({r["file"] for r in a["shapes"]}):
            rs = [r for r in a["shapes"] if r["file"] == f]
            print(f"  {f}: {len(rs)} shapes, {sum(r['ok'] for r in rs)} correct, ratio geomean "
                  f"{geomean([r['ratio'] for r in rs]):.3f}, worst {min(r['ratio'] for r in rs):.3f}, "
                  f"winner/cuBLAS geomean {geomean([r['cublas_us'] / r['winner_us'] for r in rs]):.3f}")
    b = doc.get("b")
    if b:
        print("\n(b) seconds from the first call to a tuned kernel, fresh process, empty Triton cache")
        for r in b:
            cold = r["carver_cold"].get("seconds")
            disk = r["carver_disk_cache"].get("seconds")
            same = r["carver_cold"].get("best") == r["carver_disk_cache"].get("best")
            line = (f"  {r['name']}: decorator {cold:.2f}s (8 configs); again with Triton's on-disk autotuning "
                    f"cache {disk:.2f}s ({'same' if same else 'DIFFERENT'} winner)")
            ref = r.get("reference_cold")
            if ref is None:
                line += f"; triton.autotune over {r['reference_configs']} configs not run (time budget)"
            else:
                ref_s = ref.get("seconds") or ref.get("seconds_at_least")
                sign = ">=" if ref.get("timed_out") else ""
                line += (f"; triton.autotune over {r['reference_configs']} configs {sign}{ref_s:.1f}s -> "
                         f"{sign}{ref_s / cold:.1f}x as long")
            print(line)
    c = doc.get("c")
    if c:
        ov = [r["overhead_us"] for r in c]
        print(f"\n(c) carver.recommend from Python minus the Rust flow, per call ({len(c)} shapes): median "
              f"{statistics.median(ov):.1f} us, max {max(ov):.1f} us; flow median "
              f"{statistics.median(r['flow_us'] for r in c):.1f} us, Python call median "
              f"{statistics.median(r['python_us'] for r in c):.1f} us, the model alone median "
              f"{statistics.median(r['model_us'] for r in c):.1f} us")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", action="append", default=[], help="shapes file (repeatable)")
    ap.add_argument("--only", help="comma-separated shape names")
    ap.add_argument("--parts", default="a,b,c", help="which of a, b, c to run")
    ap.add_argument("--arch", default="auto", help="the decorator's arch (default: this GPU)")
    ap.add_argument("--out", help="output folder (created)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=14)
    ap.add_argument("--overhead-reps", type=int, default=200)
    ap.add_argument("--to-tuned-shapes", default="l2-7b.up.m32", help="(b): comma-separated shape names")
    ap.add_argument("--b-budget-s", type=float, default=300, help="(b): seconds for all of it")
    ap.add_argument("--child-shape", help=argparse.SUPPRESS)
    ap.add_argument("--child-method", help=argparse.SUPPRESS)
    ap.add_argument("--child-cache-results", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.shapes:
        args.shapes = [os.path.join(REPO, "eval", "dev-shapes.json")]
    if args.child_shape:
        return to_tuned_child(args)
    if not args.out:
        ap.error("--out is required")
    args.to_tuned_shapes = [x for x in args.to_tuned_shapes.split(",") if x]
    parts = set(args.parts.split(","))
    os.makedirs(args.out, exist_ok=True)
    shapes = load_shapes(args.shapes, args.only.split(",") if args.only else None)
    import carver

    doc = {"tool": "benches/python/decorator_bench.py", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "args": vars(args), "carver": carver.__version__, "device": "no GPU"}
    try:
        import torch
        import triton

        doc["versions"] = {"torch": torch.__version__, "triton": triton.__version__, "python": sys.version.split()[0]}
        if torch.cuda.is_available():
            doc["device"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    out_path = os.path.join(args.out, "decorator_bench.json")

    def save():
        with open(out_path, "w") as f:
            json.dump(doc, f, indent=1)

    if "c" in parts:
        doc["c"] = part_c(shapes, "h100", args.overhead_reps)
        save()
        log("(c) done")
    if "a" in parts:
        doc["a"] = part_a(shapes, args.arch, args)
        save()
    if "b" in parts:
        doc["b"] = part_b(args)
        save()
    doc["wall_s"] = time.perf_counter() - T0
    save()
    print_tables(doc)


if __name__ == "__main__":
    sys.exit(main())
