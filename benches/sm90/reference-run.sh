#!/usr/bin/env bash
# Measures the cuda-sm90 ranking against a reduced whole space on the GPU machine: `carver tune
# --reference` (the model's top-8, then every structure without a cluster or persistence at its
# deepest ring and that ring's depth variant, about 900 configurations) shape by shape of a
# shapes file, one JSON per shape under OUT_DIR, until BUDGET_S (default 480) seconds have passed;
# then `reference_summary.py`'s table. The shapes share one kernel cache: the kernels do not
# depend on the shape, so only the first shape compiles the whole reference.
#
#   BUDGET_S=480 benches/sm90/reference-run.sh OUT_DIR SHAPES.json
#
# CARVER_BIN (default target/gpu-run/carver) is the carried binary; nothing is built here.
set -uo pipefail
out=${1:?usage: reference-run.sh OUT_DIR SHAPES.json}
shapes=${2:?usage: reference-run.sh OUT_DIR SHAPES.json}
bin=${CARVER_BIN:-target/gpu-run/carver}
budget=${BUDGET_S:-480}
mkdir -p "$out"
cache=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv >"$out/gpu.csv" 2>&1
start=$EPOCHREALTIME
python3 -c '
import json, sys
for s in json.load(open(sys.argv[1]))["shapes"]:
    print(s["name"], s["M"], s["N"], s["K"])' "$shapes" | while read -r name m n k; do
    spent=$(awk "BEGIN { print int($EPOCHREALTIME - $start) }")
    if [ "$spent" -ge "$budget" ]; then
        echo "$name: skipped, budget spent ($spent s)" | tee -a "$out/runs.txt"
        continue
    fi
    t0=$EPOCHREALTIME
    "$bin" tune --m "$m" --n "$n" --k "$k" --reference --cache-dir "$cache" --format json \
        >"$out/$name.json" 2>"$out/$name.log"
    echo "$name: exit $? in $(awk "BEGIN { print $EPOCHREALTIME - $t0 }") s" | tee -a "$out/runs.txt"
done
python3 "$(dirname "$0")/reference_summary.py" "$out"/*.json
