set -u
site=/tmp/site; python3 -m pip install -q --no-index --no-deps --target $site target/moe-wheel/*.whl >/dev/null 2>&1; export PYTHONPATH=$site
mkdir -p $OUT/p
C=M64_N256_K64_G1_w4_s5,M64_N256_K64_G1_w8_s4,M64_N128_K64_G1_w8_s3,M64_N64_K64_G1_w4_s3,M32_N128_K64_G1_w4_s3,M16_N32_K64_G1_w4_s3
Q="--experts 128 --topk 8 --hidden 2048 --n 96 --tokens 512"
python3 benches/moe/probe_gemms.py $Q --configs $C --out $OUT/p/q30-tp8-512.json
PROBE="$Q" PROBE_TIMEOUT_S=100 bash benches/moe/ncu_gemms.sh $OUT/p/ncu ${C//,/ } > $OUT/p/ncu.txt 2>&1
grep -E "^==|fused_moe_gemm" $OUT/p/ncu.txt | cut -c1-200
tar -C $OUT -cJf $OUT/probe3.tar.xz p && rm -rf $OUT/p
