#!/usr/bin/env bash
# What a run across MPI ranks sends and waits for, per generation, at N = 1..8 ranks
# (docs/BENCHMARKS.md, "Across MPI ranks"; docs/SCALING.md), and what shares weighted
# by throughput gain over equal ones when one rank is slowed down.
#
#   scripts/mpi_scaling.sh [OUT_DIR]     (default runs/mpi_scaling; about 15 minutes on 2 cores)
#
# Each run is `mpirun -np N build/nevo train CONFIG` with one thread per rank; its
# comm.jsonl holds, per generation and rank, the bytes sent, the seconds inside
# collective calls (waiting for slower ranks included), the seconds evaluating and the
# generation's seconds. The tables give per-rank means over the generations after the
# first. On a machine with fewer cores than ranks the ranks share cores, so the
# communication share there is mostly waiting for ranks that were descheduled: read
# the bytes, and the shares at N <= cores.
#
# Straggler: 2 ranks pinned to cores 0 and 1 (taskset), a busy loop pinned beside rank
# 1 so that it runs at about half speed (ES on Hopper, population 128); mean generation
# seconds with equal shares (NEVO_STATIC_SHARDS=1) and with shares weighted by each
# rank's measured throughput.
set -eu
cd "$(dirname "$0")/.."
OUT=${1:-runs/mpi_scaling}
NEVO=build/nevo
MPIRUN="mpirun --allow-run-as-root --oversubscribe -q"
make -s "$NEVO" >&2
mkdir -p "$OUT"

# name config overrides
RUNS=(
  "ga_breakout configs/minatar_breakout_ga.json population=1024 generations=6 max_frames=0 eval_episodes=1"
  "es_breakout configs/minatar_breakout_es.json population=1024 generations=6 max_frames=0 eval_episodes=1"
  "ga_hopper configs/mujoco_hopper_es.json algo=ga population=128 generations=4 max_frames=0 eval_episodes=1 ga.truncation=16"
  "es_hopper configs/mujoco_hopper_es.json population=128 generations=4 max_frames=0 eval_episodes=1"
)
for spec in "${RUNS[@]}"; do
  read -r name cfg over <<<"$spec"
  for n in 1 2 3 4 5 6 7 8; do
    d="$OUT/${name}_n$n"
    rm -rf "$d"
    # shellcheck disable=SC2086
    $MPIRUN -np "$n" "$NEVO" train "$cfg" $over --threads 1 --quiet --out "$d" > /dev/null
  done
done

python3 - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
print("| run | N | bytes sent / rank / gen | comm s / gen | gen s | comm share |")
print("|---|---|---|---|---|---|")
for name in ["ga_breakout", "es_breakout", "ga_hopper", "es_hopper"]:
    for n in range(1, 9):
        d = os.path.join(out, f"{name}_n{n}")
        path = os.path.join(d, "comm.jsonl")
        if n == 1 or not os.path.exists(path):
            m = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
            ws = [m[i]["wall_s"] - m[i - 1]["wall_s"] for i in range(2, len(m))]
            print(f"| {name} | 1 | 0 | 0 | {sum(ws)/len(ws):.3f} | 0 |")
            continue
        L = [json.loads(l) for l in open(path)][1:]
        b = sum(sum(l["bytes_sent"]) / n for l in L) / len(L)
        c = sum(sum(l["comm_s"]) / n for l in L) / len(L)
        g = sum(max(l["generation_s"]) for l in L) / len(L)
        print(f"| {name} | {n} | {b:,.0f} | {c:.3f} | {g:.3f} | {c/g:.2f} |")
EOF

# the straggler
echo
echo "| shares | mean generation s | rank 0 tasks | rank 1 tasks |"
echo "|---|---|---|---|"
taskset -c 1 sh -c 'while :; do :; done' &
HOG=$!
trap 'kill $HOG 2>/dev/null' EXIT
for mode in static balanced; do
  d="$OUT/straggler_$mode"
  rm -rf "$d"
  export NEVO_STATIC_SHARDS=$([ "$mode" = static ] && echo 1 || echo 0)
  # shellcheck disable=SC2086
  $MPIRUN -x NEVO_STATIC_SHARDS -np 1 taskset -c 0 "$NEVO" train configs/mujoco_hopper_es.json population=128 \
      generations=6 max_frames=0 eval_episodes=1 --threads 1 --quiet --out "$d" : \
    -np 1 taskset -c 1 "$NEVO" train configs/mujoco_hopper_es.json population=128 \
      generations=6 max_frames=0 eval_episodes=1 --threads 1 --quiet --out "$d" > /dev/null
  python3 - "$d" "$mode" <<'EOF'
import json, sys
L = [json.loads(l) for l in open(sys.argv[1] + "/comm.jsonl")][2:]
g = sum(max(l["generation_s"]) for l in L) / len(L)
t0 = sum(l["tasks"][0] for l in L) / len(L)
t1 = sum(l["tasks"][1] for l in L) / len(L)
print(f"| {sys.argv[2]} | {g:.3f} | {t0:.0f} | {t1:.0f} |")
EOF
done
unset NEVO_STATIC_SHARDS
cmp <(sed 's/"wall_s": [0-9.]*//' "$OUT/straggler_static/metrics.jsonl") \
    <(sed 's/"wall_s": [0-9.]*//' "$OUT/straggler_balanced/metrics.jsonl") \
  && echo "(the two runs' metrics are the same bits)"
