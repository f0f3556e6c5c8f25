#!/usr/bin/env python3
"""Ranking-quality harness: sweep a reference space of Triton matmul configs per shape on the GPU,
time cuBLAS and every ranker's picks in the same interleaved rounds, and report how close each
ranker's top-1 and best-of-top-k come to the exhaustive best.

Phases (all shapes go through each phase before the next starts):
  1. compile  every distinct (config, specialisation) is compiled and launched once in a pool of
              spawned worker processes on a small proxy problem with the same specialisation, so
              Triton's on-disk cache is warm for this process. Failures (e.g. out of shared memory)
              are recorded per config, never fatal.
  2. verify   per shape: random-normal inputs (several rotating sets whose total exceeds 2x L2),
              each config run once into a NaN-poisoned output and compared with an fp32 matmul of
              the same fp16 inputs (relative Frobenius error < --tol).
  3. time     per shape: warm-up, then --rounds interleaved rounds over all verified configs and
              cuBLAS (torch.matmul) in a fresh random order each round. Each config gets a batch of
              reps queued behind a GPU sleep (so Python launch overhead leaves no gaps), timed with
              CUDA events between consecutive launches, each rep on the next input set. A round's
              figure is the median of its reps; the final time is the median of round figures.
              After round 1, configs slower than --early-stop x the best are not timed again.

Output: OUT/triton_sweep.json (everything measured) and a table, last, one row per shape.
Run `python benches/triton/harness.py --help` for the options; README.md has the commands.
"""

import argparse
import gc
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import configs as C  # noqa: E402
import scoring as S  # noqa: E402
import space as SP  # noqa: E402

T0 = time.perf_counter()
L2_FALLBACK = 50 * 1024 * 1024


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')} +{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


class FatalError(RuntimeError):
    pass


# ----------------------------------------------------------------------------------------------
# Compile phase (runs in spawned workers)
# ----------------------------------------------------------------------------------------------

def spec_class(shape, cfg):
    """What, besides the config, decides which binary Triton builds for this kernel (see kernel.py):
    divisibility of N and K by 16 (they are also the strides), whether K tiles are all full
    (EVEN_K), and the split-K path. N or K equal to 1 would be specialised to a constant."""
    n, k = shape["N"], shape["K"]
    kw = cfg["kwargs"]
    return (n == 1, n % 16 == 0, k == 1, k % 16 == 0, k % kw["BLOCK_SIZE_K"] == 0, kw["SPLIT_K"] > 1)


def compile_key(shape, cfg):
    kw = cfg["kwargs"]
    base = tuple((k, kw[k]) for k in C.CONFIG_KWARGS if k != "SPLIT_K")
    return (base, cfg["num_warps"], cfg["num_stages"], spec_class(shape, cfg))


def proxy_problem(shape):
    """A small problem with the same specialisation as `shape`: M is not specialised; N and K keep
    their residues mod 16 and mod 128 (which decide the divisibility and EVEN_K flags)."""
    n, k = shape["N"], shape["K"]
    pn = 1 if n == 1 else 256 + n % 16
    pk = 1 if k == 1 else 128 + k % 128
    return 64, pn, pk


_WORKER_TENSORS = {}


def compile_task(task):
    """Worker: compile and launch one config once on its proxy problem. Returns a result dict.
    If the launch leaves the CUDA context unusable, the worker writes a crash note naming the task
    and exits, so the parent can tell which task broke the pool."""
    import torch
    import kernel

    t0 = time.perf_counter()
    m, n, k = task["proxy"]
    try:
        if (m, n, k) not in _WORKER_TENSORS:
            g = torch.Generator(device="cuda")
            g.manual_seed(1234)
            a = torch.randn((m, k), device="cuda", dtype=torch.float16, generator=g)
            b = torch.randn((k, n), device="cuda", dtype=torch.float16, generator=g)
            c = torch.empty((m, n), device="cuda", dtype=torch.float16)
            ws = torch.empty(m * n, device="cuda", dtype=torch.float32)
            _WORKER_TENSORS[(m, n, k)] = (a, b, c, ws)
        a, b, c, ws = _WORKER_TENSORS[(m, n, k)]
        compiled = kernel.launch(a, b, c, task["config"], ws)
        torch.cuda.synchronize()
        return {"id": task["id"], "ok": True, "seconds": time.perf_counter() - t0,
                "n_regs": getattr(compiled, "n_regs", None), "n_spills": getattr(compiled, "n_spills", None),
                "shared": getattr(getattr(compiled, "metadata", None), "shared", None)}
    except Exception as e:  # noqa: BLE001 - every failure is recorded against its config
        err = f"{type(e).__name__}: {e}".strip()
        try:
            torch.cuda.synchronize()
        except Exception as e2:  # noqa: BLE001
            with open(os.path.join(task["crash_dir"], f"{task['id']}.txt"), "w") as f:
                f.write(f"{err}\nthen the CUDA context was unusable: {type(e2).__name__}: {e2}")
            os._exit(70)
        return {"id": task["id"], "ok": False, "seconds": time.perf_counter() - t0, "error": err[:4000]}


