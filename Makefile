# nevo build. `make` builds the library (static + shared), the `nevo` command and the
# test runner; `make run` trains the default config; `make install` installs them.
#
#   make test     the suite three ways: plain (in build/), with AddressSanitizer +
#                 UndefinedBehaviorSanitizer (build-san/), and the threaded parts' tests
#                 with ThreadSanitizer (build-tsan/); what CI runs
#   make check    the plain suite only (T="word ..." runs the tests whose name or file
#                 contains one of the words); SAN=1 / TSAN=1 select a sanitizer build
#
# Every build first runs scripts/install-deps.sh (installs missing Debian packages, a
# no-op when all are present). BUILD=DIR builds elsewhere; `make test BUILD=b` puts its
# sanitizer builds in b-san/ and b-tsan/.

# The version, here only: the library (nevo_version()), `nevo --version`, nevo.pc and
# the man page take it from this line. SOVERSION is the soname's: libnevo.so.0.
VERSION := 0.1.0
SOVERSION := 0

.DEFAULT_GOAL := all

SAN ?= 0
TSAN ?= 0
# MPI=1 (the default) links Open MPI for runs across ranks (`mpirun -np N nevo train`,
# src/core/comm_mpi.c); MPI=0 builds without it, where `nevo train` under mpirun says
# it needs the MPI build. MPI is started only in a process an MPI launcher started.
MPI ?= 1
# CUDA=1 adds the CUDA backend (src/nn/backend_cuda.cu, built by nvcc for Hopper), in
# build-cuda/ unless BUILD says otherwise; the default build has no CUDA dependency.
CUDA ?= 0
ifeq ($(CUDA),1)
BUILD ?= build-cuda
endif
ifeq ($(TSAN),1)
BUILD ?= build-tsan
SANFLAGS = -fsanitize=thread -fno-omit-frame-pointer
OPT = -O1
else ifeq ($(SAN),1)
BUILD ?= build-san
SANFLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
OPT = -O1
else
BUILD ?= build
SANFLAGS =
OPT = -O2
endif

# Where `make install` puts things (DESTDIR=DIR stages them under DIR).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
MODELSDIR ?= $(DATADIR)/nevo/models/mujoco

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
LIB_LIBS = -ljansson -lmujoco -lz -lm -pthread
ifeq ($(MPI),1)
CFLAGS_BASE += -DNEVO_MPI
MPI_CFLAGS = $(shell pkg-config --cflags ompi-c 2>/dev/null)
LIB_LIBS += $(shell pkg-config --libs ompi-c 2>/dev/null || echo -lmpi)
MPI_PC = ompi-c
endif
# the command's pictures: GIFs of episodes (giflib), PNGs (libpng), figures (cairo)
LIBS = -lgif -lpng $(CAIRO_LIBS) $(LIB_LIBS)

