set -u
site=/tmp/site; python3 -m pip install -q --no-index --no-deps --target $site target/moe-wheel/*.whl >/dev/null 2>&1; export PYTHONPATH=$site
P=benches/moe/probe_gemms.py
mkdir -p $OUT/p
C1=M16_N32_K128_G1_w4_s4,M16_N32_K128_G1_w4_s5,M16_N64_K128_G1_w4_s5,M16_N64_K128_G1_w4_s4,M16_N32_K256_G1_w4_s3,M16_N64_K256_G1_w4_s4,M16_N32_K64_G1_w4_s5,M16_N32_K64_G1_w4_s3,M16_N128_K128_G1_w4_s4,M16_N32_K128_G1_w8_s4,M16_N64_K64_G1_w4_s5,M16_N32_K128_G1_w4_s3
python3 $P --experts 384 --topk 8 --hidden 7168 --n 128 --tokens 4 --configs M16_N32_K128_G1_w4_s5,M16_N32_K64_G1_w4_s5 --out $OUT/p/kimi4-check.json
python3 $P --experts 256 --topk 8 --hidden 7168 --n 128 --tokens 1 --configs $C1 --out $OUT/p/ds1.json
python3 $P --experts 256 --topk 8 --hidden 7168 --n 128 --tokens 2 --configs $C1 --out $OUT/p/ds2.json
python3 $P --experts 60 --topk 4 --hidden 2048 --n 352 --tokens 1 --configs $C1,M16_N64_K256_G1_w4_s5,M32_N32_K128_G1_w8_s4 --out $OUT/p/qwen15-1.json
python3 $P --experts 128 --topk 8 --hidden 4096 --n 192 --tokens 1 --configs $C1 --out $OUT/p/q235-tp8-1.json
tar -C $OUT -cJf $OUT/probe2.tar.xz p && rm -rf $OUT/p