def run_compile_phase(tasks, workers, crash_dir):
    """Run compile tasks in a spawn-context process pool; survive worker crashes."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    os.makedirs(crash_dir, exist_ok=True)
    results = {}
    attempts = {t["id"]: 0 for t in tasks}
    pending = list(tasks)
    ctx = mp.get_context("spawn")
    restarts = 0
    done_count = 0
    last_report = time.perf_counter()
    while pending:
        broken = False
        with ProcessPoolExecutor(max_workers=min(workers, len(pending)), mp_context=ctx) as pool:
            futs = {pool.submit(compile_task, t): t for t in pending}
            for fut in as_completed(futs):
                t = futs[fut]
                try:
                    r = fut.result()
                except BrokenProcessPool:
                    broken = True
                    continue
                results[t["id"]] = r
                done_count += 1
                if time.perf_counter() - last_report > 10:
                    log(f"  compiled {done_count}/{len(tasks)}")
                    last_report = time.perf_counter()
        pending = [t for t in pending if t["id"] not in results]
        if not pending:
            break
        if not broken:
            raise FatalError(f"{len(pending)} compile tasks returned no result and the pool did not break")
        restarts += 1
        noted = set()
        for t in pending:
            note = os.path.join(crash_dir, f"{t['id']}.txt")
            if os.path.exists(note):
                with open(note) as f:
                    results[t["id"]] = {"id": t["id"], "ok": False, "seconds": None,
                                        "error": "worker crashed: " + f.read()[:4000]}
                noted.add(t["id"])
        if not noted:
            # A crash with no note (e.g. a segfault): every unfinished task is a suspect.
            for t in pending:
                attempts[t["id"]] += 1
                if attempts[t["id"]] >= 3:
                    results[t["id"]] = {"id": t["id"], "ok": False, "seconds": None,
                                        "error": "the worker pool broke 3 times while this task was unfinished"}
        pending = [t for t in pending if t["id"] not in results]
        log(f"  worker pool broke (restart {restarts}); {len(noted)} task(s) named by crash notes, "
            f"{len(pending)} to retry")
        if restarts > 20:
            raise FatalError("the compile worker pool broke more than 20 times")
    return results


# ----------------------------------------------------------------------------------------------
# Rankers' picks
# ----------------------------------------------------------------------------------------------

def run_carver(bin_path, shapes_path, topk, extra_args):
    cmd = [bin_path, "recommend", "--target", "triton", "--shapes", shapes_path, "--topk", str(topk),
           "--format", "json"] + extra_args
    log(f"running carver: {' '.join(cmd)}")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise FatalError(f"carver could not be run ({' '.join(cmd)}): {e}") from e
    wall = time.perf_counter() - t0
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise FatalError(f"carver exited {proc.returncode} without JSON on stdout ({e}); stderr:\n"
                         f"{proc.stderr[-3000:]}") from e
    picks = S.parse_picks(doc, "carver", f"output of {' '.join(cmd)}")
    picks["run"] = {"cmd": cmd, "exit_code": proc.returncode, "wall_s": wall,
                    "stderr_tail": proc.stderr[-3000:]}
    if proc.returncode != 0:
        log(f"  WARNING: carver exited {proc.returncode}; its JSON is used, per-shape errors are scored 0. "
            f"stderr tail: {proc.stderr[-500:]!r}")
    log(f"  carver answered {len(picks['results'])} shapes in {wall * 1e3:.1f} ms wall "
        f"({wall * 1e6 / max(1, len(picks['results'])):.1f} us per shape, process start included)")
    return picks


# ----------------------------------------------------------------------------------------------
# GPU measurement
# ----------------------------------------------------------------------------------------------

class Timer:
    """Event-timed batches of launches queued behind a GPU sleep."""

    def __init__(self, torch, max_reps):
        self.torch = torch
        self.events = [torch.cuda.Event(enable_timing=True) for _ in range(max(max_reps, 2) + 1)]
        self.mhz = self._calibrate()

    def _calibrate(self):
        torch = self.torch
        torch.cuda._sleep(100_000)
        torch.cuda.synchronize()
        rates = []
        for _ in range(3):
            e0, e1 = self.events[0], self.events[1]
            e0.record()
            torch.cuda._sleep(20_000_000)
            e1.record()
            e1.synchronize()
            rates.append(20_000_000 / (e0.elapsed_time(e1) * 1e3))  # cycles per microsecond
        return max(rates)

    def run(self, launch, reps, host_us_per_launch, margin):
        """Queue `reps` launches behind a GPU sleep of `margin` x their expected enqueue time; return
        (per-rep times in us, host enqueue us per launch, gap_risk). Call with gc disabled: a
        collection in the middle of the queueing would let the GPU catch up."""
        torch = self.torch
        ev = self.events
        sleep_us = min(100_000.0, host_us_per_launch * reps * margin + 100.0)
        torch.cuda._sleep(int(sleep_us * self.mhz * 1.1))
        h0 = time.perf_counter()
        ev[0].record()
        for r in range(reps):
            launch()
            ev[r + 1].record()
        h1 = time.perf_counter()
        ev[reps].synchronize()
        times = [ev[r].elapsed_time(ev[r + 1]) * 1e3 for r in range(reps)]
        enqueue_us = (h1 - h0) * 1e6
        # Gaps are possible only if enqueueing outlasted the sleep and the GPU was faster than it.
        gap_risk = enqueue_us > sleep_us and sum(times) < enqueue_us
        return times, enqueue_us / reps, gap_risk


def median(xs):
    return statistics.median(xs) if xs else None


def measure_shape(torch, kernel, shape, entries, args, l2_bytes, timer, shape_index):
    """Verify and time every entry of one shape (mutates entries) and cuBLAS; return shape info."""
    m, n, k = shape["M"], shape["N"], shape["K"]
    flops = 2.0 * m * n * k
    set_bytes = 2 * (m * k + k * n + m * n)
    n_sets = int(min(args.max_sets, max(2, (2 * l2_bytes) // set_bytes + 1)))
    need_ws = any(e["config"]["kwargs"].get("SPLIT_K", 1) > 1 for e in entries if e["status"] == "pending")
    info = {"name": shape["name"], "M": m, "N": n, "K": k, "flops": flops, "set_bytes": set_bytes,
            "n_input_sets": n_sets, "input_bytes_total": set_bytes * n_sets}
    t_shape = time.perf_counter()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(args.seed * 1000 + shape_index)
    A = [torch.randn((m, k), device="cuda", dtype=torch.float16, generator=gen) for _ in range(n_sets)]
    B = [torch.randn((k, n), device="cuda", dtype=torch.float16, generator=gen) for _ in range(n_sets)]
    Cs = [torch.empty((m, n), device="cuda", dtype=torch.float16) for _ in range(n_sets)]
    ws = torch.empty(m * n, device="cuda", dtype=torch.float32) if need_ws else None
    ref = torch.matmul(A[0].float(), B[0].float())
    ref_norm = torch.linalg.vector_norm(ref).item()
    if not (ref_norm > 0 and math.isfinite(ref_norm)):
        raise FatalError(f"{shape['name']}: reference norm is {ref_norm}")

    def rel_err(c):
        return (torch.linalg.vector_norm(c.float() - ref) / ref_norm).item()

    def check_context(what):
        try:
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            raise FatalError(f"{shape['name']}: the CUDA context is unusable after {what}: {e}") from e

    # --- verify -------------------------------------------------------------------------------
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    todo = [e for e in entries if e["status"] == "pending"]
    n_ok = 0
    for e in todo:
        c = Cs[0]
        c.fill_(float("nan"))
        try:
            go = kernel.make_launcher(A, B, Cs, e["config"], ws)
            e["_go"] = go
            h0 = time.perf_counter()
            ev0.record()
            go(0)
            ev1.record()
            e["host_us"] = (time.perf_counter() - h0) * 1e6
            ev1.synchronize()
            e["verify_event_us"] = ev0.elapsed_time(ev1) * 1e3
        except Exception as ex:  # noqa: BLE001
            e["status"] = "run_failed"
            e["error"] = f"{type(ex).__name__}: {ex}"[:4000]
            check_context(f"config {e['key']} failed ({e['error'][:200]})")
            continue
        err = rel_err(c)
        e["rel_err"] = err if math.isfinite(err) else None
        if not err < args.tol:
            e["status"] = "verify_failed"
            e["error"] = (f"relative Frobenius error {err:.3e} >= {args.tol}" if math.isfinite(err)
                          else "non-finite output (unwritten elements stay NaN)")
            continue
        n_ok += 1
        # The first call in this process loads the binary, which also inflates its event time.
        # The timing rounds size their reps from the event time and their GPU sleep from the host
        # cost of a warm launch, so a second, warm launch is measured unless the kernel is long
        # and its first launch was not dominated by host work. (Long kernels keep the GPU busy
        # while the host queues the next launch, so a rough cap on their host estimate suffices.)
        if e["verify_event_us"] < 1000.0 or e["host_us"] > 0.5 * e["verify_event_us"]:
            h0 = time.perf_counter()
            ev0.record()
            e["_go"](1)
            ev1.record()
            e["host_us"] = (time.perf_counter() - h0) * 1e6
            ev1.synchronize()
            e["verify_event_us"] = ev0.elapsed_time(ev1) * 1e3
        else:
            e["host_us"] = min(e["host_us"], 200.0)
    for e in todo:
        if e["status"] != "pending":
            e.pop("_go", None)
    # cuBLAS check (informational) and host cost
    Cs[0].fill_(float("nan"))
    h0 = time.perf_counter()
    torch.matmul(A[0], B[0], out=Cs[0])
    cublas_host_us = (time.perf_counter() - h0) * 1e6
    torch.cuda.synchronize()
    cublas_err = rel_err(Cs[0])
    ref = None  # free the fp32 reference before timing
    info["verify_s"] = time.perf_counter() - t_shape
    info["host_us_per_launch_median"] = median([e["host_us"] for e in todo if e["status"] == "pending"])
    info["verified_ok"] = n_ok
    info["verify_failed"] = sum(1 for e in todo if e["status"] in ("verify_failed", "run_failed"))
    log(f"  verify: {n_ok}/{len(todo)} ok ({info['verify_failed']} failed) in {info['verify_s']:.1f}s; "
        f"{n_sets} input sets of {set_bytes / 2**20:.1f} MiB; host cost per launch "
        f"{info['host_us_per_launch_median'] or 0:.0f} us (median)")

    # --- time ---------------------------------------------------------------------------------
    t_time = time.perf_counter()
    rot = [0]

    def next_set():
        i = rot[0] % n_sets
        rot[0] += 1
        return i

    def triton_launcher(go):
        def launch():
            go(next_set())
        return launch

    def cublas_launch():
        i = next_set()
        torch.matmul(A[i], B[i], out=Cs[i])

    items = []
    for e in entries:
        if e["status"] == "pending":
            e["status"] = S.TIMED
            e["rounds"] = []
            items.append({"entry": e, "launch": triton_launcher(e.pop("_go")), "host": e["host_us"],
                          "est": e["verify_event_us"]})
    cublas = {"rounds": [], "rel_err": cublas_err}
    items.append({"entry": cublas, "launch": cublas_launch, "host": cublas_host_us, "est": None,
                  "cublas": True})

    # warm-up: clocks up, caches and allocator settled
    w0 = time.perf_counter()
    while (time.perf_counter() - w0) * 1e3 < args.warmup_ms:
        for _ in range(10):
            cublas_launch()
        torch.cuda.synchronize()
    h0 = time.perf_counter()
    ev0.record()
    cublas_launch()
    ev1.record()
    items[-1]["host"] = (time.perf_counter() - h0) * 1e6
    ev1.synchronize()
    items[-1]["est"] = ev0.elapsed_time(ev1) * 1e3

    rng = random.Random(args.seed * 7919 + shape_index)
    active = list(items)
    gap_batches = retried = 0
    gc.collect()
    gc.disable()
    try:
        for rnd in range(args.rounds):
            order = list(active)
            rng.shuffle(order)
            for it in order:
                est = max(it["est"], 1.0)
                if rnd == 0:  # round 1 only decides the early stop
                    lo, hi = (1 if est >= 1000.0 else args.min_reps), args.first_round_reps
                else:
                    lo, hi = args.min_reps, args.max_reps
                reps = int(min(hi, max(lo, math.ceil(args.round_ms * 1e3 / est))))
                margin = 2.0
                for attempt in range(3):
                    try:
                        times, host, gap = timer.run(it["launch"], reps, it["host"], margin)
                    except Exception as ex:  # noqa: BLE001
                        check_context(f"timing {it['entry'].get('key', 'cuBLAS')}")
                        raise FatalError(f"{shape['name']}: timing {it['entry'].get('key', 'cuBLAS')} raised "
                                         f"{type(ex).__name__}: {ex}") from ex
                    med = median(times)
                    it["host"] = max(host, 0.5 * it["host"])
                    # A batch whose queueing outran its sleep, or whose median is far above this
                    # config's earlier rounds, is redone with a longer sleep (twice at most).
                    suspect = gap or (it.get("best_med") is not None and med > 2.0 * it["best_med"])
                    if not suspect or attempt == 2:
                        break
                    retried += 1
                    margin *= 2.0
                it["entry"]["rounds"].append({"median_us": round(med, 4), "times_us": [round(t, 4) for t in times],
                                              "gap_risk": gap, "attempts": attempt + 1})
                gap_batches += bool(gap)
                it["est"] = med
                it["best_med"] = med if it.get("best_med") is None else min(it["best_med"], med)
            if rnd == 0 and args.rounds > 1:
                tri = [it for it in active if not it.get("cublas")]
                if tri:
                    best0 = min(it["est"] for it in tri)
                    keep = []
                    for it in active:
                        if not it.get("cublas") and it["est"] > args.early_stop * best0:
                            it["entry"]["early_stopped"] = True
                        else:
                            keep.append(it)
                    active = keep
    finally:
        gc.enable()
    for it in items:
        ent = it["entry"]
        ent["final_us"] = median([r["median_us"] for r in ent["rounds"]])
        ent["tflops"] = flops / (ent["final_us"] * 1e-6) / 1e12
        ent.setdefault("early_stopped", False)
    info["timing_s"] = time.perf_counter() - t_time
    info["gap_risk_batches"] = gap_batches
    info["retried_batches"] = retried
    info["cublas"] = {"final_us": cublas["final_us"], "tflops": cublas["tflops"], "rel_err": cublas_err,
                      "rounds": cublas["rounds"]}
    timed = [e for e in entries if e["status"] == S.TIMED]
    if timed:
        best = min(timed, key=lambda e: e["final_us"])
        info["best"] = {"key": best["key"], "final_us": best["final_us"], "tflops": best["tflops"],
                        "sources": best["sources"]}
    else:
        info["best"] = None
    survivors = sum(1 for e in timed if not e.get("early_stopped"))
    log(f"  time: {len(timed)} configs + cuBLAS, {survivors} past round 1, in {info['timing_s']:.1f}s; "
        f"best {info['best']['key'] if info['best'] else '-'} "
        f"{info['best']['final_us'] if info['best'] else float('nan'):.2f} us "
        f"({info['best']['tflops'] if info['best'] else float('nan'):.1f} TFLOP/s), "
        f"cuBLAS {cublas['final_us']:.2f} us ({cublas['tflops']:.1f} TFLOP/s)"
        + (f"; {retried} batches redone" if retried else "")
        + (f"; {gap_batches} kept at risk of launch gaps" if gap_batches else ""))
    A.clear()
    B.clear()
    Cs.clear()
    ws = None
    torch.cuda.empty_cache()
    return info


# ----------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------

def print_table(doc, labels):
    k = doc["args"]["topk"]
    bad = []
    for sh in doc["shapes"]:
        for lab in labels:
            sc = sh["rankers"].get(lab)
            if sc is None:
                continue
            if sc["problem"]:
                bad.append(f"  {sh['name']} {lab}: {sc['problem']}")
            for p in sc["picks"]:
                if p["status"] not in S.USABLE:
                    bad.append(f"  {sh['name']} {lab} #{p['rank']} {p['key']}: {p['status']}: "
                               f"{(p['why'] or '')[:160]}")
    if bad:
        print(f"\nIllegal, failed or missing picks, counted as 0 ({len(bad)}; all in the JSON):")
        print("\n".join(bad[:30]) + (f"\n  ... {len(bad) - 30} more" if len(bad) > 30 else ""))
    cols = []
    for lab in labels:
        cols += [f"{lab} top1", f"{lab} best{k}"]
    head = f"{'shape':20s} {'best TF/s':>9s} {'cuBLAS TF/s':>11s} " + " ".join(f"{c:>13s}" for c in cols)
    print()
    print("Ratios: exhaustive-best time / pick time (1.000 = the measured best; 0 = illegal, failed or no pick;"
          " ! = top-1 not usable).")
    print(head)
    print("-" * len(head))
    for sh in doc["shapes"]:
        best = sh.get("best")
        row = f"{sh['name']:20s} {S.fmt_num(best['tflops'] if best else None):>9s} " \
              f"{S.fmt_num(sh['cublas']['tflops'] if sh.get('cublas') else None):>11s} "
        vals = []
        for lab in labels:
            sc = sh["rankers"].get(lab)
            if sc is None:
                vals += ["-", "-"]
                continue
            unusable = bool(sc["problem"]) or (sc["picks"] and sc["picks"][0]["status"] not in S.USABLE)
            vals += [S.fmt_ratio(sc["top1"]) + ("!" if unusable else " "), S.fmt_ratio(sc["best_of_k"]) + " "]
        print(row + " ".join(f"{v:>13s}" for v in vals))
    print("-" * len(head))
    for what in ("geomean", "worst"):
        vals = []
        for lab in labels:
            sm = doc["summary"].get(lab)
            vals += [S.fmt_ratio(sm["top1"][what]) + " ", S.fmt_ratio(sm["best_of_k"][what]) + " "]
        print(f"{what:20s} {'':>9s} {'':>11s} " + " ".join(f"{v:>13s}" for v in vals))
    for lab in labels:
        sm = doc["summary"][lab]
        extra = ""
        if sm["top1"]["zeros"] or sm["best_of_k"]["zeros"]:
            extra = (f"; geomean without the zeros: top-1 {S.fmt_ratio(sm['top1']['geomean_nonzero']).strip()}, "
                     f"best-of-{k} {S.fmt_ratio(sm['best_of_k']['geomean_nonzero']).strip()}")
        print(f"{lab}: legal top-1 on {sm['top1_legal_shapes']}/{sm['shapes']} shapes; "
              f"legal picks {sm['legal_picks']}/{sm['picks']}{extra}")
    tri_vs_cublas = [sh["cublas"]["final_us"] / sh["best"]["final_us"] for sh in doc["shapes"]
                     if sh.get("best") and sh.get("cublas")]
    if tri_vs_cublas:
        print(f"exhaustive Triton best vs cuBLAS (cuBLAS time / best time): geomean "
              f"{S.geomean(tri_vs_cublas):.3f}, worst {min(tri_vs_cublas):.3f}")
    ph = doc["phases_s"]
    print(f"phases: compile {ph.get('compile', 0):.0f}s, verify {ph.get('verify', 0):.0f}s, "
          f"timing {ph.get('timing', 0):.0f}s, total {ph.get('total', 0):.0f}s")


def write_json(doc, path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    os.replace(tmp, path)


# ----------------------------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="eval/dev-shapes.json", help="shapes file (eval/dev-shapes.json form)")
    ap.add_argument("--carver-picks", help="JSON from `carver recommend --target triton --shapes ... --format json`")
    ap.add_argument("--carver-bin", help="run this carver binary to produce the picks (wall time recorded)")
    ap.add_argument("--carver-args", default="", help="extra arguments for --carver-bin, space-separated")
    ap.add_argument("--nvmmh-picks", help="nvMatmulHeuristics picks file (from nvmmh_picks.py)")
    ap.add_argument("--picks", action="append", default=[], metavar="LABEL=FILE",
                    help="another ranker's picks file (carver's JSON form), timed in the same run; repeatable")
    ap.add_argument("--only", help="comma-separated shape names to run")
    ap.add_argument("--max-configs", type=int, help="smoke test: at most N grid configs per shape (picks are always added)")
    ap.add_argument("--out", required=True, help="output folder (created)")
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--min-configs", type=int, default=SP.DEFAULT_MIN_CONFIGS, help="reference space floor per shape")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--round-ms", type=float, default=1.0, help="target GPU time per config per round")
    ap.add_argument("--min-reps", type=int, default=3)
    ap.add_argument("--max-reps", type=int, default=20, help="reps per config per round, rounds 2+")
    ap.add_argument("--first-round-reps", type=int, default=8, help="reps cap in round 1 (early-stop round)")
    ap.add_argument("--early-stop", type=float, default=1.5, help="drop configs slower than this x best after round 1")
    ap.add_argument("--warmup-ms", type=float, default=100.0, help="cuBLAS warm-up per shape before timing")
    ap.add_argument("--tol", type=float, default=1e-2, help="relative Frobenius error bound for verification")
    ap.add_argument("--max-sets", type=int, default=256, help="cap on rotating input sets for tiny shapes")
    ap.add_argument("--workers", type=int, default=14, help="compile processes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fidelity-arch", default="h100",
                    help="report the cost model's fidelity (Spearman, median |error| per shape) planning "
                         "for this arch, when the carver package is installed ('' to skip)")
    ap.add_argument("--cache-dir", default=os.environ.get("TRITON_CACHE_DIR", "/tmp/carver-triton-cache"),
                    help="Triton cache folder shared by the compile workers and the timing process")
    args = ap.parse_args(argv)
    if args.carver_picks and args.carver_bin:
        ap.error("give --carver-picks or --carver-bin, not both")
    if (args.topk < 1 or args.rounds < 1 or args.min_reps < 1 or args.max_reps < args.min_reps
            or args.first_round_reps < args.min_reps):
        ap.error("--topk, --rounds, --min-reps must be >= 1; --max-reps and --first-round-reps >= --min-reps")
    return args


def main(argv=None):
    args = parse_args(argv)
    os.environ["TRITON_CACHE_DIR"] = os.path.abspath(args.cache_dir)
    os.makedirs(args.out, exist_ok=True)
    out_path = os.path.join(args.out, "triton_sweep.json")

    try:
        shapes = SP.load_shapes(args.shapes)
    except (OSError, ValueError) as e:
        raise FatalError(f"cannot read shapes file {args.shapes}: {e}") from e
    if args.only:
        want = [s.strip() for s in args.only.split(",") if s.strip()]
        unknown = [w for w in want if w not in {s["name"] for s in shapes}]
        if unknown:
            raise FatalError(f"--only names not in {args.shapes}: {unknown}")
        shapes = [s for s in shapes if s["name"] in want]

    rankers = {}
    if args.carver_bin:
        rankers["carver"] = run_carver(args.carver_bin, args.shapes, args.topk, args.carver_args.split())
    elif args.carver_picks:
        rankers["carver"] = S.load_picks(args.carver_picks, "carver")
    if args.nvmmh_picks:
        rankers["nvmmh"] = S.load_picks(args.nvmmh_picks, "nvmmh")
    for spec in args.picks:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path or label in rankers:
            raise FatalError(f"--picks takes LABEL=FILE with a new label, got {spec!r}")
        rankers[label] = S.load_picks(path, label)
    labels = list(rankers)

    # ---- the configs to measure per shape ----------------------------------------------------
    per_shape = []
    for si, sh in enumerate(shapes):
        grid, tier_of = SP.reference_space(sh["M"], sh["N"], sh["K"], args.min_configs)
        idx = list(range(len(grid)))
        if args.max_configs is not None and args.max_configs < len(grid):
            idx = sorted(random.Random(args.seed + si).sample(idx, args.max_configs))
        entries = {}
        for i in idx:
            cfg = grid[i]
            key = C.config_key(cfg)
            entries[key] = {"key": key, "config": cfg, "sources": ["grid"], "tier": tier_of[i]}
        picks = {}
        for lab, pk in rankers.items():
            hints, problem = S.pick_list(pk, sh, args.topk)
            picks[lab] = (hints, problem)
            for h in hints:
                key = C.config_key(h["config"])
                src = f"{lab}#{h.get('rank', '?')}"
                if key in entries:
                    entries[key]["sources"].append(src)
                else:
                    entries[key] = {"key": key, "config": h["config"], "sources": [src], "tier": None}
        for e in entries.values():
            why = C.legality_error(e["config"])
            e.update({"status": "illegal" if why else "pending", "error": why, "rel_err": None,
                      "final_us": None, "early_stopped": False, "rounds": []})
        per_shape.append({"shape": sh, "entries": list(entries.values()), "picks": picks, "grid_size": len(grid)})
    n_cfg = sum(len(p["entries"]) for p in per_shape)
    log(f"{len(shapes)} shapes, {n_cfg} (shape, config) pairs; rankers: {labels or 'none'}")

    import torch
    import triton
    if not torch.cuda.is_available():
        raise FatalError("no CUDA device visible to torch")
    props = torch.cuda.get_device_properties(0)
    l2_bytes = int(getattr(props, "L2_cache_size", 0) or 0)
    if l2_bytes <= 0:
        log(f"WARNING: torch reports no L2 size; assuming {L2_FALLBACK} bytes")
        l2_bytes = L2_FALLBACK
    doc = {
        "schema_version": 1,
        "tool": "benches/triton/harness.py",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "device": {"name": props.name, "sm_count": props.multi_processor_count, "l2_bytes": l2_bytes,
                   "capability": list(torch.cuda.get_device_capability(0))},
        "versions": {"torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
                     "python": sys.version.split()[0]},
        "args": vars(args),
        "rankers": {lab: {"path": pk["path"], "meta": pk["meta"], "run": pk.get("run")} for lab, pk in rankers.items()},
        "phases_s": {},
        "shapes": [],
        "summary": {},
    }
    log(f"device {props.name}, {props.multi_processor_count} SMs, L2 {l2_bytes / 2**20:.0f} MiB; "
        f"torch {torch.__version__}, triton {triton.__version__}; Triton cache {os.environ['TRITON_CACHE_DIR']}")

    # ---- phase 1: compile -----------------------------------------------------------------------
    t_c = time.perf_counter()
    tasks, by_ckey = [], {}
    for p in per_shape:
        for e in p["entries"]:
            if e["status"] != "pending":
                continue
            ck = compile_key(p["shape"], e["config"])
            if ck not in by_ckey:
                by_ckey[ck] = len(tasks)
                tasks.append({"id": len(tasks), "config": e["config"], "proxy": proxy_problem(p["shape"]),
                              "crash_dir": os.path.join(args.out, "compile-crashes")})
            e["compile_task"] = by_ckey[ck]
    # Big tiles with deep pipelines compile slowest: start them first so they do not form the tail.
    def weight(t):
        kw = t["config"]["kwargs"]
        return kw["BLOCK_SIZE_M"] * kw["BLOCK_SIZE_N"] * kw["BLOCK_SIZE_K"] * t["config"]["num_stages"]
    tasks.sort(key=weight, reverse=True)
    log(f"phase 1/3 compile: {len(tasks)} distinct (config, specialisation) builds on {args.workers} workers")
    results = run_compile_phase(tasks, args.workers, os.path.join(args.out, "compile-crashes"))
    n_fail = 0
    for p in per_shape:
        for e in p["entries"]:
            if "compile_task" not in e:
                continue
            r = results[e.pop("compile_task")]
            e["compile"] = {k: r.get(k) for k in ("seconds", "n_regs", "n_spills", "shared")}
            if not r["ok"]:
                e["status"] = "compile_failed"
                e["error"] = r["error"]
    n_fail = sum(1 for r in results.values() if not r["ok"])
    secs = [r["seconds"] for r in results.values() if r.get("seconds")]
    doc["phases_s"]["compile"] = time.perf_counter() - t_c
    doc["compile"] = {"tasks": len(tasks), "failed": n_fail, "workers": args.workers,
                      "task_seconds_median": median(secs), "task_seconds_sum": sum(secs)}
    log(f"  compile done: {len(tasks) - n_fail} ok, {n_fail} failed, {doc['phases_s']['compile']:.1f}s wall "
        f"(median {median(secs) or 0:.2f}s per build in a worker)")

    # ---- phases 2 and 3, per shape -------------------------------------------------------------
    import kernel
    torch.backends.cuda.matmul.allow_tf32 = False
    timer = Timer(torch, max(args.max_reps, args.first_round_reps))
    log(f"GPU sleep calibration: {timer.mhz:.0f} cycles/us")
    t_v = t_t = 0.0
    try:
        for si, p in enumerate(per_shape):
            sh = p["shape"]
            n_pend = sum(1 for e in p["entries"] if e["status"] == "pending")
            log(f"shape {si + 1}/{len(per_shape)} {sh['name']} (M={sh['M']} N={sh['N']} K={sh['K']}): "
                f"{len(p['entries'])} configs ({p['grid_size']} in the grid), {n_pend} to verify")
            info = measure_shape(torch, kernel, sh, p["entries"], args, l2_bytes, timer, si)
            t_v += info["verify_s"]
            t_t += info["timing_s"]
            measured = {e["key"]: e for e in p["entries"]}
            best_us = info["best"]["final_us"] if info["best"] else None
            info["rankers"] = {}
            for lab in labels:
                hints, problem = p["picks"][lab]
                info["rankers"][lab] = S.score_shape(measured, best_us, hints, problem)
            info["grid_size"] = p["grid_size"]
            info["configs"] = p["entries"]
            doc["shapes"].append(info)
            doc["phases_s"].update({"verify": t_v, "timing": t_t, "total": time.perf_counter() - T0})
            write_json(doc, out_path)
    finally:
        doc["phases_s"].update({"verify": t_v, "timing": t_t, "total": time.perf_counter() - T0})
        for lab in labels:
            doc["summary"][lab] = S.summarize([sh["rankers"][lab] for sh in doc["shapes"]])
        write_json(doc, out_path)
    log(f"wrote {out_path}; phases: compile {doc['phases_s']['compile']:.1f}s, verify {t_v:.1f}s, "
        f"timing {t_t:.1f}s, total {doc['phases_s']['total']:.1f}s")
    if args.fidelity_arch:
        try:
            import carver
        except ImportError as e:
            log(f"model fidelity not reported: the carver package is not installed ({e})")
        else:
            import fidelity as F

            doc["fidelity"] = F.sweep_fidelity(doc, carver.price, args.fidelity_arch)
            write_json(doc, out_path)
            F.print_fidelity(doc["fidelity"], f"--arch {args.fidelity_arch}")
    print_table(doc, labels)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (FatalError, S.PicksError) as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        if os.environ.get("HARNESS_TRACEBACK"):
            traceback.print_exc()
        sys.exit(2)
