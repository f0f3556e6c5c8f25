#!/usr/bin/env python3
"""Summarizes `ncu --csv --page raw` exports (gzipped) of benches/sm90/ncu_probe.sh: per profiled
launch the kernel, its duration, grid, registers, DRAM and L2 bytes and throughput, tensor-pipe
activity, issue activity and the warp stall reasons that cost most (warps stalled per issued
instruction)."""
import csv
import gzip
import sys

COLUMNS = [
    ("gpu__time_duration.sum", "us"),
    ("launch__grid_size", "grid"),
    ("launch__registers_per_thread", "regs"),
    ("dram__bytes_read.sum", "dram MB"),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram%"),
    ("lts__t_bytes.sum", "L2 MB"),
    ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2%"),
    ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", "tensor%"),
    ("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue%"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "occ%"),
    ("launch__occupancy_limit_shared_mem", "blocks by smem"),
    ("launch__occupancy_limit_registers", "by regs"),
    ("launch__shared_mem_per_block_dynamic", "dyn smem"),
    ("launch__shared_mem_per_block_static", "static smem"),
    ("smsp__inst_executed.sum", "instr"),
]
# Units ncu writes, in the summary's (microseconds, megabytes).
SCALE = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6, "ns": 1e-3, "us": 1.0, "ms": 1e3,
         "byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3}
# Printed as counted (bytes of shared memory per block, not megabytes).
UNSCALED = {"dyn smem", "static smem"}
STALL = "smsp__average_warps_issue_stalled_"
STALL_END = "_per_issue_active.ratio"


def num(v):
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return None


for path in sys.argv[1:]:
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            rows = list(csv.reader(f))
    except OSError:
        continue
    if len(rows) < 3:
        print(f"== {path}: no launches")
        continue
    header, units, launches = rows[0], rows[1], rows[2:]
    col = {name: i for i, name in enumerate(header)}
    print(f"== {path}: {len(launches)} launches")
    for r in launches:
        name = r[col["Kernel Name"]][:48] if "Kernel Name" in col else "?"
        parts = []
        for metric, label in COLUMNS:
            i = col.get(metric)
            x = num(r[i]) if i is not None else None
            if x is None:
                continue
            scale = 1.0 if label in UNSCALED else SCALE.get(units[i], 1.0)
            parts.append(f"{label} {x * scale:.1f}")
        stalls = []
        for metric, i in col.items():
            if metric.startswith(STALL) and metric.endswith(STALL_END) and "_not_issued" not in metric:
                x = num(r[i])
                if x:
                    stalls.append((x, metric[len(STALL):-len(STALL_END)]))
        stalls.sort(reverse=True)
        print(f"  {name}: " + ", ".join(parts))
        print("      stalls per issue: " + ", ".join(f"{n} {x:.2f}" for x, n in stalls[:6]))
