#!/usr/bin/env python3
"""Offline scoring of picks against a saved sweep (CPU only, no GPU, no torch).

Scores any picks file (carver's JSON form) against OUT/triton_sweep.json from harness.py: for
each shape, the top-1 and best-of-top-k ratios (exhaustive-best time / pick time) for picks that
were measured, the measured rank of each ranker's top-1, and the picks that were not measured
(they are left out of the ratios and listed). Illegal picks count as 0, as in the harness.

  # score a picks file
  python benches/triton/replay.py --sweep OUT/triton_sweep.json --picks carver=picks.json
  # run a carver binary on the sweep's shapes and score its picks (the cost-model loop)
  python benches/triton/replay.py --sweep OUT/triton_sweep.json --carver-bin target/release/carver
  # several rankers side by side
  python benches/triton/replay.py --sweep OUT/triton_sweep.json --picks carver=a.json --picks nvmmh=b.json
  # the measured configs of a shape, fastest first (or 'all'), with what each ranker picked
  python benches/triton/replay.py --sweep OUT/triton_sweep.json --dump square.m4096 --dump-top 30
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import scoring as S  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import stored  # noqa: E402


def load_sweep(path):
    # Stored sweeps are xz-compressed (triton_sweep.json.xz), older copies gzipped.
    try:
        doc = stored.load(path)
    except (OSError, EOFError, json.JSONDecodeError) as e:
        raise SystemExit(f"error: cannot read sweep {path}: {e}")
    if doc.get("schema_version") != 1 or not isinstance(doc.get("shapes"), list):
        raise SystemExit(f"error: {path} is not a triton_sweep.json (schema_version 1)")
    return doc


def measured_map(shape):
    return {c["key"]: c for c in shape["configs"]}


def best_us(shape):
    b = shape.get("best")
    return b["final_us"] if b else None


def timed_sorted(shape):
    return sorted((c for c in shape["configs"] if c["status"] == S.TIMED), key=lambda c: c["final_us"])


def run_carver(bin_path, sweep, topk, extra):
    shapes = {"shapes": [{"name": s["name"], "M": s["M"], "N": s["N"], "K": s["K"]} for s in sweep["shapes"]]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(shapes, f)
        shapes_path = f.name
    cmd = [bin_path, "recommend", "--target", "triton", "--shapes", shapes_path, "--topk", str(topk),
           "--format", "json"] + extra
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SystemExit(f"error: cannot run {' '.join(cmd)}: {e}")
    finally:
        os.unlink(shapes_path)
    wall = time.perf_counter() - t0
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise SystemExit(f"error: carver exited {proc.returncode} without JSON ({e}); stderr:\n{proc.stderr[-3000:]}")
    if proc.returncode != 0:
        print(f"warning: carver exited {proc.returncode}; stderr tail: {proc.stderr[-500:]!r}", file=sys.stderr)
    picks = S.parse_picks(doc, "carver", "carver output")
    print(f"carver: {len(picks['results'])} shapes in {wall * 1e3:.1f} ms wall (process start included)")
    return picks


def score_all(sweep, picks, topk):
    rows = []
    for sh in sweep["shapes"]:
        shape = {"name": sh["name"], "M": sh["M"], "N": sh["N"], "K": sh["K"]}
        hints, problem = S.pick_list(picks, shape, topk)
        sc = S.score_shape(measured_map(sh), best_us(sh), hints, problem)
        order = [c["key"] for c in timed_sorted(sh)]
        for p in sc["picks"]:
            p["measured_rank"] = order.index(p["key"]) + 1 if p["key"] in order else None
        sc["n_timed"] = len(order)
        rows.append((sh, sc))
    return rows


def print_scores(label, rows, topk):
    print(f"\n== {label} (top {topk}) ==")
    print(f"{'shape':20s} {'best us':>10s} {'top1':>6s} {'best-k':>6s} {'top1 rank':>10s} {'best pick':>9s} "
          f"{'legal':>5s} {'unmeas':>6s}  note")
    for sh, sc in rows:
        picks = sc["picks"]
        t1 = picks[0] if picks else None
        rank = f"{t1['measured_rank']}/{sc['n_timed']}" if t1 and t1.get("measured_rank") else "-"
        scored = [p for p in picks if p["ratio"] is not None]
        bestp = max(scored, key=lambda p: p["ratio"]) if scored else None
        note = sc["problem"] or ""
        if t1 and t1["status"] not in S.USABLE:
            note = f"top-1 {t1['status']}" + (f": {t1['why'][:70]}" if t1.get("why") else "")
        b = best_us(sh)
        print(f"{sh['name']:20s} {S.fmt_num(b, 2):>10s} {S.fmt_ratio(sc['top1']):>6s} {S.fmt_ratio(sc['best_of_k']):>6s} "
              f"{rank:>10s} {('#' + str(bestp['rank'])) if bestp else '-':>9s} {sc['legal']:>5d} {sc['unmeasured']:>6d}  {note}")
    sm = S.summarize([sc for _, sc in rows])
    print(f"{'geomean':20s} {'':>10s} {S.fmt_ratio(sm['top1']['geomean']):>6s} {S.fmt_ratio(sm['best_of_k']['geomean']):>6s}"
          f"   (over {sm['top1']['n']} / {sm['best_of_k']['n']} shapes with a measured or illegal pick)")
    print(f"{'worst':20s} {'':>10s} {S.fmt_ratio(sm['top1']['worst']):>6s} {S.fmt_ratio(sm['best_of_k']['worst']):>6s}")
    if sm["top1"]["zeros"]:
        print(f"{'geomean, legal only':20s} {'':>10s} {S.fmt_ratio(sm['top1']['geomean_nonzero']):>6s} "
              f"{S.fmt_ratio(sm['best_of_k']['geomean_nonzero']):>6s}   ({sm['top1']['zeros']} shapes with top-1 = 0)")
    print(f"legal top-1 on {sm['top1_legal_shapes']}/{sm['shapes']} shapes; legal measured picks "
          f"{sm['legal_picks']}/{sm['picks']}")
    unmeasured = [(sh["name"], p) for sh, sc in rows for p in sc["picks"] if p["status"] == "unmeasured"]
    if unmeasured:
        print(f"picks not in the measured space ({len(unmeasured)}; time them in the next GPU run):")
        for name, p in unmeasured:
            print(f"  {name:20s} #{p['rank']} {p['key']}")
    bad = [(sh["name"], p) for sh, sc in rows for p in sc["picks"]
           if p["status"] not in S.USABLE and p["status"] != "unmeasured"]
    if bad:
        print("illegal or failed picks (counted as 0):")
        for name, p in bad:
            print(f"  {name:20s} #{p['rank']} {p['key']}: {p['status']}: {(p['why'] or '')[:120]}")
    return sm


def dump(sweep, which, top, picks_by_label, topk):
    shapes = sweep["shapes"] if which == "all" else [s for s in sweep["shapes"] if s["name"] == which]
    if not shapes:
        raise SystemExit(f"error: no shape named {which!r} in the sweep "
                         f"(have: {', '.join(s['name'] for s in sweep['shapes'])})")
    for sh in shapes:
        b = best_us(sh)
        cub = sh.get("cublas") or {}
        print(f"\n== {sh['name']} M={sh['M']} N={sh['N']} K={sh['K']}: best {S.fmt_num(b, 2)} us, "
              f"cuBLAS {S.fmt_num(cub.get('final_us'), 2)} us ({S.fmt_num(cub.get('tflops'))} TFLOP/s) ==")
        marks = {}
        shape = {"name": sh["name"], "M": sh["M"], "N": sh["N"], "K": sh["K"]}
        for lab, pk in picks_by_label.items():
            hints, _ = S.pick_list(pk, shape, topk)
            for h in hints:
                marks.setdefault(S.config_key(h["config"]), []).append(f"{lab}#{h.get('rank', '?')}")
        print(f"{'#':>4s} {'config':34s} {'us':>10s} {'TF/s':>7s} {'ratio':>6s} {'rnds':>4s} {'regs':>4s} "
              f"{'spill':>5s} {'smem KiB':>8s}  sources / picks")
        rows = timed_sorted(sh)
        for i, c in enumerate(rows[:top] if top else rows):
            comp = c.get("compile") or {}
            sm = comp.get("shared")
            srcs = [s for s in c["sources"] if s == "grid"] + marks.get(c["key"], [])
            if not picks_by_label:
                srcs = c["sources"]
            print(f"{i + 1:4d} {c['key']:34s} {c['final_us']:10.2f} {c['tflops']:7.1f} {b / c['final_us']:6.3f} "
                  f"{len(c['rounds']):4d} {S.fmt_num(comp.get('n_regs'), 0):>4s} {S.fmt_num(comp.get('n_spills'), 0):>5s} "
                  f"{S.fmt_num(sm / 1024 if sm is not None else None, 0):>8s}  {' '.join(srcs)}")
        failed = [c for c in sh["configs"] if c["status"] != S.TIMED]
        if failed:
            print(f"  not timed: {len(failed)} ("
                  + ", ".join(f"{st} {sum(1 for c in failed if c['status'] == st)}"
                              for st in sorted({c['status'] for c in failed})) + ")")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", required=True, help="triton_sweep.json written by harness.py (or .json.xz, .json.gz)")
    ap.add_argument("--picks", action="append", default=[], help="LABEL=PATH or PATH (repeatable)")
    ap.add_argument("--carver-bin", help="run this carver binary on the sweep's shapes and score its picks")
    ap.add_argument("--carver-args", default="", help="extra arguments for --carver-bin, space-separated")
    ap.add_argument("--stored", action="store_true", help="also re-score the rankers' picks stored in the sweep")
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--dump", help="shape name or 'all': list measured configs fastest first")
    ap.add_argument("--dump-top", type=int, default=25, help="rows per shape in --dump (0 = all)")
    ap.add_argument("--fidelity", metavar="ARCH",
                    help="also report the cost model's fidelity over every timed config, planning for "
                         "ARCH (needs the carver Python package: pip install ./crates/carver-py)")
    ap.add_argument("--json", help="write the scores to this JSON file")
    args = ap.parse_args()
    t0 = time.perf_counter()
    sweep = load_sweep(args.sweep)
    picks_by_label = {}
    try:
        for spec in args.picks:
            label, path = spec.split("=", 1) if "=" in spec else (os.path.splitext(os.path.basename(spec))[0], spec)
            picks_by_label[label] = S.load_picks(path, label)
        if args.carver_bin:
            picks_by_label["carver"] = run_carver(args.carver_bin, sweep, args.topk, args.carver_args.split())
        if args.stored:
            for lab in sweep.get("rankers", {}):
                results = []
                for sh in sweep["shapes"]:
                    sc = sh["rankers"].get(lab)
                    if sc is None:
                        continue
                    results.append({"shape": {"name": sh["name"], "m": sh["M"], "n": sh["N"], "k": sh["K"]},
                                    "error": (sc["problem"].removeprefix("ranker error: ")
                                              if sc["problem"] and not sc["picks"] else None),
                                    "hints": [{"rank": p["rank"], "config": p["config"],
                                               "prediction": p.get("prediction")} for p in sc["picks"]]})
                picks_by_label[f"{lab}(stored)"] = S.parse_picks({"schema_version": 1, "results": results},
                                                                 f"{lab}(stored)", args.sweep)
    except (S.PicksError, ValueError) as e:
        raise SystemExit(f"error: {e}")
    n_cfg = sum(len(s["configs"]) for s in sweep["shapes"])
    dev = sweep.get("device", {})
    print(f"sweep {args.sweep}: {len(sweep['shapes'])} shapes, {n_cfg} measured configs, "
          f"{dev.get('name', '?')}, started {sweep.get('started', '?')}")
    out = {}
    for label, pk in picks_by_label.items():
        rows = score_all(sweep, pk, args.topk)
        sm = print_scores(label, rows, args.topk)
        out[label] = {"summary": sm, "shapes": {sh["name"]: sc for sh, sc in rows}}
    if args.dump:
        dump(sweep, args.dump, args.dump_top, picks_by_label, args.topk)
    if args.fidelity:
        try:
            import carver
        except ImportError as e:
            raise SystemExit(f"error: --fidelity needs the carver package ({e}): pip install ./crates/carver-py")
        import fidelity as F

        fid = F.sweep_fidelity(sweep, carver.price, args.fidelity)
        F.print_fidelity(fid, f"--arch {args.fidelity}")
        out["fidelity"] = fid
    if not picks_by_label and not args.dump and not args.fidelity:
        print("nothing to score: give --picks, --carver-bin or --stored, or --dump")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print(f"\n({(time.perf_counter() - t0) * 1e3:.0f} ms)")


if __name__ == "__main__":
    main()
