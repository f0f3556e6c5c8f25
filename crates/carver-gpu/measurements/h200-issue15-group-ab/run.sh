tar -C target -xJf target/gpu-run.tar.xz
C=target/gpu-run/carver
cache=$(mktemp -d)
for round in 1 2 3; do
while IFS=$'\t' read -r name m n k g cfg; do
  out=$($C --cache-dir $cache bench --m $m --n $n --k $k --config "$cfg" --format json 2>>$OUT/err.txt)
  echo "$round	$name	$g	$(echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("measured_time_us"), d.get("cublas_time_us"), d.get("label"))' 2>&1)"
done < abgroup.tsv
done > $OUT/abgroup.txt 2>&1
cat $OUT/abgroup.txt; tail -3 $OUT/err.txt
