"""carver: GPU matmul kernel configurations from a Roller-style cost model.

    import carver

    hints = carver.recommend(4096, 4096, 4096, arch="h100", target="triton")
    hints[0].config        # {'kwargs': {'BLOCK_SIZE_M': ..., ...}, 'num_warps': 8, 'num_stages': 3}
    hints[0].time_us, hints[0].bound, hints[0].tile.block_m
    hints[0].to_dict()     # the hint as `carver recommend --format json` prints it

    batch = carver.recommend_many([(16, 12288, 4096), (4096, 4096, 4096)], arch="h100,a100")
    carver.price(4096, 4096, 4096, [hints[0].config], target="triton")  # the model on any config
    carver.arch_list(); carver.arch("h100"); carver.detect()

`carver.triton` turns recommendations into `triton.Config`s and autotunes a `@triton.jit`
kernel per shape on carver's top-k; `carver.tilelang` gives `@tilelang.autotune` dicts.
`python -m carver ...` is the `carver` command line. Every error is a `carver.CarverError`
carrying the library's message (what was wrong and what is accepted); bad values are also
`ValueError`s and bad types `TypeError`s.
"""

from ._carver import (
    SCHEMA_VERSION,
    TARGETS,
    ArgumentTypeError,
    Breakdown,
    CarverError,
    CarverWarning,
    GpuError,
    Hint,
    InvalidInputError,
    MissingDependencyError,
    MoeBatch,
    MoeHint,
    MoeRecommendation,
    Prediction,
    PricedConfig,
    Recommendations,
    ShapeResult,
    Tile,
    UnknownArchError,
    __version__,
    arch,
    arch_list,
    detect,
    moe_from_hf,
    price,
    recommend,
    recommend_many,
    recommend_moe,
)

__all__ = [
    "SCHEMA_VERSION",
    "TARGETS",
    "ArgumentTypeError",
    "Breakdown",
    "CarverError",
    "CarverWarning",
    "GpuError",
    "Hint",
    "InvalidInputError",
    "MissingDependencyError",
    "MoeBatch",
    "MoeHint",
    "MoeRecommendation",
    "Prediction",
    "PricedConfig",
    "Recommendations",
    "ShapeResult",
    "Tile",
    "UnknownArchError",
    "__version__",
    "arch",
    "arch_list",
    "detect",
    "moe_from_hf",
    "price",
    "recommend",
    "recommend_many",
    "recommend_moe",
]


def __getattr__(name):
    # `carver.triton` and `carver.tilelang` without an explicit import; neither imports its
    # framework until a function that needs it is called.
    if name in ("triton", "tilelang"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
