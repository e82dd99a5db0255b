# Thin wrapper around CMake: `make`, `make test`, `make run`, `make clean`, `make install PREFIX=...`.
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD_TYPE ?= Release
CMAKE_FLAGS ?=
ifeq ($(OPENBLAS),1)
CMAKE_FLAGS += -DKVG_OPENBLAS=ON
endif

.PHONY: all build test run clean install

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

run: build
	./$(BUILD)/bin/kvg-generate -m models/kjv-tiny.gguf -p "And God said" -n 200

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)
