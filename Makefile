# Perf Casebook. `make serve` to read the guide, `make test` for the fast tests, `make test-all` for
# the whole suite (what CI runs: .ci/run).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
TOOLS := $(CURDIR)/.tools
# cargo and rustup where rustup puts them, when not on PATH already
export PATH := $(TOOLS)/bin:$(PATH):$(HOME)/.cargo/bin
# Python's compiled modules are kept beside the sources (__pycache__, git-ignored): where the
# environment sets PYTHONDONTWRITEBYTECODE (CI machines often do), every test run, each of its
# workers and every labkit process a lab starts compiled the checkout's modules again (collecting
# the fast tier: 12 s instead of 4 s on two slow vCPUs). Not under a PYTHONPYCACHEPREFIX: Python
# would look for every module's there, the venv's too, and compile numpy, scipy and matplotlib
# again in each process of a fresh clone's first run (9 s each here) instead of reading the ones
# pip wrote at install.
unexport PYTHONDONTWRITEBYTECODE
HOST ?=
FULL ?=
# Debian packages (installed when root with apt): each lab's own, from its manifest
# (labs/<lab>/lab.toml `debs`), and the base set: the host probe (bpftrace), recordings, the
# browser and lint tests, the cross-compiled arm64 tests, and what labkit.guest needs to assemble
# and boot guests (QEMU, mmdebstrap, dtc, mke2fs, cpio, depmod).
LAB_DEBS := $(shell python3 labkit/manifest.py --debs 2>/dev/null)
DEBS := $(LAB_DEBS) bpftrace asciinema chromium shellcheck make gcc util-linux procps \
        gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static \
        qemu-system-arm qemu-system-x86 mmdebstrap device-tree-compiler cpio e2fsprogs kmod
INFERNO_VERSION := 0.12.8
# Compiled tools are built once per machine here and copied into each checkout's .tools
TOOL_CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/perf-casebook/tools

.PHONY: setup serve site labs labs-arm64 ci-labs test test-all mutation bench clean

# `make setup`: every stage, one progress line each. `make serve` needs only the first (the
# site is built from committed results and figures; nothing is compiled to read it).
setup: venv debs inferno actionlint node-tools
	@echo "setup: done"

.PHONY: venv
venv: $(VENV)/.stamp
	@echo "setup [1/5] Python venv $(VENV): ready"

# uv (from PyPI, pinned) installs the pinned packages: it downloads them in parallel and links them
# from its cache, several times faster than pip. Where uv cannot run, pip does the same install.
UV_VERSION := 0.13.9
$(VENV)/.stamp: requirements.txt pyproject.toml
	@echo "setup [1/5] Python venv $(VENV): installing the pinned packages of requirements.txt (about 15 s)"
	@python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Python >= 3.11 is needed (python3 is $$(python3 -V))"; exit 1; }
	@python3 -m venv $(VENV)
	@if $(PY) -m pip install -q --disable-pip-version-check uv==$(UV_VERSION) 2>/dev/null && \
	    $(VENV)/bin/uv pip install -q --python $(PY) -r requirements.txt && \
	    $(VENV)/bin/uv pip install -q --python $(PY) --no-deps -e .; then :; else \
	  echo "setup [1/5] uv did not install the packages: pip instead"; \
	  $(PY) -m pip install -q --disable-pip-version-check --prefer-binary -r requirements.txt && \
	  $(PY) -m pip install -q --disable-pip-version-check --no-deps -e .; fi
	@touch $@

