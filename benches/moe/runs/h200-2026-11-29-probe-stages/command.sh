set -u
site=/tmp/site; python3 -m pip install -q --no-index --no-deps --target $site target/moe-wheel/*.whl >/dev/null 2>&1; export PYTHONPATH=$site
P=benches/moe/probe_gemms.py
DS16="--experts 256 --topk 8 --hidden 7168 --n 128"
C=M16_N32_K128_G1_w4_s2,M16_N32_K128_G1_w4_s3,M16_N32_K128_G1_w4_s4,M16_N32_K128_G1_w4_s5,M16_N128_K128_G1_w4_s2,M16_N128_K128_G1_w4_s3,M16_N128_K128_G1_w4_s4,M16_N128_K128_G1_w4_s5,M16_N64_K64_G1_w4_s2,M16_N64_K64_G1_w4_s3,M16_N64_K64_G1_w4_s4,M16_N64_K64_G1_w4_s5
timeout 100 python3 $P $DS16 --tokens 1 --configs $C --out $OUT/ds16-1-bf16-stages.json > $OUT/ds16-1-bf16-stages.txt 2>&1
timeout 100 python3 $P $DS16 --tokens 1 --configs $C --dtype fp8_w8a8 --out $OUT/ds16-1-fp8pt-stages.json > $OUT/ds16-1-fp8pt-stages.txt 2>&1
tail -14 $OUT/ds16-1-bf16-stages.txt; tail -14 $OUT/ds16-1-fp8pt-stages.txt
