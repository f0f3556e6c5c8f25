"""How well carver's cost model predicts a sweep: per shape, over every config the harness timed
(the whole reference space, not only carver's picks),

- Spearman's rank correlation between predicted and measured time (1: the model orders the
  space exactly as the GPU did), and
- the median absolute error of the predicted time relative to the measured one.

The predictions come from the installed `carver` package (`carver.price`, the same model the CLI
ranks with), for the arch and dtype given. `replay.py --fidelity ARCH` prints them for a sweep.
"""

import math
import statistics


def ranks(xs):
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        mean = (i + j) / 2.0 + 1.0
        for t in range(i, j + 1):
            out[order[t]] = mean
        i = j + 1
    return out


def spearman(xs, ys):
    """Spearman's rank correlation of two equal-length sequences (None under 3 points or when
    either is constant)."""
    if len(xs) != len(ys):
        raise ValueError("spearman needs two sequences of one length")
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def median_abs_rel_error(predicted, measured):
    """Median of |predicted - measured| / measured."""
    errs = [abs(p - m) / m for p, m in zip(predicted, measured) if m > 0]
    return statistics.median(errs) if errs else None


def shape_fidelity(shape, price, arch, dtype="f16", timed_status="timed"):
    """Fidelity of one sweep shape. `price(m, n, k, configs, arch=, target=, dtype=)` is
    `carver.price`. Configs the model cannot price (rules it does not accept) are counted, not
    scored."""
    timed = [c for c in shape["configs"] if c["status"] == timed_status and c.get("final_us")]
    priced = price(shape["M"], shape["N"], shape["K"], [c["config"] for c in timed], arch=arch,
                   target="triton", dtype=dtype)
    pred, meas = [], []
    for c, p in zip(timed, priced):
        if p.ok and p.time_us:
            pred.append(p.time_us)
            meas.append(c["final_us"])
    return {"name": shape["name"], "configs": len(timed), "priced": len(pred),
            "spearman": spearman(pred, meas), "median_abs_rel_error": median_abs_rel_error(pred, meas)}


def sweep_fidelity(sweep, price, arch, dtype="f16"):
    """Per-shape fidelity rows and their medians."""
    rows = [shape_fidelity(sh, price, arch, dtype) for sh in sweep["shapes"]]
    rho = [r["spearman"] for r in rows if r["spearman"] is not None]
    mae = [r["median_abs_rel_error"] for r in rows if r["median_abs_rel_error"] is not None]
    return {"shapes": rows,
            "median_spearman": statistics.median(rho) if rho else None,
            "median_abs_rel_error": statistics.median(mae) if mae else None}


def print_fidelity(result, label):
    print(f"\nmodel fidelity ({label}): per shape over every timed config")
    print(f"{'shape':24s} {'configs':>7s} {'priced':>6s} {'spearman':>8s} {'median |err|':>12s}")
    for r in result["shapes"]:
        rho = "-" if r["spearman"] is None else f"{r['spearman']:.3f}"
        mae = "-" if r["median_abs_rel_error"] is None else f"{100 * r['median_abs_rel_error']:.1f}%"
        print(f"{r['name']:24s} {r['configs']:7d} {r['priced']:6d} {rho:>8s} {mae:>12s}")
    ms, me = result["median_spearman"], result["median_abs_rel_error"]
    print(f"median over shapes: spearman {'-' if ms is None else f'{ms:.3f}'}, "
          f"median |error| {'-' if me is None else f'{100 * me:.1f}%'}")
