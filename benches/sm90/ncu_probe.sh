#!/usr/bin/env bash
# Hardware counters of carver's cuda-sm90 kernel and of cuBLAS on the same shapes, under Nsight
# Compute, on the GPU machine: `carver tune --topk 1` per shape (the model's first config; the
# worker checks it against cuBLAS, then times both interleaved), with ncu profiling the first
# LAUNCHES launches of the kernels KERNELS matches (a regex; default either library's GEMM
# kernels, of which cuBLAS's come first: KERNELS=carver_sm90 for carver's own). Clocks are left
# as they are (`--clock-control none`). With CONFIG (cuda-sm90's own JSON terms) set, `carver
# bench --config "$CONFIG"` runs instead: that configuration, whatever the model would rank.
#
#   CARVER_BIN=target/calib/carver bash benches/sm90/ncu_probe.sh OUT_DIR 96x5120x5120 512x4096x11008
#
# Writes OUT_DIR/<shape>.ncu-rep, OUT_DIR/<shape>.csv.gz (`--page raw`: every metric of every
# profiled launch) and prints per launch: kernel, duration, DRAM and L2 traffic, tensor-pipe
# activity and the costliest warp stalls (benches/sm90/ncu_summary.py).
set -uo pipefail
out=${1:?usage: ncu_probe.sh OUT_DIR MxNxK ...}
shift
bin=${CARVER_BIN:-target/calib/carver}
mkdir -p "$out"
if [ -n "${CONFIG:-}" ]; then run=(bench --config "$CONFIG"); else run=(tune --topk 1); fi
for shape in "$@"; do
    IFS=x read -r m n k <<< "$shape"
    cache=$(mktemp -d)
    timeout ${PROBE_TIMEOUT_S:-240} ncu --clock-control none --target-processes all \
        --kernel-name "regex:${KERNELS:-carver_sm90|nvjet|sm90_xmma|splitKreduce|cutlass}" \
        --launch-count ${LAUNCHES:-8} \
        --set full \
        -f -o "$out/$shape" \
        "$bin" --cache-dir "$cache" "${run[@]}" \
        --m "$m" --n "$n" --k "$k" --watchdog-s 200 \
        > "$out/$shape.tune.txt" 2> "$out/$shape.ncu.log"
    echo "$shape: ncu exit $?"
    ncu --import "$out/$shape.ncu-rep" --csv --page raw > "$out/$shape.csv" 2>/dev/null
    gzip -f "$out/$shape.csv"
done
python3 "$(dirname "$0")/ncu_summary.py" "$out"/*.csv.gz
