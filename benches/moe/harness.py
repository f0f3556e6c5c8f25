#!/usr/bin/env python3
"""Fused-MoE config harness: for each (model, TP, batch size M), in one run on one GPU, time
  - a sweep of vLLM's tuner space (the legal space carver ranks: shared memory filtered against
    this device's opt-in limit; GROUP_SIZE_M narrowed to --group-sizes; --sweep-configs of them,
    a fixed-seed sample, the same for every problem; 0 = all),
  - carver's model-only file (carver.recommend_moe: top-1 and the best of its top-8),
  - the kernel's default config (vLLM's get_default_config rule for bf16),
  - vLLM's shipped tuned file for this (E, N, device) where vllm-configs/ holds one,
with carver's fused-MoE Triton kernel (carver.moe_kernel), and score each pick as
exhaustive-best time / pick time (1.0 = the best found).

Timing: the two GEMM launches of the layer with one config (the align step and the SiLU-and-mul
between them are excluded: computed once per M), uniform random routing with a fixed seed per M,
weights rotated across copies when one copy is under 100 MB, launches queued behind a GPU sleep
and timed with CUDA events, median. Phases:
  1. compile: every distinct config, in --workers spawned processes (Triton's on-disk cache is
     then read by this process; the number of new cache entries this process adds is reported);
  2. per (model, TP): weights once; per M: the sweep (--sweep-reps reps per config, a config
     slower than --early-stop x the best so far after one rep is not repeated), then a final
     interleaved re-timing (--final-rounds rounds x --final-reps reps, fresh order each round) of
     the sweep's top 5, carver's 8, the default and vLLM's config; the exhaustive best is the
     best of that re-timing. Correctness: 2 sweep configs per M and every re-timed config against
     the PyTorch reference (relative Frobenius error < --tol); a wrong config scores 0.
  3. the measured refinement `python -m carver.moe_tune` for --tune-model (a subprocess with a
     fresh Triton cache: its cold wall time), its file scored against this run's re-timed times.
Output: OUT/moe_results.json (schema_version 1, every timing) and a table printed last.
"""

import argparse
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
T0 = time.perf_counter()
BATCH_SIZES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)
QUICK_BATCHES = (1, 8, 64, 256, 1024, 4096)
QUICK_MODELS = ("mixtral-8x7b", "qwen3-30b-a3b")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')} +{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


class FatalError(RuntimeError):
    pass


COMPILE_FAILED = set()
def parse_config_key(key):
    """The config named by moe_kernel.config_key ('M64_N128_K64_G16_w4_s3')."""
    m = re.fullmatch(r"M(\d+)_N(\d+)_K(\d+)_G(\d+)_w(\d+)_s(\d+)", key)
    if not m:
        raise ValueError(f"not a config key: {key!r}")
    names = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
    return dict(zip(names, map(int, m.groups())))


# Configs launched at least once in this process (binary loaded).
LOADED = set()


