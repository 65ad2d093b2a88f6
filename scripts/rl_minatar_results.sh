#!/usr/bin/env bash
# An actor-learner (algo vtrace or r2d2) on the MinAtar games at 5M frames
# (configs/minatar_<game>_<algo>.json, sync mode), seeds 1-3, and the classic-control
# configs; prints docs/RESULTS.md's table: the final greedy policy's mean return over 100
# fresh episodes (sticky actions on), each seed's, and the wall time of each run; and the
# learning curves docs/img/<algo>_minatar_<game>.png (the seeds' mean training return
# against frames, with the paper's DQN and AC(lambda) levels at 5M frames). Runs already
# finished in OUT_DIR are kept; GAMES limits the games.
#
#   scripts/rl_minatar_results.sh vtrace [OUT_DIR]   (default runs/vtrace; about 30 minutes on 2 cores)
#   GAMES="breakout seaquest" scripts/rl_minatar_results.sh r2d2   (about 40 minutes a run on 2 cores)
set -eu
cd "$(dirname "$0")/.."
ALGO=${1:?usage: scripts/rl_minatar_results.sh vtrace|r2d2 [OUT_DIR]}
OUT=${2:-runs/$ALGO}
GAMES=${GAMES:-asterix breakout freeway seaquest space_invaders}
case $ALGO in vtrace) NAME=V-trace ;; r2d2) NAME=R2D2 ;; *) echo "algo vtrace or r2d2, not $ALGO" >&2; exit 2 ;; esac
make -s build/nevo >&2
mkdir -p "$OUT"
for cfg in cartpole acrobot; do
  d="$OUT/${cfg}"
  [ -f "$d/summary.json" ] || { rm -rf "$d"; build/nevo train "configs/${cfg}_${ALGO}.json" --out "$d" --quiet > /dev/null; }
done
for game in $GAMES; do
  for seed in 1 2 3; do
    d="$OUT/${game}_s$seed"
    [ -f "$d/summary.json" ] || { rm -rf "$d"; build/nevo train "configs/minatar_${game}_${ALGO}.json" seed=$seed --out "$d" --quiet > /dev/null; }
  done
done
declare -A DQN=([asterix]=17 [breakout]=10 [freeway]=50 [seaquest]=20 [space_invaders]=43)
declare -A AC=([asterix]=19 [breakout]=17.5 [freeway]=47.5 [seaquest]=15.5 [space_invaders]=185)
for game in $GAMES; do
  build/nevo plot curves "$OUT/${game}_s1=$NAME" "$OUT/${game}_s2=$NAME" "$OUT/${game}_s3=$NAME" \
    --y mean_fitness --ref "DQN at 5M=${DQN[$game]}" --ref "AC(0.8) at 5M=${AC[$game]}" \
    --title "$NAME on MinAtar $game (3 seeds, training episodes' mean return)" \
    --out "docs/img/${ALGO}_minatar_$game.png" > /dev/null
done
python3 - "$OUT" "$NAME" $GAMES <<'EOF'
import json, os, statistics, sys
out, name, games = sys.argv[1], sys.argv[2], sys.argv[3:]
def summ(d): return json.load(open(os.path.join(out, d, "summary.json")))
for cfg in ["cartpole", "acrobot"]:
    s = summ(cfg)
    print(f"{cfg}: eval {s['eval_return_mean']:.1f} +- {s['eval_return_std']:.1f} after {s['frames']/1e6:.2f}M frames, {s['wall_s']:.1f} s")
print()
print(f"| game | DQN 5M | AC(lambda) | {name} 5M, mean of 3 seeds | seeds | wall s per run |")
print("|---|---|---|---|---|---|")
ref = {"asterix": (17, 19), "breakout": (10, 17.5), "freeway": (50, 47.5), "seaquest": (20, 15.5), "space_invaders": (43, 185)}
for game in games:
    S = [summ(f"{game}_s{s}") for s in (1, 2, 3)]
    r = [x["eval_return_mean"] for x in S]
    w = statistics.mean(x["wall_s"] for x in S)
    print(f"| {game} | {ref[game][0]} | {ref[game][1]} | {statistics.mean(r):.2f} | {', '.join(f'{v:.2f}' for v in r)} | {w:.0f} |")
EOF
