#!/usr/bin/env python3
"""nvMatmulHeuristics' top-k Triton configs for each shape, in carver's picks-file form.

Runs on the CPU (no GPU needed): NVIDIA's nvidia-matmul-heuristics package with the TRITON target,
the predefined H100_SXM hardware descriptor and precision "HSH" (A and B fp16, fp32 compute,
C and D fp16), layout NN_ROW_MAJOR (A M x K and B K x N, both row-major, no transposes), flag
PERF_MODEL_BASED_AUTO_TUNING, and the package's internal discovery set for that layout loaded first
(the setup NVIDIA's own samples and CUTLASS integration use).

  python3 -m venv /tmp/nvmmh-venv && /tmp/nvmmh-venv/bin/pip install nvidia-matmul-heuristics
  /tmp/nvmmh-venv/bin/python benches/triton/nvmmh_picks.py --shapes eval/dev-shapes.json \
      --out benches/triton/picks/nvmmh-h100-sxm.json.gz

Mapping of each returned kernel configuration to the kernel's kwargs:
  BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K = the CTA tile (cta[0], cta[1], cta[2])
  num_stages   = loadStages
  SPLIT_K      = splitK
  GROUP_SIZE_M = gridSwizzle (the header: "matches CUTLASS, nvFuser and Triton definition")
  num_warps    = (cta_m / warp_m) * (cta_n / warp_n) * (cta_k / warp_k): one warp per warp tile, the
                 CUTLASS convention the package's warp tile follows (for TRITON it returns
                 warp_k == cta_k). No Triton example from NVIDIA shows another rule.
  dropped      ctaOrder (rasterisation order: the kernel has one grouped order; ctaOrder 1 cannot be
               expressed), the instruction shape (Triton picks its own MMA), and the cluster shape
               (always 1x1 here). Every dropped non-default value is listed in the hint's "dropped".
Nothing is adjusted to make a config legal: a tile Triton cannot express (say 48 wide) or a
non-integer warp count is kept as returned, and the harness reports it as illegal.
Each result records the wall time of its call (microseconds, Python wrapper included) and of the
raw library call alone.
"""

import argparse
import ctypes
import gzip
import json
import os
import platform
import sys
import time
from importlib import metadata

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from configs import config_key, legality_error  # noqa: E402
from space import load_shapes  # noqa: E402


