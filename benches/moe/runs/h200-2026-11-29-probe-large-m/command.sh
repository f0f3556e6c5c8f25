set -u
site=/tmp/site; python3 -m pip install -q --no-index --no-deps --target $site target/moe-wheel/*.whl >/dev/null 2>&1; export PYTHONPATH=$site
P=benches/moe/probe_gemms.py
mkdir -p $OUT/p
GLM8="--experts 160 --topk 8 --hidden 5120 --n 192"
DS16="--experts 256 --topk 8 --hidden 7168 --n 128"
C=M64_N128_K128_G1_w8_s3,M64_N128_K128_G1_w4_s3,M128_N128_K128_G1_w8_s3,M256_N128_K128_G1_w8_s4,M64_N128_K64_G16_w4_s4,M128_N256_K128_G1_w8_s4
date
timeout 150 python3 $P $GLM8 --tokens 3072 --configs $C --dtype fp8_w8a8 --out $OUT/p/glm8-3072-fp8pt.json > $OUT/p/glm8-3072-fp8pt.txt 2>&1; date
CB=M64_N128_K64_G1_w8_s3,M128_N128_K64_G1_w8_s3,M256_N128_K64_G1_w8_s4,M64_N128_K64_G16_w4_s4,M128_N128_K64_G1_w4_s3
timeout 150 python3 $P $GLM8 --tokens 3072 --configs $CB --out $OUT/p/glm8-3072-bf16.json > $OUT/p/glm8-3072-bf16.txt 2>&1; date
PROBE="$GLM8 --tokens 3072 --dtype fp8_w8a8" PROBE_TIMEOUT_S=120 bash benches/moe/ncu_gemms.sh $OUT/p/ncu-glm8-3072-fp8pt \
  M64_N128_K128_G1_w8_s3 M128_N128_K128_G1_w8_s3 M256_N128_K128_G1_w8_s4 > $OUT/p/ncu-glm8-3072-fp8pt.txt 2>&1; date
PROBE="$DS16 --tokens 1 --dtype fp8_w8a8" PROBE_TIMEOUT_S=60 bash benches/moe/ncu_gemms.sh $OUT/p/ncu-ds16-1-fp8pt \
  M16_N128_K128_G1_w4_s5 M16_N128_K128_G1_w8_s5 M16_N64_K128_G1_w4_s5 > $OUT/p/ncu-ds16-1-fp8pt.txt 2>&1; date
tail -12 $OUT/p/glm8-3072-fp8pt.txt; tail -10 $OUT/p/glm8-3072-bf16.txt
tar -C $OUT -cJf $OUT/probe-large-m.tar.xz p && rm -rf $OUT/p
