#!/usr/bin/env bash
# One device call for the small-M path (A and B swapped in the wgmma) and the deeper rings: the
# GPU test of the path against the reference, then `carver tune --topk 8` over the held-out and
# dev sets (bf16, B row-major) and the fp8 set (e4m3 -> bf16, B stored N x K), cuBLAS/cuBLASLt
# timed in the same run (SETS overrides the bf16 sets, FP8=0 skips the fp8 set). Binaries
# from benches/gpu-check/build.sh (carried as
# target/gpu-run.tar.xz); everything lands in $OUT/results.tgz, tables on stdout.
set -o pipefail
G=target/gpu-run
[ -d $G ] || tar -C target -xJf target/gpu-run.tar.xz
chmod +x $G/*
R=$OUT/r
mkdir -p $R
CARVER_TEST_BIN=$PWD/$G/carver timeout 240 $G/tune_cli --test-threads 1 --nocapture small_m \
    >$R/test-small-m.txt 2>&1
echo "test small_m rc=$?"
CARVER_BIN=$G/carver benches/sm90/tune-sets.sh $R/sets ${SETS:-eval/holdout10-sm90-shapes.json \
    eval/holdout8-sm90-shapes.json eval/dev-shapes.json eval/holdout7-sm90-shapes.json} >$R/sets.txt 2>&1
if [ "${FP8:-1}" = 1 ]; then
    TUNE_ARGS="--dtype e4m3 --out-dtype bf16 --layout rc" CARVER_BIN=$G/carver \
        benches/sm90/tune-sets.sh $R/fp8 eval/fp8-sm90-shapes.json >$R/fp8.txt 2>&1
fi
tar -C $OUT -czf $OUT/results.tgz r && rm -rf $R/sets $R/fp8
grep -E 'relative error|test result|FAILED|panicked' $R/test-small-m.txt | tail -40
cat $R/sets.txt
[ -f $R/fp8.txt ] && cat $R/fp8.txt
