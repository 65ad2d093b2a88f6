#!/usr/bin/env bash
# V-trace (and R2D2, spec 6: its LSTM acting) on MinAtar Breakout with the acting forward
# on the cpu and the cuda backend, sync (the same bits on both) and async, on all the
# machine's cores:
# step 5 of dev/cuda/device_run.sh, or alone: `dev/cuda/stage.sh` here, then
# `BIN=.devrun bash dev/cuda/vtrace_run.sh` on the GPU machine.
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-build-cuda}
[ -d "$BIN/lib" ] && export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
RUNS=$(mktemp -d)
T=$(nproc)
vrate() { python3 -c '
import json,sys
m=[json.loads(l) for l in open(sys.argv[1])]
if len(m) < 2: sys.exit(print("n/a: fewer than 2 generations"))
f=m[-1]["frames"]-m[0]["frames"]; t=m[-1]["wall_s"]-m[0]["wall_s"]
r=m[-1]["mean_fitness"]
print(f"{f/t:.4g} frames/s over {len(m)-1} generations, return {r}")' "$1" 2>&1 | tail -1; }
# a run's metrics but its timings (wall_s, frames_per_s, updates_per_s)
vstrip() { sed -E 's/"(wall_s|frames_per_s|updates_per_s)": [0-9.e+-]*,//g' "$1"; }
# the config's 32 envs, then 256 (an 8x larger acting batch); then 32 with unrolls of 80,
# a quarter of the updates a frame (does the cuda backend's cost go with the updates or
# with the steps?); sync on a fixed frame budget, async on a fixed wall budget; R2D2
# sync (VT_SPECS: the specs' numbers in that list, e.g. "1 2 5")
specs=("vtrace sync 32 max_frames=320000" "vtrace sync 256 max_frames=1280000"
       "vtrace sync 32 max_frames=640000 rl.unroll=80" "vtrace async 32 max_wall_s=15"
       "vtrace async 256 max_wall_s=15 rl.queue=512" "r2d2 sync 32 max_frames=100000")
for i in ${VT_SPECS:-1 2 3 4 5 6}; do
    [[ $i =~ ^[1-6]$ ]] || { echo "VT_SPECS: $i is not a spec's number (1-6)"; continue; }
    spec=${specs[$((i - 1))]}
    set -- $spec
    algo=$1
    shift
    key=$(echo "$spec" | tr ' =' '__')
    for be in cpu cuda; do
        d=$RUNS/vt_${key}_$be
        timeout 60 "$BIN/nevo" train configs/minatar_breakout_$algo.json rl.mode=$1 rl.envs=$2 $3 ${4:-} \
            eval_episodes=10 --backend $be --threads "$T" --out "$d" --quiet > "$d.log" 2>&1
        echo "$algo $1, $2 envs${4:+, $4}, $be: $(vrate "$d/metrics.jsonl")"
    done
    [ "$1" = sync ] || continue
    if cmp -s <(vstrip "$RUNS/vt_${key}_cpu/metrics.jsonl") <(vstrip "$RUNS/vt_${key}_cuda/metrics.jsonl"); then
        echo "   metrics (all but timings) identical on cpu and cuda"
    else
        echo "   metrics DIFFER between cpu and cuda"
    fi
done
rm -rf "$RUNS"
