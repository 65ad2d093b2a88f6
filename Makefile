# nevo build. `make` builds the library (static + shared), the `nevo` command and the
# test runner; `make test` runs the tests; `make run` trains the default config.
# SAN=1 builds everything with AddressSanitizer + UndefinedBehaviorSanitizer into
# build-san/. Every build first runs scripts/install-deps.sh (installs missing
# Debian packages, a no-op when all are present).

SAN ?= 0
ifeq ($(SAN),1)
BUILD ?= build-san
SANFLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
OPT = -O1
else
BUILD ?= build
SANFLAGS =
OPT = -O2
endif

CC ?= cc
# -std=c11 (not gnu11) keeps -ffp-contract=off: no silent FMA contraction, so float
# results do not depend on the compiler's instruction choice. Never -ffast-math.
# -fno-math-errno only stops libm calls setting errno (nothing reads it after them): sqrt
# is then one instruction, and loops over it can be vectorised, with the same results.
CFLAGS_BASE = -std=c11 -D_DEFAULT_SOURCE -D_GNU_SOURCE $(OPT) -g -Wall -Wextra -Wshadow \
              -Wno-unused-parameter -ffp-contract=off -fno-math-errno -fPIC -pthread -Iinclude -Isrc \
              $(SANFLAGS)
ifeq ($(CI),true)
CFLAGS_BASE += -Werror
endif
CFLAGS += $(CFLAGS_BASE)
# cairo draws `nevo plot` figures: the CLI and its tests link it, libnevo does not.
# Its flags come from pkg-config, asked as each recipe runs (so after install-deps.sh);
# plain -lcairo where pkg-config cannot say.
CAIRO_CFLAGS = $(shell pkg-config --cflags cairo 2>/dev/null)
CAIRO_LIBS = $(shell pkg-config --libs cairo 2>/dev/null || echo -lcairo)
LIB_LIBS = -lgif -ljansson -lmujoco -lpng -lm -pthread
LIBS = $(LIB_LIBS) $(CAIRO_LIBS)
# MuJoCo envs look for their model files in $NEVO_MODELS, then models/mujoco under the
# current directory, then this checkout's models/mujoco (baked in here, only here).
$(BUILD)/src/envs/mujoco_common.o: CFLAGS += -DNEVO_MODELS_DIR='"$(CURDIR)/models/mujoco"'

# libnevo is the engine; `nevo bench` (src/bench/) and `nevo plot` belong to the command.
LIB_SRC := $(sort $(wildcard src/core/*.c src/envs/*.c src/nn/*.c src/engine/*.c src/algo/*.c src/io/*.c))
BENCH_SRC := $(sort $(wildcard src/bench/*.c))
CLI_SRC := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/*.c))

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)
$(CLI_OBJ) $(TEST_OBJ): CFLAGS += $(CAIRO_CFLAGS)

NEVO := $(BUILD)/nevo
TESTS := $(BUILD)/nevo_tests
STATIC := $(BUILD)/libnevo.a
SHARED := $(BUILD)/libnevo.so
DEPS_STAMP := $(BUILD)/.deps-installed

.PHONY: all deps test run bench clean

all: $(NEVO) $(TESTS) $(STATIC) $(SHARED)

# Re-checked whenever the script changes; the stamp avoids a dpkg query per build.
$(DEPS_STAMP): scripts/install-deps.sh
	@mkdir -p $(BUILD)
	@bash scripts/install-deps.sh
	@touch $@

deps: $(DEPS_STAMP)

$(BUILD)/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(STATIC): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(SHARED): $(LIB_OBJ)
	$(CC) $(CFLAGS) -shared -o $@ $^ $(LIB_LIBS)

$(NEVO): $(CLI_OBJ) $(BENCH_OBJ) $(STATIC)
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(BENCH_OBJ) $(STATIC) $(LIBS)

$(TESTS): $(TEST_OBJ) $(BENCH_OBJ) $(STATIC)
	$(CC) $(CFLAGS) -o $@ $(TEST_OBJ) $(BENCH_OBJ) $(STATIC) $(LIBS)

# T="name ..." runs only tests whose name or file contains one of the words.
test: $(NEVO) $(TESTS)
	NEVO_BIN=$(NEVO) ./$(TESTS) $(T)

# the run directory: runs/cartpole_ga, then runs/cartpole_ga-2 ... (nevo train never
# writes into an existing run without --resume), so `make run` can run again
run: $(NEVO)
	./$(NEVO) train configs/cartpole_ga.json

bench: $(NEVO)
	./$(NEVO) bench

clean:
	rm -rf build build-san

-include $(LIB_OBJ:.o=.d) $(BENCH_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d)
