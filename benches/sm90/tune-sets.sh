#!/usr/bin/env bash
# `carver tune --topk 8` of carver's own Hopper family over whole shape files on the GPU machine,
# each in a fresh cache (cold compiles), cuBLAS timed in the same run; JSON per set under OUT_DIR
# and a table last: per shape the winner against cuBLAS, its split and model rank, tuning time.
#
#   benches/sm90/tune-sets.sh OUT_DIR SHAPES.json [SHAPES.json ...]
#
# CARVER_BIN (default target/gpu-run/carver) is the carried binary; nothing is built here.
# TUNE_ARGS adds arguments to every `carver tune` (e.g. "--layout rc").
set -uo pipefail
out=${1:?usage: tune-sets.sh OUT_DIR SHAPES.json ...}
shift
bin=${CARVER_BIN:-target/gpu-run/carver}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv >"$out/gpu.csv" 2>&1
for shapes in "$@"; do
    name=$(basename "$shapes" .json)
    cache=$(mktemp -d)
    start=$EPOCHREALTIME
    # shellcheck disable=SC2086
    "$bin" tune --shapes "$shapes" --topk 8 ${TUNE_ARGS:-} --cache-dir "$cache" --format json \
        >"$out/$name.json" 2>"$out/$name.log"
    echo "$name: exit $? in $(awk "BEGIN { print $EPOCHREALTIME - $start }") s" | tee -a "$out/runs.txt"
done
python3 "$(dirname "$0")/summarize_sets.py" "$out"/*.json
