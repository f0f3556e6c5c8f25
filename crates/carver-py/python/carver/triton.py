"""carver's configurations for Triton.

- `configs(m, n, k, ...)`: carver's top-k as `triton.Config`s, for `triton.autotune(configs=...)`.
- `autotune(...)`: a decorator for a `@triton.jit` matmul-like kernel: Triton's own `Autotuner`
  benchmarks, per key, carver's top-k for that key's shape instead of one fixed list.
- `prune(...)`: an `early_config_prune` hook for a config list of your own: carver prices each
  config with its cost model and keeps the fastest predicted.

carver's Triton family has the meta-parameters BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K,
GROUP_SIZE_M (grouped launch order) and SPLIT_K, plus num_warps and num_stages; a kernel whose
parameters have other names says so with `block_m=`, `block_n=`, `block_k=`, `group_m=`,
`split_k=`, and one without grouping or split-K passes `group_m=None` or `split_k=None` (it then
gets only configs with GROUP_SIZE_M = 1 or SPLIT_K = 1, which is how such a kernel runs).

Triton is imported when first needed; without it these raise `carver.MissingDependencyError`
(an ImportError) that says `pip install triton`.
"""

import inspect
import operator

from . import _carver
from ._carver import ArgumentTypeError, InvalidInputError, MissingDependencyError

__all__ = ["configs", "autotune", "prune", "to_config", "native"]

# carver's names for the family's meta-parameters, as in its native dicts (`hints[].config`).
META = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "SPLIT_K")
# The value a kernel without the parameter behaves as.
_NEUTRAL = {"GROUP_SIZE_M": 1, "SPLIT_K": 1}
_MAX_DIM = 2**31 - 1
_TOPK_MAX = 1024


def _triton():
    try:
        import triton
    except ImportError as e:
        raise MissingDependencyError(
            f"carver.triton needs Triton, which cannot be imported ({e}); install it with "
            "`pip install triton` (carver.recommend(..., target='triton') gives the same "
            "configurations as dicts without it)"
        ) from e
    return triton


class _Names:
    """How a kernel names carver's meta-parameters (None: the kernel has no such parameter)."""

    def __init__(self, block_m, block_n, block_k, group_m, split_k):
        self.theirs = dict(zip(META, (block_m, block_n, block_k, group_m, split_k)))
        for ours, theirs in self.theirs.items():
            optional = ours in _NEUTRAL
            if theirs is None and optional:
                continue
            if not isinstance(theirs, str) or not theirs:
                accepted = "a parameter name, or None when the kernel has none" if optional else "a parameter name"
                raise ArgumentTypeError(
                    f"the kernel's name for {ours} is {theirs!r}; accepted: {accepted}"
                )

    def present(self):
        return [t for t in self.theirs.values() if t is not None]

    def expresses(self, native):
        """Whether the kernel can run `native` (a parameter it lacks must be neutral)."""
        kw = native["kwargs"]
        return all(kw[ours] == v for ours, v in _NEUTRAL.items() if self.theirs[ours] is None)

    def to_config(self, native, triton):
        kw = native["kwargs"]
        kwargs = {theirs: kw[ours] for ours, theirs in self.theirs.items() if theirs is not None}
        return triton.Config(kwargs, num_warps=native["num_warps"], num_stages=native["num_stages"])

    def native(self, config, call_kwargs=None):
        """carver's native dict for a `triton.Config`, or None when it lacks a block size.
        A parameter not in the config is read from the call's keyword arguments, else taken as
        neutral (a kernel without grouping or split-K)."""
        call_kwargs = call_kwargs or {}
        kw = {}
        for ours, theirs in self.theirs.items():
            value = None
            if theirs is not None:
                value = config.kwargs.get(theirs, call_kwargs.get(theirs))
            if value is None:
                if ours not in _NEUTRAL:
                    return None
                value = _NEUTRAL[ours]
            kw[ours] = value
        return {"kwargs": kw, "num_warps": config.num_warps, "num_stages": config.num_stages}


def to_config(native, *, block_m="BLOCK_SIZE_M", block_n="BLOCK_SIZE_N", block_k="BLOCK_SIZE_K",
              group_m="GROUP_SIZE_M", split_k="SPLIT_K"):
    """One carver Triton config dict (`hint.config`) as a `triton.Config`."""
    return _Names(block_m, block_n, block_k, group_m, split_k).to_config(native, _triton())


