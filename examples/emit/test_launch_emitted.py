#!/usr/bin/env python3
"""The parts of launch_emitted.py that need no GPU: reading launch.json and packing the kernel
arguments exactly as cuLaunchKernel reads them.

    python3 examples/emit/test_launch_emitted.py                    # on a built-in description
    CARVER_EMIT_LAUNCH_JSON=DIR/<shape>/launch.json python3 ...     # on one carver wrote

carver-gpu's `emit` test runs it on descriptions it emits, so a renamed field fails there.
"""

import copy
import ctypes
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_emitted as le  # noqa: E402


def tensor_map(operand, dims, box):
    return {
        "name": f"tma_{operand.lower()}",
        "kind": "tensor_map",
        "size_bytes": 128,
        "align_bytes": 64,
        "note": "",
        "tensor_map": {
            "global_address": operand,
            "note": "",
            "data_type": {"name": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", "value": 9},
            "rank": 3,
            "global_dim": dims,
            "global_strides_bytes": [dims[0] * 2, dims[0] * dims[1] * 2],
            "box_dim": box,
            "element_strides": [1, 1, 1],
            "interleave": {"name": "CU_TENSOR_MAP_INTERLEAVE_NONE", "value": 0},
            "swizzle": {"name": "CU_TENSOR_MAP_SWIZZLE_128B", "value": 3},
            "l2_promotion": {"name": "CU_TENSOR_MAP_L2_PROMOTION_L2_256B", "value": 3},
            "oob_fill": {"name": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE", "value": 0},
        },
    }


def scalar(name, kind, size, **value):
    return {"name": name, "kind": kind, "size_bytes": size, "align_bytes": size, "note": "", **value}


def built_in():
    """A split-K decode GEMM as carver describes one (the shape of carver-schema's snapshot)."""
    buffers = [
        ("A", "input", "bf16", [1, 1, 8192], 2),
        ("B", "input", "bf16", [1, 8192, 4096], 2),
        ("C", "output", "bf16", [1, 1, 4096], 2),
        ("workspace", "scratch", "f32", [1, 4, 1, 4096], 4),
    ]
    return {
        "schema_version": 1,
        "carver_version": "0.1.0",
        "target": "cuda-sm90",
        "device": {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "sm_count": 132},
        "problem": {"m": 1, "n": 4096, "k": 8192, "batch": 1, "dtype_a": "bf16",
                    "dtype_b": "bf16", "dtype_c": "bf16", "dtype_acc": "f32",
                    "layout_a": "row", "layout_b": "row"},
        "label": "64x128x64 s6 c1 g8 k4 rr bf16",
        "buffers": [
            {"name": n, "role": r, "dtype": d, "shape": s,
             "bytes": s[0] * s[1] * s[2] * (s[3] if len(s) > 3 else 1) * e,
             "alignment_bytes": 16, "layout": ""}
            for n, r, d, s, e in buffers
        ],
        "workspace_bytes": 65536,
        "kernels": [
            {
                "entry_point": "carver_sm90_gemm", "source_file": "kernel.cu",
                "cubin_file": "kernel.cubin", "cubin_sha256": "0" * 64,
                "grid": [128, 1, 1], "block": [256, 1, 1], "cluster": [1, 1, 1],
                "cluster_compiled_in": False, "dynamic_smem_bytes": 148480,
                "set_max_dynamic_smem": True,
                "params": [
                    tensor_map("A", [8192, 1, 1], [64, 64, 1]),
                    tensor_map("B", [4096, 8192, 1], [64, 64, 1]),
                    scalar("c", "device_pointer", 8, buffer="C", bytes=8192),
                    scalar("partials", "device_pointer", 8, buffer="workspace", bytes=65536),
                    scalar("M", "i32", 4, value=1),
                    scalar("N", "i32", 4, value=4096),
                    scalar("K", "i32", 4, value=8192),
                    scalar("batch", "i32", 4, value=1),
                    scalar("alpha", "f32", 4, float_value=0.5),
                ],
            },
            {
                "entry_point": "carver_sm90_splitk_reduce", "source_file": "splitk_reduce.cu",
                "cubin_file": "splitk_reduce.cubin", "cubin_sha256": "0" * 64,
                "grid": [16, 1, 1], "block": [256, 1, 1], "cluster": [1, 1, 1],
                "cluster_compiled_in": False, "dynamic_smem_bytes": 0,
                "set_max_dynamic_smem": False,
                "params": [
                    scalar("partials", "device_pointer", 8, buffer="workspace", bytes=65536),
                    scalar("c", "device_pointer", 8, buffer="C", bytes=8192),
                    scalar("M", "i32", 4, value=1),
                    scalar("N", "i32", 4, value=4096),
                    scalar("ldw", "i32", 4, value=4096),
                    scalar("splits", "i32", 4, value=4),
                    scalar("batch", "i32", 4, value=1),
                    scalar("out_bf16", "i32", 4, value=1),
                ],
            },
        ],
        "grid_rule": "",
    }


WRITTEN = []


def write(doc):
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(doc, f)
    f.close()
    WRITTEN.append(f.name)
    return f.name


def tearDownModule():
    for name in WRITTEN:
        os.unlink(name)


def description_path():
    return os.environ.get("CARVER_EMIT_LAUNCH_JSON") or write(built_in())


class Description(unittest.TestCase):
    def test_reads_a_description(self):
        doc = le.read_description(description_path())
        self.assertEqual(doc["kernels"][0]["entry_point"], "carver_sm90_gemm")

    def test_refuses_what_it_cannot_launch_faithfully(self):
        doc = le.read_description(description_path())
        for change, expect in [
            (lambda d: d.update(schema_version=2), "schema_version 2"),
            (lambda d: d.update(target="triton"), "target"),
            (lambda d: d.update(kernels=[]), "no kernels"),
            (lambda d: d["kernels"][0]["params"][4].update(kind="i64"), "kind 'i64'"),
            (lambda d: d["kernels"][0]["params"][2].update(buffer="D"), "names no buffer"),
        ]:
            bad = copy.deepcopy(doc)
            change(bad)
            with self.assertRaises(le.EmitError) as raised:
                le.read_description(write(bad))
            self.assertIn(expect, str(raised.exception))
        with self.assertRaises(le.EmitError):
            le.read_description("/nonexistent/launch.json")


class Arguments(unittest.TestCase):
    def test_every_parameter_is_passed_in_order_with_its_value(self):
        doc = le.read_description(description_path())
        addresses = {b["name"]: 0x7F0000000000 + 0x100000 * i for i, b in enumerate(doc["buffers"])}
        for kernel in doc["kernels"]:
            maps = {
                p["name"]: le.HostTensorMap() for p in kernel["params"] if p["kind"] == "tensor_map"
            }
            params, keep = le.pack_params(kernel, addresses, maps)
            self.assertEqual(len(params), len(kernel["params"]))
            for slot, p in zip(params, kernel["params"]):
                if p["kind"] == "tensor_map":
                    # The map itself, by value: cuLaunchKernel copies 128 bytes from here.
                    self.assertEqual(slot, maps[p["name"]].address)
                    self.assertEqual(slot % 64, 0)
                elif p["kind"] == "device_pointer":
                    want = addresses[p["buffer"]] if p.get("buffer") is not None else 0
                    self.assertEqual(ctypes.c_uint64.from_address(slot).value, want, p["name"])
                elif p["kind"] == "i32":
                    self.assertEqual(ctypes.c_int32.from_address(slot).value, p["value"], p["name"])
                else:
                    self.assertEqual(
                        ctypes.c_float.from_address(slot).value, p["float_value"], p["name"]
                    )
            self.assertTrue(keep)

    def test_tensor_map_arguments_are_the_described_ones(self):
        doc = le.read_description(description_path())
        for p in doc["kernels"][0]["params"]:
            if p["kind"] != "tensor_map":
                continue
            enc = p["tensor_map"]
            args = le.encode_arguments(enc, 0x7F0000001000)
            (dtype, rank, address, dims, strides, box, element_strides,
             interleave, swizzle, l2, oob) = args
            self.assertEqual((dtype, rank), (enc["data_type"]["value"], 3))
            self.assertEqual(address.value, 0x7F0000001000)
            self.assertEqual(list(dims), enc["global_dim"])
            self.assertEqual(list(strides), enc["global_strides_bytes"])
            self.assertEqual(list(box), enc["box_dim"])
            self.assertEqual(list(element_strides), [1, 1, 1])
            self.assertEqual((interleave, swizzle, l2, oob), (0, 3, 3, 0))
            # TMA's rules, which the driver would otherwise refuse at encode time.
            self.assertTrue(all(s % 16 == 0 for s in enc["global_strides_bytes"]))
            self.assertLessEqual(max(enc["box_dim"]), 256)
        bad = dict(doc["kernels"][0]["params"][0]["tensor_map"], box_dim=[64, 64])
        with self.assertRaises(le.EmitError):
            le.encode_arguments(bad, 0)


if __name__ == "__main__":
    unittest.main()
