#!/usr/bin/env bash
# One device call: dense held-out sets (Triton harness, carver's picks from the carried binary,
# a previous commit's picks and nvMatmulHeuristics' in the same run), then a MoE model set
# (benches/moe/run.sh with the carried wheel), then optional MoE GEMM probes. Results bundled
# under $OUT.
#   GPU=h100|h200|auto SHAPES="eval/holdout16-shapes.json eval/holdout17-shapes.json" \
#   OLD=benches/triton/picks/carver-<commit>-<gpu>-{set}.json.gz MOESET=holdout7 TUNE=model/tpN \
#   PROBES="--experts 128 --topk 6 ...;--experts ..." bash benches/device-holdout.sh
# OLD may name the set as {set} (holdout16, ...) and the GPU as {gpu}, MOEARGS the GPU as {gpu};
# the stored picks are gzipped (`nvmmh_picks.py --out X.json`, then `gzip X.json`);
# one SHAPES file per dense run. GPU=auto plans for the card the machine has.
set -u
cd "$(dirname "$0")/.."
G=${GPU:-h100}
if [ "$G" = auto ]; then
  # The lent machine may be either card: plan for the one that is there.
  if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then G=h200; else G=h100; fi
fi
echo "planning for $G ($(nvidia-smi --query-gpu=name --format=csv,noheader))"
export PYTHONUNBUFFERED=1
for shapes in ${SHAPES:-}; do
  set_name=$(basename "$shapes" -shapes.json)
  old=${OLD:+${OLD//\{set\}/$set_name}}
  old=${old//\{gpu\}/$G}
  timeout ${DENSE_TIMEOUT_S:-240} python3 benches/triton/harness.py --shapes "$shapes" \
    --carver-bin target/calib/carver --carver-args "--arch $G" ${old:+--picks "previous=$old"} \
    --nvmmh-picks "benches/triton/picks/nvmmh-$G-sxm-$set_name.json.gz" \
    --out "/tmp/dense-$set_name" > "/tmp/dense-$set_name.log" 2>&1
  echo "dense $set_name rc=$?"
  cp "/tmp/dense-$set_name.log" "/tmp/dense-$set_name/" 2>/dev/null
  tar -C /tmp -czf "$OUT/dense-$set_name.tar.gz" "dense-$set_name"
done
if [ -n "${MOESET:-}" ]; then
  mkdir -p /tmp/moe
  OUT=/tmp/moe WHEEL=$(ls target/moe-wheel/carver-*.whl) HARNESS_TIMEOUT_S=${MOE_TIMEOUT_S:-330} \
    bash benches/moe/run.sh --set "$MOESET" --sweep-configs 200 --budget-s ${MOE_BUDGET_S:-230} \
    --tune-model "${TUNE:-none}" --tune-timeout 120 ${MOEARGS:+${MOEARGS//\{gpu\}/$G}} > /tmp/moe-run.log 2>&1
  echo "moe rc=$?"
  gzip -f /tmp/moe/moe_results.json 2>/dev/null
  tar -C /tmp -czf "$OUT/moe.tar.gz" moe
  tail -40 /tmp/moe/harness.log
fi
if [ -n "${PROBES:-}" ]; then
  mkdir -p /tmp/probes
  site=$(mktemp -d /tmp/carver-probe-site.XXXXXX)
  python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" \
    "$(ls target/moe-wheel/carver-*.whl)" 2>&1 | tail -3
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  i=0
  IFS=';' read -ra probe_args <<< "$PROBES"
  for args in "${probe_args[@]}"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    timeout ${PROBE_TIMEOUT_S:-120} python3 benches/moe/probe_gemms.py $args --out "/tmp/probes/probe$i.json" \
      2>&1 | tee -a /tmp/probes/probes.log
  done
  tar -C /tmp -czf "$OUT/probes.tar.gz" probes
fi
for shapes in ${SHAPES:-}; do
  tail -22 "/tmp/dense-$(basename "$shapes" -shapes.json).log"
done