def native(config, *, block_m="BLOCK_SIZE_M", block_n="BLOCK_SIZE_N", block_k="BLOCK_SIZE_K",
           group_m="GROUP_SIZE_M", split_k="SPLIT_K"):
    """A `triton.Config` as carver's native dict (what `carver.price` takes), or None when the
    config has no value for a block size."""
    return _Names(block_m, block_n, block_k, group_m, split_k).native(config)


def _natives(m, n, k, names, topk, options):
    """carver's top `topk` native configs that the kernel can express. When some cannot be
    (no split-K in the kernel), more are asked for until `topk` remain or the space ends."""
    ask = topk
    while True:
        hints = _carver.recommend(m, n, k, target="triton", topk=ask, **options)
        kept = []
        for h in hints:
            cfg = h.config
            if names.expresses(cfg) and cfg not in kept:
                kept.append(cfg)
        if len(kept) >= topk or len(hints) < ask or ask >= _TOPK_MAX:
            return kept[:topk]
        ask = min(_TOPK_MAX, ask * 4)


def configs(m, n, k, *, arch="h100", dtype="f16", layout="rr", batch=1, topk=8, out_dtype=None,
            acc_dtype=None, block_m="BLOCK_SIZE_M", block_n="BLOCK_SIZE_N", block_k="BLOCK_SIZE_K",
            group_m="GROUP_SIZE_M", split_k="SPLIT_K", hardware_db=None, cache_dir=None):
    """carver's `topk` best Triton configurations for C (m x n) = A (m x k) @ B (k x n), best
    first, as `triton.Config(kwargs, num_warps=..., num_stages=...)`.

    The options are `carver.recommend`'s; the five names are the kernel's meta-parameters."""
    triton = _triton()
    names = _Names(block_m, block_n, block_k, group_m, split_k)
    options = dict(arch=arch, dtype=dtype, layout=layout, batch=batch, out_dtype=out_dtype,
                   acc_dtype=acc_dtype, hardware_db=hardware_db, cache_dir=cache_dir)
    _check_topk(topk)
    return [names.to_config(c, triton) for c in _natives(m, n, k, names, topk, options)]


def _check_topk(topk):
    if isinstance(topk, bool) or not isinstance(topk, int):
        raise ArgumentTypeError(f"topk = {topk!r} ({type(topk).__name__}) is not an integer; accepted 1 to {_TOPK_MAX}")
    if not 1 <= topk <= _TOPK_MAX:
        raise InvalidInputError(f"top-k = {topk}: accepted 1 to {_TOPK_MAX} configurations")


def _kernel_name(fn):
    while not inspect.isfunction(fn) and hasattr(fn, "fn"):
        fn = fn.fn
    return getattr(fn, "__name__", repr(fn))


class _Sizes:
    """Where a kernel's call holds the problem: the arguments named M, N, K (and batch), and
    the dtype (fixed, or read from a tensor argument)."""

    def __init__(self, kernel, arg_names, m, n, k, batch, dtype, dtype_arg):
        # How messages name the kernel: `kernel `matmul``, or a hook's "the kernel".
        self.kernel = f"kernel `{kernel}`" if kernel else "the kernel"
        self.roles = {"M": m, "N": n, "K": k}
        if batch is not None:
            self.roles["batch"] = batch
        self.dtype = dtype
        self.dtype_arg = dtype_arg
        named = dict(self.roles)
        if dtype_arg is not None:
            named["dtype"] = dtype_arg
        for role, name in named.items():
            if not isinstance(name, str):
                raise ArgumentTypeError(
                    f"the argument holding {role} is given as {name!r} ({type(name).__name__}); "
                    f"accepted: the name of one of the kernel's arguments: {', '.join(arg_names)}"
                )
            if name not in arg_names:
                raise InvalidInputError(
                    f"{self.kernel} has no argument `{name}` (named as the one holding "
                    f"{role}); its arguments are: {', '.join(arg_names)}"
                )

    def _arg(self, name, named_args, kwargs):
        if name in named_args:
            return named_args[name]
        if name in kwargs:
            return kwargs[name]
        raise InvalidInputError(
            f"{self.kernel} was called without a value for `{name}`; carver reads the "
            "problem's sizes from it"
        )

    def shape(self, named_args, kwargs):
        """(m, n, k, batch, dtype) of one call."""
        sizes = {}
        for role, name in self.roles.items():
            value = self._arg(name, named_args, kwargs)
            if isinstance(value, bool) or not hasattr(type(value), "__index__"):
                raise ArgumentTypeError(
                    f"{self.kernel}: argument `{name}` (the {role} size) is {value!r} "
                    f"({type(value).__name__}); accepted: an integer from 1 to {_MAX_DIM}"
                )
            sizes[role] = operator.index(value)
        dtype = self.dtype
        if self.dtype_arg is not None:
            tensor = self._arg(self.dtype_arg, named_args, kwargs)
            dtype = getattr(tensor, "dtype", None)
            if dtype is None:
                raise ArgumentTypeError(
                    f"{self.kernel}: argument `{self.dtype_arg}` (dtype_arg) is "
                    f"{type(tensor).__name__}, which has no dtype; accepted: a tensor"
                )
        return sizes["M"], sizes["N"], sizes["K"], sizes.get("batch", 1), dtype


