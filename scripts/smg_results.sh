#!/usr/bin/env bash
# Safe mutations against plain mutation at equal evaluations: each config of the
# experiment, seeds 1..N, one thread each; prints one line per run and a mean per config
# (the tables in docs/RESULTS.md, "Safe mutations").
#   scripts/smg_results.sh [SEEDS] [CONFIG ...] [KEY=VALUE ...]
# Defaults: 5 seeds of configs/smg_pendulum_deep_{plain,sum,so}.json. KEY=VALUE
# arguments override every run's config (as `nevo train` takes them: ga.sigma=0.3), for a
# sweep. Runs go to runs/smg/<config>[-<overrides>]-s<seed>; NEVO (default build/nevo) is
# the command.
set -eu
cd "$(dirname "$0")/.."
NEVO=${NEVO:-build/nevo}
SEEDS=${1:-5}
shift || true
CONFIGS=()
OVERRIDES=()
for a in "$@"; do
  case $a in
    *=*) OVERRIDES+=("$a") ;;
    *) CONFIGS+=("$a") ;;
  esac
done
[ ${#CONFIGS[@]} -eq 0 ] && CONFIGS=(configs/smg_pendulum_deep_plain.json configs/smg_pendulum_deep_sum.json
                                    configs/smg_pendulum_deep_so.json)
[ -x "$NEVO" ] || make -s
tag=""
[ ${#OVERRIDES[@]} -gt 0 ] && tag="-$(printf '%s-' "${OVERRIDES[@]}" | tr -c 'A-Za-z0-9.=_-' '_' | sed 's/-$//')"
for cfg in "${CONFIGS[@]}"; do
  name=$(basename "$cfg" .json)$tag
  sum=0
  for seed in $(seq 1 "$SEEDS"); do
    out=runs/smg/$name-s$seed
    rm -rf "$out"
    line=$("$NEVO" train "$cfg" seed="$seed" ${OVERRIDES[@]+"${OVERRIDES[@]}"} --threads 1 --out "$out" --quiet | tail -1)
    ret=$(printf '%s' "$line" | sed -n 's/.*"eval_return_mean": \([-0-9.e+]*\).*/\1/p')
    wall=$(printf '%s' "$line" | sed -n 's/.*"wall_s": \([0-9.]*\).*/\1/p')
    echo "$name seed $seed: eval_return_mean $ret (${wall} s)"
    sum=$(awk -v a="$sum" -v b="$ret" 'BEGIN { print a + b }')
  done
  awk -v n="$name" -v s="$sum" -v k="$SEEDS" 'BEGIN { printf "%s: mean over %d seeds %.3f\n", n, k, s / k }'
done
