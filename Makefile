# Every target first runs scripts/setup.sh: it installs what is missing and configures build/.
JOBS ?= $(shell nproc)
# cmake's own make would otherwise print every directory it enters, once per target.
MAKEFLAGS += --no-print-directory

.PHONY: setup build run test bench clean

setup:
	@bash scripts/setup.sh

build: setup
	cmake --build build -j $(JOBS)

run: build
	@model=$$(bash scripts/fetch_demo_model.sh) && ./build/nmkit demo --model "$$model" --out build/demo

test: build
	cd build && ctest --output-on-failure -j $(JOBS)

bench: build
	./build/nmkit bench quant
	./build/nmkit bench linear

clean:
	rm -rf build