_TUNER_CLASS = None


def _tuner_class():
    """`CarverAutotuner`, a `triton.runtime.autotuner.Autotuner` (made once Triton is imported)."""
    global _TUNER_CLASS
    if _TUNER_CLASS is not None:
        return _TUNER_CLASS
    triton = _triton()
    from triton.runtime.autotuner import Autotuner

    class CarverAutotuner(Autotuner):
        """Triton's Autotuner, with carver choosing the configs to benchmark for each key.

        Everything else is Triton's: the key (the named arguments plus every tensor argument's
        dtype), each config's launch as `_bench` builds it, `reset_to_zero` / `restore_value` and the hooks,
        the in-memory cache per key and, with `cache_results=True` (or
        TRITON_CACHE_AUTOTUNING=1), the on-disk cache: carver's configs for a shape are the same
        in every process, so the cache entry's key (which hashes the configs) matches."""

        def __init__(self, fn, arg_names, key, sizes, names, topk, options, interleave=True,
                     **tuner_args):
            self.carver_sizes = sizes
            self.carver_names = names
            self.carver_topk = topk
            self.carver_options = options
            # The configs benchmarked per (m, n, k, batch, dtype): what carver recommended.
            self.carver_configs = {}
            # Timing in interleaved rounds (`_interleaved`) unless the user brought a `do_bench`.
            self.carver_interleave = interleave and tuner_args.get("do_bench") is None
            # The configs of the key being tuned, and their times once measured together.
            self.carver_batch = []
            self.carver_timed = {}
            # Triton benchmarks only when it holds more than one config, and passes what it
            # holds to `early_config_prune`, which returns carver's configs for the call's shape
            # instead. These two are never run.
            placeholders = [triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)]
            super().__init__(fn, arg_names, placeholders, key,
                             prune_configs_by={"early_config_prune": self._carver_prune},
                             **tuner_args)

        def carver_configs_for(self, named_args, kwargs=None):
            """carver's configs for a call with these arguments (positional ones by name)."""
            m, n, k, batch, dtype = self.carver_sizes.shape(named_args, kwargs or {})
            cache_key = (m, n, k, batch, str(dtype))
            if cache_key not in self.carver_configs:
                options = dict(self.carver_options, batch=batch, dtype=dtype)
                natives = _natives(m, n, k, self.carver_names, self.carver_topk, options)
                self.carver_configs[cache_key] = [self.carver_names.to_config(c, triton) for c in natives]
            return list(self.carver_configs[cache_key])

        def _carver_prune(self, configs, named_args, **kwargs):
            self.carver_batch = self.carver_configs_for(named_args, kwargs)
            self.carver_timed = {}
            return list(self.carver_batch)

        def _bench(self, *args, config, **meta):
            """Triton benchmarks a key's configs one `_bench` call at a time. The first call of
            a key builds every config's launch through Triton's own `_bench` (hooks, argument
            checks) with the timing swapped for a capture, times them all together in rounds,
            and each call returns its config's time."""
            if not self.carver_interleave:
                return super()._bench(*args, config=config, **meta)
            if config not in self.carver_timed:
                batch = self.carver_batch if config in self.carver_batch else [config]
                calls = []
                for c in batch:
                    launch = self._carver_capture(args, c, meta)
                    if launch is None:  # a Triton whose `_bench` does not time through do_bench
                        return super()._bench(*args, config=config, **meta)
                    calls.append((c, launch))
                from . import _interleaved

                self.carver_timed = _interleaved.time_interleaved(
                    calls, _interleaved.TritonDevice(), skip=_interleaved.failures())
            return self.carver_timed.pop(config)

        def _carver_capture(self, args, config, meta):
            """The launch Triton's `_bench` would time for `config`, captured instead of timed:
            `do_bench` is looked up on the instance, so an instance entry shadows it."""
            captured = []

            def capture(kernel_call, quantiles=None, **_):
                captured.append(kernel_call)
                return [0.0, 0.0, 0.0]

            missing = object()
            saved = self.__dict__.get("do_bench", missing)
            self.__dict__["do_bench"] = capture
            try:
                super()._bench(*args, config=config, **meta)
            finally:
                if saved is missing:
                    del self.__dict__["do_bench"]
                else:
                    self.__dict__["do_bench"] = saved
            return captured[0] if captured else None

    # Named as users see it, not as a class local to this function.
    CarverAutotuner.__qualname__ = "CarverAutotuner"
    CarverAutotuner.__module__ = __name__
    _TUNER_CLASS = CarverAutotuner
    return CarverAutotuner


