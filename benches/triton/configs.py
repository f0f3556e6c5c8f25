"""Config validation and naming for the Triton matmul kernel; no torch or triton imports, so the
offline tools (replay.py, nvmmh_picks.py) can use it on any machine.

Config form (what carver emits for `--target triton`):
    {"kwargs": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64,
                "GROUP_SIZE_M": 8, "SPLIT_K": 1}, "num_warps": 8, "num_stages": 3}
"""

CONFIG_KWARGS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "SPLIT_K")


class ConfigError(ValueError):
    """A config that the kernel cannot express (reported as illegal, never silently fixed)."""


def unpack_config(config):
    """Validate a config dict and return (kwargs, num_warps, num_stages).

    Raises ConfigError naming the first problem. Triton needs power-of-two block sizes (tl.arange),
    tl.dot needs every block dimension >= 16, and a block has at most 32 warps (1024 threads).
    Resource limits (shared memory, registers) are not checked here: the compiler and the driver
    decide those, and the harness records their verdict.
    """
    if not isinstance(config, dict) or not isinstance(config.get("kwargs"), dict):
        raise ConfigError(f"config must be a dict with a 'kwargs' dict, got {config!r}")
    kw = config["kwargs"]
    missing = [k for k in CONFIG_KWARGS if k not in kw]
    extra = [k for k in kw if k not in CONFIG_KWARGS]
    if missing or extra:
        raise ConfigError(f"config kwargs must be exactly {list(CONFIG_KWARGS)}; missing {missing}, unexpected {extra}")
    for name in ("num_warps", "num_stages"):
        if name not in config:
            raise ConfigError(f"config lacks {name}")
    kwargs = {k: kw[k] for k in CONFIG_KWARGS}
    nw, ns = config["num_warps"], config["num_stages"]
    for k, v in list(kwargs.items()) + [("num_warps", nw), ("num_stages", ns)]:
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"{k}={v!r} is not a positive integer")
    for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"):
        v = kwargs[k]
        if v & (v - 1):
            raise ConfigError(f"{k}={v} is not a power of two (Triton block shapes must be)")
        if v < 16:
            raise ConfigError(f"{k}={v} is below 16 (tl.dot needs every dimension >= 16)")
    if nw & (nw - 1) or nw > 32:
        raise ConfigError(f"num_warps={nw} must be a power of two <= 32")
    return kwargs, nw, ns


def config_key(config):
    """A short canonical name for a config, used to match picks against measured configs.
    Never raises: an illegal config still gets a stable name for reports."""
    kw = config.get("kwargs", {}) if isinstance(config, dict) else {}
    kw = kw if isinstance(kw, dict) else {}
    get = config.get if isinstance(config, dict) else (lambda _k: None)
    return (f"BM{kw.get('BLOCK_SIZE_M')}_BN{kw.get('BLOCK_SIZE_N')}_BK{kw.get('BLOCK_SIZE_K')}"
            f"_G{kw.get('GROUP_SIZE_M')}_SK{kw.get('SPLIT_K')}_w{get('num_warps')}_s{get('num_stages')}")


def legality_error(config):
    """None if the kernel can express the config, else the reason."""
    try:
        unpack_config(config)
        return None
    except ConfigError as e:
        return str(e)
