#!/usr/bin/env bash
# One device call for the small-M path (A and B swapped in the wgmma) and the deeper rings: the
# GPU test of the path against the reference, then `carver tune --topk 8` over the held-out and
# dev sets (bf16, B row-major) and the fp8 set (e4m3 -> bf16, B stored N x K), cuBLAS/cuBLASLt
# timed in the same run (SETS overrides the bf16 sets, FP8=0 skips the fp8 set). Binaries
# from benches/gpu-check/build.sh (carried as target/gpu-run.tar.xz). The test and the bf16
# sets are benches/sm90/compare-run.sh's (results in $OUT/results.tgz); the fp8 set lands in
# $OUT/fp8.txt and $OUT/fp8.tgz.
set -o pipefail
# shellcheck disable=SC2086
TESTS=small_m bash "$(dirname "$0")/compare-run.sh" ${SETS:-eval/holdout10-sm90-shapes.json \
    eval/holdout8-sm90-shapes.json eval/dev-shapes.json eval/holdout7-sm90-shapes.json}
if [ "${FP8:-1}" = 1 ]; then
    TUNE_ARGS="--dtype e4m3 --out-dtype bf16 --layout rc" CARVER_BIN=target/gpu-run/carver \
        benches/sm90/tune-sets.sh "$OUT/fp8" eval/fp8-sm90-shapes.json >"$OUT/fp8.txt" 2>&1
    tar -C "$OUT" -czf "$OUT/fp8.tgz" fp8 && rm -rf "$OUT/fp8"
    cat "$OUT/fp8.txt"
fi
