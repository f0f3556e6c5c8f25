#!/usr/bin/env python3
"""Load and launch a kernel that `carver tune --emit DIR` wrote, from a program that is not carver.

    python3 examples/emit/launch_emitted.py DIR/<shape>/launch.json [--runs 50] [--seed 0]

It reads launch.json, makes A and B (uniform in [-1, 1), in the stored layout, the batch stacked),
C and the split-K workspace with torch, loads the cubin(s) with the CUDA driver (ctypes on
libcuda.so.1, in torch's own context), encodes the tensor maps exactly as launch.json says,
launches every kernel in order on torch's current stream, checks C against torch.matmul (relative
Frobenius error below 1e-2) and times both with CUDA events (median over replays of a CUDA graph
of 20 calls each, so that host overhead does not count). It prints one line. Exit status: 0
when C matches, 1 when it does not, 2 when the description or the driver refuses.

Needs torch with CUDA and the NVIDIA driver, nothing else (no cuda-python). The parts that need
neither (reading the description, packing the kernel arguments) are tested by
test_launch_emitted.py.
"""

import argparse
import ctypes
import hashlib
import json
import math
import os
import statistics
import sys

SCHEMA_VERSION = 1
TARGET = "cuda-sm90"
PARAM_KINDS = ("tensor_map", "device_pointer", "i32", "f32")
# A CUtensorMap: 128 opaque bytes; cuda.h aligns it to 64 bytes (128 from CUDA 13), so 128 suits both.
TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 128
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
TOLERANCE = 1e-2


class EmitError(Exception):
    """The description, the files or the driver refused; the message says what and why."""


# ---- the description (no GPU needed) -----------------------------------------------------------


def read_description(path):
    """launch.json, checked enough that a launch from it cannot pass arguments carver did not mean."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise EmitError(f"{path}: cannot read it as JSON: {e}") from e
    if not isinstance(doc, dict):
        raise EmitError(f"{path}: not a JSON object")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise EmitError(
            f"{path}: schema_version {version!r}; this example reads version {SCHEMA_VERSION}"
        )
    if doc.get("target") != TARGET:
        raise EmitError(f"{path}: target {doc.get('target')!r}; this example launches {TARGET}")
    buffers = {b["name"]: b for b in doc.get("buffers", [])}
    for name in ("A", "B", "C"):
        if name not in buffers:
            raise EmitError(f"{path}: no buffer {name}")
    kernels = doc.get("kernels")
    if not kernels:
        raise EmitError(f"{path}: no kernels to launch")
    for k in kernels:
        for p in k["params"]:
            kind = p.get("kind")
            if kind not in PARAM_KINDS:
                raise EmitError(
                    f"{path}: {k['entry_point']} parameter {p.get('name')!r} is of kind {kind!r};"
                    f" this example passes {', '.join(PARAM_KINDS)}"
                )
            named = p.get("buffer") if kind == "device_pointer" else None
            if kind == "tensor_map":
                named = p["tensor_map"]["global_address"]
            if named is not None and named not in buffers:
                raise EmitError(f"{path}: parameter {p['name']!r} names no buffer ({named!r})")
    return doc


def check_cubin(directory, kernel):
    """The cubin's bytes, when they are the ones launch.json describes."""
    path = os.path.join(directory, kernel["cubin_file"])
    try:
        with open(path, "rb") as f:
            image = f.read()
    except OSError as e:
        raise EmitError(f"{path}: cannot read the cubin: {e}") from e
    digest = hashlib.sha256(image).hexdigest()
    if digest != kernel["cubin_sha256"]:
        raise EmitError(
            f"{path}: SHA-256 {digest}, launch.json records {kernel['cubin_sha256']}: emit again"
        )
    return image


