#!/usr/bin/env bash
# How well ES's gradient estimate follows the true gradient as the population grows
# (Zhang, Clune & Stanley 2017): ES on Fashion-MNIST (the network of
# configs/fashion_mnist_sgd.json) with es.grad_cosine, which reports each generation's
# cosine between the step direction (centred ranks, antithetic pairs) and the exact
# gradient of the fitness on the same batch, for populations 10 .. 10,000. Prints a table
# (mean cosine over the generations) and draws docs/figures/es_gradient_cosine.png.
#   scripts/es_gradient_correlation.sh [GENERATIONS] [BATCH]
set -eu
cd "$(dirname "$0")/.."
NEVO=${NEVO:-build/nevo}
GENS=${1:-3}
BATCH=${2:-200}
[ -x "$NEVO" ] || make -s
plots=()
for P in 10 100 1000 10000; do
  out=runs/es_grad_cosine/P$P
  rm -rf "$out"
  "$NEVO" train configs/fashion_mnist_es.json population=$P generations="$GENS" data.fitness_batch="$BATCH" \
    es.grad_cosine=true data.test_samples=1000 --out "$out" --quiet > /dev/null
  mean=$(sed -n 's/.*"grad_cosine": \([-0-9.e+]*\).*/\1/p' "$out/metrics.jsonl" |
         awk '{ s += $1; n++ } END { printf "%.4f", s / n }')
  echo "population $P: mean cosine $mean over $GENS generations (batch $BATCH)"
  plots+=("$out=population $P")
done
mkdir -p docs/figures
"$NEVO" plot curves "${plots[@]}" --x generation --y grad_cosine \
  --title "ES step direction vs true gradient (cosine), Fashion-MNIST" --out docs/figures/es_gradient_cosine.png
