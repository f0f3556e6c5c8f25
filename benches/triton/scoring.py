"""Reading rankers' picks files and scoring them against measured times (pure Python: used by the
GPU harness and by the offline replay).

A picks file has carver's JSON form (the harness reads only these fields):
  {"schema_version": 1, "results": [{"shape": {"name": ..., "m": ..., "n": ..., "k": ..., "batch": 1},
   "error": null, "hints": [{"rank": 1, "config": {"kwargs": {...}, "num_warps": 4, "num_stages": 4},
   "prediction": {"time_us": 12.3}}]}]}

Scores: ratio = exhaustive-best time / pick time (1.0 = the pick is the measured best). A pick
that is illegal, failed to compile or run, or computed a wrong result counts as 0; so does a shape
the ranker answered with an error or not at all.
"""

import json
import lzma
import math
import os
import sys

from configs import config_key, legality_error

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import stored  # noqa: E402

# Statuses a measured config can have in triton_sweep.json.
TIMED = "timed"
USABLE = (TIMED,)


class PicksError(ValueError):
    pass


def load_picks(path, label):
    """Load a picks file (JSON, or compressed JSON when its name ends in .gz, as the stored picks
    under benches/triton/picks/ are, or .xz); return {"label", "path", "meta", "results"}. Raises
    PicksError."""
    try:
        doc = stored.load(path)
    except (OSError, EOFError, ValueError, lzma.LZMAError) as e:
        raise PicksError(f"{label} picks {path}: cannot read JSON: {e}") from e
    return parse_picks(doc, label, path)


def parse_picks(doc, label, path="<memory>"):
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise PicksError(f"{label} picks {path}: expected an object with a 'results' list")
    if doc.get("schema_version") != 1:
        raise PicksError(f"{label} picks {path}: schema_version {doc.get('schema_version')!r}, expected 1")
    results = []
    for i, r in enumerate(doc["results"]):
        shape = r.get("shape") if isinstance(r, dict) else None
        if not isinstance(shape, dict):
            raise PicksError(f"{label} picks {path}: results[{i}] has no 'shape' object")
        try:
            m, n, k = int(shape["m"]), int(shape["n"]), int(shape["k"])
        except (KeyError, TypeError, ValueError) as e:
            raise PicksError(f"{label} picks {path}: results[{i}].shape lacks integer m, n, k") from e
        hints = r.get("hints") or []
        if not isinstance(hints, list):
            raise PicksError(f"{label} picks {path}: results[{i}].hints is not a list")
        for j, h in enumerate(hints):
            if not isinstance(h, dict) or "config" not in h:
                raise PicksError(f"{label} picks {path}: results[{i}].hints[{j}] has no 'config'")
        hints = sorted(hints, key=lambda h: h.get("rank", 10**9))
        results.append({"name": shape.get("name"), "m": m, "n": n, "k": k,
                        "batch": int(shape.get("batch", 1) or 1),
                        "error": r.get("error"), "hints": hints, "raw": r})
    meta = {k: v for k, v in doc.items() if k != "results"}
    return {"label": label, "path": path, "meta": meta, "results": results}


def result_for_shape(picks, shape):
    """The picks entry for a shape ({"name", "M", "N", "K"}), matched by name, else by sizes.
    Returns None when the file has no entry for it. Raises PicksError on a name whose sizes differ."""
    by_size = None
    for r in picks["results"]:
        same_size = (r["m"], r["n"], r["k"]) == (shape["M"], shape["N"], shape["K"]) and r["batch"] == 1
        if r["name"] is not None and r["name"] == shape["name"]:
            if not same_size:
                raise PicksError(f"{picks['label']} picks {picks['path']}: shape {shape['name']} is "
                                 f"m={r['m']} n={r['n']} k={r['k']} there but M={shape['M']} N={shape['N']} "
                                 f"K={shape['K']} in the shapes file")
            return r
        if same_size and by_size is None and (r["name"] is None or r["name"] == shape["name"]):
            by_size = r
    return by_size


def pick_list(picks, shape, topk):
    """Return (hints[:topk], problem) where problem is None or a string saying why the shape has
    no usable answer from this ranker."""
    r = result_for_shape(picks, shape)
    if r is None:
        return [], "no result for this shape in the picks file"
    if r["error"]:
        return [], f"ranker error: {r['error']}"
    if not r["hints"]:
        return [], "no hints"
    return r["hints"][:topk], None


def geomean(xs):
    xs = list(xs)
    if not xs:
        return None
    if any(x <= 0 for x in xs):
        return 0.0
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def score_shape(measured, best_us, hints, problem):
    """Score one ranker on one shape.

    measured: {config key: {"status", "final_us", "error"}} for every config measured on the shape
    best_us:  exhaustive-best time on the shape (None when nothing ran)
    Returns a dict with per-pick rows and top1 / best_of_k ratios. A pick absent from `measured`
    is "unmeasured" (possible only offline, in replay): it is left out of the ratios and listed.
    """
    rows = []
    for i, h in enumerate(hints):
        cfg = h["config"]
        key = config_key(cfg)
        illegal = legality_error(cfg)
        m = measured.get(key)
        if illegal is not None:
            status, t, ratio, why = "illegal", None, 0.0, illegal
        elif m is None:
            status, t, ratio, why = "unmeasured", None, None, "not in the measured space"
        elif m["status"] in USABLE and m.get("final_us") and best_us:
            status, t, ratio, why = m["status"], m["final_us"], best_us / m["final_us"], None
        else:
            status, t, ratio, why = m["status"], m.get("final_us"), 0.0, m.get("error")
        rows.append({"rank": h.get("rank", i + 1), "key": key, "config": cfg, "status": status,
                     "final_us": t, "ratio": ratio, "why": why,
                     "early_stopped": bool(m and m.get("early_stopped")),
                     "prediction": h.get("prediction")})
    if problem is not None or not rows:
        return {"problem": problem or "no hints", "picks": rows, "top1": 0.0, "best_of_k": 0.0,
                "legal": 0, "count": len(rows), "unmeasured": 0}
    top1 = rows[0]["ratio"]
    scored = [r["ratio"] for r in rows if r["ratio"] is not None]
    return {"problem": None, "picks": rows, "top1": top1,
            "best_of_k": max(scored) if scored else None,
            "legal": sum(1 for r in rows if r["status"] in USABLE),
            "count": len(rows),
            "unmeasured": sum(1 for r in rows if r["status"] == "unmeasured")}


def summarize(per_shape_scores):
    """Geomean / worst of top1 and best_of_k over shapes (None ratios, i.e. unmeasured, skipped)."""
    out = {}
    for field in ("top1", "best_of_k"):
        vals = [s[field] for s in per_shape_scores if s[field] is not None]
        legal_vals = [v for v in vals if v > 0]
        out[field] = {"geomean": geomean(vals), "worst": min(vals) if vals else None,
                      "n": len(vals), "geomean_nonzero": geomean(legal_vals), "zeros": len(vals) - len(legal_vals)}
    out["top1_legal_shapes"] = sum(1 for s in per_shape_scores if s["picks"] and s["picks"][0]["status"] in USABLE)
    out["shapes"] = len(per_shape_scores)
    out["legal_picks"] = sum(s["legal"] for s in per_shape_scores)
    out["picks"] = sum(s["count"] for s in per_shape_scores)
    return out


def fmt_ratio(x):
    if x is None:
        return "    -"
    return f"{x:5.3f}"


def fmt_num(x, nd=1):
    return "-" if x is None else f"{x:.{nd}f}"
