#!/usr/bin/env bash
# Measures carver's own Hopper family (`cuda-sm90`) on the GPU machine: `carver tune` top-8 on
# 4096^3, 8192^3 and the dev shapes with M >= 256, then `--exhaustive` on the shapes named on the
# command line (NAME=MxNxK), every result as JSON under OUT_DIR, and a summary table last.
#
#   benches/sm90/run.sh OUT_DIR [NAME=MxNxK ...]
#
# CARVER_BIN (default target/gpu-run/carver) is the carried binary; nothing is built here.
# ONLY_EXHAUSTIVE=1 skips the top-8 runs of 4096^3, 8192^3 and the dev shapes. The exhaustive runs
# share one compile cache (the first is cold, later ones reuse its kernels) and pass --retune so
# the tuning database cannot answer them.
set -uo pipefail
out=${1:?usage: run.sh OUT_DIR [NAME=MxNxK ...]}
shift
bin=${CARVER_BIN:-target/gpu-run/carver}
here=$(dirname "$0")
mkdir -p "$out"
cache=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv >"$out/gpu.csv" 2>&1

tune() { # name, then tune arguments
    local name=$1
    shift
    local start=$EPOCHREALTIME
    "$bin" tune "$@" --cache-dir "$cache/$name" --format json >"$out/$name.json" 2>"$out/$name.log"
    echo "$name: exit $? in $(awk "BEGIN { print $EPOCHREALTIME - $start }") s" >>"$out/runs.txt"
}

tune_in() { # cache directory, name, then tune arguments
    local dir=$1 name=$2
    shift 2
    local start=$EPOCHREALTIME
    "$bin" tune "$@" --cache-dir "$dir" --format json >"$out/$name.json" 2>"$out/$name.log"
    echo "$name: exit $? in $(awk "BEGIN { print $EPOCHREALTIME - $start }") s" >>"$out/runs.txt"
}

if [ "${ONLY_EXHAUSTIVE:-0}" != 1 ]; then
    tune t4096 --m 4096 --n 4096 --k 4096 --topk 8
    tune t8192 --m 8192 --n 8192 --k 8192 --topk 8
    python3 - "$out/dev-m256.json" <<'PY'
import json, sys
shapes = json.load(open("eval/dev-shapes.json"))["shapes"]
json.dump({"shapes": [s for s in shapes if s["M"] >= 256]}, open(sys.argv[1], "w"))
PY
    tune dev --shapes "$out/dev-m256.json" --topk 8
fi

for spec in "$@"; do
    name=${spec%%=*}
    IFS=x read -r m n k <<<"${spec#*=}"
    # The model's top-8, looked up in the exhaustive run's own measurements.
    "$bin" recommend --arch h100 --target cuda-sm90 --dtype bf16 --m "$m" --n "$n" --k "$k" \
        --topk 8 --format json >"$out/picks-$name.json"
    tune "top8-$name" --m "$m" --n "$n" --k "$k" --topk 8
    tune_in "$cache/exhaustive" "ex-$name" --m "$m" --n "$n" --k "$k" --exhaustive --retune
done
python3 "$here/summarize.py" "$out"
