#!/usr/bin/env bash
# The MoE harness on the lent GPU machine (no network, no pip index): installs the carver wheel
# built here (target/wheels/carver-*.whl, built with maturin on the build machine) into a temp dir
# on PYTHONPATH, then runs harness.py. Every argument goes to harness.py, e.g.
#   bash benches/moe/run.sh --quick                       # smoke: 2 models, 6 batch sizes, 60 configs
#   bash benches/moe/run.sh                               # main models, full ladder, 320 sweep configs
#   bash benches/moe/run.sh --set holdout --budget-s 400  # held-out models
#   bash benches/moe/run.sh --models mixtral-8x7b --sweep-configs 0   # one model, the whole legal space
# Env: OUT (results folder; default ./moe-out), WHEEL (a wheel path instead of target/wheels/carver-*.whl),
# HARNESS_TIMEOUT_S (see below).
# Writes at most 5 files under $OUT: moe_results.json, harness.log, env.txt, tune.tar.gz, compile-errors.txt.
set -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/moe-out}
mkdir -p "$OUT"
W=${WHEEL:-$(ls -t target/wheels/carver-*.whl 2>/dev/null | head -1)}
if [ -z "$W" ] || [ ! -f "$W" ]; then
  echo "no carver wheel: build one first (maturin build --release -m crates/carver-py/Cargo.toml) or set WHEEL" >&2
  exit 2
fi
SITE=$(mktemp -d /tmp/carver-site.XXXXXX)
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$SITE" "$W" 2>&1 | tail -3
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/carver-moe-triton-cache}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
  python3 -c "import sys, torch, triton, carver; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'carver', carver.__version__, 'recommend_moe', hasattr(carver, 'recommend_moe'))"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
WORK=$(mktemp -d /tmp/moe-work.XXXXXX)
# HARNESS_TIMEOUT_S: stop the harness (SIGINT) after that many seconds and keep what it measured
# (its results file is rewritten after every batch size); 0 = no limit.
timeout --signal=INT "${HARNESS_TIMEOUT_S:-0}" python3 benches/moe/harness.py --out "$WORK" "$@" 2>&1 | tee "$OUT/harness.log"
rc=${PIPESTATUS[0]}
[ -f "$WORK/moe_results.json" ] && cp "$WORK/moe_results.json" "$OUT/"
[ -d "$WORK/tune" ] && tar -C "$WORK" -czf "$OUT/tune.tar.gz" tune
python3 - "$OUT/moe_results.json" > "$OUT/compile-errors.txt" 2>/dev/null <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k, v in (d.get("compile", {}).get("failures") or {}).items():
    print(k, (v or "")[:300].replace("\n", " "))
PY
{ date -u; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader; } >> "$OUT/env.txt" 2>&1
echo "harness rc=$rc; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit $rc
