#!/bin/sh
# Regenerates the seed corpus of the policy and checkpoint fuzz targets from tiny runs
# of the committed configs (a few KB each): CartPole GA, Pendulum ES (observation
# normalisation, continuous actions), hard-maze GA-NS and NSRA-ES (novelty archives,
# ES meta-population) and MinAtar Breakout GA (a conv layer), and of the task-set, IDX
# and model targets. Run from the repository root after a change of the file formats:
# fuzz/make_corpus.sh [path/to/nevo] [path/to/fuzz_tasks] [path/to/fuzz_idx] [path/to/fuzz_model]
set -e
nevo=$(realpath "${1:-build/nevo}")
root=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # NAME CONFIG OVERRIDES...
    name=$1 config=$2
    shift 2
    (cd "$tmp" && "$nevo" train --quiet --threads 1 --out "$name" "$root/configs/$config" generations=2 \
        eval_episodes=1 max_frames=0 'policy.hidden=[4]' "$@" >/dev/null)
    cp "$tmp/$name/policy.nevo" "$root/fuzz/corpus/policy/$name.nevo"
    cp "$tmp/$name/checkpoint.bin" "$root/fuzz/corpus/checkpoint/$name.bin"
}
ga="ga.truncation=2 ga.validation_candidates=2 ga.validation_episodes=1"
run cartpole_ga cartpole_ga.json population=8 $ga
run pendulum_es pendulum_es.json population=4 es.center_episodes=1
run maze_ga_ns maze_ga_ns.json population=6 $ga
run maze_nsra_es maze_nsra_es.json population=4 ns.meta_population=2 es.center_episodes=1
run breakout_conv_ga minatar_breakout_ga.json population=4 'policy.hidden=[2]' 'policy.conv_filters=[1]' \
    max_episode_steps=50 $ga
# task sets: the fuzz target writes its own (a GA's and an ES's first rounds) where it
# is built (fuzz/fuzz.mk: make fuzz-build)
tasks=$(realpath "${2:-build-fuzz/fuzz_tasks}")
mkdir -p "$root/fuzz/corpus/tasks"
NEVO_FUZZ_WRITE_CORPUS="$root/fuzz/corpus/tasks" "$tasks" >/dev/null
# IDX dataset files: the IDX target writes its own (small images and labels, plain and
# gzipped)
idx=$(realpath "${3:-build-fuzz/fuzz_idx}")
mkdir -p "$root/fuzz/corpus/idx"
NEVO_FUZZ_WRITE_CORPUS="$root/fuzz/corpus/idx" "$idx" >/dev/null
# MuJoCo model files: the model target's own seeds, and nevo's models
model=$(realpath "${4:-build-fuzz/fuzz_model}")
mkdir -p "$root/fuzz/corpus/model"
NEVO_FUZZ_WRITE_CORPUS="$root/fuzz/corpus/model" "$model" >/dev/null
cp "$root"/models/mujoco/hopper.xml "$root"/models/mujoco/humanoid.xml "$root/fuzz/corpus/model/"
