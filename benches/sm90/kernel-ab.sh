#!/usr/bin/env bash
# One device call for a change to the cuda-sm90 kernel that leaves the configuration space
# alone: the stored winners of tune runs, each timed as stored with the carver binary of every
# variant (`config_variants.py --as-stored`, binary variants, rotating order, cuBLAS in each
# call), mid M first, then large M. Binaries carried as target/exp.tar.xz holding exp/NAME/carver
# (exp/base/carver is the code before the change); everything lands in $OUT/ab.tgz.
#
# MID_ARGS adds arguments to the mid-M pass (e.g. "--max-tile-rows 1"); LARGE_S=0 skips large M.
#
#   MID_S=280 LARGE_S=140 bash benches/sm90/kernel-ab.sh RESULTS.json.xz [...]
set -uo pipefail
[ -d target/exp ] || tar -C target -xJf target/exp.tar.xz
chmod +x target/exp/*/carver
variants=""
for d in target/exp/*/; do
    name=$(basename "$d")
    [ "$name" = base ] || variants="$variants${variants:+,}bin:$name=$PWD/${d}carver"
done
R=$OUT/ab
mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv >$R/gpu.csv 2>&1
py=benches/sm90/config_variants.py
python3 $py --bin target/exp/base/carver --as-stored --variants "$variants" --max-m 512 ${MID_ARGS:-} \
    --budget-s "${MID_S:-280}" --out $R/mid.jsonl "$@" >$R/mid.txt 2>$R/mid.err
[ "${LARGE_S:-140}" = 0 ] || python3 $py --bin target/exp/base/carver --as-stored --variants "$variants" --min-m 513 \
    --max-m 100000 --budget-s "${LARGE_S:-140}" --out $R/large.jsonl "$@" >$R/large.txt 2>$R/large.err
tar -C $OUT -czf $OUT/ab.tgz ab
tail -n 3 $R/*.err
grep -E "geomean" $R/*.txt
