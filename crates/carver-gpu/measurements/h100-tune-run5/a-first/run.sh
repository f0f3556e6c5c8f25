#!/usr/bin/env bash
# cuda-sm90 epilogue measurement: correctness tests, then carver tune before/after (interleaved).
set -o pipefail
G=target/gpu-run
L=$OUT/log.txt
chmod +x $G/carver $G/carver-before $G/tune_cli $G/sm90_compile
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv; } 2>&1 | tee $L
CARVER_TEST_BIN=$PWD/$G/carver $G/tune_cli --test-threads 1 --nocapture > $OUT/tests.txt 2>&1; echo "tune_cli rc=$?" | tee -a $L
$G/sm90_compile --nocapture >> $OUT/tests.txt 2>&1; echo "sm90_compile rc=$?" | tee -a $L
grep -E "^test |relative error|test result" $OUT/tests.txt | tail -40
run() { # binary m n k
  echo "== $1 M=$2 N=$3 K=$4" | tee -a $L
  local t0=$(date +%s%N)
  $G/$1 --cache-dir /tmp/cc-$1-$2-$3-$4 tune --m $2 --n $3 --k $4 --topk 8 2>&1 | tee -a $L
  echo "process wall ms: $(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a $L
}
run carver-before 4096 4096 96; run carver 4096 4096 96
run carver 65536 256 1024; run carver-before 65536 256 1024
run carver-before 4096 4096 4096; run carver 4096 4096 4096
run carver 8192 8192 8192; run carver-before 8192 8192 8192
for b in carver carver-before; do
  echo "== $b dev shapes with M >= 256" | tee -a $L
  $G/$b --cache-dir /tmp/dev-$b tune --shapes $G/dev-m256.json --topk 8 > $OUT/dev-$b.txt 2>&1
  grep -E "^cuBLAS|: M=|error" $OUT/dev-$b.txt | tee -a $L
done
{ date -u; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader; } | tee -a $L
