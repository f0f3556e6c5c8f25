set -u
site=/tmp/site; python3 -m pip install -q --no-index --no-deps --target $site target/moe-wheel/*.whl >/dev/null 2>&1; export PYTHONPATH=$site
P=benches/moe/probe_gemms.py
mkdir -p $OUT/p
DS16="--experts 256 --topk 8 --hidden 7168 --n 128"
Q15="--experts 60 --topk 4 --hidden 2048 --n 1408"
DOTS8="--experts 128 --topk 6 --hidden 4096 --n 176"
C=M16_N32_K128_G1_w4_s4,M16_N32_K128_G1_w8_s4,M16_N32_K128_G1_w4_s5,M16_N32_K128_G1_w8_s5,M16_N64_K128_G1_w4_s5,M16_N64_K128_G1_w8_s5,M16_N64_K128_G1_w4_s4,M16_N64_K128_G1_w8_s4,M16_N128_K128_G1_w4_s5,M16_N128_K128_G1_w8_s5,M16_N128_K128_G1_w4_s4,M16_N128_K128_G1_w8_s4
date
timeout 150 python3 $P $DS16 --tokens 1 --configs $C --out $OUT/p/ds16-1-bf16.json > $OUT/p/ds16-1-bf16.txt 2>&1; date
timeout 120 python3 $P $DS16 --tokens 2 --configs $C --out $OUT/p/ds16-2-bf16.json > $OUT/p/ds16-2-bf16.txt 2>&1; date
timeout 120 python3 $P $DS16 --tokens 1 --configs $C --dtype fp8_w8a8 --out $OUT/p/ds16-1-fp8pt.json > $OUT/p/ds16-1-fp8pt.txt 2>&1; date
timeout 120 python3 $P $Q15 --tokens 1 --configs $C --out $OUT/p/q15-1-bf16.json > $OUT/p/q15-1-bf16.txt 2>&1; date
timeout 120 python3 $P $DOTS8 --tokens 1 --configs $C --out $OUT/p/dots8-1-bf16.json > $OUT/p/dots8-1-bf16.txt 2>&1; date
PROBE="$DS16 --tokens 1" PROBE_TIMEOUT_S=60 bash benches/moe/ncu_gemms.sh $OUT/p/ncu-ds16-1-bf16 \
  M16_N32_K128_G1_w4_s5 M16_N32_K128_G1_w8_s5 M16_N64_K128_G1_w4_s5 M16_N64_K128_G1_w8_s5 \
  M16_N128_K128_G1_w4_s5 M16_N128_K128_G1_w8_s5 > $OUT/p/ncu-ds16-1-bf16.txt 2>&1; date
tail -45 $OUT/p/ncu-ds16-1-bf16.txt
tar -C $OUT -cJf $OUT/probe-warps.tar.xz p && rm -rf $OUT/p
