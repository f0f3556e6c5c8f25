#!/usr/bin/env bash
# One device call: the dense held-out set (Triton harness, carver's picks from the carried
# binary, the previous commit's picks and nvMatmulHeuristics' in the same run), then a MoE
# model set (benches/moe/run.sh with the carried wheel). Results bundled under $OUT.
#   GPU=h100|h200 SHAPES=eval/holdout6-shapes.json OLD=<picks file> MOESET=holdout4 TUNE=model/tpN
#   bash benches/device-holdout.sh
set -u
cd "$(dirname "$0")/.."
G=${GPU:-h100}
export PYTHONUNBUFFERED=1
if [ -n "${SHAPES:-}" ]; then
  timeout ${DENSE_TIMEOUT_S:-240} python3 benches/triton/harness.py --shapes "$SHAPES" \
    --carver-bin target/calib/carver --carver-args "--arch $G" ${OLD:+--picks "previous=$OLD"} \
    --nvmmh-picks "benches/triton/picks/nvmmh-$G-sxm-$(basename "$SHAPES" -shapes.json).json" \
    --out /tmp/dense > /tmp/dense.log 2>&1
  echo "dense rc=$?"
  cp /tmp/dense.log /tmp/dense/ 2>/dev/null
  tar -C /tmp -czf "$OUT/dense.tar.gz" dense
fi
if [ -n "${MOESET:-}" ]; then
  mkdir -p /tmp/moe
  OUT=/tmp/moe WHEEL=$(ls target/moe-wheel/carver-*.whl) HARNESS_TIMEOUT_S=${MOE_TIMEOUT_S:-330} \
    bash benches/moe/run.sh --set "$MOESET" --sweep-configs 200 --budget-s ${MOE_BUDGET_S:-230} \
    --tune-model "${TUNE:-none}" --tune-timeout 120 ${MOEARGS:-} > /tmp/moe-run.log 2>&1
  echo "moe rc=$?"
  gzip -f /tmp/moe/moe_results.json 2>/dev/null
  tar -C /tmp -czf "$OUT/moe.tar.gz" moe
  tail -40 /tmp/moe/harness.log
fi
[ -n "${SHAPES:-}" ] && tail -45 /tmp/dense.log