def _arg_names(fn):
    names = getattr(fn, "arg_names", None)
    if not isinstance(names, (list, tuple)) or not callable(getattr(fn, "run", None)):
        raise ArgumentTypeError(
            f"carver.triton.autotune decorates a @triton.jit kernel (or one wrapped in "
            f"triton.heuristics); got {fn!r} ({type(fn).__name__})"
        )
    return list(names)


def autotune(*, m="M", n="N", k="K", batch=None, block_m="BLOCK_SIZE_M", block_n="BLOCK_SIZE_N",
             block_k="BLOCK_SIZE_K", group_m="GROUP_SIZE_M", split_k="SPLIT_K", arch="auto",
             dtype="f16", dtype_arg=None, layout="rr", out_dtype=None, acc_dtype=None, topk=8,
             key=None, reset_to_zero=None, restore_value=None, pre_hook=None, post_hook=None,
             do_bench=None, cache_results=False, hardware_db=None, cache_dir=None,
             interleave=True):
    """Autotunes a `@triton.jit` matmul-like kernel per key on carver's top-k for that key's
    shape, with Triton's own `Autotuner`:

        @carver.triton.autotune(m="M", n="N", k="K", reset_to_zero=["ws_ptr"])
        @triton.jit
        def matmul(a_ptr, b_ptr, c_ptr, ws_ptr, M, N, K, ..., BLOCK_SIZE_M: tl.constexpr, ...):

    `m`, `n`, `k` (and `batch`) name the arguments that hold the sizes; the next five name the
    meta-parameters carver sets (None for GROUP_SIZE_M or SPLIT_K when the kernel has none).
    `arch` is the GPU to plan for (`auto`: the one this process runs on); `dtype` the input
    type, or `dtype_arg` a tensor argument to read it from; `layout`, `topk` as in
    `carver.recommend`. `key` defaults to the size arguments and must contain them. The rest
    are Triton's `Autotuner` arguments, passed through.

    A key's configs are timed together in interleaved rounds (median of round medians, L2
    cleared before each launch), since carver's picks are often within a few percent of each
    other and timing them one after another lets clock drift pick the winner;
    `interleave=False`, or a `do_bench` of your own, gives Triton's sequential timing.
    """
    _check_topk(topk)
    names = _Names(block_m, block_n, block_k, group_m, split_k)
    if not isinstance(arch, str):
        raise ArgumentTypeError(f"arch = {arch!r} ({type(arch).__name__}) is not a GPU name; accepted: a name from carver.arch_list() or 'auto'")
    # Values the library rejects are reported now rather than at the kernel's first call.
    _carver._check_problem_kind(target="triton", dtype=dtype if dtype_arg is None else "f16",
                                layout=layout, out_dtype=out_dtype, acc_dtype=acc_dtype)
    if arch.strip().lower() != "auto":
        _carver.arch(arch, hardware_db=hardware_db)
    options = dict(arch=arch, layout=layout, out_dtype=out_dtype, acc_dtype=acc_dtype,
                   hardware_db=hardware_db, cache_dir=cache_dir)

    def decorator(fn):
        arg_names = _arg_names(fn)
        kernel = _kernel_name(fn)
        sizes = _Sizes(kernel, arg_names, m, n, k, batch, dtype, dtype_arg)
        missing = [t for t in names.present() if t not in arg_names]
        if missing:
            raise InvalidInputError(
                f"kernel `{kernel}` has no parameter {', '.join(f'`{t}`' for t in missing)} for "
                f"carver to set; its arguments are: {', '.join(arg_names)} (name the kernel's own "
                "with block_m=, block_n=, block_k=, group_m=, split_k=; None for group_m or "
                "split_k when it has no grouping or split-K)"
            )
        size_args = list(sizes.roles.values())
        tuning_key = list(size_args) if key is None else key
        if isinstance(tuning_key, str) or not all(isinstance(a, str) for a in tuning_key):
            raise ArgumentTypeError(f"key = {key!r} is not a list of argument names")
        unknown = [a for a in tuning_key if a not in arg_names]
        if unknown:
            raise InvalidInputError(
                f"key names {', '.join(f'`{a}`' for a in unknown)}, not arguments of kernel "
                f"`{kernel}`; its arguments are: {', '.join(arg_names)}"
            )
        absent = [a for a in size_args if a not in tuning_key]
        if absent:
            raise InvalidInputError(
                f"key = {list(tuning_key)} lacks {', '.join(f'`{a}`' for a in absent)}: carver's "
                "configs depend on every size, so a key without one would reuse one shape's "
                "tuning for another; add it"
            )
        tuner_args = dict(reset_to_zero=reset_to_zero, restore_value=restore_value,
                          pre_hook=pre_hook, post_hook=post_hook, do_bench=do_bench)
        if cache_results:
            # Triton before 3.2 has no on-disk autotuning cache.
            if "cache_results" not in inspect.signature(_tuner_class().__mro__[1].__init__).parameters:
                raise InvalidInputError("cache_results=True needs Triton >= 3.2 (its on-disk autotuning cache)")
            tuner_args["cache_results"] = True
        return _tuner_class()(fn, arg_names, tuning_key, sizes, names, topk, options,
                              interleave=bool(interleave), **tuner_args)

    return decorator