.PHONY: debs
debs:
	@echo "setup [2/5] Debian packages the labs use (root and apt-get: installed; otherwise listed)"
	@missing=$$(for p in $(DEBS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -q >/dev/null; \
	  avail=""; for p in $$missing; do \
	    if apt-cache policy $$p 2>/dev/null | grep -q 'Candidate: [0-9]'; then avail="$$avail $$p"; \
	    elif [ $$p = linux-perf ]; then \
	      if apt-cache policy linux-tools-$$(uname -r) 2>/dev/null | grep -q 'Candidate: [0-9]'; then \
	        avail="$$avail linux-tools-common linux-tools-$$(uname -r)"; \
	      else echo "note: no linux-tools-$$(uname -r) package for this kernel: labs skip their perf steps"; fi; \
	    else echo "note: no Debian package $$p here; labs skip the steps that need it"; fi; \
	  done; \
	  echo "installing packages:$$avail"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$avail >/dev/null || echo "note: some packages did not install"; \
	else \
	  echo "note: missing Debian packages (labs will skip the steps that need them): $$missing"; \
	fi

.PHONY: inferno
inferno:
	@echo "setup [3/5] inferno $(INFERNO_VERSION) (flame graphs, for the labs) in $(TOOLS)"
	@if [ -x $(TOOLS)/bin/inferno-flamegraph ]; then exit 0; fi; \
	c=$(TOOL_CACHE)/inferno-$(INFERNO_VERSION); \
	if [ ! -x $$c/bin/inferno-flamegraph ] && command -v cargo >/dev/null; then \
	  echo "compiling inferno $(INFERNO_VERSION) into $$c (cargo install --locked, about a minute; once per machine)"; \
	  cargo install -q --locked --root $$c inferno@$(INFERNO_VERSION) || rm -rf $$c; \
	fi; \
	if [ -x $$c/bin/inferno-flamegraph ]; then mkdir -p $(TOOLS) && cp -a $$c/. $(TOOLS)/; \
	else echo "note: cargo not found or inferno did not build: flame graph steps will be skipped"; fi

# inferno for arm64 guests (Debian has no package; labs --guest arm64 copy it into the guest).
# Cross-built with cargo for aarch64-unknown-linux-gnu, linked by the Debian cross gcc.
.PHONY: inferno-arm64
inferno-arm64:
	@echo "inferno $(INFERNO_VERSION) for arm64 guests in $(TOOLS)/arm64"
	@if [ -x $(TOOLS)/arm64/bin/inferno-flamegraph ]; then exit 0; fi; \
	c=$(TOOL_CACHE)/inferno-$(INFERNO_VERSION)-aarch64; \
	if [ ! -x $$c/bin/inferno-flamegraph ]; then \
	  if command -v cargo >/dev/null && command -v rustup >/dev/null && command -v aarch64-linux-gnu-gcc >/dev/null; then \
	    echo "cross-building inferno $(INFERNO_VERSION) for aarch64 into $$c (cargo install --locked --target, a few minutes; once per machine)"; \
	    rustup target add aarch64-unknown-linux-gnu >/dev/null 2>&1; \
	    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
	      cargo install -q --locked --root $$c --target aarch64-unknown-linux-gnu inferno@$(INFERNO_VERSION) || rm -rf $$c; \
	  else echo "note: cargo, rustup or aarch64-linux-gnu-gcc not found"; fi; \
	fi; \
	if [ -x $$c/bin/inferno-flamegraph ]; then mkdir -p $(TOOLS)/arm64 && cp -a $$c/. $(TOOLS)/arm64/; \
	else echo "note: no arm64 inferno: flame graph steps in arm64 guests will be skipped"; fi

ACTIONLINT_VERSION := v1.7.12
.PHONY: actionlint
actionlint:
	@echo "setup [4/5] actionlint $(ACTIONLINT_VERSION) (the workflow lint test) in $(TOOLS)"
	@if [ -x $(TOOLS)/bin/actionlint ]; then exit 0; fi; \
	if command -v go >/dev/null; then \
	  echo "installing actionlint $(ACTIONLINT_VERSION) into $(TOOLS) (go install)"; \
	  GOBIN=$(TOOLS)/bin go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION); \
	else \
	  echo "note: go not found: the workflow lint test will be skipped"; \
	fi

# axe-core (the page budget test) and Lighthouse (`make bench` and the `timing` test of `make test-all`), pinned in tests/node/ (npm
# install with that lock: `npm ci` refuses it, as one of Lighthouse's dependencies asks for a "latest" tag).
.PHONY: node-tools
node-tools:
	@echo "setup [5/5] axe-core and Lighthouse (npm, for the page budget test and make bench) in $(TOOLS)/node"
	@if [ ! -f $(TOOLS)/node/.stamp ] || [ tests/node/package-lock.json -nt $(TOOLS)/node/.stamp ]; then \
	  if command -v npm >/dev/null; then \
	    mkdir -p $(TOOLS)/node && cp tests/node/package.json tests/node/package-lock.json $(TOOLS)/node/ && \
	    npm install --prefix $(TOOLS)/node --no-audit --no-fund --loglevel=error >/dev/null && touch $(TOOLS)/node/.stamp \
	    || echo "note: npm install failed: the page budget test will be skipped"; \
	  else \
	    echo "note: npm not found: the page budget test will be skipped, make bench prints no Lighthouse scores"; \
	  fi; \
	fi

PORT ?= 8000
serve: venv
	@echo "serve: building the guide, then serving it at http://127.0.0.1:$(PORT) (it rebuilds when docs/, labkit/, labs/, results/ or local-results/ change: reload after a lab run)"
	@NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve --strict -a 127.0.0.1:$(PORT)

PERF_CASEBOOK_RESULTS ?=
export PERF_CASEBOOK_RESULTS

site: setup
	$(PY) -m mkdocs build --strict

labs: setup
	@for run in labs/*/run.sh; do \
	  echo "== $$run"; \
	  bash $$run $(if $(FULL),,--quick) $(if $(HOST),--host $(HOST)) || echo "$$run exited $$?"; \
	done

# Every lab inside an emulated arm64 guest (QEMU; labkit.guest assembles it from Debian arm64
# packages, cached under ~/.cache/perf-casebook/guest): results in local-results/qemu-arm64-<accel>/.
# OUT=dir to write elsewhere (e.g. OUT=results/qemu-arm64-tcg for reference results).
OUT ?=
labs-arm64: setup inferno-arm64
	@for run in labs/*/run.sh; do \
	  echo "== $$run --guest arm64"; \
	  bash $$run --guest arm64 $(if $(FULL),,--quick) $(if $(OUT),--out $(OUT)) || echo "$$run exited $$?"; \
	done

# What a CI runner runs and uploads (see .github/workflows/labs.yml): LABS=a,b HOST=label FULL=1 CI_OUT=dir
LABS ?=
ci-labs: setup
	bash .github/ci-labs.sh $(if $(FULL),--full) $(if $(HOST),--host $(HOST)) $(if $(LABS),--labs $(LABS)) $(if $(CI_OUT),--out $(CI_OUT))

# The fast tier (no lab run for real, no guest boot, no browser, no site build: under 150 s), and
# everything (markers by rule in conftest.py; every test has a pytest-timeout).
# The fast tier runs on every CPU (pytest-xdist; one worker runs all the tests of a file, so
# tests that share the fake lab's lock stay in one file). The rest of the suite: first what
# measures nothing (site builds, browsers checking pages, the fake lab, QEMU guests that labkit.guest
# boots without a lab) on every CPU, the fake lab's tests on one worker (their xdist_group); then
# the labs (a lab run in a guest too: one lab run per host, the lab lock) and what measures time
# (Lighthouse), one at a time, since two at once would measure each other.
FAST := not lab and not guest and not slow and not timing
XDIST := -n auto --dist loadfile
# `make test` needs only the venv (tests whose tools are missing skip, with the reason);
# `make test-all` installs everything first (`make setup`), then runs the fast tier and the rest.
test: venv
	$(PY) -m pytest -m "$(FAST)" $(XDIST) --durations=15

test-all: setup test
	$(PY) -m pytest -m "not ($(FAST)) and not lab and not timing" -n auto --dist loadgroup --durations=20
	$(PY) -m pytest -m "not ($(FAST)) and (lab or timing)" --durations=40

# Mutation testing (mutmut, in a copy of the checkout: the tree in use is never mutated) of the
# modules that turn results into verdicts and pages, against the fast tier's unit tests.
# MUTATE=labkit/stats/claims.py,labkit/model.py to run on some of them; SAMPLE=40 to test 40 mutants per
# module drawn at random (all of them take hours on two CPUs). Prints the kill ratio per module and in all
# (target >= 80 % in all). A mutant of supervisor, journal or record that their own tests miss runs the
# fake lab's tests too (1-5 minutes on two busy CPUs): a sample of 30 of each can take an hour or more.
SAMPLE ?= 0
comma := ,
MUTMUT_VERSION := 2.5.1
MUTATE_CONTRACT := labkit/record.py,labkit/manifest.py,labkit/run/probe.py,labkit/run/supervisor.py,labkit/run/journal.py,labkit/guest/command.py
MUTATE ?= labkit/stats/claims.py,labkit/stats/calibration.py,labkit/stale.py,labkit/model.py,labkit/results.py,labkit/view/render.py,labkit/view/charts.py,$(subst $(eval) ,$(comma),$(sort $(wildcard labkit/site/macros/*.py))),$(MUTATE_CONTRACT)
mutation: setup
	@[ -x $(TOOLS)/mutmut/bin/mutmut ] || { python3 -m venv $(TOOLS)/mutmut && \
	  $(TOOLS)/mutmut/bin/pip install -q --disable-pip-version-check mutmut==$(MUTMUT_VERSION); }
	$(PY) tests/mutation.py --mutmut $(TOOLS)/mutmut/bin/mutmut --paths $(MUTATE) --sample $(SAMPLE)

# BENCH_ARGS="--pages-only" to skip the lab runs, "--no-lighthouse" to skip Lighthouse.
# Then the fault matrix (tests/fault_matrix.py: cases tried, cases clean; root for the labs).
BENCH_ARGS ?=
bench: setup
	NO_MKDOCS_2_WARNING=1 $(PY) tests/bench.py $(BENCH_ARGS)
	$(PY) tests/fault_matrix.py

clean:
	rm -rf site .pytest_cache test-artifacts
