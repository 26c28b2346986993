# Convenience front end; the build itself is CMake.  Run as root (labs need
# network namespaces).  `make demo` and `make test` are the README's commands.
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)

.PHONY: all deps build build-asan test unit e2e demo demo-send install clean

all: build

deps:
	bash scripts/install-deps.sh

# The release build (library, tools) serves the demo and the end-to-end tests;
# the unit tests run in the sanitizer build.
build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

build-asan: deps
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DGC_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_ASAN) -j$(JOBS)

# Unit tests under ASan+UBSan, then the end-to-end tests in network namespaces.
test: unit e2e

unit: build-asan
	ctest --test-dir $(BUILD_ASAN) --output-on-failure

e2e: build
	GC_BUILD_DIR=$(abspath $(BUILD)) python3 -m pytest -q tests/e2e

# The main job: a live-broadcast relay to 200 subscribers in a lab, best engine vs loop.
demo: build
	python3 bench/relay_demo.py --build $(abspath $(BUILD))

# One group send to 1000 receivers per engine (the library alone).
demo-send: build
	python3 bench/demo.py --build $(abspath $(BUILD))

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
