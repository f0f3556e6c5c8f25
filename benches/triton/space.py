"""The reference config space the harness sweeps to find each shape's exhaustive best.

A broad grid over the kernel's parameters, filtered for legality and sanity, with tiers that are
added only where a shape would otherwise have too few configs:

  axes     BLOCK_SIZE_M, BLOCK_SIZE_N in {16, 32, 64, 128, 256}; BLOCK_SIZE_K in {32, 64, 128};
           num_warps in {2, 4, 8}; num_stages in {2, 3, 4, 5}; GROUP_SIZE_M in {1, 8};
           SPLIT_K in {1, 2, 4, 8, 16}
  legal    shared memory <= 227 KiB: num_stages * (BM + BN) * BK * 2 bytes (what Triton 3.6
           allocates on sm_90 for this kernel's pipeline: one A and one B tile per stage), and for
           SPLIT_K > 1 also BM * BN * 4 bytes (the fp32 accumulator goes through shared memory on
           its way to the atomics: 256x256 split-K asked for 262144 bytes on the H100)
           accumulator: BM * BN / (32 * num_warps) <= 256 fp32 registers per thread
           mma.sync configs (num_warps 2, or BM < 64: no 64-row warpgroup tile, so Triton does not
           use wgmma and holds A and B fragments in registers): accumulator + one K step of A and B
           fragments, BM*BN/(32*w) + (BM+BN)*BK/(64*w) <= 160 registers per thread. Past that ptxas
           spills heavily: in the H100 smoke runs such configs spilled 1500-3500 bytes, took 3-9 s
           each to compile and ran at <= 0.6 of the best.
  sanity   a block dimension is at most the next power of two of its problem dimension (at least
           16): a bigger tile only adds masked work;
           tiny tiles are dropped when they are under 1/16 of the largest tile the shape allows AND
           they would make >= 4 waves of the 132 SMs (bigger tiles then fill the GPU with more reuse);
           GROUP_SIZE_M is only varied when the tile grid has more than one row and column
           (otherwise 1 and 8 launch the same order);
           SPLIT_K > 1 only when the tile grid is under one wave (< 132 tiles), every split keeps
           >= 4 K tiles, and tiles * SPLIT_K stays within 4 waves.

  tier 0   num_warps giving 32..128 accumulator values per thread (the closest one if none does),
           num_stages with stages * BK in 96..512 (K depth in flight), GROUP_SIZE_M 8 (1 where
           grouping is moot), SPLIT_K 1
  tier 1   GROUP_SIZE_M 1, and every qualifying SPLIT_K > 1, at one stage count per tile (the
           middle of that tile's tier-0 stage counts)
  tier 2   (only if tiers 0-1 have fewer than `min_configs`) every num_warps that passes the
           register bound and gives >= 4 accumulator values per thread, at all tier-0 stages
  tier 3   (likewise) GROUP_SIZE_M 1 and SPLIT_K > 1 at every tier-0 stage count
  tier 4   (likewise) every legal stage count 2..5, outside the 96..512 depth window

Configs are returned in carver's form: {"kwargs": {...}, "num_warps": w, "num_stages": s}.
Run `python space.py --shapes eval/dev-shapes.json` to print the per-shape counts.
"""

import argparse
import json
import math

SMS = 132
SMEM_LIMIT = 227 * 1024
MAX_ACC_PER_THREAD = 256
BLOCKS_MN = (16, 32, 64, 128, 256)
BLOCKS_K = (32, 64, 128)
WARPS = (2, 4, 8)
STAGES = (2, 3, 4, 5)
SPLITS = (2, 4, 8, 16)
DEFAULT_MIN_CONFIGS = 220
MMA_SYNC_REG_BUDGET = 160


