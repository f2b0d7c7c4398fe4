# The two commands of the quick start:  make demo   and   make test
# Everything else here is a convenience for developers (see HACKING.md).
SHELL := /bin/bash
JOBS ?= $(shell nproc)
PRESET ?= dev
BUILD := build/$(PRESET)
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: all deps deps-cpp deps-python build test test-cpp test-asan test-python demo fuzz fuzz-smoke bench install-check clean python

all: build

deps: deps-cpp deps-python
deps-cpp:
	@scripts/install-deps.sh cpp
deps-python:
	@scripts/install-deps.sh python

$(BUILD)/build.ninja: | deps-cpp
	cmake --preset $(PRESET) >/dev/null

build: deps-cpp $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Builds and runs every test: C++ unit, C ABI, CLI, golden vectors, Python, sanitizers, fuzz smoke.
test: deps
	@scripts/run-tests.sh

# Builds only what the demo needs (the example engine and the CLI), then runs it.
demo: deps-cpp
	@scripts/demo.sh

fuzz: deps-cpp
	@scripts/fuzz.sh $${FUZZ_SECONDS:-60}

bench: deps
	cmake --preset release >/dev/null && cmake --build build/release -j $(JOBS)
	@scripts/bench.sh

python: deps
	$(PY) -m pip install -q --no-build-isolation ./

# The packaging tests (ctest label packaging): the installed static package used through
# find_package, and the shared libraries' exports (HACKING.md "Public API").
install-check: build
	ctest --test-dir $(BUILD) --output-on-failure -L packaging

clean:
	rm -rf build
