#!/bin/bash
# What limits the GA on MinAtar (issue 31; docs/RESULTS.md "What limits the GA"): the
# one-hour config of a game, configs/minatar_<game>_ga_1h.json, with one setting changed
# at a time, each for the same number of frames (FRAMES, default 30M: about 4.5 minutes
# on one core) and the given seeds (default 1 2 3), JOBS runs at once on one thread each
# (default 2), into runs/ablations/<game>/<setting>_s<seed>. Finished runs are skipped and
# interrupted ones resumed (bit-identically: the budget is frames, not wall time).
# Prints each setting's final evaluation (100 fresh episodes, sticky actions on): every
# seed, their mean and standard deviation, and the mean wall time of a run.
#
#   scripts/minatar_ablations.sh [GAME [SEED ...]]    (default breakout; SETTINGS="base ep1" limits them)
set -eu
cd "$(dirname "$0")/.."
nevo=${NEVO:-build/nevo}
[ -x "$nevo" ] || make -s
game=${1:-breakout}
shift || true
seeds=${*:-1 2 3}
frames=${FRAMES:-30000000}
jobs=${JOBS:-2}

# name and overrides of the base config; "base" changes nothing (xargs -L reads a line
# that ends in a blank as continued, so no line ends in one)
declare -A SET=(
    [base]=""
    [ep1]="episodes=1"
    [ep16]="episodes=16"
    [no_crn]="ga.shared_episodes=false"
    [sigma_const]="ga.sigma_decay=1"
    [sigma_005]="ga.sigma=0.005 ga.sigma_decay=1"
    [no_revalidation]="ga.validation_episodes=0"
    [pop256]="population=256"
    [trunc50]="ga.truncation=50"
    [wide256]="policy.hidden=[256]"
    [deep2x128]="policy.hidden=[128,128]"
    [rank1]="ga.rank=1"
    [rank1f]="ga.rank=1 ga.factored=true"
)
order="base ep1 ep16 no_crn sigma_const sigma_005 no_revalidation pop256 trunc50 wide256 deep2x128 rank1 rank1f"
settings=${SETTINGS:-$order}
for s in $settings; do [ -n "${SET[$s]+x}" ] || { echo "minatar_ablations: unknown setting '$s' (known: $order)" >&2; exit 2; }; done

root=runs/ablations/$game
mkdir -p "$root"
for s in $settings; do for seed in $seeds; do
    d=$root/${s}_s$seed
    [ -f "$d/summary.json" ] && continue
    if [ -f "$d/checkpoint.bin" ]; then echo "$d --resume"; continue; fi
    rm -rf "$d"
    echo "$d configs/minatar_${game}_ga_1h.json seed=$seed max_frames=$frames max_wall_s=0${SET[$s]:+ ${SET[$s]}}"
done; done | xargs -r -P "$jobs" -L 1 sh -c 'd=$1; c=$2; shift 2
    if [ "$c" = --resume ]; then set -- --resume "$d"; else set -- "$c" "$@" --out "$d"; fi
    nice "$0" train "$@" --threads 1 --quiet >>"$d.log" 2>&1 || echo "minatar_ablations: $d failed, see $d.log" >&2' "$nevo"

field() { grep -o "\"$1\": [-0-9.e+]*" "$2" | head -1 | awk '{print $2}'; }
echo "| setting ($game, $((frames / 1000000))M frames) | changed | per seed | mean | sd | wall s |"
echo "|---|---|---|---|---|---|"
for s in $settings; do
    vals="" walls=""
    for seed in $seeds; do
        f=$root/${s}_s$seed/summary.json
        [ -f "$f" ] || continue
        vals="$vals $(field eval_return_mean "$f")"
        walls="$walls $(field wall_s "$f")"
    done
    [ -n "$vals" ] || continue
    echo "$s|${SET[$s]:-(the 1 h config)}|$vals|$walls" | awk -F'|' '{
        n = split($3, v, " "); split($4, w, " "); m = 0; ws = 0
        for (i = 1; i <= n; i++) { m += v[i]; ws += w[i]; per = per (i > 1 ? " / " : "") sprintf("%.2f", v[i]) }
        m /= n; sd = 0
        for (i = 1; i <= n; i++) sd += (v[i] - m) ^ 2
        sd = n > 1 ? sqrt(sd / (n - 1)) : 0
        printf "| %s | %s | %s | %.2f | %.2f | %.0f |\n", $1, $2, per, m, sd, ws / n }'
done