def prune(*, m="M", n="N", k="K", batch=None, topk=8, arch="auto", dtype="f16", dtype_arg=None,
          layout="rr", out_dtype=None, acc_dtype=None, block_m="BLOCK_SIZE_M",
          block_n="BLOCK_SIZE_N", block_k="BLOCK_SIZE_K", group_m="GROUP_SIZE_M",
          split_k="SPLIT_K", hardware_db=None, cache_dir=None):
    """An `early_config_prune` hook that keeps the `topk` configs of your own list carver's cost
    model predicts fastest for each call's shape:

        @triton.autotune(configs=my_configs, key=["M", "N", "K"],
                         prune_configs_by={"early_config_prune": carver.triton.prune(topk=4)})

    Configs the model cannot price (a block size missing, a tile rule broken, too much shared
    memory for the GPU) rank after every priced one, in the order given. The hook's
    `last_ranking` holds the last call's configs with their `carver.PricedConfig`s (None where a
    config has no block size)."""
    _check_topk(topk)
    names = _Names(block_m, block_n, block_k, group_m, split_k)
    options = dict(arch=arch, layout=layout, out_dtype=out_dtype, acc_dtype=acc_dtype,
                   hardware_db=hardware_db, cache_dir=cache_dir, target="triton")

    def early_config_prune(configs, named_args, **kwargs):
        arg_names = list(named_args) + [a for a in kwargs if a not in named_args]
        sizes = _Sizes(None, arg_names, m, n, k, batch, dtype, dtype_arg)
        mm, nn, kk, bb, dt = sizes.shape(named_args, kwargs)
        # A meta-parameter a config leaves out is the call's (positional or keyword).
        natives = [names.native(c, {**named_args, **kwargs}) for c in configs]
        to_price = [x for x in natives if x is not None]
        priced = iter(_carver.price(mm, nn, kk, to_price, batch=bb, dtype=dt, **options))
        verdicts = [next(priced) if x is not None else None for x in natives]
        early_config_prune.last_ranking = list(zip(configs, verdicts))
        order = sorted(
            range(len(configs)),
            key=lambda i: (0, verdicts[i].time_us, i) if verdicts[i] is not None and verdicts[i].ok
            else (1, 0.0, i),
        )
        return [configs[i] for i in order[:topk]]

    early_config_prune.last_ranking = []
    return early_config_prune
