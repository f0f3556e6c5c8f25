#!/usr/bin/env python3
"""Compile the harness's Triton kernel for sm_90 without a GPU and record what ptxas reports.

For every shape of a shapes file, every config of the harness's reference space (`space.py`) is
compiled with Triton's own compiler for a Hopper target (`GPUTarget("cuda", 90, 32)`); the
cubin's registers per thread, spilled bytes and the kernel's shared memory are read with the
`cuobjdump` that ships in the Triton wheel. The kernel is specialised as a real launch of that
shape would be: N, K and the strides that equal them are 16-divisible only when they are, EVEN_K
follows K, and SPLIT_K 1 is a constant (`kernel.py`, `harness.spec_class`).

The output has the form of `triton_sweep.json` (schema_version 1), with a `compile` record per
config and no timings, so `compiled_resources.py` compares carver's resource estimates with it
exactly as with a GPU sweep:

  python3 benches/triton/compile_sweep.py --shapes eval/one-unaligned-shapes.json --out /tmp/c.json.gz
  python3 benches/triton/compiled_resources.py --sweep /tmp/c.json.gz --arch h100 --carver-bin target/release/carver

Needs only the `triton` package (CPU); torch is not imported for compiling.
"""

import argparse
import concurrent.futures
import functools
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import space  # noqa: E402

TARGET_CAPABILITY = 90
RESOURCE = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


def kernel_fn():
    """The harness's `matmul_kernel`. kernel.py imports torch for its launch helpers; compiling
    needs none of them, so a placeholder module stands in where torch is not installed."""
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.modules["torch"] = types.ModuleType("torch")
    from kernel import matmul_kernel

    return matmul_kernel


@functools.cache
def cuobjdump():
    import triton

    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.access(path, os.X_OK):
        raise SystemExit(f"error: no cuobjdump in the Triton wheel at {path}")
    return path


def compile_one(shape, config):
    """Compile one config for `shape`; returns the `compile` record (n_regs, n_spills, shared)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = kernel_fn()
    kw = config["kwargs"]
    n, k = shape["N"], shape["K"]
    split = kw["SPLIT_K"] > 1
    names = fn.arg_names
    constexpr = {"BLOCK_SIZE_M": kw["BLOCK_SIZE_M"], "BLOCK_SIZE_N": kw["BLOCK_SIZE_N"],
                 "BLOCK_SIZE_K": kw["BLOCK_SIZE_K"], "GROUP_SIZE_M": kw["GROUP_SIZE_M"],
                 "EVEN_K": k % kw["BLOCK_SIZE_K"] == 0,
                 # Row-major A, B and C: their inner strides are 1, which Triton makes constants.
                 "stride_ak": 1, "stride_bn": 1, "stride_cn": 1}
    if not split:
        constexpr["SPLIT_K"] = 1
    pointers = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "ws_ptr": "*fp32"}
    signature = {a: pointers.get(a, "constexpr" if a in constexpr else "i32") for a in names}
    divisible = list(pointers)
    if n % 16 == 0:
        divisible += ["N", "stride_bk", "stride_cm"]
    if k % 16 == 0:
        divisible += ["K", "stride_am"]
    src = ASTSource(fn=fn, signature=signature,
                    constexprs={(names.index(a),): v for a, v in constexpr.items()},
                    attrs={(names.index(a),): [["tt.divisibility", 16]] for a in divisible})
    t0 = time.perf_counter()
    compiled = triton.compile(src, target=GPUTarget("cuda", TARGET_CAPABILITY, 32),
                              options={"num_warps": config["num_warps"], "num_stages": config["num_stages"]})
    seconds = time.perf_counter() - t0
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        out = subprocess.run([cuobjdump(), "--dump-resource-usage", f.name],
                             capture_output=True, text=True, check=True).stdout
    m = RESOURCE.search(out)
    if not m:
        raise RuntimeError(f"cuobjdump printed no resource line: {out[-300:]}")
    regs, _stack, _shared, local = (int(x) for x in m.groups())
    return {"seconds": seconds, "n_regs": regs, "n_spills": local, "shared": compiled.metadata.shared}


def task(args):
    shape, config = args
    try:
        return {"compile": compile_one(shape, config), "error": None}
    except Exception as e:  # noqa: BLE001 - a config that fails to compile is recorded, not fatal
        return {"compile": None, "error": f"{type(e).__name__}: {e}"[:2000]}


def config_key(config):
    kw = config["kwargs"]
    return (f"BM{kw['BLOCK_SIZE_M']}_BN{kw['BLOCK_SIZE_N']}_BK{kw['BLOCK_SIZE_K']}_G{kw['GROUP_SIZE_M']}"
            f"_SK{kw['SPLIT_K']}_w{config['num_warps']}_s{config['num_stages']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", required=True, help="shapes file (the harness's form)")
    ap.add_argument("--out", required=True, help="where to write the sweep-form JSON (.gz to compress)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    shapes = space.load_shapes(args.shapes)
    doc = {"schema_version": 1, "device": f"none (compiled for sm_{TARGET_CAPABILITY}, not run)",
           "source": os.path.relpath(args.shapes), "shapes": []}
    t0 = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        for shape in shapes:
            # GROUP_SIZE_M only changes the program-id arithmetic, not the main loop: one config
            # per main loop (tile, split or not, warps, stages).
            configs, seen = [], set()
            for c in space.reference_space(shape["M"], shape["N"], shape["K"])[0]:
                kw = c["kwargs"]
                binary = (kw["BLOCK_SIZE_M"], kw["BLOCK_SIZE_N"], kw["BLOCK_SIZE_K"], kw["SPLIT_K"] > 1,
                          c["num_warps"], c["num_stages"])
                if binary not in seen:
                    seen.add(binary)
                    configs.append(c)
            results = list(pool.map(task, [(shape, c) for c in configs], chunksize=4))
            entries = [{"key": config_key(c), "config": c, "status": "compiled" if r["compile"] else "error",
                        **r} for c, r in zip(configs, results)]
            failed = sum(e["status"] == "error" for e in entries)
            print(f"{shape['name']:24s} {len(entries):4d} configs compiled, {failed} failed "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
            doc["shapes"].append({**shape, "configs": entries})
    opener = gzip.open if args.out.endswith(".gz") else open
    with opener(args.out, "wt") as f:
        json.dump(doc, f)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