def geomean(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    if any(x <= 0 for x in xs):
        return 0.0
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def fmt(x, w=6):
    return f"{x:{w}.3f}" if isinstance(x, (int, float)) and x is not None else f"{'-':>{w}s}"


# ---------------------------------------------------------------------------------------------
# Problems
# ---------------------------------------------------------------------------------------------

# The lists of models.json: "main" shaped the model; each "holdout" list was written before the
# model change it judges.
MODEL_SETS = ("main", "holdout", "holdout2", "holdout3", "holdout4", "holdout5", "holdout6", "holdout7", "holdout8", "holdout9", "holdout10", "holdout11", "holdout12", "holdout13", "holdout14", "holdout15", "holdout16", "holdout17", "holdout18", "holdout19", "holdout20", "holdout21", "holdout22", "holdout23", "holdout24")


def load_problems(path, which, only):
    with open(path) as f:
        doc = json.load(f)
    sets = {name: doc[name] for name in MODEL_SETS}
    sets["all"] = [m for name in MODEL_SETS for m in doc[name]]
    models = sets[which]
    if only:
        want = [w.strip() for w in only.split(",") if w.strip()]
        known = {m["name"] for m in sets["all"]}
        bad = [w for w in want if w not in known]
        if bad:
            raise FatalError(f"--models: unknown {bad}; known: {sorted(known)}")
        models = [m for m in sets["all"] if m["name"] in want]
    # The kernel's own rules for a layer (moe_tune.Problem's), checked before any GPU time is spent:
    # a layer it cannot run would stall the sweep until the harness's timeout.
    from carver import InvalidInputError
    from carver import moe_tune as mt
    out = []
    for m in models:
        for tp in m["tp"]:
            label = f"{m['name']}/tp{tp}"
            try:
                layer = mt.Problem(m["experts"], m["topk"], m["hidden"], m["intermediate"], tp=tp)
            except InvalidInputError as e:
                raise FatalError(f"{label}: the kernel cannot run this layer: {e}") from e
            out.append(dict(m, tp=tp, n=layer.n, label=label))
    return out


def vllm_file(vdir, e, n, device, dtype="bf16", block_shape=None):
    sel = ",dtype=fp8_w8a8" if dtype == "fp8_w8a8" else ""
    if block_shape:
        sel += f",block_shape=[{block_shape[0]},{block_shape[1]}]"
    p = os.path.join(vdir, f"E={e},N={n},device_name={device}{sel}.json")
    if not os.path.exists(p):
        return None, None
    with open(p) as f:
        doc = json.load(f)
    return p, {int(k): v for k, v in doc.items() if k.isdigit()}


def nearest(table, m):
    """vLLM's lookup: the entry whose batch size is closest to m."""
    return table[min(table, key=lambda k: abs(k - m))]


# ---------------------------------------------------------------------------------------------
# carver (every call to carver.recommend_moe goes through carver.moe_tune.recommend)
# ---------------------------------------------------------------------------------------------

def carver_picks(mt, prob, arch, batches, k, dtype="bf16", block_shape=None):
    t0 = time.perf_counter()
    try:
        p = mt.Problem(prob["experts"], prob["topk"], prob["hidden"], prob["intermediate"], tp=prob["tp"],
                       dtype=dtype, block_shape=block_shape)
        rec = mt.recommend(p, arch, batches, k)
        return {"file_name": rec["file_name"], "device_name": rec["device_name"], "seconds": rec["seconds"],
                "batches": {m: [h["config"] for h in rec["batches"].get(m, [])] for m in batches},
                "predicted_us": {m: [h["predicted_us"] for h in rec["batches"].get(m, [])] for m in batches},
                "error": None}
    except Exception as e:  # noqa: BLE001 - reported, carver's columns then score 0
        return {"error": f"{type(e).__name__}: {e}", "seconds": time.perf_counter() - t0, "batches": {}}


# ---------------------------------------------------------------------------------------------
# GPU timing
# ---------------------------------------------------------------------------------------------

def measure_entry(torch, mk, prob, batches, sweep, picks_for, args, timer, budget_s, results_doc):
    """Sweep, check and re-time one (model, TP) over its batch sizes; returns the entry record."""
    t_entry = time.perf_counter()
    E, K, N, topk = prob["experts"], prob["hidden"], prob["n"], prob["topk"]
    g = torch.Generator(device="cuda").manual_seed(args.seed)
    # fp8 layers keep bf16 activations and quantise them per launch (as vLLM's w8a8 does)
    base = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    w1 = torch.randn((E, 2 * N, K), generator=g, device="cuda", dtype=base) * (K ** -0.5)
    w2 = torch.randn((E, K, N), generator=g, device="cuda", dtype=base) * (N ** -0.5)
    wbytes = (w1.numel() + w2.numel()) * (1 if args.dtype == "fp8_w8a8" else 2)
    # Enough copies that even the smallest batch's experts miss the L2 from launch to launch.
    w1s, w2s, s1s, s2s = mk.timing_weights(w1, w2, args.dtype, args.block_shape, topk=topk,
                                           min_tokens=min(batches))
    del w1, w2
    copies = len(w1s)
    rec = {"label": prob["label"], "problem": {k: prob[k] for k in ("name", "experts", "topk", "hidden",
                                                                      "intermediate", "tp", "n")},
           "weight_bytes": wbytes, "weight_copies": copies, "batches": []}
    log(f"{prob['label']}: E={E} top-{topk} K={K} N={N}; weights {wbytes / 2**20:.0f} MiB x {copies} copies; "
        f"budget {budget_s:.0f}s")
    rot = [0]
    # Each batch size's share of the budget follows what one launch of the layer costs there
    # (weights of the active experts streamed, or the math), so large M are not cut short.
    def layer_cost(m):
        active = E * (1.0 - (1.0 - topk / E) ** m)
        return max(wbytes * active / E / 3.0e12, 2.0 * m * topk * 3 * N * K / 5.0e14) + 20e-6
    costs = [layer_cost(m) for m in batches]
    for mi, m in enumerate(batches):
        t_m = time.perf_counter()
        left_s = budget_s - (t_m - t_entry)
        per_m_budget = max(1.0, left_s * costs[mi] / sum(costs[mi:]))
        x = torch.randn((m, K), generator=torch.Generator(device="cuda").manual_seed(args.seed * 1000 + m),
                        device="cuda", dtype=base)
        tw, ti = mk.random_routing(m, E, topk, seed=args.seed * 1000 + m)
        if args.dtype == "fp8_w8a8":
            run = mk.Fp8LayerRunner(x, w1s, w2s, s1s, s2s, tw, ti, args.block_shape)
        else:
            run = mk.LayerRunner(x, w1s, w2s, tw, ti)

        def launcher(cfg):
            def go(_r):
                run.launch(cfg, rot[0])
                rot[0] += 1
            return go

        picks = picks_for(m)  # {"carver": [cfgs], "default": cfg, "vllm": cfg or None}
        # ---- sweep ------------------------------------------------------------------------------
        sweep_t = {}
        failed = {}
        best = float("inf")
        truncated = None
        run.launch(sweep[0], 0)
        torch.cuda.synchronize()
        for ci, c in enumerate(sweep):
            key = mk.config_key(c)
            if key in COMPILE_FAILED:
                failed[key] = "compile failed (see compile.failures)"
                continue
            if time.perf_counter() - t_m > per_m_budget * 0.75 and ci >= args.min_sweep:
                truncated = ci
                break
            try:
                if key not in LOADED:
                    # A config's first launch in this process loads its binary (milliseconds):
                    # never time it, or the sweep's early stop would drop the config.
                    run.launch(c, 0)
                    torch.cuda.synchronize()
                    LOADED.add(key)
                    results_doc["binaries"][key] = mk.last_binary_resources()
                first = timer.run(launcher(c), 1)[0]
                if first > args.early_stop * best:
                    sweep_t[key] = first
                    continue
                ts = [first] + timer.run(launcher(c), args.sweep_reps - 1, first) if args.sweep_reps > 1 else [first]
            except Exception as e:  # noqa: BLE001
                failed[key] = f"{type(e).__name__}: {e}"[:500]
                torch.cuda.synchronize()
                continue
            t = statistics.median(ts)
            sweep_t[key] = t
            best = min(best, t)
        # ---- candidates for the final re-timing -------------------------------------------------
        by_key = {mk.config_key(c): c for c in sweep}
        top = sorted(sweep_t, key=sweep_t.get)[: args.top]
        final = {}
        for k in top:
            final[k] = by_key[k]
        for c in picks["carver"]:
            final.setdefault(mk.config_key(c), c)
        final.setdefault(mk.config_key(picks["default"]), picks["default"])
        if picks["vllm"] is not None:
            final.setdefault(mk.config_key(picks["vllm"]), picks["vllm"])
        if picks.get("tuned") is not None:
            final.setdefault(mk.config_key(picks["tuned"]), picks["tuned"])
        if picks.get("previous") is not None:
            final.setdefault(mk.config_key(picks["previous"]), picks["previous"])
        # ---- correctness ------------------------------------------------------------------------
        ref = run.reference()
        errs = {}
        rng = random.Random(args.seed + m)
        spot = rng.sample(list(sweep_t), min(2, len(sweep_t)))
        for k in list(final) + [s for s in spot if s not in final]:
            c = final.get(k) or by_key[k]
            try:
                out = run.layer(c, 0)
                results_doc["binaries"].setdefault(k, mk.last_binary_resources())
                errs[k] = mk.rel_error(out, ref)
            except Exception as e:  # noqa: BLE001
                errs[k] = None
                failed[k] = f"{type(e).__name__}: {e}"[:500]
        del ref
        bad = {k for k, e in errs.items() if e is None or not e < args.tol}
        # ---- final interleaved re-timing --------------------------------------------------------
        keys = [k for k in final if k not in bad and k not in COMPILE_FAILED]
        fin = {k: [] for k in keys}
        order_rng = random.Random(args.seed * 31 + m)
        for _ in range(args.final_rounds):
            order = list(keys)
            order_rng.shuffle(order)
            for k in order:
                ts = timer.run(launcher(final[k]), args.final_reps, sweep_t.get(k))
                fin[k].append(statistics.median(ts))
        fin_us = {k: statistics.median(v) for k, v in fin.items()}
        best_key = min(fin_us, key=fin_us.get) if fin_us else None
        best_us = fin_us.get(best_key)

        def ratio(k):
            if k is None or best_us is None or k not in fin_us:
                return 0.0
            return best_us / fin_us[k]

        ck = [mk.config_key(c) for c in picks["carver"]]
        scores = {
            "carver_top1": ratio(ck[0]) if ck else None,
            "carver_best8": max((ratio(k) for k in ck), default=None),
            "default": ratio(mk.config_key(picks["default"])),
            "vllm": ratio(mk.config_key(picks["vllm"])) if picks["vllm"] is not None else None,
            "tuned": ratio(mk.config_key(picks["tuned"])) if picks.get("tuned") is not None else None,
            "previous": ratio(mk.config_key(picks["previous"])) if picks.get("previous") is not None else None,
        }
        flops = 2.0 * m * topk * (2 * N * K + N * K)
        brec = {"m": m, "sweep_us": sweep_t, "sweep_timed": len(sweep_t), "sweep_truncated_at": truncated,
                "failed": failed, "rel_err": errs, "wrong": sorted(bad), "final_us": fin_us,
                "final_rounds": fin, "best_key": best_key, "best_us": best_us,
                "best_tflops": flops / (best_us * 1e-6) / 1e12 if best_us else None,
                "picks": {"carver": ck, "default": mk.config_key(picks["default"]),
                          "vllm": mk.config_key(picks["vllm"]) if picks["vllm"] is not None else None,
                          "previous": mk.config_key(picks["previous"]) if picks.get("previous") is not None
                          else None},
                "scores": scores, "seconds": time.perf_counter() - t_m}
        rec["batches"].append(brec)
        left = len(batches) - mi - 1
        spent = time.perf_counter() - t_entry
        log(f"  M={m:5d}: best {best_key} {best_us or float('nan'):.1f} us "
            f"({brec['best_tflops'] or 0:.0f} TFLOP/s); carver {fmt(scores['carver_top1'], 5)} "
            f"best8 {fmt(scores['carver_best8'], 5)} default {fmt(scores['default'], 5)} "
            f"vllm {fmt(scores['vllm'], 5)}; {len(sweep_t)} swept"
            + (f" (truncated at {truncated})" if truncated else "") + (f"; WRONG {sorted(bad)}" if bad else "")
            + f"; {brec['seconds']:.1f}s, entry ETA {spent / (mi + 1) * left:.0f}s")
        results_doc["_flush"]()
    del w1s, w2s
    torch.cuda.empty_cache()
    rec["seconds"] = time.perf_counter() - t_entry
    return rec


# ---------------------------------------------------------------------------------------------
# The refinement (moe_tune) as a subprocess with a cold Triton cache
# ---------------------------------------------------------------------------------------------

def run_tune(prob, out_dir, arch, batches, timeout, dtype="bf16", block_shape=None):
    tdir = os.path.join(out_dir, "tune")
    cache = tempfile.mkdtemp(prefix="moe-tune-triton-")
    cmd = [sys.executable, "-m", "carver.moe_tune", "--experts", str(prob["experts"]), "--topk", str(prob["topk"]),
           "--hidden", str(prob["hidden"]), "--intermediate", str(prob["intermediate"]), "--tp", str(prob["tp"]),
           "--output", tdir, "--candidates", "8", "--batch-sizes", ",".join(str(b) for b in batches),
           "--dtype", dtype]
    if block_shape:
        cmd += ["--block-shape", f"{block_shape[0]},{block_shape[1]}"]
    if arch:
        cmd += ["--arch", arch]
    env = dict(os.environ, TRITON_CACHE_DIR=cache, PYTHONUNBUFFERED="1")
    log(f"moe_tune: {' '.join(cmd)} (fresh Triton cache {cache})")
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        rc, err_tail = p.returncode, p.stderr[-3000:]
    except subprocess.TimeoutExpired as e:
        rc, err_tail = "timeout", (e.stderr or b"")[-3000:] if isinstance(e.stderr, bytes) else str(e.stderr)[-3000:]
    wall = time.perf_counter() - t0
    winners = {}
    for fn in os.listdir(tdir) if os.path.isdir(tdir) else []:
        if fn.endswith(".state.json"):
            with open(os.path.join(tdir, fn)) as f:
                st = json.load(f)
            winners = {int(k): v["winner_key"] for k, v in st["done"].items()}
    log(f"moe_tune: rc={rc} wall {wall:.1f}s, {len(winners)} batch sizes")
    return {"cmd": cmd, "rc": rc, "wall_s": wall, "stderr_tail": err_tail if isinstance(err_tail, str) else "",
            "winners": winners}


# ---------------------------------------------------------------------------------------------

def print_table(doc):
    cols = ("carver_top1", "carver_best8", "default", "vllm")
    if any(b["scores"].get("previous") is not None for e in doc["entries"] for b in e["batches"]):
        cols += ("previous",)
    print()
    print("Ratios: exhaustive-best time / pick time, over batch sizes (1.000 = the best of the re-timed set;"
          " 0 = wrong or failed; - = no such pick).")
    head = f"{'model/tp':24s} {'M':>3s} " + " ".join(f"{c + ' gm':>16s} {'worst':>6s}" for c in cols)
    print(head)
    print("-" * len(head))
    allv = {c: [] for c in cols}
    for ent in doc["entries"]:
        row = f"{ent['label']:24s} {len(ent['batches']):3d} "
        for c in cols:
            v = [b["scores"].get(c) for b in ent["batches"] if b["scores"].get(c) is not None]
            allv[c] += v
            row += f"{fmt(geomean(v), 16)} {fmt(min(v) if v else None)} "
        print(row)
    print("-" * len(head))
    row = f"{'overall (model x M)':24s} {sum(len(e['batches']) for e in doc['entries']):3d} "
    for c in cols:
        row += f"{fmt(geomean(allv[c]), 16)} {fmt(min(allv[c]) if allv[c] else None)} "
    print(row)
    t = doc.get("tune")
    if t:
        print(f"moe_tune {t['label']}: wall {t['wall_s']:.0f}s for the whole file (cold Triton cache), rc={t['rc']}; "
              f"its file vs exhaustive: geomean {fmt(t.get('geomean'))}, worst {fmt(t.get('worst'))}")
    c = doc.get("compile", {})
    print(f"compile: {c.get('configs')} configs in {c.get('seconds', 0):.0f}s ({c.get('failed')} failed); "
          f"new Triton cache entries made by this process after the pool: {c.get('main_process_new_cache_entries')}")
    print(f"carver recommend_moe: {doc.get('carver_seconds_total', 0) * 1e3:.1f} ms for all files; "
          f"total wall {doc['phases_s'].get('total', 0):.0f}s")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models-file", default=os.path.join(HERE, "models.json"))
    ap.add_argument("--set", choices=MODEL_SETS + ("all",), default="main", help="which models list")
    ap.add_argument("--models", help="comma-separated model names (overrides --set)")
    ap.add_argument("--quick", action="store_true", help="smoke test: 2 models, 6 batch sizes, 60 sweep configs")
    ap.add_argument("--batch-sizes", help="comma-separated (default: vLLM's ladder)")
    ap.add_argument("--sweep-configs", type=int, default=320,
                    help="configs of the legal space swept per problem (fixed-seed sample; 0 = all)")
    ap.add_argument("--group-sizes", default="1,16,64", help="GROUP_SIZE_M values of the sweep")
    ap.add_argument("--budget-s", type=float, default=420.0, help="GPU-phase time budget for the measurement loop")
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--min-sweep", type=int, default=200,
                    help="configs every batch size's sweep times before the budget may cut it short")
    ap.add_argument("--sweep-reps", type=int, default=3)
    ap.add_argument("--early-stop", type=float, default=3.0)
    ap.add_argument("--top", type=int, default=5, help="sweep configs re-timed in the final rounds")
    ap.add_argument("--final-rounds", type=int, default=5)
    ap.add_argument("--final-reps", type=int, default=5)
    ap.add_argument("--tol", type=float, help="relative error allowed (default 2e-2; 6e-2 for fp8)")
    ap.add_argument("--dtype", choices=("bf16", "fp16", "fp8_w8a8"), default="bf16",
                    help="weights and activations (fp8_w8a8: e4m3 weights, activations quantised per launch)")
    ap.add_argument("--block-shape", help="fp8 block scales, e.g. 128,128 (default: per-tensor scales)")
    ap.add_argument("--arch", help="carver arch (default: from the device name)")
    ap.add_argument("--tune-model", default="mixtral-8x7b/tp2", help="model/tpN for moe_tune; 'none' to skip")
    ap.add_argument("--tune-timeout", type=float, default=300.0)
    ap.add_argument("--vllm-configs", default=os.path.join(HERE, "vllm-configs"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--previous", help="JSON {label: {M: config key}} of another model's first picks (the "
                    "previous commit's, from benches/moe/top1_picks.py), re-timed with the other picks and "
                    "scored as 'previous'")
    args = ap.parse_args(argv)
    if args.sweep_reps < 1 or args.final_rounds < 1 or args.final_reps < 1 or args.top < 1:
        ap.error("--sweep-reps, --final-rounds, --final-reps and --top must be >= 1")
    if args.sweep_configs < 0:
        ap.error("--sweep-configs must be >= 0")
    try:
        args.group_sizes = [int(g) for g in args.group_sizes.split(",")]
        args.batch_sizes = [int(b) for b in args.batch_sizes.split(",")] if args.batch_sizes else None
    except ValueError:
        ap.error("--group-sizes and --batch-sizes take comma-separated integers")
    if args.block_shape is not None:
        try:
            args.block_shape = [int(x) for x in args.block_shape.split(",")]
        except ValueError:
            ap.error("--block-shape takes two integers, e.g. 128,128")
        if args.dtype != "fp8_w8a8" or len(args.block_shape) != 2:
            ap.error("--block-shape takes two integers and needs --dtype fp8_w8a8")
    if args.tol is None:
        args.tol = 6e-2 if args.dtype == "fp8_w8a8" else 2e-2
    if args.quick:
        args.models = args.models or ",".join(QUICK_MODELS)
        args.batch_sizes = args.batch_sizes or list(QUICK_BATCHES)
        args.sweep_configs = 60
        args.min_sweep = 20
    return args


def sweep_space(mk, smem, args):
    space = mk.tuner_space(smem_limit=smem, dtype=args.dtype, group_sizes=args.group_sizes,
                           block_shape=args.block_shape)
    if args.sweep_configs and args.sweep_configs < len(space):
        rng = random.Random(args.seed + 12345)
        space = rng.sample(space, args.sweep_configs)
    return space


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(tempfile.gettempdir(), "carver-moe-triton-cache"))
    cache_dir = os.environ["TRITON_CACHE_DIR"]
    problems = load_problems(args.models_file, args.set, args.models)
    batches = args.batch_sizes or list(BATCH_SIZES)
    out_path = os.path.join(args.out, "moe_results.json")

    import torch
    import triton
    from carver import moe_kernel as mk
    from carver import moe_tune as mt

    if not torch.cuda.is_available():
        raise FatalError("no CUDA device visible to torch")
    props = torch.cuda.get_device_properties(0)
    device = mt.vllm_device_name(torch.cuda.get_device_name())
    smem = int(getattr(props, "shared_memory_per_block_optin", 0) or mk.DEFAULT_SMEM_LIMIT)
    arch = args.arch or mt.arch_for_device(device)
    sweep = sweep_space(mk, smem, args)
    doc = {"schema_version": 1, "tool": "benches/moe/harness.py", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "device": {"name": props.name, "vllm_name": device, "sm_count": props.multi_processor_count,
                      "smem_optin": smem, "l2_bytes": getattr(props, "L2_cache_size", None)},
           "versions": {"torch": torch.__version__, "triton": triton.__version__, "python": sys.version.split()[0]},
           "args": {k: v for k, v in vars(args).items()}, "arch": arch, "batch_sizes": batches,
           "timing_note": ("two GEMM launches of the layer per timed rep; align step and SiLU-and-mul excluded"
                           if args.dtype != "fp8_w8a8" else
                           "two fp8 GEMM launches of the layer per timed rep; align step, SiLU-and-mul and the "
                           "activations' fp8 quantisation excluded (runs before 2026-11-28's sixteenth session "
                           "timed the whole fp8 layer, the unfused quantisation included)"),
           "sweep": {"legal_space": len(mk.tuner_space(smem_limit=smem)),
                     "legal_space_groups": len(mk.tuner_space(smem_limit=smem, group_sizes=args.group_sizes)),
                     "swept": len(sweep), "configs": [mk.config_key(c) for c in sweep]},
           "entries": [], "phases_s": {}, "carver": {},
           # registers and spills of each swept config's binaries, as Triton compiled them
           "binaries": {}}

    def flush():
        doc["phases_s"]["total"] = time.perf_counter() - T0
        tmp = out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({k: v for k, v in doc.items() if k != "_flush"}, f, separators=(",", ":"))
        os.replace(tmp, out_path)
    doc["_flush"] = flush
    log(f"device {props.name} ({device}), smem opt-in {smem} B; torch {torch.__version__}, triton "
        f"{triton.__version__}; arch {arch}; {len(problems)} problems x {len(batches)} batch sizes; sweep "
        f"{len(sweep)} of {doc['sweep']['legal_space_groups']} legal configs (G in {args.group_sizes}; "
        f"{doc['sweep']['legal_space']} with all 4 GROUP_SIZE_M)")

    # ---- carver's files, default and vLLM configs ---------------------------------------------
    picks = {}
    total_carver = 0.0
    for p in problems:
        cp = carver_picks(mt, p, arch, batches, 8, args.dtype, args.block_shape)
        total_carver += cp.get("seconds") or 0.0
        vpath, vtab = vllm_file(args.vllm_configs, p["experts"], p["n"], device, args.dtype, args.block_shape)
        picks[p["label"]] = {"carver": cp, "vllm_path": vpath, "vllm": vtab}
        doc["carver"][p["label"]] = {k: v for k, v in cp.items() if k != "batches"}
        doc["carver"][p["label"]]["configs"] = {str(m): [mk.config_key(c) for c in cs]
                                               for m, cs in cp.get("batches", {}).items()}
        doc["carver"][p["label"]]["vllm_file"] = vpath
        if cp["error"]:
            log(f"WARNING {p['label']}: carver.recommend_moe failed: {cp['error']}")
    doc["carver_seconds_total"] = total_carver
    log(f"carver answered {len(problems)} files in {total_carver * 1e3:.1f} ms")

    # ---- refinement (moe_tune, a cold Triton cache of its own) before the measurements, so its
    # winners are re-timed with the other picks ------------------------------------------------------
    previous = {}
    if args.previous:
        try:
            with open(args.previous) as f:
                previous = {label: {int(m): parse_config_key(k) for m, k in by_m.items()}
                            for label, by_m in json.load(f).items()}
        except (OSError, ValueError, AttributeError) as e:
            raise FatalError(f"--previous {args.previous}: {e}; expected JSON {{label: {{M: config key}}}} "
                             "as benches/moe/top1_picks.py writes it") from e
        doc["previous_picks"] = args.previous
    tuned, tuned_label = {}, None
    if args.tune_model != "none":
        tp_match = [p for p in problems if p["label"] == args.tune_model]
        if tp_match:
            tp = tp_match[0]
            t = run_tune(tp, args.out, args.arch, batches, args.tune_timeout, args.dtype, args.block_shape)
            t["label"] = tuned_label = tp["label"]
            doc["tune"] = t
            tuned = {m: parse_config_key(k) for m, k in t["winners"].items()}
        else:
            log(f"--tune-model {args.tune_model} is not among this run's problems; refinement skipped")

    def picks_for(p):
        def f(m):
            pk = picks[p["label"]]
            return {"carver": pk["carver"]["batches"].get(m, []),
                    "default": mk.default_config(m, p["experts"], args.dtype, args.block_shape),
                    "vllm": nearest(pk["vllm"], m) if pk["vllm"] else None,
                    "tuned": tuned.get(m) if p["label"] == tuned_label else None,
                    "previous": previous.get(p["label"], {}).get(m)}
        return f

    # ---- compile -------------------------------------------------------------------------------
    allc = list(sweep)
    for p in problems:
        f = picks_for(p)
        for m in batches:
            pk = f(m)
            allc += pk["carver"] + [c for c in (pk["default"], pk["vllm"], pk["tuned"], pk["previous"]) if c]
    allc = [{k: c[k] for k in mk.CONFIG_KEYS} for c in allc]
    t_c = time.perf_counter()
    n_uniq = len({mk.config_key(c) for c in allc})
    log(f"phase 1: compiling {n_uniq} distinct configs on {args.workers} workers (cache {cache_dir})")
    res = mt.precompile(allc, args.dtype, args.block_shape, args.workers, log)
    nfail = sum(1 for r in res.values() if not r.get("ok"))
    COMPILE_FAILED.update(k for k, r in res.items() if not r.get("ok"))
    doc["compile"] = {"configs": n_uniq, "failed": nfail, "seconds": time.perf_counter() - t_c,
                      "failures": {k: r.get("error") for k, r in res.items() if not r.get("ok")}}
    log(f"  compiled in {doc['compile']['seconds']:.0f}s, {nfail} failed")

    def count_cache():
        n = 0
        for _root, dirs, _files in os.walk(cache_dir):
            n += len(dirs)
            break
        return n
    before = count_cache()

    # ---- measure ----------------------------------------------------------------------------------
    timer = mk.QueuedTimer(torch, max(args.final_reps, args.sweep_reps) + 1)
    log(f"GPU sleep calibration: {timer.cycles_per_us:.0f} cycles/us")
    t_meas = time.perf_counter()
    weights = [p["n"] * p["hidden"] * p["experts"] * max(1, min(p["topk"] * 4096, p["experts"])) for p in problems]
    try:
        for i, p in enumerate(problems):
            left = args.budget_s - (time.perf_counter() - t_meas)
            share = max(10.0, left * weights[i] / max(1, sum(weights[i:])))
            try:
                ent = measure_entry(torch, mk, p, batches, sweep, picks_for(p), args, timer, share, doc)
            except Exception as e:  # noqa: BLE001 - one problem's failure does not end the run
                log(f"ERROR {p['label']}: {type(e).__name__}: {e}")
                traceback.print_exc()
                try:
                    torch.cuda.synchronize()
                except Exception as e2:  # noqa: BLE001
                    raise FatalError(f"CUDA context unusable after {p['label']}: {e2}") from e2
                continue
            doc["entries"].append(ent)
            el = time.perf_counter() - t_meas
            log(f"{p['label']} done in {ent['seconds']:.0f}s; measurement {el:.0f}s of {args.budget_s:.0f}s budget; "
                f"ETA {el / (i + 1) * (len(problems) - i - 1):.0f}s for {len(problems) - i - 1} more")
            flush()
    finally:
        doc["compile"]["main_process_new_cache_entries"] = count_cache() - before
        doc["phases_s"]["measure"] = time.perf_counter() - t_meas

    # ---- refinement: its file is scored like the other picks -----------------------------------------
    t = doc.get("tune")
    if t is not None:
        ent = next((e for e in doc["entries"] if e["label"] == t["label"]), None)
        ratios = [b["scores"].get("tuned") for b in ent["batches"]] if ent else []
        ratios = [r if r is not None else 0.0 for r in ratios]
        t.update({"ratios": ratios, "geomean": geomean(ratios), "worst": min(ratios) if ratios else None})
    doc.pop("_flush", None)
    doc["phases_s"]["total"] = time.perf_counter() - T0
    with open(out_path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    log(f"wrote {out_path}")
    print_table(doc)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except FatalError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