class HostTensorMap:
    """A 128-byte host buffer, 128-byte aligned, that cuTensorMapEncodeTiled fills in and
    cuLaunchKernel copies by value into the kernel's parameters."""

    def __init__(self):
        self._raw = (ctypes.c_ubyte * (TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN))()
        start = ctypes.addressof(self._raw)
        self.address = (start + TENSOR_MAP_ALIGN - 1) // TENSOR_MAP_ALIGN * TENSOR_MAP_ALIGN

    def bytes(self):
        return ctypes.string_at(self.address, TENSOR_MAP_BYTES)


def encode_arguments(encoding, global_address):
    """The arguments of cuTensorMapEncodeTiled after the map itself, as launch.json gives them."""
    rank = encoding["rank"]
    for field, length in (
        ("global_dim", rank),
        ("global_strides_bytes", rank - 1),
        ("box_dim", rank),
        ("element_strides", rank),
    ):
        if len(encoding[field]) != length:
            raise EmitError(f"tensor map of {encoding['global_address']}: {field} is not {length} long")
    return (
        encoding["data_type"]["value"],
        rank,
        ctypes.c_void_p(global_address),
        (ctypes.c_uint64 * rank)(*encoding["global_dim"]),
        (ctypes.c_uint64 * (rank - 1))(*encoding["global_strides_bytes"]),
        (ctypes.c_uint32 * rank)(*encoding["box_dim"]),
        (ctypes.c_uint32 * rank)(*encoding["element_strides"]),
        encoding["interleave"]["value"],
        encoding["swizzle"]["value"],
        encoding["l2_promotion"]["value"],
        encoding["oob_fill"]["value"],
    )


def pack_params(kernel, addresses, tensor_maps):
    """cuLaunchKernel's kernelParams: an array with a pointer to each argument's value, in order.

    `addresses` maps buffer names to device addresses; `tensor_maps` maps parameter names to
    encoded HostTensorMaps. Returns the array and the values it points into (keep both alive
    until the launches are done)."""
    values = []
    pointers = []
    for p in kernel["params"]:
        kind = p["kind"]
        if kind == "tensor_map":
            pointers.append(tensor_maps[p["name"]].address)
            continue
        if kind == "device_pointer":
            buffer = p.get("buffer")
            value = ctypes.c_uint64(addresses[buffer] if buffer is not None else 0)
        elif kind == "i32":
            value = ctypes.c_int32(p["value"])
        elif kind == "f32":
            value = ctypes.c_float(p["float_value"])
        else:
            raise EmitError(f"parameter {p['name']!r}: kind {kind!r} cannot be passed")
        if ctypes.sizeof(value) != p["size_bytes"]:
            raise EmitError(f"parameter {p['name']!r}: {p['size_bytes']} bytes, not a {kind}")
        values.append(value)
        pointers.append(ctypes.addressof(value))
    return (ctypes.c_void_p * len(pointers))(*pointers), values


# ---- the CUDA driver ---------------------------------------------------------------------------


