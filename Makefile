# Conflux: the two commands a new user needs on a fresh Debian 12 machine.
#   make demo   installs missing Debian packages, builds, runs a 4-rank all-reduce benchmark on host memory
#   make test   installs, builds, runs every test label, then the unit and integration labels under ASan and TSan
#               (ASan's also replay every wire fuzzer's seeds and regression inputs)
# Other targets: deps, build, check-layers, check-format, env-doc, package (Debian packages; docs/USER_GUIDE.md),
# python-ext, compare (see perf/README.md), fuzz (tests/fuzz/README.md), clean.

SHELL := /bin/bash
JOBS ?= $(shell nproc)
BUILD ?= build
# Debian packages the build, the tests and the demo need. `deps` installs only the missing ones.
# Open MPI, gfortran and mpi4py serve the MPI interposer's tests; UCX the ucx transport; iperf3 the raw-TCP baselines
# of the namespace test bed; hipcc the AMD build of the device kernels (the CUDA build uses the toolkit's nvcc when
# /usr/local/cuda has one). clang 16's libFuzzer serves `make fuzz` alone (FUZZ_PACKAGES, below).
# libxxhash-dev gives the 128-bit state hashes, compiled in from its header. dpkg-dev (dpkg-shlibdeps) and file serve
# `make package` and its test. pytest tests the Python package (python/), and PyTorch with its headers (libtorch-dev,
# pybind11-dev, python3-dev) builds and tests the torch.distributed backend; the library itself never needs them.
# python3-pip and python3-venv: `pip install ./python` as python/README.md gives it, and its test. clang-format (14):
# tools/check_format.py.
DEB_PACKAGES := cmake ninja-build g++ make pkg-config python3 libgtest-dev libgmock-dev libssl-dev \
                iproute2 procps libhwloc-dev openmpi-bin libopenmpi-dev gfortran python3-mpi4py python3-numpy \
                libucx-dev ucx-utils libxxhash-dev iperf3 hipcc dpkg-dev file \
                python3-dev python3-pytest python3-torch libtorch-dev pybind11-dev python3-pip python3-venv \
                clang-format
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build demo test test-main test-asan test-tsan asan-build tsan-build prebuild check-layers check-format env-doc package python-ext clean

all: build

# $(call install_missing,PACKAGES,WHAT): installs whichever of PACKAGES dpkg does not report installed. Without the
# packages they only recommend: on a fresh machine those were 120 MiB more to download and 860 MiB more to unpack
# (GTK, Qt, VA drivers, LLVM's development files), and nothing of make test reads them (an strace of the HIP kernel
# compile and of the torch backend's build and import).
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing missing Debian packages$(2):$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "All Debian packages$(2) present."; fi
endef

deps:
	$(call install_missing,$(DEB_PACKAGES),)

# make's builds precompile the standard headers (CFX_PCH) and compile src/ in unity batches (CFX_UNITY: 166 s of CPU
# for the library instead of 247 s): a developer's build without them (the default) is what catches a missing
# #include or a name two files of a layer both claim. This optimised build leaves out the unit tests that make test
# runs under the sanitizers anyway (CFX_ALL_UNIT_TESTS=OFF): each of them runs in the asan build, and the threaded
# ones in the tsan build too. It keeps those marked OPTIMISED: the reduction and conversion kernels, device kernels,
# the HIP runtime, the CUDA headers, and the sweeps that only this build runs whole (the sanitizer builds run them
# with CFX_TEST_QUICK). A developer's default build has them all.
$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCFX_WERROR=ON -DCFX_PCH=ON -DCFX_UNITY=ON \
	  -DCFX_ALL_UNIT_TESTS=OFF

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	@echo "== Conflux demo: 4-rank all-reduce on host memory (shared-memory transport) =="
	NCCL_SOCKET_IFNAME=lo $(BUILD)/perf/cfxrun -n 4 --timeout 300 $(BUILD)/perf/all_reduce_perf -b 1K -e 64M -f 4 -n 20 -w 5 -c 1

