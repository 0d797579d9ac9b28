# tp-opt: the two commands of the README.
#   make demo    set up, build, and run the main job on the bundled tiny Llama
#   make check   set up, build, and run the whole test suite
BUILD_DIR ?= build
JOBS ?= 2

.PHONY: all setup configure build demo check docs clean

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

docs: setup configure
	ninja -C $(BUILD_DIR) tp-docs

clean:
	rm -rf $(BUILD_DIR)
