# tp-opt: the two commands of the README.
#   make demo    set up, build, and run the main job on the bundled tiny Llama
#   make check   set up, build, and run the whole test suite
BUILD_DIR ?= build
JOBS ?= 2

SANITIZE_DIR ?= build-sanitize
# libMLIR.so is not instrumented and OpenMPI leaks by design at exit:
# leak checking is off; every other ASan and UBSan finding fails a test.
SANITIZE_ENV = ASAN_OPTIONS=detect_leaks=0:detect_odr_violation=0:allow_user_poisoning=0:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: all setup configure build demo check check-sanitize docs clean

all: build

setup:
	@scripts/setup.sh

$(BUILD_DIR)/build.ninja:
	cmake -G Ninja -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release

configure: $(BUILD_DIR)/build.ninja

build: setup configure
	ninja -C $(BUILD_DIR) -j$(JOBS)

demo: build
	@scripts/demo.sh $(BUILD_DIR)

check: build
	@scripts/check.sh $(BUILD_DIR)

# The whole suite on an ASan + UBSan build of compiler, runtime and the
# programs tpc generates (their own build directory; make check stays fast).
# The runtime is shared there: instrumented, it made each program ~20 MB.
check-sanitize: setup
	cmake -G Ninja -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=Release -DTPOPT_SANITIZE=ON -DTPRT_SHARED=ON
	ninja -C $(SANITIZE_DIR) -j$(JOBS)
	@$(SANITIZE_ENV) scripts/check.sh $(SANITIZE_DIR)

docs: setup configure
	ninja -C $(BUILD_DIR) tp-docs

clean:
	rm -rf $(BUILD_DIR) $(SANITIZE_DIR)
