#!/usr/bin/env bash
# One device call for a change to the cuda-sm90 kernel: the GPU tests named in TESTS (default:
# every `tune_cli` test whose name holds split_k, small_m, fp8 or emit), then `carver tune
# --topk 8` over the shape sets given, with the new binary and, when OLD names a carried
# binary of the code before the change, with that one too, each in a fresh cache with cuBLAS
# timed in the same run. Binaries from benches/gpu-check/build.sh (carried as
# target/gpu-run.tar.xz); everything lands in $OUT/results.tgz, tables on stdout.
#
#   OLD=path/to/old/carver benches/sm90/compare-run.sh SHAPES.json [SHAPES.json ...]
#
# Used for the split-K reductions of 2026-11-28 (docs/RESULTS.md): TESTS="split_k small_m fp8
# emit" OLD=target/gpu-old-carver, the old binary built at the commit before the change;
# TESTS=none runs no test.
set -o pipefail
G=target/gpu-run
[ -d $G ] || tar -C target -xJf target/gpu-run.tar.xz
chmod +x $G/*
R=$OUT/r
mkdir -p $R
for t in ${TESTS:-split_k small_m fp8 emit}; do
    CARVER_TEST_BIN=$PWD/$G/carver timeout 200 $G/tune_cli --test-threads 1 --nocapture "$t" \
        >$R/test-$t.txt 2>&1
    echo "test $t rc=$? $(grep -E '^test result' $R/test-$t.txt | tail -1)"
done
CARVER_BIN=$G/carver benches/sm90/tune-sets.sh $R/new "$@" >$R/new.txt 2>&1
if [ -n "${OLD:-}" ]; then
    chmod +x "$OLD"
    CARVER_BIN=$OLD benches/sm90/tune-sets.sh $R/old "$@" >$R/old.txt 2>&1
fi
tar -C $OUT -czf $OUT/results.tgz r
for t in ${TESTS:-split_k small_m fp8 emit}; do
    grep -E 'FAILED|panicked' $R/test-$t.txt | head -5
done
echo "== new"; cat $R/new.txt
[ -f $R/old.txt ] && { echo "== old"; cat $R/old.txt; }