# libnevo is the engine; `nevo bench` (src/bench/) and `nevo plot` belong to the command.
LIB_SRC := $(sort $(wildcard src/core/*.c src/envs/*.c src/nn/*.c src/engine/*.c src/algo/*.c src/io/*.c))
BENCH_SRC := $(sort $(wildcard src/bench/*.c))
CLI_SRC := $(sort $(wildcard src/cli/*.c))
# ThreadSanitizer runs the tests of the threaded parts: the thread pool, the evaluator,
# the replicas' comms and the actor-learner runtime (the rest of the suite is
# single-threaded or covered by them, and runs 5-15 times slower under TSan).
ifeq ($(TSAN),1)
TEST_SRC := tests/main.c tests/test_threads.c tests/test_eval.c tests/test_replica.c tests/test_vtrace.c \
            tests/test_r2d2.c
else
TEST_SRC := $(sort $(wildcard tests/*.c))
endif

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)

# The CUDA backend: nvcc from PATH or CUDA_HOME; sm_90 code plus PTX for later GPUs.
# --fmad=false and IEEE division keep the kernels' arithmetic the CPU kernels' (the same
# bits: src/nn/kernel_bodies.h); the CUDA runtime is linked statically.
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(shell command -v nvcc 2>/dev/null || echo $(CUDA_HOME)/bin/nvcc)
CUDA_ARCH ?= -gencode=arch=compute_90,code=[sm_90,compute_90]
NVCCFLAGS = -std=c++17 -O2 -g $(CUDA_ARCH) --fmad=false -prec-div=true -prec-sqrt=true \
            -Xcompiler -fPIC,-ffp-contract=off,-pthread,-Wall -Iinclude -Isrc -DNEVO_CUDA
# The plain suite compiles the CUDA code where nvcc is installed, whatever CUDA is
# (tests/test_cuda.c, cuda_code_compiles): CI has no GPU, and nothing else builds it.
NVCC_TEST = $(if $(filter 00,$(SAN)$(TSAN)),$(if $(shell command -v $(NVCC) 2>/dev/null),$(NVCC) $(NVCCFLAGS)))
ifeq ($(CUDA),1)
CFLAGS_BASE += -DNEVO_CUDA
LIB_OBJ += $(BUILD)/src/nn/backend_cuda.o
LIB_LIBS += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++
endif
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
# the command's picture writers, which the tests also check
CLI_PARTS := $(BUILD)/src/cli/gif.o $(BUILD)/src/cli/png.o
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)
$(CLI_OBJ) $(TEST_OBJ): CFLAGS += $(CAIRO_CFLAGS)

NEVO := $(BUILD)/nevo
TESTS := $(BUILD)/nevo_tests
STATIC := $(BUILD)/libnevo.a
SHARED := $(BUILD)/libnevo.so
PY_FAST := $(BUILD)/python/.fast-built
DEPS_STAMP := $(BUILD)/.deps-installed

# MuJoCo envs look for their model files in $NEVO_MODELS, then models/mujoco under the
# current directory, then (an installed library) MODELSDIR, then this checkout's
# models/mujoco. The in-tree library knows only the checkout (baked in here, only here);
# `make install` builds its own copy of this one object that also knows MODELSDIR.
MJ_COMMON := src/envs/mujoco_common.c
MJ_CHECKOUT := -DNEVO_MODELS_DIR='"$(CURDIR)/models/mujoco"'
$(BUILD)/src/envs/mujoco_common.o: CFLAGS += $(MJ_CHECKOUT)
# The version reaches the code only through src/core/version.c.
$(BUILD)/src/core/version.o: CFLAGS += -DNEVO_VERSION='"$(VERSION)"'
$(BUILD)/src/core/version.o: Makefile
$(BUILD)/src/core/comm_mpi.o: CFLAGS += $(MPI_CFLAGS)

.PHONY: all deps test check test-plain install-test run bench install uninstall clean FORCE

all: $(NEVO) $(TESTS) $(STATIC) $(SHARED) $(PY_FAST)

# Re-checked whenever the script changes; the stamp avoids a dpkg query per build.
$(DEPS_STAMP): scripts/install-deps.sh
	@mkdir -p $(BUILD)
	@bash scripts/install-deps.sh
	@touch $@

deps: $(DEPS_STAMP)

$(BUILD)/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.cu | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(STATIC): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# libnevo.so links no cairo (tests/test_install.c checks); its soname is libnevo.so.0.
$(SHARED): $(LIB_OBJ)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libnevo.so.$(SOVERSION) -o $@ $^ $(LIB_LIBS)
	@ln -sf libnevo.so $@.$(SOVERSION)

$(NEVO): $(CLI_OBJ) $(BENCH_OBJ) $(STATIC)
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(BENCH_OBJ) $(STATIC) $(LIBS)

ifeq ($(TSAN),1)
# the actor-learner runtime's tests without the ones that run the command
$(BUILD)/tests/test_vtrace.o: CFLAGS += -DNEVO_TSAN_ONLY
$(BUILD)/tests/test_r2d2.o: CFLAGS += -DNEVO_TSAN_ONLY
$(TESTS): $(TEST_OBJ) $(STATIC)
	$(CC) $(CFLAGS) -o $@ $(TEST_OBJ) $(STATIC) $(LIBS)
else
$(TESTS): $(TEST_OBJ) $(BENCH_OBJ) $(CLI_PARTS) $(STATIC)
	$(CC) $(CFLAGS) -o $@ $(TEST_OBJ) $(BENCH_OBJ) $(CLI_PARTS) $(STATIC) $(LIBS)
endif

# The Python package's compiled step (python/nevo/_fast.c) for the build tree, next to
# the library: BUILD/python/nevo/_fast<EXT_SUFFIX>, where the package looks when it loads
# this libnevo.so (pip install builds its own copy). Built by setup.py for the first of
# python3, /usr/bin/python3 with numpy and setuptools (the tests choose among the same
# two), with Python's own flags in every build: an uninstrumented python3 loads it.
$(PY_FAST): python/nevo/_fast.c python/setup.py | $(DEPS_STAMP)
	@py=$$(for p in python3 /usr/bin/python3; do $$p -c 'import numpy, setuptools' 2>/dev/null && { echo $$p; break; }; done); \
	  [ -n "$$py" ] || { echo "nevo: no python3 with numpy and setuptools for python/nevo/_fast.c" >&2; exit 1; }; \
	  cd python && $$py setup.py -q build_ext --build-lib $(abspath $(BUILD))/python --build-temp $(abspath $(BUILD))/python/tmp
	@touch $@

# ---- install ---------------------------------------------------------------------------
# What `make install` copies is built in $(BUILD)/inst/: the library again from the
# same objects but for mujoco_common.o (compiled to also search MODELSDIR), the command
# linked with it, nevo.pc and the man page with this install's paths and version. The
# in-tree build is never touched, so installing elsewhere rebuilds only these.
INST ?= $(BUILD)/inst
INST_STAMP := $(INST)/.paths
INST_LIB_OBJ := $(filter-out $(BUILD)/src/envs/mujoco_common.o,$(LIB_OBJ)) $(INST)/mujoco_common.o
INST_SO := $(INST)/libnevo.so.$(VERSION)
INST_FILES := $(INST)/nevo $(INST)/libnevo.a $(INST_SO) $(INST)/nevo.pc $(INST)/nevo.1

# Rewritten (so the files below rebuild) only when a path or the version changes.
$(INST_STAMP): FORCE | $(DEPS_STAMP)
	@mkdir -p $(INST)
	@echo '$(VERSION) $(PREFIX) $(LIBDIR) $(INCLUDEDIR) $(DATADIR) $(MODELSDIR) $(CURDIR)' | cmp -s - $@ \
	  || echo '$(VERSION) $(PREFIX) $(LIBDIR) $(INCLUDEDIR) $(DATADIR) $(MODELSDIR) $(CURDIR)' > $@

$(INST)/mujoco_common.o: $(MJ_COMMON) $(INST_STAMP)
	$(CC) $(CFLAGS) $(MJ_CHECKOUT) -DNEVO_MODELS_INSTALL_DIR='"$(MODELSDIR)"' -MMD -MP -c $< -o $@

$(INST)/libnevo.a: $(INST_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(INST_SO): $(INST_LIB_OBJ)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libnevo.so.$(SOVERSION) -o $@ $^ $(LIB_LIBS)

$(INST)/nevo: $(CLI_OBJ) $(BENCH_OBJ) $(INST)/libnevo.a
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(BENCH_OBJ) $(INST)/libnevo.a $(LIBS)

SUBST = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
            -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@DATADIR@|$(DATADIR)|g' -e 's|@MODELSDIR@|$(MODELSDIR)|g' \
            -e 's|@MPI_PC@|$(MPI_PC)|g'

$(INST)/nevo.pc: nevo.pc.in $(INST_STAMP)
	$(SUBST) $< > $@

$(INST)/nevo.1: docs/nevo.1.in $(INST_STAMP)
	$(SUBST) $< > $@

install: $(INST_FILES)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/nevo \
	  $(DESTDIR)$(MODELSDIR) $(DESTDIR)$(DATADIR)/nevo/configs $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(INST)/nevo $(DESTDIR)$(BINDIR)/nevo
	install -m 644 $(INST)/libnevo.a $(DESTDIR)$(LIBDIR)/libnevo.a
	install -m 755 $(INST_SO) $(DESTDIR)$(LIBDIR)/libnevo.so.$(VERSION)
	ln -sf libnevo.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libnevo.so.$(SOVERSION)
	ln -sf libnevo.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libnevo.so
	install -m 644 include/nevo/*.h $(DESTDIR)$(INCLUDEDIR)/nevo/
	install -m 644 models/mujoco/*.xml $(DESTDIR)$(MODELSDIR)/
	install -m 644 configs/*.json $(DESTDIR)$(DATADIR)/nevo/configs/
	install -m 644 $(INST)/nevo.pc $(DESTDIR)$(LIBDIR)/pkgconfig/nevo.pc
	install -m 644 $(INST)/nevo.1 $(DESTDIR)$(MANDIR)/man1/nevo.1

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/nevo $(DESTDIR)$(LIBDIR)/libnevo.a $(DESTDIR)$(LIBDIR)/libnevo.so \
	  $(DESTDIR)$(LIBDIR)/libnevo.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libnevo.so.$(VERSION) \
	  $(DESTDIR)$(LIBDIR)/pkgconfig/nevo.pc $(DESTDIR)$(MANDIR)/man1/nevo.1
	rm -rf $(DESTDIR)$(INCLUDEDIR)/nevo $(DESTDIR)$(MODELSDIR) $(DESTDIR)$(DATADIR)/nevo/configs
	@rmdir $(DESTDIR)$(DATADIR)/nevo/models $(DESTDIR)$(DATADIR)/nevo 2>/dev/null || true

# ---- tests -----------------------------------------------------------------------------
# tests/test_install.c checks an install into $(BUILD)/install-test, made before each
# run by `make install` itself (its own files built in $(BUILD)/inst-test/).
TEST_PREFIX := $(abspath $(BUILD))/install-test

install-test: $(NEVO) $(STATIC)
	@rm -rf $(TEST_PREFIX)
	@$(MAKE) --no-print-directory -s install INST=$(BUILD)/inst-test PREFIX=$(TEST_PREFIX) DESTDIR=

ifeq ($(TSAN),1)
CHECK_DEPS := $(TESTS)
# A report fails its test at once (each test ends with _exit in a child process, which
# would skip TSan's exit status 66).
CHECK_ENV := TSAN_OPTIONS="halt_on_error=1 $$TSAN_OPTIONS"
else
CHECK_DEPS := $(NEVO) $(TESTS) $(SHARED) $(PY_FAST) install-test
endif

# The suite in $(BUILD) (plain, SAN=1 or TSAN=1); the last line is "N passed, N failed".
# T="name ..." runs only tests whose name or file contains one of the words.
check: $(CHECK_DEPS)
	@{ $(CHECK_ENV) NEVO_BIN=$(NEVO) NEVO_TEST_PREFIX=$(TEST_PREFIX) NEVO_TEST_CFLAGS='$(SANFLAGS)' \
	   NEVO_TEST_NVCC='$(NVCC_TEST)' NEVO_TEST_CC='$(CC) $(filter-out -DNEVO_CUDA,$(CFLAGS_BASE)) -DNEVO_CUDA' \
	   ./$(TESTS) $(T); echo $$? > $(BUILD)/check.rc; } \
	   | tee $(BUILD)/check.log
	@exit $$(cat $(BUILD)/check.rc)

test-plain: check

# `make test`: the plain suite, then ASan + UBSan, then TSan (each build in its own
# directory), stopping at the first that fails; then the total over the three. The
# builds use every CPU (JOBS) unless make was given -j itself, and so do the tests
# (tests/main.c: NEVO_TEST_JOBS, default the CPUs).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
SUBMAKE = $(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(JOBS))
ifeq ($(SAN)$(TSAN),00)
test:
	@t0=$$(date +%s); \
	$(SUBMAKE) check && t1=$$(date +%s) && \
	echo "== plain: $$((t1 - t0)) s; now AddressSanitizer + UndefinedBehaviorSanitizer in $(BUILD)-san/" && \
	$(SUBMAKE) SAN=1 BUILD=$(BUILD)-san check && t2=$$(date +%s) && \
	echo "== ASan + UBSan: $$((t2 - t1)) s; now ThreadSanitizer (thread pool, evaluator, replicas, actor-learner) in $(BUILD)-tsan/" && \
	$(SUBMAKE) TSAN=1 BUILD=$(BUILD)-tsan check && t3=$$(date +%s) && \
	echo "== TSan: $$((t3 - t2)) s; total $$((t3 - t0)) s over the plain, ASan + UBSan and TSan runs:" && \
	tail -q -n 1 $(BUILD)/check.log $(BUILD)-san/check.log $(BUILD)-tsan/check.log \
	  | awk '{ p += $$1; f += $$3 } END { printf "%d passed, %d failed\n", p, f; exit f > 0 }'
else
test: check
endif

# the run directory: runs/cartpole_ga, then runs/cartpole_ga-2 ... (nevo train never
# writes into an existing run without --resume), so `make run` can run again
run: $(NEVO)
	./$(NEVO) train configs/cartpole_ga.json

bench: $(NEVO)
	./$(NEVO) bench

clean:
	rm -rf build build-san build-tsan

FORCE:

-include $(LIB_OBJ:.o=.d) $(BENCH_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(INST)/mujoco_common.d
include fuzz/fuzz.mk
