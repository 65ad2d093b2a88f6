#!/usr/bin/env bash
# Everything the CUDA backend needs a GPU for, in one run (GPU time is scarce):
#   1. the parity tests: the cuda backend's forwards, builds and whole evaluations
#      against the CPU backend, bit for bit (tests/test_cuda.c);
#   2. `nevo bench --only gpu`: the device's FMA peak, copy and host-link bandwidth,
#      and the forward against them;
#   3. end to end, the GA on MinAtar Breakout (and Freeway, whose episodes are long from
#      the start) with the GPU and all cores against all cores alone, same config and
#      seed: frames/s, and whether the two runs' metrics are the same bits; on Breakout
#      also with rank-1 mutations run factored (ga.factored: children not built);
#   4. compute-sanitizer's memcheck over the forwards' parity tests and nevo_rows_write's;
#   5. SEED RL's V-trace on MinAtar Breakout with its acting forward on cpu and cuda;
# and between 2 and 3 the kernel variants of dev/cuda/variants.cu, checked against the
# kernels in use and timed beside them.
# Knobs: STEPS (the steps and their order, default "1 2 2b 3 4 5 sweep sass": sweep is
# GA runs over the cuda backend's slots and forward threads (SWEEP_SPECS, below), sass
# the dense kernel's instructions),
# GENS (Breakout's generations), DENSE_ROWS (the
# NEVO_CUDA_DENSE_ROWS values step 2 times, default "8 16 0"), TILED (the
# NEVO_CUDA_TILED_ROWS values step 2 then times with the default rows, default "16";
# TILED= none),
# GA_RUNS= (no GA run with
# the runs dense kernel), GA_FACTORED= (no Breakout runs of rank-1 factored children,
# ga.factored), VT_SPECS (step 5's specs, vtrace_run.sh).
# Results go to $OUT (default dev/cuda/out). Binaries come from BIN (default build-cuda;
# `dev/cuda/stage.sh` stages a CUDA=1 build with its shared libraries in .devrun/ for a
# machine without the Debian packages).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-dev/cuda/out}
RUNS=${RUNS:-$(mktemp -d)} # run directories (the device tool brings back 8 files)
BIN=${BIN:-build-cuda}
mkdir -p "$OUT"
[ -d "$BIN/lib" ] && export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log() { echo "== [${SECONDS}s] $*" | tee -a "$OUT/summary.txt"; }
THREADS=$(nproc)
GENS=${GENS:-12}

step_device() {
log "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv 2>&1 | tee -a "$OUT/summary.txt"
log "cpus: $THREADS ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"

}

step_1() {
log "1. parity tests"
NEVO_BIN="$BIN/nevo" "$BIN/nevo_tests" cuda backend_rows_write 2>&1 | tee "$OUT/tests.txt" | tail -12 |
    tee -a "$OUT/summary.txt"

}

# the default dense kernel, then each other NEVO_CUDA_DENSE_ROWS of DENSE_ROWS (0: the
# runs kernel for every call, the one-row calls too), then the tiled kernel for calls
# whose runs average TILED rows (B = 16 and 64, and every factored call: one shared
# network)
step_2() {
for spec in ${DENSE_ROWS:-8 16 0} $(for t in ${TILED-16}; do echo "8t$t"; done); do
    rows=${spec%t*} tiled=$([[ $spec == *t* ]] && echo "${spec#*t}" || echo 0)
    log "2. nevo bench --only gpu, NEVO_CUDA_DENSE_ROWS=$rows NEVO_CUDA_TILED_ROWS=$tiled"
    NEVO_CUDA_DENSE_ROWS=$rows NEVO_CUDA_TILED_ROWS=$tiled "$BIN/nevo" bench --only gpu --json \
        > "$OUT/bench_gpu_r$spec.jsonl" 2>> "$OUT/summary.txt"
    python3 - "$OUT/bench_gpu_r$spec.jsonl" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("group") != "gpu": continue
    extra = {k: r[k] for k in ("fraction_of_fma_peak", "fraction_of_copy_bandwidth", "gflops", "minatar_frames_per_s") if k in r}
    if "factored" in r["name"] and r.get("ratio") is not None: extra["of " + r["limit_name"]] = r["ratio"]
    print(f'{r["name"]:<62} {r["value"]:10.4g} {r["unit"]:<8} {extra}')
PY
done

}

