# Every target first runs scripts/setup.sh: it installs what is missing and configures build/.
JOBS ?= $(shell nproc)
# cmake's own make would otherwise print every directory it enters, once per target.
MAKEFLAGS += --no-print-directory

.PHONY: setup build run demo test bench accuracy clean

setup:
	@bash scripts/setup.sh

build: setup
	cmake --build build -j $(JOBS)

# The real job: SmolLM2-135M pruned (magnitude) to 6:8, 4:8 and 2:4 next to the dense model, one table of
# perplexity (16 chunks of 512 tokens of the evaluation text), size, decode and prefill tokens/s.
run: build
	@model=$$(bash scripts/fetch_model.sh) && text=$$(bash scripts/fetch_texts.sh eval) && \
	  ./build/nmkit sweep "$$model" --text "$$text" --patterns 6:8,4:8,2:4 --chunks 16

# The MiniLM checkpoint demo (prune, pack, slide, check) that `make run` ran before the real model.
demo: build
	@model=$$(bash scripts/fetch_demo_model.sh) && ./build/nmkit demo --model "$$model" --out build/demo

test: build
	cd build && ctest --output-on-failure -j $(JOBS)

bench: build
	./build/nmkit bench quant
	./build/nmkit bench linear
	@model=$$(bash scripts/fetch_model.sh) && ./build/nmkit bench model "$$model"

# The accuracy table (issue 11) and chart (issue 28): SmolLM2 perplexity (ctx 512) dense and 6:8/4:8/2:4 x
# magnitude, Wanda, SparseGPT (and ADMM at the ADMM patterns), calibrated on the project's calibration text,
# each in f32 and int8, next to llama.cpp's quantizations of the same model (llama-quantize; perplexity by
# llama-perplexity and by nmkit eval); then decode speeds (nmkit's forms, then llama-bench), after every
# perplexity; then the table and docs/accuracy.png/.svg. CHUNKS=0 evaluates the whole text (slow);
# THREADS=1 times decode on one thread (nmkit and llama-bench) where other jobs load the cores;
# ADMM= skips ADMM (4 minutes at 6:8 on a quiet 2-core machine; 8 and 15 at 4:8 and 2:4 loaded); RESUME=FILE takes the rows an earlier
# (partial) bench accuracy JSON holds instead of running them again.
CHUNKS ?= 32
PATTERNS ?= 6:8,4:8,2:4
ADMM ?= 6:8,4:8,2:4
ACCURACY_JSON ?= build/accuracy.json
CHART ?= docs/accuracy
accuracy: build
	@bash scripts/setup.sh chart
	@model=$$(bash scripts/fetch_model.sh) && bash scripts/fetch_texts.sh >/dev/null && \
	  CHUNKS=$(CHUNKS) bash scripts/bench_models.sh quant-perplexity >/dev/null && \
	  $(if $(THREADS),NMKIT_THREADS=$(THREADS)) ./build/nmkit bench accuracy "$$model" --chunks $(CHUNKS) --patterns $(PATTERNS) --admm "$(ADMM)" \
	    $(if $(RESUME),--resume $(RESUME)) --json $(ACCURACY_JSON) && \
	  THREADS=$(THREADS) bash scripts/bench_models.sh quant-speed >/dev/null && \
	  python3 scripts/accuracy_chart.py --nmkit $(ACCURACY_JSON) --llamacpp .cache/bench/quants-perplexity.json \
	    --llamacpp-speed .cache/bench/quants-speed.json --out $(CHART)

clean:
	rm -rf build
