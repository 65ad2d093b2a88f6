#!/usr/bin/env bash
# Low-rank ES (es.rank, EGGROLL) against full-rank ES on the shipped MinAtar and MuJoCo
# ES configs, at the configs' own budgets: each config at es.rank = 0 (full rank) and
# each rank given, seeds 1..N, one thread per run (the table in docs/RESULTS.md,
# "Low-rank ES"). Prints one line per run and a mean per config and rank. A rank
# written with an f (1f) runs its members through the factored forward (es.factored).
#   scripts/lowrank_results.sh [SEEDS] [RANKS] [CONFIG ...]
# Defaults: 2 seeds, ranks "1", configs minatar_breakout_es, mujoco_halfcheetah_es,
# mujoco_hopper_es. Runs go to runs/lowrank/<config>-r<rank>-s<seed>; NEVO (default
# build/nevo) is the command.
set -eu
cd "$(dirname "$0")/.."
NEVO=${NEVO:-build/nevo}
SEEDS=${1:-2}
RANKS=${2:-1}
shift 2 || shift $# || true
CONFIGS=("$@")
[ ${#CONFIGS[@]} -eq 0 ] && CONFIGS=(configs/minatar_breakout_es.json configs/mujoco_halfcheetah_es.json
                                    configs/mujoco_hopper_es.json)
[ -x "$NEVO" ] || make -s
for cfg in "${CONFIGS[@]}"; do
  name=$(basename "$cfg" .json)
  for rank in 0 $RANKS; do
    sum=0
    for seed in $(seq 1 "$SEEDS"); do
      out=runs/lowrank/$name-r$rank-s$seed
      rm -rf "$out"
      line=$("$NEVO" train "$cfg" seed="$seed" es.rank="${rank%f}" es.factored="$([ "${rank%f}" = "$rank" ] &&
             echo false || echo true)" --threads 1 --out "$out" --quiet | tail -1)
      ret=$(printf '%s' "$line" | sed -n 's/.*"eval_return_mean": \([-0-9.e+]*\).*/\1/p')
      frames=$(printf '%s' "$line" | sed -n 's/.*"frames": \([0-9]*\).*/\1/p')
      wall=$(printf '%s' "$line" | sed -n 's/.*"wall_s": \([0-9.]*\).*/\1/p')
      echo "$name rank $rank seed $seed: eval_return_mean $ret ($frames frames, ${wall} s)"
      sum=$(awk -v a="$sum" -v b="$ret" 'BEGIN { print a + b }')
    done
    awk -v n="$name" -v r="$rank" -v s="$sum" -v k="$SEEDS" \
      'BEGIN { printf "%s rank %s: mean over %d seeds %.2f\n", n, r, k, s / k }'
  done
done
