set -u
mkdir -p $OUT/k $OUT/p
rm -rf /tmp/moe; GPU=h200 MOESET=holdout23 MOE_BUDGET_S=150 MOE_TIMEOUT_S=170 MOEARGS="--dtype fp8_w8a8 --block-shape 128,128 --previous benches/moe/picks/a2b5e05-h200-fp8-holdout23.json" OUT=$OUT/k bash benches/device-holdout.sh 2>&1 | tail -12
site=/tmp/site; python3 -m pip install -q --no-index --no-deps --target $site target/moe-wheel/*.whl >/dev/null 2>&1; export PYTHONPATH=$site
P=benches/moe/probe_gemms.py
DS16="--experts 256 --topk 8 --hidden 7168 --n 128"
C=M16_N128_K128_G1_w4_s3,M16_N128_K128_G1_w4_s4,M16_N128_K128_G1_w8_s3,M16_N256_K128_G1_w4_s3,M16_N256_K128_G1_w4_s4,M16_N256_K128_G1_w8_s4,M16_N256_K128_G1_w8_s3
timeout 120 python3 $P $DS16 --tokens 24 --configs $C --dtype fp8_w8a8 --block-shape 128,128 --out $OUT/p/ds16-24-fp8blk.json > $OUT/p/ds16-24-fp8blk.txt 2>&1
PROBE="$DS16 --tokens 24 --dtype fp8_w8a8 --block-shape 128,128" PROBE_TIMEOUT_S=60 bash benches/moe/ncu_gemms.sh $OUT/p/ncu-ds16-24-fp8blk \
  M16_N128_K128_G1_w4_s3 M16_N256_K128_G1_w8_s4 M16_N256_K128_G1_w4_s4 > $OUT/p/ncu-ds16-24-fp8blk.txt 2>&1
tail -10 $OUT/p/ds16-24-fp8blk.txt
tar -C $OUT -cJf $OUT/probe-fp8blk-wide.tar.xz p && rm -rf $OUT/p
