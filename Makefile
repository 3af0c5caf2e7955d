# loom — build.
#
#   make            static + shared library (the operators only), the `loom`
#                   CLI, and libloom_dev.a (CPU references + baseline, for
#                   the CLI and tests) in build/
#   make test       CPU tests (no GPU needed); also compiles every .cu for sm_90a
#   make gpu-test   GPU tests (needs 1+ GPUs; multi-GPU cases skip when fewer)
#   make clean
#
# Finds CUDA in $CUDA_HOME or /usr/local/cuda, and NCCL >= 2.28 with its
# device API in $NCCL_HOME, the CUDA tree, or the Python package
# nvidia-nccl (as on the GPU machines' image), in that order.

CUDA_HOME ?= /usr/local/cuda
NVCC := $(CUDA_HOME)/bin/nvcc
ifeq ($(wildcard $(NVCC)),)
$(error CUDA not found: no nvcc at $(NVCC). Set CUDA_HOME to your CUDA toolkit (12.8 or newer))
endif

# ---- NCCL -------------------------------------------------------------------
NCCL_MIN_VERSION := 22800
ifneq ($(NCCL_HOME),)
  ifeq ($(wildcard $(NCCL_HOME)/include/nccl.h),)
    $(error NCCL_HOME=$(NCCL_HOME) has no include/nccl.h)
  endif
  NCCL_ROOT := $(NCCL_HOME)
else ifneq ($(wildcard $(CUDA_HOME)/include/nccl.h),)
  NCCL_ROOT := $(CUDA_HOME)
else
  NCCL_ROOT := $(shell python3 -c 'import nvidia.nccl as m; print(m.__path__[0])' 2>/dev/null)
