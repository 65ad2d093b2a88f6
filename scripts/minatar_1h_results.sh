#!/bin/bash
# MinAtar at equal wall time (issue 31; docs/RESULTS.md): configs/minatar_<game>_<algo>_1h.json
# (max_wall_s 3600: one hour) for the five games and the given seeds (default 1 2 3),
# one run after another on both cores (--threads 2), into
# runs/minatar_1h/<game>_<algo>_s<seed>; finished runs are skipped and interrupted ones
# resumed (a run's wall_s sums its parts, so the hour holds across a resume). Prints the
# table of final evaluations (100 fresh episodes, sticky actions on) beside the MinAtar
# paper's DQN and AC(lambda) at 5M frames, and draws each game's curves against wall
# time (the elite's validation return, a moving average of 10 generations, mean and
# band over the seeds) with those levels into docs/img/minatar_1h_<game>.png (another
# ALGO than ga: minatar_1h_<game>_<algo>.png).
# A finished run is archived in docs/data/minatar_1h/<game>_<algo>_s<seed> (its summary
# and, of its metrics, the keys the table and curves read), kept in git as runs/ is not:
# the table and the curves are drawn from the archive, so seeds run in different
# sessions (fresh checkouts) add up.
#
#   scripts/minatar_1h_results.sh [ALGO [SEED ...]]   (ALGO: ga, or ga_rank1 for Breakout;
#                                                      GAMES="breakout ..." limits the games)
set -eu
cd "$(dirname "$0")/.."
nevo=${NEVO:-build/nevo}
[ -x "$nevo" ] || make -s
algo=${1:-ga}
shift || true
seeds=${*:-1 2 3}
games=${GAMES:-breakout asterix freeway space_invaders seaquest}
declare -A DQN=([asterix]=17 [breakout]=10 [freeway]=50 [seaquest]=20 [space_invaders]=43)
declare -A AC=([asterix]=19 [breakout]=17.5 [freeway]=47.5 [seaquest]=15.5 [space_invaders]=185)
arch=docs/data/minatar_1h
# the run's summary and its metrics' generation, frames, wall_s and fitness keys
archive() {
    local d=$1 a=$arch/$(basename "$1")
    [ -f "$d/summary.json" ] || return 0
    mkdir -p "$a.tmp"
    cp "$d/summary.json" "$a.tmp/summary.json"
    awk '/^\{"generation"/ {
        out = ""
        n = split("generation frames wall_s best_fitness mean_fitness elite_validation_mean", k, " ")
        for (i = 1; i <= n; i++)
            if (match($0, "\"" k[i] "\": [-0-9.e+]+")) out = out (out ? ", " : "") substr($0, RSTART, RLENGTH)
        print "{" out "}"
    }' "$d/metrics.jsonl" > "$a.tmp/metrics.jsonl"
    rm -rf "$a" && mv "$a.tmp" "$a"
}
mkdir -p runs/minatar_1h "$arch"
for g in $games; do for seed in $seeds; do
    d=runs/minatar_1h/${g}_${algo}_s$seed
    [ -f "$arch/$(basename "$d")/summary.json" ] && continue
    if [ -f "$d/summary.json" ]; then :
    elif [ -f "$d/checkpoint.bin" ]; then "$nevo" train --resume "$d" --threads 2 --quiet >"$d.log" 2>&1
    else "$nevo" train "configs/minatar_${g}_${algo}_1h.json" seed="$seed" --threads 2 --out "$d" --quiet >"$d.log" 2>&1; fi
    archive "$d"
done; done

field() { grep -o "\"$1\": [-0-9.e+]*" "$2" | head -1 | awk '{print $2}'; }
echo "| game | DQN at 5M | AC(lambda) at 5M | $algo, 1 h, mean of seeds | seeds | frames per run | wall s per run |"
echo "|---|---|---|---|---|---|---|"
for g in $games; do
    rets="" runs=() sum=0 n=0 frames="" walls="" done_seeds=""
    for seed in $seeds; do
        s=$arch/${g}_${algo}_s$seed/summary.json
        [ -f "$s" ] || continue
        r=$(awk -v r="$(field eval_return_mean "$s")" 'BEGIN { printf "%.2f", r }')
        rets="$rets${rets:+ / }$r"
        sum=$(awk -v a="$sum" -v b="$r" 'BEGIN { print a + b }')
        n=$((n + 1))
        frames="$frames${frames:+, }$(awk -v f="$(field frames "$s")" 'BEGIN { printf "%.0fM", f / 1e6 }')"
        walls="$walls${walls:+, }$(awk -v w="$(field wall_s "$s")" 'BEGIN { printf "%.0f", w }')"
        runs+=("$arch/${g}_${algo}_s$seed=$algo")
        done_seeds="$done_seeds${done_seeds:+, }$seed"
    done
    [ "$n" -gt 0 ] || continue
    echo "| $g | ${DQN[$g]} | ${AC[$g]} | $(awk -v a="$sum" -v n="$n" 'BEGIN { printf "%.2f", a / n }') | $rets | $frames | $walls |"
    "$nevo" plot curves "${runs[@]}" --x wall_s --y elite_validation_mean --smooth 10 \
        --ref "DQN at 5M=${DQN[$g]}" --ref "AC(0.8) at 5M=${AC[$g]}" \
        --title "$algo on MinAtar $g, one hour on 2 cores (seed$([ "$n" = 1 ] || echo s) $done_seeds)" \
        --out "docs/img/minatar_1h_$g$([ "$algo" = ga ] || echo "_$algo").png" >/dev/null
done
