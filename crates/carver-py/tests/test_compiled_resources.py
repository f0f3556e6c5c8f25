"""benches/triton/compiled_resources.py, which reads Triton's compile report against carver's
resource estimates: its reading of the report must be right for its counts to mean anything."""

import importlib.util
import sys

from conftest import REPO

HERE = REPO / "benches" / "triton"


def load():
    sys.path.insert(0, str(HERE))
    spec = importlib.util.spec_from_file_location("compiled_resources", HERE / "compiled_resources.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


R = load()


def cfg(bm, bn, bk, warps, stages):
    return {"kwargs": {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 1,
                       "SPLIT_K": 1}, "num_warps": warps, "num_stages": stages}


def test_staged_operands_follow_16_byte_row_alignment():
    assert R.staged({"M": 64, "N": 4096, "K": 4096}) == "-"
    assert R.staged({"M": 64, "N": 4096, "K": 1201}) == "A"
    assert R.staged({"M": 64, "N": 3583, "K": 4096}) == "B"
    assert R.staged({"M": 64, "N": 3583, "K": 999}) == "AB"


def test_the_mma_kind_is_wgmma_only_when_a_warpgroup_owns_64_rows():
    assert R.mma_kind(cfg(64, 128, 64, 4, 3)) == "wgmma"
    assert R.mma_kind(cfg(32, 128, 64, 4, 3)) == "mma.sync"
    assert R.mma_kind(cfg(128, 128, 64, 2, 3)) == "mma.sync"


def test_buffers_read_the_shared_bytes_as_tiles_per_stage():
    c = cfg(64, 128, 64, 4, 4)
    a, b = 64 * 64 * 2, 128 * 64 * 2
    assert R.buffers(c, "-", 4 * (a + b)) == "s x s"
    assert R.buffers(c, "-", 3 * (a + b)) == "s-1 x s-1"
    # A staged: one buffer of A whatever num_stages says.
    assert R.buffers(c, "A", a + 4 * b) == "1 x s"
    assert R.buffers(c, "A", a + 3 * b) == "1 x s-1"
    # Bytes no whole count of tiles makes (the epilogue's buffer) are not read as buffers.
    assert R.buffers(c, "-", 64 * 128 * 4 + 2) is None


def test_equal_counts_are_preferred_when_square_tiles_make_the_total_ambiguous():
    c = cfg(64, 64, 32, 4, 4)
    tile = 64 * 32 * 2
    # 6 tiles is both 3 + 3 and 2 + 4.
    assert R.buffers(c, "-", 6 * tile) == "s-1 x s-1"


def test_occupancy_uses_the_allocation_unit_and_every_limit():
    arch = {"registers": {"allocation_unit": 256, "per_sm": 65536},
            "shared_memory": {"per_sm_bytes": 233472, "reserved_per_block_bytes": 1024},
            "sm": {"max_threads": 2048, "max_blocks": 32}}
    # 128 registers x 256 threads: exactly 2 blocks; 129 rounds up to 136 a thread: 1 block.
    assert R.occupancy(128, 256, 1024, arch) == 2
    assert R.occupancy(129, 256, 1024, arch) == 1
    # Shared memory: 106496 + 1024 reserved fits twice in 233472 bytes.
    assert R.occupancy(32, 128, 106496, arch) == 2
    # Threads, then the block cap.
    assert R.occupancy(16, 1024, 0, arch) == 2
    assert R.occupancy(16, 32, 0, arch) == 32
