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

test: $(BUILD)/CMakeCache.txt
	@scripts/check-test-deps.sh $(BUILD)
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# builds only the libraries and kvg-generate, then generates text with the shipped model
run: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target kvg-generate
	./$(BUILD)/bin/kvg-generate -m models/kjv-tiny.gguf -p "And God said" -n 200

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)
