#!/usr/bin/env bash
# Are the small rc errors against cuBLAS the same before and after the epilogue change?
G=target/gpu-run
chmod +x $G/carver $G/carver-before
for s in "333 1001 136 bf16" "333 1002 200 f16" "777 1232 304 bf16" "1000 1000 1000 bf16"; do
  set -- $s
  L=rc; [ "$1" = 1000 ] && L=rr
  for b in carver-before carver; do
    echo "== $b M=$1 N=$2 K=$3 $4 $L"
    $G/$b --cache-dir /tmp/e-$b tune --m $1 --n $2 --k $3 --dtype $4 --layout $L --topk 6 --format json > $OUT/$b-$1-$2.json 2>&1
    python3 -c "
import json,sys
r=json.load(open(sys.argv[1]))['results'][0]
for c in r['candidates']:
    d=c.get('details') or {}
    k=c.get('config') or {}
    print('%sx%s s%s c%s x%s p%d' % (k.get('block_m'), k.get('block_n'), k.get('stages'), k.get('consumers'), k.get('cluster_m'), k.get('persistent', 0)), d.get('rel_error'), (d.get('timing') or {}).get('median_s'), c.get('failure'))
" $OUT/$b-$1-$2.json 2>&1 | cut -c1-200
  done
done
