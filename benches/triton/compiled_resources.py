#!/usr/bin/env python3
"""carver's resource estimates against what Triton compiled (CPU only, no GPU, no torch).

Every config a sweep compiled carries Triton's report (`compile.shared`, `compile.n_regs`,
`compile.n_spills`). For each one, this prices the config with the installed carver package
(`carver.price`, the model the CLI ranks with) and compares:

- shared memory: how many pipeline buffers of the A and B tiles Triton allocated, by MMA kind
  (wgmma when a warpgroup owns 64 rows: BLOCK_SIZE_M >= 64 and num_warps % 4 == 0; else
  mma.sync) and load path (an operand whose rows are not 16-byte aligned is staged through
  registers);
- registers per thread: carver's estimate minus the compiler's, as percentiles, per class;
- blocks per SM: carver's prediction against the occupancy the compiled kernel has (the GPU's
  limits from the arch passed), counting where carver predicts fewer or more.

  python benches/triton/compiled_resources.py --sweep benches/triton/runs/RUN/triton_sweep.json.xz \
      [--sweep ...] [--arch h100] [--carver-bin target/release/carver]

The GPU's limits for the occupancy come from `carver arch show ARCH --format json` (--carver-bin);
without it, that comparison is left out.
"""

import argparse
import collections
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from replay import load_sweep  # noqa: E402

ELEM_BYTES = 2  # the harness's kernel is fp16


def staged(shape):
    """'A', 'B', 'AB' or '-': the operands whose rows are not 16-byte aligned (A is M x K and B is
    K x N, row-major)."""
    a = shape["K"] * ELEM_BYTES % 16 != 0
    b = shape["N"] * ELEM_BYTES % 16 != 0
    return ("A" if a else "") + ("B" if b else "") or "-"


def mma_kind(config):
    return "wgmma" if config["kwargs"]["BLOCK_SIZE_M"] >= 64 and config["num_warps"] % 4 == 0 else "mma.sync"


def buffers(config, path, shared):
    """The pipeline buffers of each operand's tile that `shared` bytes hold, as 'A x B' with s =
    num_stages ('1' for a staged operand's single buffer), or None when no count fits (the
    epilogue's buffer is the larger). Equal counts are tried first, since BLOCK_SIZE_M ==
    BLOCK_SIZE_N makes some totals ambiguous."""
    kw = config["kwargs"]
    a = kw["BLOCK_SIZE_M"] * kw["BLOCK_SIZE_K"] * ELEM_BYTES
    b = kw["BLOCK_SIZE_N"] * kw["BLOCK_SIZE_K"] * ELEM_BYTES
    s = config["num_stages"]
    depths = [s, s - 1] + [n for n in range(s - 2, 0, -1)]
    counts = lambda operand: [1] if operand in path else depths  # noqa: E731
    pairs = sorted(((na, nb) for na in counts("A") for nb in counts("B")), key=lambda p: p[0] != p[1])
    for na, nb in pairs:
        if na * a + nb * b == shared:
            name = lambda n, op: "1" if op in path else ("s" if n == s else f"s{n - s:+d}")  # noqa: E731
            return f"{name(na, 'A')} x {name(nb, 'B')}"
    return None


def occupancy(regs, threads, smem, arch):
    """Blocks per SM of a compiled kernel: carver's rule (registers in allocation units per warp,
    shared memory with the per-block reservation, threads, the block cap)."""
    unit = arch["registers"]["allocation_unit"]
    per_warp = -(-regs * 32 // unit) * unit
    by_regs = arch["registers"]["per_sm"] // max(1, per_warp * (threads // 32))
    sm = arch["shared_memory"]
    by_smem = sm["per_sm_bytes"] // (smem + sm["reserved_per_block_bytes"])
    return min(by_regs, by_smem, arch["sm"]["max_threads"] // threads, arch["sm"]["max_blocks"])


def arch_limits(carver_bin, name):
    cmd = [carver_bin, "arch", "show", name, "--format", "json"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout
        return json.loads(out)["arch"]
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError, KeyError) as e:
        raise SystemExit(f"error: {' '.join(cmd)} gave no arch JSON: {e}")


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", action="append", required=True, help="triton_sweep.json(.gz); repeatable")
    ap.add_argument("--arch", help="price for this arch (default: h200 for runs named h200*, else h100)")
    ap.add_argument("--carver-bin", help="carver CLI, for the GPU's limits (blocks per SM comparison)")
    args = ap.parse_args()
    try:
        import carver
    except ImportError as e:
        raise SystemExit(f"error: needs the carver package ({e}): pip install ./crates/carver-py")

    buf = collections.defaultdict(collections.Counter)
    reg_err = collections.defaultdict(list)
    occ = collections.defaultdict(collections.Counter)
    for path in args.sweep:
        arch_name = args.arch or ("h200" if os.path.basename(os.path.dirname(path)).startswith("h200") else "h100")
        arch = arch_limits(args.carver_bin, arch_name) if args.carver_bin else None
        for shape in load_sweep(path)["shapes"]:
            done = [c for c in shape["configs"] if (c.get("compile") or {}).get("n_regs")]
            priced = carver.price(shape["M"], shape["N"], shape["K"], [c["config"] for c in done],
                                  arch=arch_name, target="triton", dtype="f16")
            path_kind = staged(shape)
            for c, p in zip(done, priced):
                comp, cfg = c["compile"], c["config"]
                cls = (path_kind, mma_kind(cfg))
                buf[cls][buffers(cfg, path_kind, comp["shared"]) or "other (epilogue)"] += 1
                if not p.ok or comp["n_spills"]:
                    continue
                pred = p.prediction
                reg_err[cls].append(pred.registers_per_thread - comp["n_regs"])
                if arch:
                    real = occupancy(comp["n_regs"], cfg["num_warps"] * 32, comp["shared"], arch)
                    occ[cls]["carver fewer" if pred.blocks_per_sm < real else
                             "carver more" if pred.blocks_per_sm > real else "equal"] += 1

    print("shared memory: Triton's pipeline buffers (A tile x B tile; s = num_stages)")
    for cls in sorted(buf):
        total = sum(buf[cls].values())
        top = ", ".join(f"{k}: {v}" for k, v in buf[cls].most_common(3))
        print(f"  staged {cls[0]:2s} {cls[1]:8s} {total:6d} configs  {top}")
    print("registers per thread: carver's estimate minus the compiler's (no spills)")
    for cls in sorted(reg_err):
        e = reg_err[cls]
        print(f"  staged {cls[0]:2s} {cls[1]:8s} {len(e):6d} configs  p10 {percentile(e, 0.1):+4d}  "
              f"median {percentile(e, 0.5):+4d}  p90 {percentile(e, 0.9):+4d}")
    if occ:
        print("blocks per SM: carver's prediction against the compiled kernel's")
        for cls in sorted(occ):
            print(f"  staged {cls[0]:2s} {cls[1]:8s} " + ", ".join(f"{k}: {v}" for k, v in sorted(occ[cls].items())))


if __name__ == "__main__":
    main()
