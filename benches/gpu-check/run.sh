#!/usr/bin/env bash
# The GPU checks of a build, on the lent Hopper machine: every GPU test binary, then the CLI's
# GPU flows end to end (detect, calibrate, tune with a database hit, bucketed lookup, repack,
# tune --emit with the emitted kernels launched from Python, bench, exhaustive, recommend
# --arch auto). Binaries are built here and carried in
# target/gpu-run (see benches/gpu-check/build.sh); results go to $OUT.
set -o pipefail
G=target/gpu-run
[ -d $G ] || tar -C target -xJf target/gpu-run.tar.xz
L=$OUT/log.txt
C=/tmp/carver-cache
chmod +x $G/*
step() { echo "== $*" | tee -a $L; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv; } 2>&1 | tee $L
for t in gpu repack_gpu kernels sm90_compile; do
  timeout 300 $G/$t --test-threads 1 > $OUT/test-$t.txt 2>&1; echo "test $t rc=$?" | tee -a $L
done
CARVER_TEST_BIN=$PWD/$G/carver timeout 400 $G/tune_cli --test-threads 1 --nocapture > $OUT/test-tune_cli.txt 2>&1; echo "test tune_cli rc=$?" | tee -a $L
c() { step "carver $*"; timeout 300 $G/carver --cache-dir $C "$@" 2>&1 | tee -a $L; echo "rc=${PIPESTATUS[0]}" | tee -a $L; }
c arch detect
c arch calibrate
c tune --m 4096 --n 4096 --k 4096 --topk 8
c tune --m 4096 --n 4096 --k 4096 --topk 8
c tune --m 1024 --n 1024 --k 1024 --topk 4
c tune --m 1000 --n 1000 --k 1000 --topk 4 --bucket pow2
c tune --m 333 --n 777 --k 999 --topk 4
# Emitted winners, loaded and launched by another program (examples/emit, torch + ctypes on
# libcuda), checked against torch.matmul and timed beside it: split-K decode, a batch, fp8.
E=/tmp/carver-emit
rm -rf $E
c tune --m 1 --n 4096 --k 8192 --topk 4 --emit $E
c tune --m 512 --n 512 --k 256 --batch 4 --topk 2 --emit $E
c tune --m 256 --n 1024 --k 2048 --dtype e4m3 --out-dtype bf16 --layout rc --topk 2 --emit $E
for j in $E/*/launch.json; do
  step "python3 examples/emit/launch_emitted.py $j ($(grep -c '"entry_point"' $j) kernel(s))"
  timeout 120 python3 examples/emit/launch_emitted.py $j 2>&1 | tee -a $L; echo "rc=${PIPESTATUS[0]}" | tee -a $L
done
c bench --m 4096 --n 4096 --k 4096
step "flip one byte of every cached cubin, then tune 1024^3 again (each must be reported and recompiled)"
for f in $(find $C -name '*.cubin'); do printf '\xff' | dd of=$f bs=1 seek=200 conv=notrunc status=none; done
c tune --m 1024 --n 1024 --k 1024 --topk 4 --retune
if [ -z "${SKIP_EXHAUSTIVE:-}" ]; then
  step "carver tune --exhaustive 256x4096x4096"
  timeout 400 $G/carver --cache-dir $C tune --m 256 --n 4096 --k 4096 --exhaustive --format json > $OUT/exhaustive.json 2> $OUT/exhaustive.err; echo "rc=$?" | tee -a $L
fi
c recommend --arch auto --target triton --m 4096 --n 4096 --k 4096
{ date -u; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader; } | tee -a $L
grep -h -E "^test .*(ok|FAILED|ignored)|test result" $OUT/test-*.txt | grep -v " ok$" | tail -20
grep -E "^test |rc=|winner|of cuBLAS|database:|emit:|^ok:|MISMATCH|^error" $L | tail -50
