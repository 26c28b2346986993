# Convenience front end; the build itself is CMake.  Run as root (labs need
# network namespaces).  `make demo` and `make test` are the README's commands.
BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_TSAN ?= build-tsan
JOBS       ?= $(shell nproc)

.PHONY: all deps build build-asan test unit tsan e2e go-test test-python interop pkg-test demo demo-send install clean abi-update deb deb-symbols

all: build

deps:
	bash scripts/install-deps.sh

# The release build (library, tools) serves the demo and the end-to-end tests;
# the unit tests run in the sanitizer build.  Here (and so in CI) warnings are
# errors: GC_WERROR=ON.  A plain `cmake` build leaves it off for packagers.
WERROR     ?= -DGC_WERROR=ON
build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF $(WERROR) >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

build-asan: deps
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DGC_SANITIZE=ON $(WERROR) >/dev/null
	cmake --build $(BUILD_ASAN) -j$(JOBS)

# Unit tests under ASan+UBSan, the threaded ring tests under TSan, the
# end-to-end tests in network namespaces, DCCP against Linux 6.1, then the
# Debian packages: last, also under -j (it installs them system-wide, and
# purges them when done).
test: unit tsan e2e go-test interop
	$(MAKE) test-python
	$(MAKE) pkg-test

unit: build-asan
	ctest --test-dir $(BUILD_ASAN) --output-on-failure

# The packet-ring tests whose threads meet in process memory: the engine
# thread against gc_ring_flush() and gc_ring_notify() callers (the engine's
# per-connection lock).  Not the others: a ring's shared indexes are mapped
# twice (the application's and the engine's mapping of the memfd), and
# ThreadSanitizer cannot see an acquire at one address pair with a release at
# the other.  And threads: the socket table's references (group.c) against
# concurrent calls, releases and sends on other sockets.
TSAN_TESTS = ring_flush ring_notify ring_engine ring_race threads
tsan: deps
	cmake -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=Debug -DGC_TSAN=ON $(WERROR) >/dev/null
	cmake --build $(BUILD_TSAN) -j$(JOBS) --target $(addprefix test_,$(TSAN_TESTS))
	ctest --test-dir $(BUILD_TSAN) --output-on-failure -R '^($(subst $(eval ) ,|,$(TSAN_TESTS)))$$'

e2e: build
	GC_BUILD_DIR=$(abspath $(BUILD)) python3 -m pytest -q tests/e2e

# The Go module (bindings/go) against this build, installed into a prefix in
# the build tree (its groupcast.pc; an rpath, so the test binaries re-run
# under unshare(1) find the library): gofmt, go vet, the tests under the race
# detector with cgocheck=1, again under GOEXPERIMENT=cgocheck2 where the
# toolchain has it (Go 1.21 and later), then the rtpfan example's e2e.
GO        ?= $(shell command -v go || echo /usr/local/go/bin/go)
GO_PREFIX  = $(abspath $(BUILD))/go-prefix
GO_ENV     = cd bindings/go && GOTOOLCHAIN=local GOFLAGS=-count=1 \
	PKG_CONFIG_PATH=$(GO_PREFIX)/lib/pkgconfig CGO_LDFLAGS=-Wl,-rpath,$(GO_PREFIX)/lib
go-test: build
	rm -rf $(GO_PREFIX) && cmake --install $(BUILD) --prefix $(GO_PREFIX) >/dev/null
	test -z "$$(cd bindings/go && $(dir $(GO))gofmt -l .)" || { echo "gofmt -l bindings/go: not formatted"; exit 1; }
	$(GO_ENV) $(GO) vet ./...
	$(GO_ENV) GODEBUG=cgocheck=1 $(GO) test -race ./...
	if (cd bindings/go && GOEXPERIMENT=cgocheck2 $(GO) env >/dev/null 2>&1); then \
		$(GO_ENV) GOEXPERIMENT=cgocheck2 $(GO) test ./...; fi
	$(GO_ENV) $(GO) build -o $(GO_PREFIX)/rtpfan ./examples/rtpfan
	GC_RTPFAN=$(GO_PREFIX)/rtpfan python3 -m pytest -q bindings/go/examples/rtpfan
# The Python binding (bindings/python): its tests, as root in lab namespaces,
# import the package from the tree and load $(BUILD)'s library
# (GROUPCAST_LIB); test_install.py also pip-installs it into a venv.
test-python: build
	GC_BUILD_DIR=$(abspath $(BUILD)) GROUPCAST_LIB=$(abspath $(BUILD))/libgroupcast.so.1 \
		python3 -m pytest -q bindings/python/tests

# Linux 6.1's own DCCP as the peer, in a QEMU guest (tests/interop).  The first
# run fetches Debian's 6.1 kernel package (about 70 MB) into
# GC_INTEROP_CACHE (default /var/cache/groupcast-interop); about 1 minute
# from a fresh machine, 20-40 s after that.
interop: build
	GC_BUILD_DIR=$(abspath $(BUILD)) python3 -m pytest -q tests/interop

# Debian packages (debian/): libgroupcast1, libgroupcast-dev, groupcast, and
# their -dbgsym, in $(DEB_OUT)/ with the .buildinfo and .changes; nothing is
# written outside the source tree.  lintian must report no error
# (debian/README.source lists the warnings left).  The build tree debian/rules
# used is cleaned after.
DEB_OUT = build-deb
deb:
	bash scripts/install-deps.sh --deb
	rm -rf $(DEB_OUT) && mkdir -p $(DEB_OUT)
	set -e; out=$(abspath $(DEB_OUT)); \
	name=groupcast_$$(dpkg-parsechangelog -S Version)_$$(dpkg-architecture -qDEB_HOST_ARCH); \
	GC_DEB_DESTDIR=$$out dpkg-buildpackage -us -uc -b \
		--buildinfo-option=-u$$out --buildinfo-file=$$out/$$name.buildinfo \
		--changes-option=-u$$out --changes-file=$$out/$$name.changes; \
	debian/rules clean; \
	lintian --fail-on error -I --pedantic $$out/$$name.changes

# Build the Debian packages (make deb), install them, build a program against
# libgroupcast-dev with pkg-config and run it, run the installed tools, purge.
pkg-test:
	bash tests/pkg/test_deb.sh

# After adding symbols to groupcast.map: the new ones into
# debian/libgroupcast1.symbols, with debian/changelog's version as their
# minimum (bump it first, for the release that adds them).
deb-symbols: build
	dpkg-gensymbols -plibgroupcast1 -e'$(BUILD)/libgroupcast.so.*.*.*' -Odebian/libgroupcast1.symbols

# The main job: a live-broadcast relay to 200 subscribers in a lab, best engine vs loop.
demo: build
	python3 bench/relay_demo.py --build $(abspath $(BUILD))

# One group send to 1000 receivers per engine (the library alone).
demo-send: build
	python3 bench/demo.py --build $(abspath $(BUILD))

# After a deliberate ABI change (include/groupcast/version.h says which are
# allowed): rewrite abi/libgroupcast.abi, which ctest's "abi" test compares with.
abi-update: build-asan
	sh tests/build/abi.sh $(CURDIR) $(BUILD_ASAN)/libgroupcast.so --update

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_TSAN) $(DEB_OUT)
