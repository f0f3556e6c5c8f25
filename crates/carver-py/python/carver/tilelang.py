"""carver's configurations for TileLang's autotuner.

`configs(m, n, k, ...)` returns the dicts `@tilelang.autotune(configs=...)` takes: each one's
keys are the tunable parameters of the kernel factory under `@tilelang.jit`, and carver's
TileLang family names them `block_M`, `block_N`, `block_K`, `num_stages`, `thread_num` and
`enable_rasteration` (the names of TileLang's GEMM example). A kernel whose parameters are named
otherwise passes `names={"thread_num": "threads"}`, and `None` drops a key the kernel lacks:

    @tilelang.autotune(configs=carver.tilelang.configs(4096, 4096, 4096, names={"thread_num": "threads"}))
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, block_N=128, block_K=32, threads=128, num_stages=3,
               enable_rasteration=False): ...

or, for a configs callable that receives the kernel's arguments:

    @tilelang.autotune(configs=lambda M, N, K, **_: carver.tilelang.configs(M, N, K))

TileLang itself is not imported: the dicts are plain data.
"""

from . import _carver
from ._carver import ArgumentTypeError, InvalidInputError

__all__ = ["configs", "KEYS"]

# carver's TileLang family parameters, as in its native dicts (`hints[].config`).
KEYS = ("block_M", "block_N", "block_K", "num_stages", "thread_num", "enable_rasteration")


def configs(m, n, k, *, arch="h100", dtype="f16", layout="rr", batch=1, topk=8, out_dtype=None,
            acc_dtype=None, names=None, hardware_db=None, cache_dir=None):
    """carver's `topk` best TileLang configurations for C (m x n) = A (m x k) @ B (k x n), best
    first, as dicts for `tilelang.autotune(configs=...)`; `names` renames (or, with None,
    drops) keys. The other options are `carver.recommend`'s."""
    renames = _renames(names)
    hints = _carver.recommend(m, n, k, target="tilelang", arch=arch, dtype=dtype, layout=layout,
                              batch=batch, topk=topk, out_dtype=out_dtype, acc_dtype=acc_dtype,
                              hardware_db=hardware_db, cache_dir=cache_dir)
    out = []
    for h in hints:
        config = {}
        for key, value in h.config.items():
            theirs = renames.get(key, key)
            if theirs is not None:
                config[theirs] = value
        out.append(config)
    return out


def _renames(names):
    if names is None:
        return {}
    if not isinstance(names, dict):
        raise ArgumentTypeError(
            f"names = {names!r} ({type(names).__name__}) is not a dict; accepted: a dict from "
            f"carver's keys ({', '.join(KEYS)}) to the kernel's parameter names, or None to drop one"
        )
    unknown = [k for k in names if k not in KEYS]
    if unknown:
        raise InvalidInputError(
            f"names renames {', '.join(repr(k) for k in unknown)}, not a key of carver's TileLang "
            f"configs; accepted keys: {', '.join(KEYS)}"
        )
    bad = {k: v for k, v in names.items() if v is not None and (not isinstance(v, str) or not v)}
    if bad:
        raise ArgumentTypeError(
            f"names maps {', '.join(f'{k!r} to {v!r}' for k, v in bad.items())}; accepted: a "
            "parameter name, or None to drop the key"
        )
    targets = [v for v in names.values() if v is not None]
    kept = [k for k in KEYS if k not in names]
    clash = sorted({t for t in targets if targets.count(t) > 1 or t in kept})
    if clash:
        raise InvalidInputError(
            f"names gives two keys the name {', '.join(repr(c) for c in clash)}; each parameter "
            "can take one key"
        )
    return names