def warps_from_tiles(cta, warp):
    ratio = 1
    for c, w in zip(cta, warp):
        if w <= 0 or c % w:
            return (cta[0] / warp[0]) * (cta[1] / warp[1]) * (cta[2] / warp[2]) if all(warp) else None
        ratio *= c // w
    return ratio


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="eval/dev-shapes.json")
    ap.add_argument("--out", default=os.path.join(HERE, "picks", "nvmmh-h100-sxm.json.gz"))
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--gpu", default="H100_SXM", help="NvMatmulHeuristicsNvidiaGpu member")
    ap.add_argument("--precision", default="HSH")
    ap.add_argument("--repeat", type=int, default=5, help="calls per shape for the wall time (median reported)")
    args = ap.parse_args()

    try:
        import nvMatmulHeuristics as nv
    except ImportError as e:
        raise SystemExit(f"error: nvMatmulHeuristics is not importable ({e}); "
                         "pip install nvidia-matmul-heuristics into the Python running this script")
    version = metadata.version("nvidia-matmul-heuristics")
    shapes = load_shapes(args.shapes)
    gpu = getattr(nv.NvMatmulHeuristicsNvidiaGpu, args.gpu)
    layout = nv.NvMatmulHeuristicsMatmulLayout.NN_ROW_MAJOR
    flags = nv.NvMatmulHeuristicsFlags.PERF_MODEL_BASED_AUTO_TUNING

    t0 = time.perf_counter()
    lib = nv.NvMatmulHeuristicsInterface(nv.NvMatmulHeuristicsTarget.TRITON, precision=args.precision, flags=flags)
    hw = lib.createHardwareDescriptor()
    lib.setHardwarePredefinedGpu(hw, gpu)
    init_us = (time.perf_counter() - t0) * 1e6
    t0 = time.perf_counter()
    discovery = lib.loadInternalDiscoverySet(layout, hw)
    discovery_us = (time.perf_counter() - t0) * 1e6
    if not discovery:
        print("warning: loadInternalDiscoverySet returned false; picks come from the uncalibrated model",
              file=sys.stderr)

    results = []
    for sh in shapes:
        m, n, k = sh["M"], sh["N"], sh["K"]
        problem = lib.makeNvMatmulHeuristicsProblem(m, n, k, layout)
        wall, raw = [], []
        got, first = None, None
        for _ in range(max(1, args.repeat)):
            t = time.perf_counter()
            got = lib.get(problem, args.topk, hw)
            wall.append((time.perf_counter() - t) * 1e6)
            this = [str(g["kernel"]) for g in got]
            if first is None:
                first = this
            elif this != first:
                raise SystemExit(f"error: {sh['name']}: repeated calls returned different configs")
            out = (lib.nvmmhKernelConfiguration * args.topk)()
            t = time.perf_counter()
            cnt = lib.nvMatmulHeuristicsGetGemmConfig(lib.handle, args.precision.encode("ascii"), ctypes.c_int(flags),
                                                      ctypes.c_int(nv.NvMatmulHeuristicsTarget.TRITON),
                                                      ctypes.byref(problem), out, args.topk, hw)
            raw.append((time.perf_counter() - t) * 1e6)
            if cnt != len(got):
                raise SystemExit(f"error: {sh['name']}: raw call returned {cnt} configs, wrapper {len(got)}")
        hints = []
        for rank, g in enumerate(got, start=1):
            kc = g["kernel"]
            cta = (kc.cta_tile_m, kc.cta_tile_n, kc.cta_tile_k)
            warp = (kc.warp_tile_m, kc.warp_tile_n, kc.warp_tile_k)
            nw = warps_from_tiles(cta, warp)
            cfg = {"kwargs": {"BLOCK_SIZE_M": cta[0], "BLOCK_SIZE_N": cta[1], "BLOCK_SIZE_K": cta[2],
                              "GROUP_SIZE_M": kc.swizzle_factor, "SPLIT_K": kc.split_k},
                   "num_warps": nw, "num_stages": kc.stages}
            dropped = []
            if kc.cta_order:
                dropped.append(f"ctaOrder={kc.cta_order}")
            if (kc.cluster_m, kc.cluster_n) != (1, 1):
                dropped.append(f"cluster={kc.cluster_m}x{kc.cluster_n}")
            hints.append({
                "rank": rank, "config": cfg,
                "prediction": {"time_us": g["runtime"] * 1e6},
                "nvmmh": {"cta": list(cta), "warp": list(warp),
                          "instr": [kc.instr_tile_m, kc.instr_tile_n, kc.instr_tile_k],
                          "stages": kc.stages, "split_k": kc.split_k, "swizzle": kc.swizzle_factor,
                          "cta_order": kc.cta_order, "cluster": [kc.cluster_m, kc.cluster_n]},
                "dropped": dropped,
                "legal_for_kernel": legality_error(cfg) is None,
                "key": config_key(cfg),
            })
        wall.sort()
        raw.sort()
        results.append({
            "shape": {"name": sh["name"], "m": m, "n": n, "k": k, "batch": 1},
            "arch": "h100-sxm", "target": "triton",
            "error": None if hints else "nvMatmulHeuristics returned no configuration",
            "hints": hints,
            "wall_time_us": {"get_median": wall[len(wall) // 2], "get_min": wall[0],
                             "raw_call_median": raw[len(raw) // 2], "calls": len(wall)},
        })
        illegal = sum(1 for h in hints if not h["legal_for_kernel"])
        print(f"{sh['name']:20s} {len(hints)} configs, {illegal} not expressible, "
              f"{wall[len(wall) // 2]:8.1f} us per call (raw {raw[len(raw) // 2]:8.1f} us); "
              f"top-1 {hints[0]['key'] if hints else '-'}")

    doc = {
        "schema_version": 1,
        "generator": "benches/triton/nvmmh_picks.py",
        "ranker": "nvMatmulHeuristics",
        "package": f"nvidia-matmul-heuristics {version}",
        "target": "TRITON", "gpu": args.gpu, "precision": args.precision, "layout": "NN_ROW_MAJOR",
        "flags": "PERF_MODEL_BASED_AUTO_TUNING", "topk": args.topk,
        "discovery_set_loaded": bool(discovery),
        "setup_wall_time_us": {"interface_and_hardware": init_us, "load_internal_discovery_set": discovery_us},
        "host": {"python": platform.python_version(), "machine": platform.machine(),
                 "processor": platform.processor() or None},
        "mapping": ("BLOCK_SIZE_M/N/K = cta tile; num_stages = loadStages; SPLIT_K = splitK; GROUP_SIZE_M = "
                    "gridSwizzle; num_warps = product of cta/warp tile ratios; ctaOrder, instruction shape and "
                    "cluster dropped (listed per hint); nothing adjusted for legality"),
        "results": results,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    # Stored picks are gzipped (benches/triton/picks/*.json.gz).
    with (gzip.open(args.out, "wt") if args.out.endswith(".gz") else open(args.out, "w")) as f:
        json.dump(doc, f, indent=1)
    med = sorted(r["wall_time_us"]["get_median"] for r in results)
    print(f"wrote {args.out}: {len(results)} shapes; median {med[len(med) // 2]:.1f} us per shape "
          f"(setup {init_us / 1e3:.1f} ms, discovery load {discovery_us / 1e3:.1f} ms)")
    # nvidia-matmul-heuristics 0.1.0.27 segfaults in nvMatmulHeuristicsDestroy once an internal
    # discovery set has been loaded (seen here at interpreter exit and on an explicit del). The
    # results are written; leave the handle to the OS instead of destroying it.
    lib.handle = ctypes.c_void_p()


if __name__ == "__main__":
    main()
