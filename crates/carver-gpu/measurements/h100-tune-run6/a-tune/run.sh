#!/usr/bin/env bash
# carver tune run 6 (issue 4): cuda-sm90 on operands whose rows are not 16-byte aligned
# (repacked into padded rows before every launch). GPU tests, the copy kernel beside the
# driver's cuMemcpy2DAsync, then tune top-8 of the two refused dev shapes, rr and rc.
set -o pipefail
G=target/gpu-run
L=$OUT/log.txt
chmod +x $G/carver $G/tune_cli $G/repack_gpu
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv; } 2>&1 | tee $L
$G/repack_gpu --nocapture > $OUT/repack.txt 2>&1; echo "repack_gpu rc=$?" | tee -a $L
cat $OUT/repack.txt | tee -a $L
run() { # m n k dtype layout
  echo "== M=$1 N=$2 K=$3 $4 $5" | tee -a $L
  local t0=$(date +%s%N)
  $G/carver --cache-dir /tmp/cc tune --m $1 --n $2 --k $3 --dtype $4 --layout $5 --topk 8 2>&1 | tee -a $L
  echo "process wall ms: $(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a $L
}
run 333 777 999 bf16 rr
run 1537 2049 3001 bf16 rr
run 333 777 999 bf16 rc
run 1537 2049 3001 f16 rc
CARVER_TEST_BIN=$PWD/$G/carver $G/tune_cli --test-threads 1 --nocapture > $OUT/tests.txt 2>&1; echo "tune_cli rc=$?" | tee -a $L
{ date -u; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader; } | tee -a $L
grep -E "^test |test result" $OUT/tests.txt
grep -E "^cuBLAS|^repack|: M=|^M=" $L
