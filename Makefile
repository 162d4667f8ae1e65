# omni-errors developer commands. `make help` lists them.
# Everything runs inside .venv, created with uv from requirements.lock (pinned, vLLM 0.33 included).
# The second supported environment, .venv-omni (vLLM 0.30 + vllm-omni 0.30, requirements-omni.lock),
# runs the suites that need vLLM once more and the vLLM-Omni plugin's suite (tests/vllm_omni). The third,
# .venv-vllm034 (requirements-vllm034.lock), is the development one on the current vLLM, 0.34: the
# vLLM-dependent suites run there too.

PYTHON ?= python3
# Each process may cache the bytecode of what it imports: where PYTHONDONTWRITEBYTECODE is set (as on
# these machines) every process of the suites compiled all it imported again, vLLM and torch included
# (one `vllm-omni serve` start: 79 s of CPU, 38 s with the cache). The first import writes the cache.
unexport PYTHONDONTWRITEBYTECODE
VENV   := .venv
# The distributions beside the core (the root's pyproject.toml), each an editable install in both
# environments: the command line, the audit, the reference tools, the vLLM-Omni plugin.
MEMBERS := packages/cli packages/audit packages/tools packages/vllm-omni
BIN    := $(VENV)/bin
OMNI_VENV := .venv-omni
OMNI_BIN  := $(OMNI_VENV)/bin
# What runs against both vLLM versions: the semantics and the HTTP handlers (what the plugin loads
# into vLLM-Omni's API process), and the plugin's own suite. The rest needs no second vLLM.
OMNI_SUITES ?= tests/vllm_omni tests/semantics tests/server
# The current vLLM (0.34), beside the development lock's 0.33: the same distributions, its own environment.
# vLLM 0.34.0 as published does not resolve (lock-overrides-vllm034.txt says why); its lock is made with
# that one override and installed as pinned. The suites that use vLLM's classes run there; their modules
# whose subject no vLLM release changes run on .venv's alone (VLLM034_SAME: the chaos runner's fault
# scenarios, 7 of the 17 minutes the suites took there on a loaded machine, the docs' tour, and the remote
# link between network namespaces).
VLLM034_VENV := .venv-vllm034
VLLM034_BIN  := $(VLLM034_VENV)/bin
VLLM034_SUITES := tests/semantics tests/server tests/pipeline tests/lifecycle tests/audit/test_audit_names.py
VLLM034_SAME := tests/pipeline/test_chaos.py tests/pipeline/test_tour.py tests/lifecycle/test_remote_netns.py
# The multi-node cases (a real head and --headless stages in two network namespaces) are their own job;
# those of LLM stages run with the other LLM-stage cases (OMNI_LLM_TESTS).
MULTINODE_TESTS := tests/vllm_omni/test_multinode_*.py
# One-host cases that start a server per case or run without the plugin (a fatal failure ends its
# server; the before-cases show the released behaviour): a job of their own beside the rest of the
# one-host suite, so that the two halves' server starts run side by side instead of one after another.
# Its files are listed without the LLM-stage ones: pytest's --ignore-glob skips nothing named on its
# command line (tests/vllm_omni/test_ci_jobs.py checks that each module runs in one job).
OMNI_FATAL_TESTS := tests/vllm_omni/test_fatal_*.py tests/vllm_omni/test_stage_lost.py tests/vllm_omni/test_before_*.py
# The LLM-stage cases (vLLM's EngineCore in each stage process, tests/vllm_omni/fake_llm): their servers
# start one process per stage, so they are a job of their own beside the diffusion ones.
OMNI_LLM_TESTS := tests/vllm_omni/test_*llm*.py
# The upstream series' own suites (the series against the manifest and the plugin, by the plugin's
# modules): they run once, in the upstream suite.
SERIES_TESTS := tests/vllm_omni/test_upstream_*.py
UV     := $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
CARGO  ?= cargo
FUZZ_SECONDS ?= 60
# `make test` times each phase (.ci/phases.py) into this log and prints the table at its end;
# outside `make test` (OMNI_PHASES unset) TIMED only runs its command.
PHASES := $(PYTHON) .ci/phases.py
TIMED  := $(PHASES) run
PHASE_LOG := $(CURDIR)/target/phases.jsonl
VLLM_OMNI_TREE := .cache/vllm-omni-0.30.0/vllm_omni
AUDIT_BASELINE := docs/audit/vllm-omni-0.30.baseline.json
# The project's own audit: `make lint` fails on any site not in this baseline (`make audit-self-baseline`
# rewrites it after a reviewed change; the vllm_omni sites stay in it until the plugin is migrated).
SELF_BASELINE := docs/audit/omni-errors.baseline.json
SELF_AUDITED := python/omni_errors $(foreach m,$(MEMBERS),$(wildcard $(m)/src/*))

.DEFAULT_GOAL := help
.PHONY: help setup build run bench test test-steps test-rust test-python pytest lint format fuzz lock clean audit-corpus \
	audit-inventory audit-baseline audit-self-baseline netns-deps setup-omni build-omni test-omni pytest-omni pytest-multinode bench-omni \
	lock-omni upstream-tree upstream-test pytest-upstream pytest-upstream-core pytest-audit pytest-omni-fatal pytest-omni-llm suites bytecode bytecode-omni \
	setup-vllm034 build-vllm034 test-vllm034 pytest-vllm034 bytecode-vllm034 lock-vllm034

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements.lock
	@echo "setup: installing requirements.lock into $(VENV) (vLLM and torch included: about a minute from uv's cache, several minutes downloading)"
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	@test -x $(BIN)/python || $(UV) venv --quiet --python 3.11 $(VENV)
	$(TIMED) setup -- $(UV) pip install --quiet --python $(BIN)/python -r requirements.lock
	@touch $@

setup: $(VENV)/.installed ## create .venv and install every dependency (vLLM and torch included)

# The one release build of a run: every later install (.venv-omni, the install tests' wheel) names
# this interpreter, so cargo finds its build current and compiles nothing again.
build: setup ## build the Rust extension in release mode into .venv, and install every distribution of packages/ beside it
	@echo "build: compiling the Rust extension in release mode (a first build takes about a minute; later ones, seconds)"
	$(TIMED) build -- env PATH="$(abspath $(BIN)):$$PATH" $(BIN)/maturin develop --release --uv --quiet
	@echo "build: installing the distributions of packages/ into $(VENV) (seconds)"
	$(UV) pip install --quiet --python $(BIN)/python --no-deps --no-build-isolation $(addprefix -e ,$(MEMBERS))

# Options for `omni-errors serve` (`make run ARGS="--port 8001"`; `omni-errors serve --help` lists them).
ARGS ?=
# Ctrl+C reaches make, this shell and the server alike: the shell waits (`trap :`) for the server,
# whose clean stop on SIGINT is exit 130, and reports that as success; any other code fails the target.
run: build ## set up, build, and serve the reference pipeline on 127.0.0.1:8000 (`ARGS="--port N ..."` for serve's options; Ctrl+C stops it)
	@trap : INT; $(BIN)/omni-errors serve $(ARGS); rc=$$?; \
		if [ $$rc -eq 130 ]; then echo "make run: the server stopped cleanly on Ctrl+C"; else exit $$rc; fi

# The sanitizer's baselines: .venv's vLLM (0.33) and the current vLLM's environment (0.34), in one run.
bench: build audit-corpus setup-vllm034 ## benchmarks side by side with their baselines (pytest-benchmark); `omni-errors bench` prints the ratio table
	OMNI_ERRORS_BENCH_VLLM_ENVS=$(VLLM034_VENV) $(BIN)/python -m pytest benches --benchmark-only \
		--benchmark-columns=min,median,ops -q

# After the builds, everything runs side by side: the lints and the Rust tests (one core, a few
# minutes) beside the suites, each mostly one process's imports and server starts, or waits on a
# deadline (the multi-node cases); every test holds beside a CPU-bound load by design. The suites:
# `.venv` (vLLM 0.33) in two jobs, one-host `.venv-omni` in two, multi-node `.venv-omni`, and the after-cases
# on the upstream series' tree. The `.venv` suite was the run's last phase by minutes, alone on a
# half-idle machine at its end: its whole-tree audits and fresh-venv installs (CPU, no waits) are a
# job of their own (`pytest-audit`), so its waits on deadlines start with the rest. The run is bound by
# the CPU all of them need together (the phase table's `cpu`). --output-sync keeps each job's output
# in one piece.
SUITES := pytest pytest-audit pytest-omni pytest-omni-fatal pytest-omni-llm pytest-multinode pytest-upstream \
	pytest-upstream-core pytest-vllm034
# CPU-bound .venv tests with no server and no deadline: `pytest-audit`; after them, one module of
# deadline waits on real processes (pytest runs the paths in order), so that the two .venv jobs end
# together instead of `pytest` alone for minutes at the run's end.
AUDIT_TESTS := tests/audit tests/install tests/lifecycle/test_lifecycle_requests.py
test: export OMNI_PHASES := $(PHASE_LOG)
test: ## every check CI runs: lints, Rust tests, both Python environments, the upstream series; ends with each phase's time
	@$(PHASES) start
	@$(MAKE) --no-print-directory test-steps; rc=$$?; $(PHASES) report; exit $$rc

test-steps: build build-omni build-vllm034 audit-corpus netns-deps upstream-tree
	$(MAKE) --no-print-directory -j8 --output-sync=target lint test-rust suites

# The suites start once both environments' bytecode is cached (.ci/bytecode.py: otherwise each suite's
# first processes compile torch, vLLM and vLLM-Omni at once); the lints and the Rust tests meanwhile.
suites: bytecode bytecode-omni bytecode-vllm034
	@$(MAKE) --no-print-directory --output-sync=target $(SUITES)

# Like the suites' targets, these take the environments as built (`make build build-omni upstream-tree`).
bytecode:
	$(TIMED) bytecode -- $(BIN)/python .ci/bytecode.py venv

bytecode-vllm034:
	$(TIMED) bytecode-vllm034 -- $(VLLM034_BIN)/python .ci/bytecode.py venv

# The series' tree has its own vllm_omni: cached on its path too.
bytecode-omni:
	$(TIMED) bytecode-omni -- $(OMNI_BIN)/python .ci/bytecode.py omni
	$(TIMED) bytecode-upstream -- env PYTHONPATH=$(abspath $(UPSTREAM_TREE)) $(OMNI_BIN)/python .ci/bytecode.py omni

test-rust: ## cargo tests: the pure-Rust core and the PyO3 glue in one debug build; the core builds without PyO3
	$(TIMED) cargo-test -- $(CARGO) test --quiet
	$(TIMED) core-without-pyo3 -- $(CARGO) build --no-default-features --lib --quiet

test-python: build audit-corpus netns-deps pytest pytest-audit ## the pytest suite in .venv (vLLM 0.33)

pytest:
	$(TIMED) pytest -- $(BIN)/python -m pytest $(addprefix --ignore=,$(AUDIT_TESTS))

pytest-audit:
	$(TIMED) pytest-audit -- $(BIN)/python -m pytest $(AUDIT_TESTS)

audit-corpus: setup ## download and unpack the vllm-omni 0.30.0 wheel into .cache/ (real code for the audit tests)
	$(TIMED) audit-corpus -- $(BIN)/python tests/audit/vllm_omni_wheel.py

audit-inventory: build audit-corpus ## print the audit table of vllm-omni 0.30 (the inventory in docs/migration.md)
	$(BIN)/omni-errors audit $(VLLM_OMNI_TREE) --exit-zero --no-progress

audit-baseline: build audit-corpus ## rewrite the committed vllm-omni 0.30 allowlist in docs/audit/
	$(BIN)/omni-errors audit $(VLLM_OMNI_TREE) --baseline $(AUDIT_BASELINE) --write-baseline --no-progress > /dev/null

$(OMNI_VENV)/.installed: requirements-omni.lock
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	@test -x $(OMNI_BIN)/python || $(UV) venv --quiet --python 3.11 $(OMNI_VENV)
	$(TIMED) setup-omni -- $(UV) pip sync --quiet --python $(OMNI_BIN)/python requirements-omni.lock
	@touch $@

setup-omni: $(OMNI_VENV)/.installed ## create .venv-omni: vLLM 0.30 + vllm-omni 0.30 (torch comes from the uv cache)

# The editable install names .venv's interpreter to maturin: the same build as `make build`, so
# nothing compiles (both are CPython 3.11; the extension is the one `make build` made).
build-omni: setup-omni build ## install omni-errors, the distributions of packages/ (the plugin's entry point) and the test-only fake diffusion and LLM plugins into .venv-omni
	$(TIMED) build-omni -- env PATH="$(abspath $(OMNI_BIN)):$$PATH" \
		MATURIN_PEP517_ARGS="--interpreter $(abspath $(BIN))/python" \
		$(UV) pip install --quiet --python $(OMNI_BIN)/python --no-deps --no-build-isolation -e . $(addprefix -e ,$(MEMBERS)) \
		-e tests/vllm_omni/fake_diffusion -e tests/vllm_omni/fake_llm

$(VLLM034_VENV)/.installed: requirements-vllm034.lock
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	@test -x $(VLLM034_BIN)/python || $(UV) venv --quiet --python 3.11 $(VLLM034_VENV)
	$(TIMED) setup-vllm034 -- $(UV) pip sync --quiet --python $(VLLM034_BIN)/python requirements-vllm034.lock
	@touch $@

setup-vllm034: $(VLLM034_VENV)/.installed ## create .venv-vllm034: the development environment on vLLM 0.34 (requirements-vllm034.lock)

# As build-omni: maturin is named .venv's interpreter, so the extension `make build` made is reused.
build-vllm034: setup-vllm034 build ## install omni-errors and the distributions of packages/ into .venv-vllm034
	$(TIMED) build-vllm034 -- env PATH="$(abspath $(VLLM034_BIN)):$$PATH" \
		MATURIN_PEP517_ARGS="--interpreter $(abspath $(BIN))/python" \
		$(UV) pip install --quiet --python $(VLLM034_BIN)/python --no-deps --no-build-isolation -e . $(addprefix -e ,$(MEMBERS))

test-vllm034: build-vllm034 pytest-vllm034 ## the suites that use vLLM's classes (semantics, server, pipeline, lifecycle, the audit's vLLM table) on vLLM 0.34

pytest-vllm034:
	$(TIMED) pytest-vllm034 -- $(VLLM034_BIN)/python -m pytest $(VLLM034_SUITES) $(addprefix --ignore=,$(VLLM034_SAME))

test-omni: build-omni netns-deps pytest-omni pytest-omni-fatal pytest-omni-llm pytest-multinode ## the vLLM-Omni suite (multi-node in two namespaces: root) and the vLLM-dependent suites again, on vLLM 0.30 + vllm-omni 0.30

pytest-omni:
	$(TIMED) pytest-omni -- $(OMNI_BIN)/python -m pytest $(OMNI_SUITES) --ignore-glob='$(MULTINODE_TESTS)' \
		$(foreach glob,$(OMNI_FATAL_TESTS) $(OMNI_LLM_TESTS),--ignore-glob='$(glob)') --ignore-glob='$(SERIES_TESTS)'

pytest-omni-fatal:
	$(TIMED) pytest-omni-fatal -- $(OMNI_BIN)/python -m pytest $(filter-out $(wildcard $(OMNI_LLM_TESTS)),$(wildcard $(OMNI_FATAL_TESTS)))

pytest-omni-llm:
	$(TIMED) pytest-omni-llm -- $(OMNI_BIN)/python -m pytest $(OMNI_LLM_TESTS)

pytest-multinode:
	$(TIMED) pytest-multinode -- $(OMNI_BIN)/python -m pytest $(filter-out $(wildcard $(OMNI_LLM_TESTS)),$(wildcard $(MULTINODE_TESTS)))

bench-omni: build-omni ## the time and memory the vLLM-Omni plugin adds to each kind of process's start
	$(OMNI_BIN)/python benches/plugin_startup.py

# The upstream series (upstream/vllm-omni/0.30.0, docs/upstream.md) applied to the unpacked 0.30.0 wheel:
# every patch `git apply --check`ed on the tree its predecessors made, then applied (no fuzz), the whole
# series into UPSTREAM_TREE and every prefix into UPSTREAM_TREE-K. The tests put the patched package
# first on .venv-omni's path (PYTHONPATH): the same torch and vLLM, no second install.
UPSTREAM_TREE := .cache/vllm-omni-0.30.0-upstream
UPSTREAM_TESTS ?= $(SERIES_TESTS) tests/vllm_omni/test_after_inline.py tests/vllm_omni/test_after_subprocess.py \
	tests/vllm_omni/test_http_surface.py tests/vllm_omni/test_multinode_after.py tests/vllm_omni/test_fatal_llm_pipeline.py \
	tests/vllm_omni/test_multinode_llm.py

upstream-tree: audit-corpus ## apply the upstream patch series (and each prefix) to the vllm-omni 0.30.0 sources in .cache/
	$(TIMED) upstream-tree -- $(BIN)/python tests/vllm_omni/upstream_tree.py --prefixes

upstream-test: build-omni upstream-tree pytest-upstream ## the vLLM-Omni after-cases on the patched tree (the plugin patching only what is not upstreamed)

pytest-upstream:
	$(TIMED) pytest-upstream -- env PYTHONPATH=$(abspath $(UPSTREAM_TREE)) OMNI_ERRORS_UPSTREAM_TREE=$(abspath $(UPSTREAM_TREE)) \
		$(OMNI_BIN)/python -m pytest $(UPSTREAM_TESTS)

# The series' tree with only the core: vLLM loads no plugin of omni-errors (tests/vllm_omni/omni_server.py,
# CORE_ONLY), and the after-cases still hold: vLLM-Omni's own code gives them.
pytest-upstream-core:
	$(TIMED) pytest-upstream-core -- env PYTHONPATH=$(abspath $(UPSTREAM_TREE)) OMNI_ERRORS_UPSTREAM_TREE=$(abspath $(UPSTREAM_TREE)) \
		OMNI_ERRORS_CORE_ONLY=1 $(OMNI_BIN)/python -m pytest tests/vllm_omni/test_after_inline.py

lock-omni: ## re-pin requirements-omni.lock from every distribution's pyproject.toml (the plugin's vLLM 0.30) and the dev group
	$(UV) pip compile --quiet pyproject.toml $(addsuffix /pyproject.toml,$(MEMBERS)) --group pyproject.toml:dev \
		$(NO_EMIT_MEMBERS) --python-version 3.11 --python-platform x86_64-unknown-linux-gnu -o requirements-omni.lock

lock-vllm034: ## re-pin requirements-vllm034.lock: the development lock's distributions on vLLM 0.34 (with its one override)
	$(UV) pip compile --quiet pyproject.toml $(addsuffix /pyproject.toml,$(filter-out packages/vllm-omni,$(MEMBERS))) \
		--group pyproject.toml:dev $(NO_EMIT_MEMBERS) --constraint lock-constraints-vllm034.txt \
		--override lock-overrides-vllm034.txt --python-version 3.11 --python-platform x86_64-unknown-linux-gnu \
		-o requirements-vllm034.lock

# The remote-stage tests build network namespaces (root only; they skip without root). As root,
# install what they need if it is missing: iproute2 (ip, tc) and Debian's nftables (nft).
netns-deps: ## as root, install the network-namespace tests' tools (iproute2, nftables) if missing
	@if [ "$$(id -u)" = 0 ] && ! { command -v nft && command -v tc && command -v ip; } >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			iproute2 nftables; fi

lint: setup ## rustfmt, clippy, ruff, mypy, stubtest, the project's own audit against its baseline
	$(TIMED) rustfmt -- $(CARGO) fmt --all -- --check
	$(TIMED) clippy -- $(CARGO) clippy --all-targets --quiet -- -D warnings
	$(TIMED) ruff-format -- $(BIN)/ruff format --check python packages tests benches .ci
	$(TIMED) ruff-check -- $(BIN)/ruff check python packages tests benches .ci
	$(TIMED) mypy -- $(BIN)/mypy
	$(TIMED) stubtest -- $(BIN)/python -m mypy.stubtest omni_errors._native --allowlist .stubtest-allowlist \
		--mypy-config-file .stubtest-mypy.ini
	$(TIMED) self-audit -- sh -c '$(BIN)/omni-errors-audit $(SELF_AUDITED) --baseline $(SELF_BASELINE) \
		--no-progress > /dev/null'

audit-self-baseline: build ## rewrite the project's own audit baseline (docs/audit/omni-errors.baseline.json)
	$(BIN)/omni-errors-audit $(SELF_AUDITED) --baseline $(SELF_BASELINE) --write-baseline --no-progress > /dev/null

format: setup ## apply rustfmt and ruff formatting
	$(CARGO) fmt --all
	$(BIN)/ruff format python packages tests benches
	$(BIN)/ruff check --fix python packages tests benches

fuzz: ## run each cargo-fuzz target for FUZZ_SECONDS (needs cargo-fuzz)
	@command -v cargo-fuzz >/dev/null 2>&1 || $(CARGO) install cargo-fuzz --locked
	@# The decoder's seeds: the valid test vectors (random bytes rarely get past the header).
	@mkdir -p rust/fuzz/corpus/decode && $(PYTHON) -c "import json, pathlib; \
		[pathlib.Path('rust/fuzz/corpus/decode', v['name']).write_bytes(bytes.fromhex(v['hex'])) \
		for v in json.load(open('tests/vectors/frames.json'))['valid']]"
	cd rust/fuzz && for t in $$(RUSTC_BOOTSTRAP=1 cargo fuzz list); do \
		RUSTC_BOOTSTRAP=1 cargo fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) || exit 1; done

# The locks pin third-party packages only: the project's own distributions are installed from packages/.
NO_EMIT_MEMBERS := --no-emit-package omni-errors $(foreach m,$(MEMBERS),--no-emit-package omni-errors-$(notdir $(m)))

lock: ## re-pin requirements.lock from the distributions but the plugin, and the dev group (vLLM 0.33: lock-constraints.txt)
	$(UV) pip compile --quiet pyproject.toml $(addsuffix /pyproject.toml,$(filter-out packages/vllm-omni,$(MEMBERS))) \
		--group pyproject.toml:dev $(NO_EMIT_MEMBERS) --constraint lock-constraints.txt --python-version 3.11 \
		--python-platform x86_64-unknown-linux-gnu -o requirements.lock

clean: ## remove build outputs and the virtual environments
	rm -rf target rust/fuzz/target $(VENV) $(OMNI_VENV) $(VLLM034_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .benchmarks
