# Two commands for a newcomer: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: venv demo example test bench bench-kb bench-live bench-replay bench-soak lint evaluate evaluate-heldout ledger phases

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev,sim]'
	touch $(STAMP)

venv: $(STAMP)

# The offline plan on the shipped dump, then the daemon's loop on a simulated cluster.
demo: example
	$(VENV)/bin/tuner demo

example: venv
	$(VENV)/bin/tuner plan --snapshot examples/cluster-dump.json --settings settings/example.json

test: venv
	scripts/test.sh

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: venv
	$(VENV)/bin/python -m bench.plan_scale
	$(VENV)/bin/python -m bench.packing_quality

# The knowledge graph at scale on a private Neo4j (about half an hour, most of it loading).
bench-kb: venv
	bash scripts/neo4j.sh install
	$(VENV)/bin/python -m bench.kb_lookup

# The live path on a private control plane with 100 and 1,000 KWOK nodes (about 15 minutes
# on 2 cores, most of it the controllers creating 30,000 pods; see docs/performance.md).
bench-live: venv
	bash scripts/cluster.sh build
	$(VENV)/bin/python -m bench.live_scale --nodes 100 1000 --repeat 3

# The daemon's memory over many cycles: `tuner run` on a private control plane with Prometheus,
# removing a node that the bench brings back, RSS after each of 600 cycles (about 25 minutes on
# 2 cores); fails when its growth less SQLite's page cache over the last 200 cycles exceeds
# 0.07 MB per 100 (a leak of 1 kB a cycle fails it).
bench-soak: venv
	bash scripts/cluster.sh build
	bash scripts/prometheus.sh install
	$(VENV)/bin/python -m bench.daemon_soak --cycles 600 --warmup 50 --runs 1

# One scenario replayed on the real control plane (HPA, metrics-server, Karpenter, the tuner's
# daemon) against the simulator; adds to docs/fidelity/results.json (see docs/fidelity.md).
# Real time: HOURS of the scenario at SPEEDUP take HOURS/SPEEDUP hours, times RUNS.
SCENARIO ?= bench/scenarios/fidelity-shops.json
COMPARISON ?= hpa
RUNS ?= 1
bench-replay: venv
	bash scripts/cluster.sh build
	$(VENV)/bin/python -m bench.replay --scenario $(SCENARIO) --comparison $(COMPARISON) \
		--runs $(RUNS) $(if $(HOURS),--hours $(HOURS)) $(if $(SPEEDUP),--speedup $(SPEEDUP)) \
		$(if $(WARMUP),--warmup $(WARMUP)) $(if $(NODE_REMOVAL),--node-removal $(NODE_REMOVAL))

# Every scenario with every strategy; README tables and plots regenerated (JOBS simulations at once).
JOBS ?= 3
evaluate: venv
	$(VENV)/bin/tuner simulate --scenario all --jobs $(JOBS) --output docs/evaluation --readme README.md

# The held-out scenario files (bench/scenarios/heldout: traces, node types and mixes no default
# was tuned on), each with every strategy, into docs/evaluation/heldout/<file>/.
evaluate-heldout: venv
	for f in bench/scenarios/heldout/*.json; do \
		$(VENV)/bin/tuner simulate --scenario $$f --output docs/evaluation/heldout/$$(basename $$f .json) || exit 1; \
	done

# Where the headline row leaves the room: its cost above the lower bound by the tuner's last cycle
# outcome and by node, on every scenario and held-out file, printed, and one row per scenario put
# into the table between LEDGER_DOC's ledger markers (docs/evaluation.md, "Where the room goes";
# rows of scenarios not run are kept).
LEDGER_DOC ?= docs/evaluation.md
ledger: venv
	$(VENV)/bin/tuner simulate --scenario all --strategy tuner --ledger-doc $(LEDGER_DOC) --jobs $(JOBS)
	for f in bench/scenarios/heldout/*.json; do \
		$(VENV)/bin/tuner simulate --scenario $$f --strategy tuner --ledger-doc $(LEDGER_DOC) || exit 1; \
	done

# How much the headline row's figures owe to where its cycles fall: every scenario and held-out
# file run PHASES times, its first look 10 s later each time, one row per scenario put into the
# table between LEDGER_DOC's phases markers (docs/evaluation.md, "How much is the phase").
PHASES ?= 6
phases: venv
	$(VENV)/bin/tuner simulate --scenario all --strategy tuner --phases $(PHASES) --phases-doc $(LEDGER_DOC) --jobs $(JOBS)
	for f in bench/scenarios/heldout/*.json; do \
		$(VENV)/bin/tuner simulate --scenario $$f --strategy tuner --phases $(PHASES) --phases-doc $(LEDGER_DOC) --jobs $(JOBS) || exit 1; \
	done