# The whole suite. Sanitizer runs use CFX_TEST_QUICK=1: the same tests over a smaller sweep (the optimised build runs
# the sweeps whole; see $(BUILD)/build.ninja for the unit tests it leaves to the sanitizer builds).
# test-main's tests leave most of the CPU idle (they wait on sockets, peers and deadlines: about a third of two
# cores in use), so the sanitizer builds compile meanwhile at the lowest priority (prebuild). The stages after it
# then find their builds done; a failed prebuild is only a cold cache, since each stage builds again and reports the
# error itself.
# The second step runs the two sanitizer stages side by side, for the same reason: each takes what the other's
# waiting tests leave idle. They share the CPU at one priority, since tests (unlike compiles) wait on deadlines. -O
# keeps each stage's output together. (Four chains, each stage's tests starting as soon as its build was done, took
# 1,517 s against this layout's 1,383 s in a fresh clone: the nice builds then starve behind the earlier stages' tests.)
# Measured stage by stage in a fresh clone, make test is CPU-bound on two cores: the builds took 1,817 s of CPU and the
# tests 1,302 s, so the layout can only share the cores out; what shortens it is less work (docs/notes/ci.md).
test: build
	$(MAKE) --no-print-directory -j2 test-main prebuild
	$(MAKE) --no-print-directory -j2 -O test-tsan test-asan
	@echo "make test: all labels passed (main, asan, tsan; the asan label replays the wire fuzzers' inputs)"

test-main: check-layers check-format python-ext
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

# The torch.distributed backend (python/csrc), compiled against the installed PyTorch into python/conflux/ for the
# tests (label python). A step of its own: `make build` and the library never need PyTorch. Incremental. Without
# debug information (CFLAGS=-g0, after Python's -g): its sources compiled in 11 s instead of 18 s; `pip install`
# builds keep Python's flags.
PYTHON ?= /usr/bin/python3
python-ext:
	@mkdir -p $(BUILD)
	@echo "Building the torch backend (python/csrc) against $$($(PYTHON) -c 'import torch; print("PyTorch", torch.__version__)')"
	@cd python && CFLAGS=-g0 MAX_JOBS=$(JOBS) $(PYTHON) setup.py -q build_ext --inplace --build-temp $(CURDIR)/$(BUILD)/python-ext \
	  > $(CURDIR)/$(BUILD)/python-ext.log 2>&1 || { cat $(CURDIR)/$(BUILD)/python-ext.log; exit 1; }

# Sanitizer builds use -O1 -g1: quick to compile, fast enough to run, and still give file:line in reports. They
# build only the tests they run (unit, integration) and no device kernels (the main build compiles those).
# The address sanitizer build also replays the wire fuzzers' seeds and regression inputs (tests/fuzz, label unit):
# the libFuzzer build of its own (make fuzz) is not part of make test.
SAN_FLAGS := -DCFX_UNITY=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
             -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCFX_BUILD_PERF=OFF -DCFX_WERROR=ON \
             -DCFX_CUDA_KERNELS=OFF -DCFX_HIP_KERNELS=OFF -DCFX_PCH=ON

asan-build:
	cmake -S . -B build-asan -G Ninja $(SAN_FLAGS) -DCFX_SANITIZE=address -DCFX_TEST_FOLDERS="integration;interpose;gpu;fuzz"
	cmake --build build-asan -j $(JOBS)

tsan-build:
	cmake -S . -B build-tsan -G Ninja $(SAN_FLAGS) -DCFX_SANITIZE=thread -DCFX_TEST_FOLDERS="integration;interpose;gpu"
	cmake --build build-tsan -j $(JOBS)

# The builds of the later stages at nice 19, output in $(BUILD)/prebuild.log; see `test`.
prebuild:
	@echo "prebuild: the asan and tsan builds at nice 19 while test-main runs (log: $(BUILD)/prebuild.log)"
	@mkdir -p $(BUILD)
	@MAKEFLAGS= nice -n 19 $(MAKE) --no-print-directory asan-build tsan-build > $(BUILD)/prebuild.log 2>&1 \
	  || echo "prebuild: a build failed (see $(BUILD)/prebuild.log); its stage builds again and reports it"

