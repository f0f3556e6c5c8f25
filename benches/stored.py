"""Stored measurements, read one way: JSON kept xz-compressed (`.json.xz`: the runs in the
repository), gzipped (`.json.gz`: as the device scripts write them, and older copies) or plain.

The runs are xz-compressed because the whole checkout travels to the GPU machine with every call,
within 64 MiB, and xz keeps them about 30% smaller than gzip (docs/RESULTS.md, "Stored runs in
xz").
"""

import glob
import gzip
import json
import lzma
import os

SUFFIXES = (".json.xz", ".json.gz", ".json")


def open_text(path):
    """A text stream of `path`, decompressed by its suffix."""
    path = str(path)
    if path.endswith(".xz"):
        return lzma.open(path, "rt")
    if path.endswith(".gz"):
        return gzip.open(path, "rt")
    return open(path)


def load(path):
    with open_text(path) as f:
        return json.load(f)


def find(pattern):
    """The stored files a glob `pattern` naming the plain `.json` matches, compressed or not,
    sorted (`runs/*/triton_sweep.json` finds `triton_sweep.json.xz` and `.json.gz` too)."""
    return sorted(set(glob.glob(pattern)) | set(glob.glob(pattern + ".xz"))
                  | set(glob.glob(pattern + ".gz")))


def stem(path):
    """The file name without its `.json[.xz|.gz]` suffix."""
    name = os.path.basename(str(path))
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name
