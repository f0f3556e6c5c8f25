#!/usr/bin/env bash
# Hardware counters of the fused-MoE kernel's two GEMMs, per config, under Nsight Compute on the
# GPU machine: benches/moe/probe_gemms.py runs each config once (one weight copy, one timed
# launch of each GEMM after its warm-up) and ncu profiles those four launches (gate/up twice,
# then down twice). Clocks are left as they are (`--clock-control none`).
#
#   PROBE="--experts 128 --topk 8 --hidden 2048 --n 192 --tokens 1024" \
#       bash benches/moe/ncu_gemms.sh OUT_DIR M16_N32_K64_G1_w4_s5 M16_N32_K128_G1_w4_s5
#
# Needs the carver wheel importable (benches/device-holdout.sh's PROBES step installs it).
# Writes OUT_DIR/<config>.csv.gz (`--page raw`, every metric of every launch) and prints per
# launch its duration, traffic, occupancy and costliest stalls (benches/sm90/ncu_summary.py).
set -uo pipefail
out=${1:?usage: ncu_gemms.sh OUT_DIR CONFIG ...}
shift
: "${PROBE:?set PROBE to the problem arguments of probe_gemms.py}"
mkdir -p "$out"
here=$(dirname "$0")
for config in "$@"; do
    # shellcheck disable=SC2086
    timeout ${PROBE_TIMEOUT_S:-240} ncu --clock-control none --target-processes all \
        --kernel-name "regex:fused_moe" --launch-count 4 --set full -f -o "$out/$config" \
        python3 "$here/probe_gemms.py" $PROBE --configs "$config" --reps 1 --copies 1 \
        > "$out/$config.probe.txt" 2> "$out/$config.ncu.log"
    echo "$config: ncu exit $?"
    ncu --import "$out/$config.ncu-rep" --csv --page raw > "$out/$config.csv" 2>/dev/null
    gzip -f "$out/$config.csv"
    rm -f "$out/$config.ncu-rep"
done
python3 "$here/../sm90/ncu_summary.py" "$out"/*.csv.gz
