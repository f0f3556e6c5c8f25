set -u
site=/tmp/site; python3 -m pip install -q --no-index --no-deps --target $site target/moe-wheel/*.whl >/dev/null 2>&1; export PYTHONPATH=$site
P=benches/moe/probe_gemms.py
mkdir -p $OUT/p
KIMI="--experts 384 --topk 8 --hidden 7168 --n 128"
python3 $P $KIMI --tokens 4 --configs M16_N32_K128_G1_w4_s5,M16_N32_K128_G1_w4_s4,M16_N32_K128_G1_w4_s3,M16_N32_K64_G1_w4_s5,M16_N32_K64_G1_w4_s3,M16_N64_K64_G1_w4_s5,M16_N64_K128_G1_w4_s5,M16_N128_K64_G1_w8_s5,M16_N32_K256_G1_w4_s3,M16_N32_K256_G1_w4_s2 --out $OUT/p/kimi4.json
python3 $P $KIMI --tokens 1 --configs M16_N32_K128_G1_w4_s4,M16_N32_K128_G1_w4_s5,M16_N32_K256_G1_w4_s3,M16_N32_K64_G1_w4_s5,M16_N64_K128_G1_w4_s5,M16_N32_K128_G1_w4_s3 --out $OUT/p/kimi1.json
python3 $P --experts 60 --topk 4 --hidden 2048 --n 352 --tokens 1 --configs M16_N32_K128_G1_w4_s5,M16_N64_K256_G1_w4_s5,M16_N32_K256_G1_w4_s4,M16_N32_K64_G1_w4_s5,M16_N64_K128_G1_w4_s4,M16_N64_K256_G1_w4_s2 --out $OUT/p/qwen15_1.json
python3 $P $KIMI --tokens 64 --configs M16_N64_K64_G16_w4_s3,M16_N64_K64_G1_w4_s3,M16_N64_K64_G1_w4_s4,M16_N128_K64_G1_w4_s4,M16_N128_K64_G16_w4_s3,M16_N128_K64_G1_w8_s4 --out $OUT/p/kimi64.json
PROBE="$KIMI --tokens 4" PROBE_TIMEOUT_S=150 bash benches/moe/ncu_gemms.sh $OUT/p/ncu4 M16_N32_K128_G1_w4_s5 M16_N32_K64_G1_w4_s5 > $OUT/p/ncu4.txt 2>&1
tail -40 $OUT/p/ncu4.txt
tar -C $OUT -cJf $OUT/probe.tar.xz p && rm -rf $OUT/p
