# Types of the extension module (crates/carver-py/src); the docstrings are there.
from os import PathLike
from typing import Any, Iterator, Optional, Sequence, Union

_Path = Union[str, PathLike]
_Size = int
_DType = Any  # "f16", "bf16", ..., or a dtype object such as torch.float16
_Shape = Union[Sequence[int], dict]

__version__: str
SCHEMA_VERSION: int
TARGETS: list[str]

class CarverError(Exception): ...
class InvalidInputError(CarverError, ValueError): ...
class UnknownArchError(InvalidInputError): ...
class ArgumentTypeError(InvalidInputError, TypeError): ...
class GpuError(CarverError, RuntimeError): ...
class MissingDependencyError(CarverError, ImportError): ...
class CarverWarning(UserWarning): ...

class Tile:
    block_m: int
    block_n: int
    block_k: int
    warps_m: int
    warps_n: int
    producer_warps: int
    stages: int
    split_k: int
    cluster_m: int
    cluster_n: int
    persistent: bool
    swap_ab: bool
    group: int
    raster_order: str
    mma: str
    warps: int
    def to_dict(self) -> dict: ...

class Breakdown:
    compute_us: float
    smem_us: float
    l2_us: float
    dram_us: float
    latency_us: float
    epilogue_us: float
    split_k_us: float
    overhead_us: float
    repack_us: float
    dram_bytes: float
    l2_bytes: float
    wave_efficiency: float
    padding_efficiency: float
    def to_dict(self) -> dict: ...

class Prediction:
    time_us: float
    tflops: float
    bound: str
    smem_bytes: int
    registers_per_thread: int
    hedged_registers: Optional[int]
    threads: int
    blocks_per_sm: int
    grid: int
    waves: float
    breakdown: Breakdown
    def to_dict(self) -> dict: ...

class Hint:
    rank: int
    config: dict
    tile: Tile
    prediction: Prediction
    time_us: float
    tflops: float
    bound: str
    breakdown: Breakdown
    def to_dict(self) -> dict: ...

class ShapeResult:
    shape: dict
    m: int
    n: int
    k: int
    batch: int
    name: Optional[str]
    arch: str
    target: str
    problem: dict
    hints: list[Hint]
    error: Optional[str]
    measured: Optional[dict]
    elapsed_us: float
    ok: bool
    def to_dict(self) -> dict: ...

class Recommendations:
    schema_version: int
    carver_version: str
    results: list[ShapeResult]
    def to_dict(self) -> dict: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> ShapeResult: ...
    def __iter__(self) -> Iterator[ShapeResult]: ...

class PricedConfig:
    config: dict
    tile: Optional[Tile]
    prediction: Optional[Prediction]
    time_us: Optional[float]
    error: Optional[str]
    ok: bool
    def to_dict(self) -> dict: ...

def recommend(m: _Size, n: _Size, k: _Size, *, arch: str = "h100", target: str = "triton",
              dtype: _DType = "f16", layout: str = "rr", batch: _Size = 1, topk: int = 8,
              out_dtype: Optional[_DType] = None, acc_dtype: Optional[_DType] = None,
              hardware_db: Optional[_Path] = None, cache_dir: Optional[_Path] = None) -> list[Hint]: ...
def recommend_many(shapes: Sequence[_Shape], *, arch: Union[str, Sequence[str]] = "h100",
                   target: str = "triton", dtype: _DType = "f16", layout: str = "rr",
                   batch: _Size = 1, topk: int = 8, out_dtype: Optional[_DType] = None,
                   acc_dtype: Optional[_DType] = None, hardware_db: Optional[_Path] = None,
                   cache_dir: Optional[_Path] = None) -> Recommendations: ...
def price(m: _Size, n: _Size, k: _Size, configs: Sequence[dict], *, arch: str = "h100",
          target: str = "triton", dtype: _DType = "f16", layout: str = "rr", batch: _Size = 1,
          out_dtype: Optional[_DType] = None, acc_dtype: Optional[_DType] = None,
          hardware_db: Optional[_Path] = None, cache_dir: Optional[_Path] = None) -> list[PricedConfig]: ...
class MoeHint:
    @property
    def rank(self) -> int: ...
    @property
    def config(self) -> dict[str, int]: ...
    @property
    def predicted_us(self) -> float: ...
    @property
    def gate_up(self) -> dict[str, Any]: ...
    @property
    def down(self) -> dict[str, Any]: ...
    def to_dict(self) -> dict[str, Any]: ...

class MoeBatch:
    @property
    def m(self) -> int: ...
    @property
    def hints(self) -> list[MoeHint]: ...
    def to_dict(self) -> dict[str, Any]: ...

class MoeRecommendation:
    @property
    def file_name(self) -> str: ...
    @property
    def sglang_file_name(self) -> str: ...
    @property
    def device_name(self) -> str: ...
    @property
    def arch(self) -> str: ...
    @property
    def batches(self) -> list[MoeBatch]: ...
    def to_dict(self) -> dict[str, Any]: ...
    def vllm_config(self) -> dict[str, dict[str, int]]: ...

def recommend_moe(experts: int, topk: int, hidden: int, intermediate: int, *, tp: int = 1,
                  dtype: str = "bf16", block_shape: Optional[Union[str, Sequence[int]]] = None,
                  arch: str = "h100", batch_sizes: Optional[Sequence[int]] = None,
                  candidates: int = 8, routing: Optional[Sequence[float]] = None,
                  hardware_db: Optional[_Path] = None,
                  cache_dir: Optional[_Path] = None) -> MoeRecommendation: ...
def moe_from_hf(path: _Path) -> dict[str, int]: ...
def arch_list(*, hardware_db: Optional[_Path] = None) -> list[dict]: ...
def arch(name: str, *, hardware_db: Optional[_Path] = None, cache_dir: Optional[_Path] = None) -> dict: ...
def detect(*, hardware_db: Optional[_Path] = None, cache_dir: Optional[_Path] = None) -> list[dict]: ...
def main(argv: list[str], relaunch: list[str]) -> int: ...
