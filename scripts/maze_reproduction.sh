#!/bin/bash
# The hard-maze reproduction (docs/RESULTS.md): GA, ES, GA-NS, NS-ES, NSR-ES and
# NSRA-ES from configs/maze_*.json, each over seeds 1..N (default 10), under the same
# frame budget. Runs go to runs/maze/<config>_s<seed>; finished runs are skipped and
# interrupted ones resumed, so the script can be stopped and started again. Prints the
# table (a run reaches the goal when any individual it evaluated ended within 10 units
# of it) and draws the final populations of seed 1 into runs/maze/behaviours.png.
#
#   scripts/maze_reproduction.sh [SEEDS] [PARALLEL]   (defaults 10 and the CPU count)
set -eu
cd "$(dirname "$0")/.."
seeds=${1:-10}
par=${2:-$(nproc)}
nevo=${NEVO:-build/nevo}
[ -x "$nevo" ] || make -s
configs="maze_ga maze_es maze_ga_ns maze_ns_es maze_nsr_es maze_nsra_es"
mkdir -p runs/maze
for c in $configs; do for s in $(seq 1 "$seeds"); do echo "$c $s"; done; done |
    xargs -P "$par" -L 1 sh -c '
        d=runs/maze/$0_s$1
        if [ -f "$d/summary.json" ]; then exit 0; fi
        if [ -f "$d/checkpoint.bin" ]; then '"$nevo"' train --resume "$d" --threads 1 >"$d.log" 2>&1
        else '"$nevo"' train configs/$0.json seed=$1 --out "$d" --threads 1 >"$d.log" 2>&1; fi
        echo "$d: $(grep -o "\"best_fitness\": [-0-9.e]*" "$d/summary.json")"'

# frames at which a run first evaluated an individual within 10 units of the goal
first_success() {
    awk -F'"frames": |, "episodes"|"best_fitness": |, "mean_fitness"' \
        '{ if ($4 + 0 > -10) { print $2; exit } }' "$1/metrics.jsonl"
}
echo
echo "| algorithm | reached the goal | median frames to the goal | closest approach, median |"
echo "|---|---|---|---|"
for c in $configs; do
    n=0; ok=0; frames=""; dists=""
    for s in $(seq 1 "$seeds"); do
        d=runs/maze/${c}_s$s
        [ -f "$d/summary.json" ] || continue
        n=$((n + 1))
        f=$(first_success "$d")
        if [ -n "$f" ]; then ok=$((ok + 1)); frames="$frames $f"; fi
        b=$(grep -o '"best_fitness": [-0-9.e]*' "$d/summary.json" | awk '{print -$2}')
        dists="$dists $b"
    done
    med() { echo "$@" | tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {if (NR) printf "%.3g", (a[int((NR+1)/2)] + a[int(NR/2)+1]) / 2; else printf "-"}'; }
    algo=$(grep -o '"algo": "[a-z-]*"' configs/$c.json | cut -d'"' -f4)
    echo "| $algo | $ok / $n | $(med $frames) | $(med $dists) |"
done
runs=""
for c in $configs; do
    label=$(grep -o '"algo": "[a-z-]*"' configs/$c.json | cut -d'"' -f4 | tr a-z A-Z)
    runs="$runs runs/maze/${c}_s1=$label"
done
"$nevo" plot behaviours $runs --size 360 --out runs/maze/behaviours.png >/dev/null &&
    echo && echo "final populations of seed 1: runs/maze/behaviours.png"
