# libFuzzer targets (included at the end of the Makefile: `include fuzz/fuzz.mk`).
#
#   make fuzz         builds the targets and runs each for FUZZ_TIME seconds (default
#                     60) from its seed corpus in fuzz/corpus/<target>/; new inputs go to
#                     $(FUZZ_BUILD)/corpus-<target>/, crashes to $(FUZZ_BUILD)/crash-<target>-*
#   make fuzz-build   builds them only
#   make check        (the plain suite, and so `make test`) also builds them and sets
#                     NEVO_FUZZ_DIR, so tests/test_fuzz.c runs each briefly over its
#                     corpus plus some mutations and fails on any finding
#
# The targets (fuzz/fuzz_<target>.c): config (JSON configs and key=value overrides
# through nevo_config_apply_json, nevo_config_override, nevo_config_check and the
# env/network/memory checks), policy and checkpoint (whole files through
# nevo_load_any_policy, the loader behind `nevo eval FILE`), tasks (evaluation task
# sets as another process receives them, through nevo_taskset_read, evaluated), idx
# (IDX dataset files, plain or gzipped, through the dataset reader), model (MuJoCo model
# files, through the check of the files they name). They link the library
# built again by clang with libFuzzer's coverage, AddressSanitizer and
# UndefinedBehaviorSanitizer, in $(FUZZ_BUILD). They need clang and its libFuzzer
# runtime (Debian: clang, libclang-rt-14-dev); without them the rules say so and
# build nothing, and tests/test_fuzz.c reports itself skipped.

FUZZ_CC ?= clang
FUZZ_TIME ?= 60
FUZZ_BUILD ?= $(BUILD)-fuzz
FUZZ_TARGETS := config policy checkpoint tasks idx model
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
# the library's own flags, minus optimisation, sanitizers and -Werror (clang warns
# about other things than gcc: the fuzz build must not fail CI on them)
FUZZ_CFLAGS = $(filter-out -O% -fsanitize=% -fno-sanitize-recover=% -Werror,$(CFLAGS_BASE)) -O1 -g -Werror=implicit-function-declaration \
              -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o)
# where clang keeps libFuzzer (one quick query); empty when it is not installed
FUZZ_RUNTIME := $(wildcard $(shell $(FUZZ_CC) --print-runtime-dir 2>/dev/null)/libclang_rt.fuzzer*.a)

# Three parts are not what is fuzzed and are built as the main build does, without the
# sanitizers and coverage: the SIMD kernels (src/nn/kernels*.c; clang took over ten
# minutes and 2 GB to compile them with the sanitizers), the backward's (src/nn/grad.c,
# whose backward no target runs; 128 s with them, against 3 s) and the
# Philox streams (src/core/rng.c; filling each checkpoint's noise table through
# coverage hooks took a third of the checkpoint target's time). The gcc sanitizer pass
# of `make test` checks all three.
FUZZ_PLAIN := $(filter $(FUZZ_BUILD)/src/nn/kernels%.o $(FUZZ_BUILD)/src/nn/grad.o $(FUZZ_BUILD)/src/core/rng.o,\
                $(FUZZ_LIB_OBJ))
$(FUZZ_PLAIN): FUZZ_CFLAGS = $(filter-out -O% -fsanitize=% -fno-sanitize-recover=% -Werror,$(CFLAGS_BASE)) -O2 -g
$(FUZZ_PLAIN): FUZZ_COVERAGE =
FUZZ_COVERAGE = -fsanitize=fuzzer-no-link

# the per-object defines the main build gives these two
$(FUZZ_BUILD)/src/envs/mujoco_common.o: FUZZ_CFLAGS += -DNEVO_MODELS_DIR='"$(CURDIR)/models/mujoco"'
$(FUZZ_BUILD)/src/core/version.o: FUZZ_CFLAGS += -DNEVO_VERSION='"$(VERSION)"'
$(FUZZ_BUILD)/src/core/comm_mpi.o: FUZZ_CFLAGS += $(MPI_CFLAGS)

.PHONY: fuzz fuzz-build

ifneq ($(FUZZ_RUNTIME),)
$(FUZZ_BUILD)/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_COVERAGE) -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_check.h fuzz/fuzz_file.h $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB_OBJ) $(LIB_LIBS)

fuzz-build: $(FUZZ_BINS) $(FUZZ_LIB_OBJ)

# -rss_limit_mb: libFuzzer's default (2 GiB), stated; the targets refuse configs needing
# more than NEVO_MAX_MEMORY_MB (set by the targets: 1 GiB for config, 256 MiB for files)
fuzz: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus-$$t; \
	  echo "== fuzz_$$t for $(FUZZ_TIME) s"; \
	  $(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_TIME) -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/crash-$$t- $(FUZZ_BUILD)/corpus-$$t fuzz/corpus/$$t; \
	done

# the plain suite runs the targets (tests/test_fuzz.c; `make test` runs it through
# `make check`); the sanitizer passes of `make test` do not run them again
ifeq ($(filter 1,$(SAN) $(TSAN)),)
check: fuzz-build
check: export NEVO_FUZZ_DIR = $(FUZZ_BUILD)
endif
else
fuzz-build fuzz:
	@echo "fuzz: $(FUZZ_CC) with libFuzzer not found (Debian: clang, libclang-rt-14-dev); fuzz targets not built"
endif

-include $(FUZZ_LIB_OBJ:.o=.d)
