/* libFuzzer target: policy files (seed corpus fuzz/corpus/policy), through
 * nevo_load_any_policy; see fuzz_file.h. */
#include "fuzz_file.h"