step_2b() {
log "2b. kernel variants against the kernels in use (dev/cuda/variants.cu)"
if nvcc -std=c++17 -O2 -arch=sm_90 --fmad=false -prec-div=true -Isrc -Iinclude dev/cuda/variants.cu \
        -o "$RUNS/variants" > "$RUNS/variants.build" 2>&1; then
    timeout 120 "$RUNS/variants" 2>&1 | tee -a "$OUT/summary.txt"
else
    tail -5 "$RUNS/variants.build" | tee -a "$OUT/summary.txt"
fi

}

# frames/s of generations 2.. (0 and 1 include start-up, the noise table's upload)
rate() {
    python3 - "$1" "$2" <<'PY'
import json, sys
pop = int(sys.argv[2])
try: m = [json.loads(l) for l in open(sys.argv[1])]
except OSError: m = []
if len(m) < 3: print("n/a"); sys.exit()
f = m[-1]["frames"] - m[1]["frames"]; t = m[-1]["wall_s"] - m[1]["wall_s"]
print(f"{f / t:.4g} frames/s over generations 2-{len(m) - 1} ({f} frames, {t:.3g} s, "
      f"{f / (len(m) - 2) / pop:.3g} frames per episode)")
PY
}
step_3() {
# Breakout's episodes are ~10 frames at first (random paddles miss); Freeway's are 2500
for spec in "breakout 8192 $GENS" "freeway 4096 3"; do
    set -- $spec
    env=$1 pop=$2 gens=$3
    log "3. GA on minatar/$env, population $pop, $gens generations, $THREADS threads"
    # cuda_runs: NEVO_CUDA_DENSE_ROWS=0; *_f (Breakout): rank-1 mutations, factored children
    factored=$([ $env = breakout ] && echo "${GA_FACTORED-cpu_f cuda_f}")
    for be in cpu cuda ${GA_RUNS-cuda_runs} $factored; do
        d="$RUNS/ga_${env}_$be"
        rm -rf "$d"
        extra=$(case $be in *_f) echo "ga.rank=1 ga.factored=true" ;; esac)
        NEVO_CUDA_DENSE_ROWS=$([ $be = cuda_runs ] && echo 0 || echo "${NEVO_CUDA_DENSE_ROWS:-}") timeout 200 "$BIN/nevo" train \
            configs/minatar_breakout_ga_gpu.json env=minatar/$env population=$pop generations=$gens eval_episodes=10 \
            $extra --backend ${be%%_*} --threads "$THREADS" --out "$d" --quiet > "$d.log" 2>&1
        echo "$be: $(rate "$d/metrics.jsonl" $pop)" | tee -a "$OUT/summary.txt"
    done
    strip() { sed 's/"wall_s": [0-9.e+-]*,//' "$1"; }
    for pair in "cpu cuda" ${factored:+"cpu_f cuda_f"}; do
        set -- $pair
        [ -f "$RUNS/ga_${env}_$1/metrics.jsonl" ] && [ -f "$RUNS/ga_${env}_$2/metrics.jsonl" ] || continue
        if cmp -s <(strip "$RUNS/ga_${env}_$1/metrics.jsonl") <(strip "$RUNS/ga_${env}_$2/metrics.jsonl"); then
            log "   metrics (all but wall time) identical on $1 and $2"
        else
            log "   metrics DIFFER between $1 and $2"
        fi
    done
done
}

step_4() {
log "4. compute-sanitizer memcheck, forward parity (plain, factored, recurrent) and rows written in place"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/nevo_tests" cuda_forward cuda_factored cuda_recurrent backend_rows_write > "$OUT/memcheck.txt" 2>&1
echo "memcheck exit $?: $(grep -c 'Invalid\|ERROR SUMMARY' "$OUT/memcheck.txt") lines; $(grep 'ERROR SUMMARY' "$OUT/memcheck.txt")" | tee -a "$OUT/summary.txt"
}

step_5() {
log "5. V-trace on minatar/breakout, acting forward on cpu and cuda, $THREADS threads"
BIN=$BIN bash dev/cuda/vtrace_run.sh 2>&1 | tee -a "$OUT/summary.txt"

}