endif
ifeq ($(NCCL_ROOT),)
$(error NCCL not found: set NCCL_HOME, install NCCL into $(CUDA_HOME), or pip install nvidia-nccl-cu13 (>= 2.28))
endif
NCCL_VERSION_CODE := $(shell awk '/define NCCL_VERSION_CODE/ {print $$3; exit}' $(NCCL_ROOT)/include/nccl.h)
ifeq ($(shell test "0$(NCCL_VERSION_CODE)" -ge $(NCCL_MIN_VERSION) && echo ok),)
$(error NCCL at $(NCCL_ROOT) is version code '$(NCCL_VERSION_CODE)'; loom needs >= 2.28 ($(NCCL_MIN_VERSION)) for the device API)
endif
ifeq ($(wildcard $(NCCL_ROOT)/include/nccl_device.h),)
$(error NCCL at $(NCCL_ROOT) has no nccl_device.h: loom needs NCCL's device API (>= 2.28))
endif
NCCL_LIBDIR := $(firstword $(foreach d,lib lib64 targets/x86_64-linux/lib,$(if $(wildcard $(NCCL_ROOT)/$(d)/libnccl.so*),$(NCCL_ROOT)/$(d))))
ifeq ($(NCCL_LIBDIR),)
$(error NCCL at $(NCCL_ROOT) has headers but no libnccl.so in lib/ or lib64/)
endif
# Python wheels ship only libnccl.so.2 (no unversioned link name).
NCCL_LINK := $(if $(wildcard $(NCCL_LIBDIR)/libnccl.so),-lnccl,-l:libnccl.so.2)

# ---- flags -------------------------------------------------------------------
BUILD := build
ARCH := -gencode=arch=compute_90a,code=sm_90a
INCLUDES := -Iinclude -I$(CUDA_HOME)/include -I$(NCCL_ROOT)/include
CC ?= gcc
CFLAGS := -std=c11 -O2 -g -Wall -Wextra -Werror -fPIC -D_GNU_SOURCE $(INCLUDES)
NVCCFLAGS := -std=c++17 -O3 $(ARCH) -lineinfo -Xptxas -warn-spills,-warn-lmem-usage \
             -Xcompiler -fPIC,-Wall $(INCLUDES)
LDLIBS := -L$(CUDA_HOME)/lib64 -lcublas -lcudart -L$(NCCL_LIBDIR) $(NCCL_LINK) \
          -Wl,-rpath,$(NCCL_LIBDIR) -Wl,-rpath,$(CUDA_HOME)/lib64 -lstdc++ -lpthread -ldl -lm

# ---- sources -------------------------------------------------------------------
# libloom: the operators only. The CPU references and the NCCL + cuBLAS
# baseline are for the tests and the CLI: they live in libloom_dev.a, which
# is not installed and not part of libloom.so.
LIB_C := $(wildcard src/host/*.c)
LIB_CU := $(wildcard src/device/runtime/*.cu) $(wildcard src/device/ops/*.cu)
LIB_OBJ := $(LIB_C:%.c=$(BUILD)/obj/%.o) $(LIB_CU:%.cu=$(BUILD)/obj/%.o)
DEV_C := $(wildcard src/reference/*.c) $(wildcard src/baseline/*.c)
DEV_CU := $(wildcard src/baseline/*.cu)
DEV_OBJ := $(DEV_C:%.c=$(BUILD)/obj/%.o) $(DEV_CU:%.cu=$(BUILD)/obj/%.o)
HEADERS := $(wildcard include/*.h src/*/*.h src/device/*/*.h src/device/*/*.cuh tests/*.h)

# The CLI minus its main(), so tests can drive its parsing.
CLI_SRC := $(filter-out src/cli/main.c,$(wildcard src/cli/*.c))
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)

BENCH_BIN := $(patsubst bench/%.cu,$(BUILD)/bench/%,$(wildcard bench/*.cu)) \
             $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))

CPU_TESTS := $(patsubst tests/cpu/%.c,$(BUILD)/tests/%,$(wildcard tests/cpu/*.c))
GPU_TESTS := $(patsubst tests/gpu/%.c,$(BUILD)/tests/%,$(wildcard tests/gpu/*.c))

.PHONY: all test gpu-test clean sass-check
all: $(BUILD)/libloom.a $(BUILD)/libloom.so $(BUILD)/loom

$(BUILD)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/libloom.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libloom.so: $(LIB_OBJ)
	$(CC) -shared -o $@ $^ $(LDLIBS)

$(BUILD)/libloom_dev.a: $(DEV_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/obj/src/cli/%.o: src/cli/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc -c $< -o $@

$(BUILD)/loom: src/cli/main.c $(CLI_OBJ) $(BUILD)/libloom_dev.a $(BUILD)/libloom.a $(HEADERS)
	$(CC) $(CFLAGS) -Isrc $< $(CLI_OBJ) $(BUILD)/libloom_dev.a $(BUILD)/libloom.a -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/cpu/%.c $(CLI_OBJ) $(BUILD)/libloom_dev.a $(BUILD)/libloom.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc $< $(CLI_OBJ) $(BUILD)/libloom_dev.a $(BUILD)/libloom.a -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/gpu/%.c $(BUILD)/libloom_dev.a $(BUILD)/libloom.a $(HEADERS) $(wildcard tests/gpu/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc $< $(BUILD)/libloom_dev.a $(BUILD)/libloom.a -o $@ $(LDLIBS)

$(BUILD)/bench/%: bench/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O3 $(ARCH) -lineinfo $< -o $@

# C probes on the library (bench/chunk_probe.c).
$(BUILD)/bench/%: bench/%.c $(BUILD)/libloom.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libloom.a -o $@ $(LDLIBS)

# The tile-engine benchmark reads the engine headers and links cuBLAS (its
# baseline); ptxas must report no spills for the engine kernels.
$(BUILD)/bench/gemm: bench/gemm.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O3 $(ARCH) -lineinfo -Xptxas -warn-spills,-warn-lmem-usage \
	  -Xcompiler -Wall -Isrc $(INCLUDES) $< -o $@ -L$(CUDA_HOME)/lib64 -lcublas -lpthread \
	  -Xlinker -rpath,$(CUDA_HOME)/lib64

# CPU tests. Building `all`, the GPU tests and bench programs here means
# every .cu is compiled for sm_90a in CI, so device code that does not build
# fails.
test: all $(SASS_OK) $(CPU_TESTS) $(GPU_TESTS) $(BENCH_BIN)
	@bash tests/cpu/run.sh $(CPU_TESTS)
	@$(MAKE) --no-print-directory sass-check
	@$(MAKE) --no-print-directory python-test

# No local-memory access inside any wgmma k-block loop of the operators or
# of the engine's benchmark kernels (bench/sass_kloop.py: a spill reload
# there runs once per k-block on every task; in session 14 the builds with
# one such LDL had the MoE expert GEMMs 2-6% slower). From the SASS, no GPU; skipped
# with a message where cuobjdump is not found (.ci/run installs it).
# One check per file, each as soon as its file is built (a stamp beside it
# holds its line; `test` lists the stamps before the tests and benchmarks,
# so make -j starts them first), so the checks run beside the remaining
# compiles instead of after all of them (~3 minutes of cuobjdump on 2
# cores). Without cuobjdump (exit 3) no stamp is made: the check says it
# skipped, and runs again next time.
SASS_CHECK_FILES := $(LIB_CU:%.cu=$(BUILD)/obj/%.o) $(BUILD)/bench/gemm
SASS_OK := $(SASS_CHECK_FILES:%=%.sass-ok)
$(BUILD)/%.sass-ok: $(BUILD)/% bench/sass_kloop.py
	@python3 bench/sass_kloop.py --all $< > $@.log; rc=$$?; \
	  if [ $$rc -eq 0 ]; then mv $@.log $@; else cat $@.log; rm -f $@.log; [ $$rc -eq 3 ]; fi
sass-check: $(SASS_OK)
	@cat $(wildcard $(SASS_OK)) /dev/null

gpu-test: all $(GPU_TESTS)
	NCCL_NVLS_ENABLE=0 bash tests/gpu/run.sh $(BUILD)/tests

clean:
	rm -rf $(BUILD)

# ---- Python package (python/loom; docs/python.md) ------------------------------
# `make python-test`: the Python package's CPU tests (tests/python) against
# build/libloom.so, without installing the package; the tests that need
# torch skip when it is not importable, the GPU ones without a GPU. Also
# builds build/python/libloom_ref.so (the CPU references of libloom_dev.a as
# a shared library) so reference_moe is checked against the C reference.
# LOOM_PYTHON: the interpreter (e.g. a venv's python with torch installed).
LOOM_PYTHON ?= python3
PY_REF_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/reference/*.c))

$(BUILD)/python/libloom_ref.so: $(PY_REF_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $^ -lm

.PHONY: python-test
python-test: $(BUILD)/libloom.so $(BUILD)/python/libloom_ref.so
	PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1 LOOM_LIBRARY=$(abspath $(BUILD)/libloom.so) \
	  LOOM_REFERENCE_LIBRARY=$(abspath $(BUILD)/python/libloom_ref.so) \
	  $(LOOM_PYTHON) tests/python/run.py
