#!/usr/bin/env python3
"""Worked example: feed carver's Triton configs to `triton.autotune` (runs on a GPU, one shape).

carver's hints are already in the form triton.Config takes, so the whole integration is:

    hints = result["hints"]            # from `carver recommend --target triton --format json`
    configs = [triton.Config(h["config"]["kwargs"], num_warps=h["config"]["num_warps"],
                             num_stages=h["config"]["num_stages"]) for h in hints]
    tuned = triton.autotune(configs=configs, key=["M", "N", "K"], reset_to_zero=["ws_ptr"])(
        triton.heuristics({"EVEN_K": lambda a: a["K"] % a["BLOCK_SIZE_K"] == 0})(matmul_kernel))

The autotuner then times only carver's top-k (8 configs instead of hundreds) the first time it
sees an (M, N, K), and caches the winner. This script does that for one shape, checks the result
against torch.matmul, and times the tuned kernel against cuBLAS with triton.testing.do_bench.

Split-K note: with SPLIT_K > 1 the kernel adds fp32 partial sums into a workspace, which must be
zero before each call and cast to fp16 after it. `reset_to_zero` makes the autotuner zero it
while benchmarking; the wrapper below zeroes it and casts on every real call. The autotuner's own
timings leave the cast out (it times the kernel launch only); the do_bench figure printed at the
end includes it.

  # hints from a picks file (carver's JSON, or nvmmh_picks.py's output) for one named shape
  python benches/triton/autotune_example.py --picks carver.json --shapes eval/dev-shapes.json --shape square.m4096
  # hints straight from a carver binary
  python benches/triton/autotune_example.py --carver-bin target/release/carver --m 4096 --n 4096 --k 4096
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import scoring as S  # noqa: E402
from space import load_shapes  # noqa: E402


def get_hints(args):
    if args.carver_bin:
        if None in (args.m, args.n, args.k):
            raise SystemExit("error: --carver-bin needs --m, --n and --k")
        cmd = [args.carver_bin, "recommend", "--target", "triton", "--m", str(args.m), "--n", str(args.n),
               "--k", str(args.k), "--topk", str(args.topk), "--format", "json"] + args.carver_args.split()
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"error: {' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
        picks = S.parse_picks(json.loads(proc.stdout), "carver", " ".join(cmd))
        print(f"carver answered in {wall * 1e3:.1f} ms wall (process start included)")
        shape = {"name": None, "M": args.m, "N": args.n, "K": args.k}
        if len(picks["results"]) != 1:
            raise SystemExit(f"error: expected one result from carver, got {len(picks['results'])}")
        shape["name"] = picks["results"][0]["name"]
    elif args.picks:
        picks = S.load_picks(args.picks, "picks")
        if args.shape:
            shapes = {s["name"]: s for s in load_shapes(args.shapes)}
            if args.shape not in shapes:
                raise SystemExit(f"error: no shape {args.shape!r} in {args.shapes}")
            shape = shapes[args.shape]
        elif None not in (args.m, args.n, args.k):
            shape = {"name": None, "M": args.m, "N": args.n, "K": args.k}
        else:
            raise SystemExit("error: give --shape NAME (with --shapes) or --m/--n/--k")
    else:
        raise SystemExit("error: give --picks FILE or --carver-bin PATH")
    hints, problem = S.pick_list(picks, shape, args.topk)
    if problem:
        raise SystemExit(f"error: no hints for M={shape['M']} N={shape['N']} K={shape['K']}: {problem}")
    return shape, hints


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--picks", help="picks file in carver's JSON form")
    ap.add_argument("--shapes", default="eval/dev-shapes.json")
    ap.add_argument("--shape", help="shape name in --shapes")
    ap.add_argument("--carver-bin")
    ap.add_argument("--carver-args", default="")
    ap.add_argument("--m", type=int)
    ap.add_argument("--n", type=int)
    ap.add_argument("--k", type=int)
    ap.add_argument("--topk", type=int, default=8)
    args = ap.parse_args()
    shape, hints = get_hints(args)

    import torch
    import triton
    from kernel import matmul_kernel

    M, N, K = shape["M"], shape["N"], shape["K"]
    print(f"shape {shape['name'] or ''} M={M} N={N} K={K}; {len(hints)} hints:")
    for h in hints:
        print(f"  #{h.get('rank')}: {json.dumps(h['config'])}  predicted {h.get('prediction', {}).get('time_us')} us")

    # --- the integration ------------------------------------------------------------------------
    configs = [triton.Config(h["config"]["kwargs"], num_warps=h["config"]["num_warps"],
                             num_stages=h["config"]["num_stages"]) for h in hints]
    tuned = triton.autotune(configs=configs, key=["M", "N", "K"], reset_to_zero=["ws_ptr"])(
        triton.heuristics({"EVEN_K": lambda a: a["K"] % a["BLOCK_SIZE_K"] == 0})(matmul_kernel))

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]), meta["SPLIT_K"])

    def matmul(a, b, c, ws):
        ws.zero_()
        tuned[grid](a, b, c, ws, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                    c.stride(0), c.stride(1))
        if tuned.best_config.kwargs["SPLIT_K"] > 1:
            c.copy_(ws.view(M, N))
        return c
    # ----------------------------------------------------------------------------------------------

    a = torch.randn((M, K), device="cuda", dtype=torch.float16)
    b = torch.randn((K, N), device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    ws = torch.empty(M * N, device="cuda", dtype=torch.float32)
    t0 = time.perf_counter()
    matmul(a, b, c, ws)
    torch.cuda.synchronize()
    tune_s = time.perf_counter() - t0
    best = tuned.best_config
    print(f"autotuning over {len(configs)} configs took {tune_s:.2f} s (compilation included); "
          f"best: {best.kwargs}, num_warps={best.num_warps}, num_stages={best.num_stages}")
    for cfg, t in sorted(tuned.configs_timings.items(), key=lambda kv: kv[1][0]):
        print(f"  {t[0] * 1e3:9.2f} us  {cfg.kwargs} w{cfg.num_warps} s{cfg.num_stages}")

    torch.backends.cuda.matmul.allow_tf32 = False
    ref = a.float() @ b.float()
    err = (torch.linalg.vector_norm(c.float() - ref) / torch.linalg.vector_norm(ref)).item()
    print(f"relative Frobenius error vs fp32 torch.matmul: {err:.2e}" + ("" if err < 1e-2 else "  (FAILED)"))
    t_tri = triton.testing.do_bench(lambda: matmul(a, b, c, ws), return_mode="median")
    t_cub = triton.testing.do_bench(lambda: torch.matmul(a, b), return_mode="median")
    fl = 2.0 * M * N * K
    print(f"tuned Triton: {t_tri * 1e3:.2f} us ({fl / t_tri / 1e9:.1f} TFLOP/s); "
          f"cuBLAS: {t_cub * 1e3:.2f} us ({fl / t_cub / 1e9:.1f} TFLOP/s)  [do_bench medians, L2 flushed]")
    if not err < 1e-2:
        sys.exit(1)


if __name__ == "__main__":
    main()