# SWEEP_SPECS: backend:env:population:generations[:slots:forward threads[:flags]], slots
# and forward threads the cuda backend's NEVO_CUDA_SLOTS and NEVO_CUDA_FORWARD_THREADS
# (empty: the defaults), flags a comma list of f (rank-1 factored children,
# ga.factored), h0 (NEVO_CUDA_HOST_TASKS=0: small calls on the device too), t
# (NEVO_CUDA_TILED_ROWS=16: calls of long runs of a parent's rows through the tiled
# kernel), lin (a linear policy: on the cpu backend, what the host's part of a frame
# allows) and thN (N threads, not all)
step_sweep() {
for spec in ${SWEEP_SPECS:-cuda:freeway:2048:3:128:4 cuda:freeway:2048:3:512:4 cuda:freeway:2048:3:256:8 cuda:freeway:2048:3:256:2}; do
    IFS=: read -r be env pop gens slots fwd flags <<< "$spec"
    d="$RUNS/sweep_${spec//[:,]/_}"
    rm -rf "$d"
    f=$([[ ,$flags, == *,f,* ]] && echo 1) host=$([[ ,$flags, == *,h0,* ]] && echo 0)
    tiled=$([[ ,$flags, == *,t,* ]] && echo 16) lin=$([[ ,$flags, == *,lin,* ]] && echo 1)
    th=$(tr , '\n' <<< "$flags" | sed -n 's/^th\([0-9]*\)$/\1/p' | tail -1)
    NEVO_CUDA_SLOTS=${slots:-} NEVO_CUDA_FORWARD_THREADS=${fwd:-} NEVO_CUDA_HOST_TASKS=$host \
        NEVO_CUDA_TILED_ROWS=${tiled:-0} timeout 90 "$BIN/nevo" train \
        configs/minatar_breakout_ga_gpu.json env=minatar/$env population=$pop generations=$gens eval_episodes=10 \
        ${f:+ga.rank=1 ga.factored=true} \
        ${lin:+'policy.conv_filters=[]' 'policy.conv_kernels=[]' 'policy.conv_strides=[]' 'policy.hidden=[]'} \
        --backend $be --threads "${th:-$THREADS}" --out "$d" --quiet > "$d.log" 2>&1
    echo "$be $env population $pop, slots ${slots:-default}, forward threads ${fwd:-default}${f:+, factored}${host:+, small calls on the device}${tiled:+, tiled}${lin:+, linear policy}, ${th:-$THREADS} threads: $(rate "$d/metrics.jsonl" $pop)" |
        tee -a "$OUT/summary.txt"
done
}

step_sass() {
log "SASS of the dense kernel of runs of 8 (k_dense_l<8>): 16-byte loads, FMAs, local memory"
cuobjdump -sass "$BIN/nevo" 2>/dev/null | awk '/Function : /{p=0} /Function : _Z9k_dense_lILi8EEv10NevoKDense/{p=1} p' \
    > "$RUNS/dense.sass"
echo "LDG.E.128 $(grep -c 'LDG.E.128' "$RUNS/dense.sass"), FFMA $(grep -c FFMA "$RUNS/dense.sass"), LDS $(grep -c 'LDS' "$RUNS/dense.sass"), LDL/STL $(grep -c 'LDL\|STL' "$RUNS/dense.sass")" | tee -a "$OUT/summary.txt"
log "SASS of the tiled dense kernel (k_dense_t): FFMA, FSEL, LDS, local memory"
cuobjdump -sass "$BIN/nevo" 2>/dev/null | awk '/Function : /{p=0} /Function : _Z9k_dense_t10NevoKDense/{p=1} p' \
    > "$RUNS/tiled.sass"
echo "FFMA $(grep -c FFMA "$RUNS/tiled.sass"), FSEL $(grep -c FSEL "$RUNS/tiled.sass"), LDS $(grep -c 'LDS' "$RUNS/tiled.sass"), LDL/STL $(grep -c 'LDL\|STL' "$RUNS/tiled.sass")" | tee -a "$OUT/summary.txt"

}

for s in device ${STEPS:-1 2 2b 3 4 5 sweep sass}; do
    declare -F "step_$s" > /dev/null || { log "STEPS: no step $s"; continue; }
    "step_$s"
done
log "done"