class Driver:
    """The few driver calls a launch needs, through ctypes; every failure raises with its name."""

    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise EmitError(f"the CUDA driver (libcuda.so.1) cannot be loaded: {e}") from e
        c = ctypes
        self._sig("cuGetErrorName", [c.c_int, c.POINTER(c.c_char_p)])
        self._sig("cuCtxGetCurrent", [c.POINTER(c.c_void_p)])
        self._sig("cuModuleLoadData", [c.POINTER(c.c_void_p), c.c_void_p])
        self._sig("cuModuleGetFunction", [c.POINTER(c.c_void_p), c.c_void_p, c.c_char_p])
        self._sig("cuFuncSetAttribute", [c.c_void_p, c.c_int, c.c_int])
        self._sig(
            "cuTensorMapEncodeTiled",
            [c.c_void_p, c.c_int, c.c_uint32, c.c_void_p, c.POINTER(c.c_uint64),
             c.POINTER(c.c_uint64), c.POINTER(c.c_uint32), c.POINTER(c.c_uint32),
             c.c_int, c.c_int, c.c_int, c.c_int],
        )
        self._sig(
            "cuLaunchKernel",
            [c.c_void_p, c.c_uint, c.c_uint, c.c_uint, c.c_uint, c.c_uint, c.c_uint, c.c_uint,
             c.c_void_p, c.POINTER(c.c_void_p), c.POINTER(c.c_void_p)],
        )

    def _sig(self, name, argtypes):
        fn = getattr(self.lib, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int

    def check(self, result, call):
        if result != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(result, ctypes.byref(name))
            raise EmitError(f"{call} failed: {(name.value or b'?').decode()} ({result})")

    def current_context(self):
        ctx = ctypes.c_void_p()
        self.check(self.lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            raise EmitError("no current CUDA context: torch has not initialised CUDA on this thread")
        return ctx

    def load_function(self, image, entry_point):
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        data = ctypes.create_string_buffer(image, len(image))
        self.check(self.lib.cuModuleLoadData(ctypes.byref(module), data), "cuModuleLoadData")
        self.check(
            self.lib.cuModuleGetFunction(ctypes.byref(function), module, entry_point.encode()),
            f"cuModuleGetFunction({entry_point})",
        )
        return module, function

    def set_max_dynamic_smem(self, function, size):
        self.check(
            self.lib.cuFuncSetAttribute(
                function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, size
            ),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
        )

    def encode(self, tensor_map, encoding, global_address):
        args = encode_arguments(encoding, global_address)
        self.check(
            self.lib.cuTensorMapEncodeTiled(ctypes.c_void_p(tensor_map.address), *args),
            f"cuTensorMapEncodeTiled({encoding['global_address']})",
        )

    def launch(self, function, kernel, stream, params):
        self.check(
            self.lib.cuLaunchKernel(
                function, *kernel["grid"], *kernel["block"], kernel["dynamic_smem_bytes"],
                ctypes.c_void_p(stream), params, None,
            ),
            f"cuLaunchKernel({kernel['entry_point']})",
        )


# ---- the run -----------------------------------------------------------------------------------


def torch_dtype(torch, name):
    dtypes = {
        "bf16": torch.bfloat16,
        "f16": torch.float16,
        "f32": torch.float32,
        "e4m3": getattr(torch, "float8_e4m3fn", None),
        "e5m2": getattr(torch, "float8_e5m2", None),
    }
    if dtypes.get(name) is None:
        raise EmitError(f"dtype {name!r} has no torch type here")
    return dtypes[name]


def make_buffers(torch, doc, seed):
    """One torch tensor per buffer: inputs uniform in [-1, 1), C poisoned with NaN (so a kernel
    that writes nothing fails the check), the workspace uninitialised (the GEMM writes it)."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    tensors = {}
    for b in doc["buffers"]:
        dtype = torch_dtype(torch, b["dtype"])
        if b["role"] == "input":
            t = (torch.rand(b["shape"], generator=gen, device="cuda") * 2 - 1).to(dtype)
        elif b["role"] == "output":
            t = torch.full(b["shape"], float("nan"), dtype=dtype, device="cuda")
        else:
            t = torch.empty(b["shape"], dtype=dtype, device="cuda")
        if t.numel() * t.element_size() != b["bytes"]:
            raise EmitError(f"buffer {b['name']}: {b['bytes']} bytes described, {t.nbytes} made")
        if t.data_ptr() % b["alignment_bytes"]:
            raise EmitError(f"buffer {b['name']} is not {b['alignment_bytes']}-byte aligned")
        tensors[b["name"]] = t
    return tensors


def alpha_of(doc):
    for p in doc["kernels"][0]["params"]:
        if p["name"] == "alpha":
            return p["float_value"]
    return 1.0


def median_us(torch, fn, runs, calls=20):
    """Median over `runs` samples of the GPU time per call of `fn(stream)`, each sample `calls`
    calls replayed from one CUDA graph between two CUDA events, so that neither ctypes nor torch
    adds its host cost per launch to a kernel of a few microseconds."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(side.cuda_stream)  # warm-up (cuBLAS picks its kernel) outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        stream = torch.cuda.current_stream().cuda_stream
        for _ in range(calls):
            fn(stream)
    graph.replay()
    events = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 / calls for s, e in events)


def run(path, runs, seed):
    directory = os.path.dirname(os.path.abspath(path))
    doc = read_description(path)
    import torch

    if not torch.cuda.is_available():
        raise EmitError("torch sees no CUDA GPU")
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # makes torch's (primary) context current on this thread
    cc = torch.cuda.get_device_capability()
    want = doc["device"]["compute_capability"]
    if f"{cc[0]}.{cc[1]}" != want:
        raise EmitError(f"the cubin is for compute capability {want}; this GPU is {cc[0]}.{cc[1]}")
    cuda = Driver()
    cuda.current_context()

    buffers = make_buffers(torch, doc, seed)
    addresses = {name: t.data_ptr() for name, t in buffers.items()}
    launches = []
    for k in doc["kernels"]:
        # The module stays loaded for the rest of the process (never unloaded here).
        _module, function = cuda.load_function(check_cubin(directory, k), k["entry_point"])
        if k["set_max_dynamic_smem"]:
            cuda.set_max_dynamic_smem(function, k["dynamic_smem_bytes"])
        maps = {}
        for p in k["params"]:
            if p["kind"] == "tensor_map":
                enc = p["tensor_map"]
                maps[p["name"]] = HostTensorMap()
                cuda.encode(maps[p["name"]], enc, addresses[enc["global_address"]])
            elif p["kind"] == "device_pointer" and p.get("buffer") is not None:
                if buffers[p["buffer"]].nbytes < p["bytes"]:
                    raise EmitError(f"{k['entry_point']} {p['name']}: buffer too small")
        params, values = pack_params(k, addresses, maps)
        launches.append((function, k, params, values, maps))

    def launch_all(stream):
        for function, k, params, _, _ in launches:
            cuda.launch(function, k, stream, params)

    a, b, c = buffers["A"], buffers["B"], buffers["C"]
    b_kxn = b.transpose(-1, -2) if doc["problem"]["layout_b"] == "col" else b
    launch_all(torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    reference = torch.matmul(a.float(), b_kxn.float()) * alpha_of(doc)
    error = (torch.linalg.vector_norm(c.float() - reference) /
             torch.linalg.vector_norm(reference)).item()
    ok = math.isfinite(error) and error < TOLERANCE

    # torch.matmul on the same operands (fp8 has no torch.matmul: its exact bf16 copies).
    if a.element_size() == 1:
        a, b_kxn = a.to(torch.bfloat16), b_kxn.to(torch.bfloat16)
    ours = median_us(torch, launch_all, runs)
    theirs = median_us(torch, lambda _stream: torch.matmul(a, b_kxn), runs)
    pr = doc["problem"]
    print(
        f"{'ok' if ok else 'MISMATCH'}: {doc['label']} on {torch.cuda.get_device_name()}: "
        f"{pr['batch']} x {pr['m']}x{pr['n']}x{pr['k']} {pr['dtype_a']} "
        f"{pr['layout_a'][0]}{pr['layout_b'][0]}, {len(launches)} kernel(s): {ours:.1f} us, "
        f"torch.matmul {theirs:.1f} us ({theirs / ours:.2f}x); rel. error {error:.1e} "
        f"(< {TOLERANCE:g} needed); carver measured {doc.get('measured_time_us') or float('nan'):.1f} us"
    )
    return 0 if ok else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("launch_json", help="DIR/<shape>/launch.json written by carver tune --emit")
    parser.add_argument("--runs", type=int, default=50, help="timed samples of each (median)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        return run(args.launch_json, max(1, args.runs), args.seed)
    except EmitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