def cdiv(a, b):
    return -(-a // b)


def next_pow2(x):
    return 1 << (x - 1).bit_length()


def smem_bytes(bm, bn, bk, stages, split_k=1):
    pipeline = stages * (bm + bn) * bk * 2
    epilogue = bm * bn * (4 if split_k > 1 else 2)
    return max(pipeline, epilogue)


def acc_per_thread(bm, bn, warps):
    return bm * bn / (32 * warps)


def is_legal(bm, bn, bk, warps, stages, split_k=1):
    if smem_bytes(bm, bn, bk, stages, split_k) > SMEM_LIMIT or acc_per_thread(bm, bn, warps) > MAX_ACC_PER_THREAD:
        return False
    if (warps == 2 or bm < 64) and \
            acc_per_thread(bm, bn, warps) + (bm + bn) * bk / (64 * warps) > MMA_SYNC_REG_BUDGET:
        return False
    return True


def make_config(bm, bn, bk, group_m, split_k, warps, stages):
    return {
        "kwargs": {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk,
                   "GROUP_SIZE_M": group_m, "SPLIT_K": split_k},
        "num_warps": warps,
        "num_stages": stages,
    }


def _core_warps(area):
    ok = [w for w in WARPS if 32 <= area / (32 * w) <= 128]
    if ok:
        return ok
    return [min(WARPS, key=lambda w: abs(math.log2(area / (32 * w)) - 5))]


def _all_warps(bm, bn):
    return [w for w in WARPS if 4 <= acc_per_thread(bm, bn, w) <= MAX_ACC_PER_THREAD]


def reference_space(m, n, k, min_configs=DEFAULT_MIN_CONFIGS):
    """Return (configs, tier_of) for one shape: configs in a deterministic order, and a dict from
    the config's index to the tier that added it."""
    bm_max = min(256, max(16, next_pow2(m)))
    bn_max = min(256, max(16, next_pow2(n)))
    max_area = bm_max * bn_max
    tiles = []
    for bm in BLOCKS_MN:
        for bn in BLOCKS_MN:
            if bm > bm_max or bn > bn_max:
                continue
            tm, tn = cdiv(m, bm), cdiv(n, bn)
            if bm * bn * 16 < max_area and tm * tn >= 4 * SMS:
                continue
            for bk in BLOCKS_K:
                if bk > max(32, next_pow2(k)):
                    continue
                tiles.append((bm, bn, bk, tm, tn))

    seen = set()
    out = []
    tier_of = {}

    def add(cfg_tuple, tier):
        if cfg_tuple in seen:
            return
        bm, bn, bk, g, sk, w, s = cfg_tuple
        if not is_legal(bm, bn, bk, w, s, sk):
            return
        seen.add(cfg_tuple)
        tier_of[len(out)] = tier
        out.append(make_config(*cfg_tuple))

    def splits_for(bk, tm, tn):
        if tm * tn >= SMS:
            return []
        return [sk for sk in SPLITS if cdiv(k, bk * sk) >= 4 and tm * tn * sk <= 4 * SMS]

    def stages_window(bm, bn, bk):
        return [s for s in STAGES if 96 <= s * bk <= 512 and smem_bytes(bm, bn, bk, s) <= SMEM_LIMIT]

    def tier0_1(tier):
        for bm, bn, bk, tm, tn in tiles:
            grouped = tm > 1 and tn > 1
            g_main = 8 if grouped else 1
            sts = stages_window(bm, bn, bk)
            if not sts:
                continue
            mid = sts[(len(sts) - 1) // 2]
            for w in _core_warps(bm * bn):
                if tier == 0:
                    for s in sts:
                        add((bm, bn, bk, g_main, 1, w, s), 0)
                else:
                    if grouped:
                        add((bm, bn, bk, 1, 1, w, mid), 1)
                    for sk in splits_for(bk, tm, tn):
                        add((bm, bn, bk, g_main, sk, w, mid), 1)

    tier0_1(0)
    tier0_1(1)
    if len(out) < min_configs:
        for bm, bn, bk, tm, tn in tiles:
            g_main = 8 if (tm > 1 and tn > 1) else 1
            for w in _all_warps(bm, bn):
                for s in stages_window(bm, bn, bk):
                    add((bm, bn, bk, g_main, 1, w, s), 2)
    if len(out) < min_configs:
        for bm, bn, bk, tm, tn in tiles:
            grouped = tm > 1 and tn > 1
            g_main = 8 if grouped else 1
            for w in _all_warps(bm, bn):
                for s in stages_window(bm, bn, bk):
                    if grouped:
                        add((bm, bn, bk, 1, 1, w, s), 3)
                    for sk in splits_for(bk, tm, tn):
                        add((bm, bn, bk, g_main, sk, w, s), 3)
    if len(out) < min_configs:
        for bm, bn, bk, tm, tn in tiles:
            grouped = tm > 1 and tn > 1
            g_main = 8 if grouped else 1
            for w in _all_warps(bm, bn):
                for s in STAGES:
                    add((bm, bn, bk, g_main, 1, w, s), 4)
                    if grouped:
                        add((bm, bn, bk, 1, 1, w, s), 4)
                    for sk in splits_for(bk, tm, tn):
                        add((bm, bn, bk, g_main, sk, w, s), 4)
    return out, tier_of


def load_shapes(path):
    """Read a shapes file in the form of eval/dev-shapes.json ({"shapes": [{"name", "M", "N", "K"}]})."""
    with open(path) as f:
        doc = json.load(f)
    rows = doc["shapes"] if isinstance(doc, dict) else doc
    shapes = []
    for i, r in enumerate(rows):
        try:
            m, n, k = int(r.get("M", r.get("m"))), int(r.get("N", r.get("n"))), int(r.get("K", r.get("k")))
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}: shape #{i} ({r!r}) lacks integer M, N, K") from e
        if min(m, n, k) < 1:
            raise ValueError(f"{path}: shape #{i} ({r!r}) has a non-positive size")
        batch = int(r.get("batch", r.get("Batch", 1)))
        if batch != 1:
            raise ValueError(f"{path}: shape #{i} has batch {batch}; the harness times batch 1 only")
        shapes.append({"name": r.get("name") or f"m{m}_n{n}_k{k}", "M": m, "N": n, "K": k})
    names = [s["name"] for s in shapes]
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise ValueError(f"{path}: duplicate shape names {dup}")
    return shapes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="eval/dev-shapes.json")
    ap.add_argument("--min-configs", type=int, default=DEFAULT_MIN_CONFIGS)
    ap.add_argument("--show", help="print every config of this shape name")
    args = ap.parse_args()
    total = 0
    for s in load_shapes(args.shapes):
        cfgs, tier_of = reference_space(s["M"], s["N"], s["K"], args.min_configs)
        by_tier = {}
        for t in tier_of.values():
            by_tier[t] = by_tier.get(t, 0) + 1
        nsk = sum(1 for c in cfgs if c["kwargs"]["SPLIT_K"] > 1)
        print(f"{s['name']:20s} M={s['M']:6d} N={s['N']:6d} K={s['K']:6d}  configs={len(cfgs):4d}  "
              f"split-K={nsk:4d}  tiers={dict(sorted(by_tier.items()))}")
        total += len(cfgs)
        if args.show == s["name"]:
            for c in cfgs:
                print("   ", json.dumps(c))
    print(f"total {total}")


if __name__ == "__main__":
    main()
