/* libFuzzer target: checkpoints (seed corpus fuzz/corpus/checkpoint), through
 * nevo_load_any_policy, which rebuilds the algorithm and replays its state; see
 * fuzz_file.h. */
#include "fuzz_file.h"
