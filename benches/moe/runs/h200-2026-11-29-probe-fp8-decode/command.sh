set -u
site=/tmp/site; python3 -m pip install -q --no-index --no-deps --target $site target/moe-wheel/*.whl >/dev/null 2>&1; export PYTHONPATH=$site
P=benches/moe/probe_gemms.py
mkdir -p $OUT/p
GLM="--experts 160 --topk 8 --hidden 5120 --n 192"
LING="--experts 256 --topk 8 --hidden 4096 --n 256"
DS16="--experts 256 --topk 8 --hidden 7168 --n 128"
C1=M64_N128_K256_G1_w4_s4,M64_N128_K128_G1_w4_s4,M64_N64_K128_G1_w8_s5,M64_N128_K256_G1_w4_s3,M16_N64_K256_G1_w4_s3,M16_N64_K128_G1_w4_s4,M16_N32_K128_G1_w4_s4,M16_N128_K128_G1_w4_s4,M16_N64_K128_G1_w4_s5,M32_N64_K256_G1_w8_s3,M16_N64_K256_G1_w4_s4,M16_N128_K256_G1_w4_s3
python3 $P $GLM --tokens 1 --configs $C1 --dtype fp8_w8a8 --out $OUT/p/glm1-fp8pt.json
python3 $P $GLM --tokens 1 --configs $C1 --out $OUT/p/glm1-bf16.json
python3 $P $LING --tokens 1 --configs $C1 --dtype fp8_w8a8 --out $OUT/p/ling1-fp8pt.json
python3 $P $LING --tokens 1 --configs $C1 --out $OUT/p/ling1-bf16.json
C2=M64_N128_K128_G1_w4_s4,M64_N128_K128_G1_w4_s3,M64_N64_K128_G1_w4_s4,M16_N128_K128_G1_w4_s4,M16_N128_K128_G1_w4_s5,M16_N64_K128_G1_w4_s4,M16_N32_K128_G1_w4_s4,M32_N128_K128_G1_w4_s3
python3 $P $DS16 --tokens 1 --configs $C2 --dtype fp8_w8a8 --block-shape 128,128 --out $OUT/p/ds16-1-fp8blk.json
PROBE="$GLM --tokens 1 --dtype fp8_w8a8" PROBE_TIMEOUT_S=90 bash benches/moe/ncu_gemms.sh $OUT/p/ncu-glm1-fp8pt M64_N128_K256_G1_w4_s4 M16_N64_K256_G1_w4_s3 M16_N64_K128_G1_w4_s4 > $OUT/p/ncu-glm1-fp8pt.txt 2>&1
tail -60 $OUT/p/ncu-glm1-fp8pt.txt
tar -C $OUT -cJf $OUT/probe-fp8.tar.xz p && rm -rf $OUT/p
