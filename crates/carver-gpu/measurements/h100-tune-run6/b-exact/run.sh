#!/usr/bin/env bash
# carver tune run 6, second call: the GEMM on repacked operands against an exact reference
# (inputs that are multiples of 1/16, so every fp32 sum is exact), beside cuBLAS; then the copy
# kernel and the driver's cuMemcpy2DAsync timed again on a warm GPU.
set -o pipefail
G=target/gpu-run
L=$OUT/log.txt
chmod +x $G/repack_gpu
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv; } 2>&1 | tee $L
for i in 1 2; do
  $G/repack_gpu --test-threads 1 --nocapture 2>&1 | tee -a $L; echo "repack_gpu rc=$?" | tee -a $L
done
{ date -u; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader; } | tee -a $L
