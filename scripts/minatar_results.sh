#!/bin/bash
# The MinAtar results (docs/RESULTS.md): configs/minatar_<game>_{ga,es}.json for the
# five games and the given seeds (default 1), one run after another on all cores, into
# runs/minatar/<game>_<algo>_s<seed>; finished runs are skipped and interrupted ones
# resumed. Then writes each run's learning curve as CSV (frames, generation, elite
# validation mean, best and mean fitness) to docs/data/minatar/, prints the table of
# final evaluations and draws the curves into runs/minatar/<game>.png.
#
#   scripts/minatar_results.sh [SEED ...]
set -eu
cd "$(dirname "$0")/.."
nevo=${NEVO:-build/nevo}
[ -x "$nevo" ] || make -s
seeds=${*:-1}
games="breakout asterix freeway space_invaders seaquest"
mkdir -p runs/minatar docs/data/minatar
for seed in $seeds; do for a in ga es; do for g in $games; do
    d=runs/minatar/${g}_${a}_s$seed
    [ -f "$d/summary.json" ] && continue
    if [ -f "$d/checkpoint.bin" ]; then "$nevo" train --resume "$d" >"$d.log" 2>&1
    else "$nevo" train "configs/minatar_${g}_$a.json" seed="$seed" --out "$d" >"$d.log" 2>&1; fi
done; done; done

field() { grep -o "\"$1\": [-0-9.e+]*" "$2" | head -1 | awk '{print $2}'; }
echo "| game | algo | seed | frames | generations | final eval return (100 episodes) | wall s |"
echo "|---|---|---|---|---|---|---|"
for g in $games; do for a in ga es; do for seed in $seeds; do
    d=runs/minatar/${g}_${a}_s$seed
    [ -f "$d/summary.json" ] || continue
    awk 'function get(k,   m) { m = index($0, "\"" k "\": "); if (!m) return "";
                                split(substr($0, m + length(k) + 4), t, /[,}]/); return t[1] }
         BEGIN { print "frames,generation,elite_validation_mean,best_fitness,mean_fitness" }
         { print get("frames") "," get("generation") "," get("elite_validation_mean") "," \
                 get("best_fitness") "," get("mean_fitness") }' "$d/metrics.jsonl" >"docs/data/minatar/${g}_${a}_s$seed.csv"
    s=$d/summary.json
    echo "| $g | $a | $seed | $(field frames $s) | $(field generations $s) | $(field eval_return_mean $s) | $(field wall_s $s) |"
done; done; done
