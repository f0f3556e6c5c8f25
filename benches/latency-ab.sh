#!/bin/bash
# Recommendation latency of several builds on one machine's CPU, alternating, pinned to one core.
#
#   LATENCY_TAR=target/latcarry.tar.xz ROUNDS=3 CORE=5 bash benches/latency-ab.sh LABEL [LABEL ...]
#
# LATENCY_TAR holds latcarry/latency-LABEL, each a stripped build of `cargo build --release -p carver
# --example latency` (the system allocator) or `--example latency_mimalloc` (the front ends').
# Each round runs every label once (5 calls a shape over eval/latency-1000.csv); the readings of
# this machine's CPU vary by a third between calls, so only builds timed side by side compare, by
# their fastest round. Writes $OUT/latency-ab.txt and prints the fastest medians.
set -euo pipefail
: "${OUT:?set OUT}"
[ $# -ge 1 ] || { echo "usage: benches/latency-ab.sh LABEL [LABEL ...]" >&2; exit 2; }
tar="${LATENCY_TAR:-target/latcarry.tar.xz}"
rounds="${ROUNDS:-3}"
core="${CORE:-5}"
mkdir -p "$OUT"
tar -C target -xJf "$tar"
for label in "$@"; do
  [ -x "target/latcarry/latency-$label" ] || { echo "error: no target/latcarry/latency-$label in $tar" >&2; exit 2; }
done
for round in $(seq "$rounds"); do
  for label in "$@"; do
    echo "== $label $round"
    taskset -c "$core" "target/latcarry/latency-$label" 5 eval/latency-1000.csv
  done
done 2>&1 | tee "$OUT/latency-ab.txt"
python3 - "$OUT/latency-ab.txt" "$@" <<'P'
import collections, re, sys
best = collections.defaultdict(lambda: float("inf"))
label = None
for line in open(sys.argv[1]):
    if line.startswith("== "):
        label = line.split()[1]
        continue
    m = re.match(r"\| latency-1000.csv \(1000\) \| (\S+) \| ([\d.]+) \|", line)
    if m and label:
        best[(label, m.group(1))] = min(best[(label, m.group(1))], float(m.group(2)))
labels = sys.argv[2:]
print("| target | " + " | ".join(labels) + " |  (fastest median us per shape)")
for t in ["triton", "tilelang", "cuda-sm90", "generic"]:
    print(f"| {t} | " + " | ".join(f"{best[(l, t)]:.1f}" for l in labels) + " |")
P