test-asan: asan-build
	cd build-asan && CFX_TEST_QUICK=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  ctest --output-on-failure -j $(JOBS) -L 'unit|integration' --timeout 900

# UCX's memory hooks (libucm patches mmap/madvise when libucp loads) crash under TSan's interceptors; the two
# UCX_MEM_* settings turn them off, which the ucx transport does not need.
test-tsan: tsan-build
	cd build-tsan && CFX_TEST_QUICK=1 TSAN_OPTIONS=second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp \
	  UCX_MEM_EVENTS=no UCX_MEM_MMAP_HOOK_MODE=none \
	  ctest --output-on-failure -j $(JOBS) -L 'unit|integration' --timeout 900

check-layers:
	python3 tools/check_layers.py

# Every C/C++ source but the legacy list in tools/format_legacy.txt must be as clang-format 14 writes it.
check-format:
	python3 tools/check_format.py

env-doc: build
	$(BUILD)/tools/cfx_env_doc > docs/ENV.md

# The Debian packages of the build, from CPack (packaging/CMakeLists.txt): $(BUILD)/packages/*.deb.
package: build
	cd $(BUILD) && cpack -G DEB

clean:
	rm -rf build build-asan build-tsan $(FUZZ_BUILD) python/conflux/_torch_backend*.so python/build

# ---- fuzz: libFuzzer targets for every parser of bytes from the network; see tests/fuzz/README.md ----
#   make fuzz-smoke                    every target for FUZZ_SMOKE_SECONDS (make test instead replays their inputs
#                                      in the asan build: tests/fuzz/replay_main.cc)
#   make fuzz [FUZZ_SECONDS=600]       every target for FUZZ_SECONDS; findings land in build-fuzz/fuzz-artifacts
# A clang build of its own (g++ has no libFuzzer); clang >= 15, since clang 14 lacks std::source_location.
FUZZ_CXX ?= clang++-16
FUZZ_CC ?= clang-16
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 2

.PHONY: fuzz fuzz-deps fuzz-build fuzz-smoke

fuzz-build: fuzz-deps
	CXX=$(FUZZ_CXX) CC=$(FUZZ_CC) cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1" \
	  -DCFX_UNITY=ON -DCFX_FUZZ=ON -DCFX_BUILD_TESTS=OFF -DCFX_BUILD_PERF=OFF -DCFX_WERROR=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target cfx_fuzz

fuzz-smoke: fuzz-build
	tests/fuzz/run_fuzzers.sh $(FUZZ_BUILD) $(FUZZ_SMOKE_SECONDS)

# clang 16 with its libFuzzer runtime (Debian 12's clang 14 lacks std::source_location); not needed by make test.
FUZZ_PACKAGES := clang-16 libclang-rt-16-dev
fuzz-deps:
	$(call install_missing,$(FUZZ_PACKAGES), for the fuzzers)

fuzz: deps fuzz-build
	tests/fuzz/run_fuzzers.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# ---- compare: Conflux beside Open MPI (vader, UCX, TCP) and Gloo, one collective; see perf/compare/README.md ----
#   make compare COLL=all_reduce NP=4 [SIZES=1K:256M[:4]] [REPS=3] [ITERS=20] [WARMUP=5] [COMPARE_OUT=dir]
# The peers' Debian packages are installed here only (compare-deps), never by `make test`.
COLL ?= all_reduce
NP ?= 2
SIZES ?= 1K:64M
REPS ?= 3
ITERS ?= 20
WARMUP ?= 5
COMPARE_PACKAGES := openmpi-bin libopenmpi-dev libgloo-dev python3-matplotlib
COMPARE_PYTHON ?= /usr/bin/python3

.PHONY: compare compare-deps

compare-deps:
	$(call install_missing,$(COMPARE_PACKAGES), for compare)

compare: deps compare-deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target cfx_perf
	$(COMPARE_PYTHON) perf/compare/compare.py --build $(BUILD) --coll $(COLL) --np $(NP) --sizes $(SIZES) \
	  --reps $(REPS) --iters $(ITERS) --warmup $(WARMUP) $(if $(COMPARE_OUT),--out $(COMPARE_OUT))
