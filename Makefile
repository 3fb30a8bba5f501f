# Perf Casebook. `make serve` to read the guide, `make test` for the whole suite.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
TOOLS := $(CURDIR)/.tools
export PATH := $(TOOLS)/bin:$(PATH)
HOST ?=
FULL ?=
# Debian packages the labs and the browser tests use (installed when root with apt). The last line:
# what labkit.guest needs to assemble and boot guests (QEMU, mmdebstrap, dtc, mke2fs, cpio, depmod).
DEBS := fio linux-perf strace sysstat trace-cmd blktrace bpftrace xfsprogs auditd iproute2 \
        hwloc asciinema chromium sockperf sysbench gcc make util-linux procps \
        gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static \
        qemu-system-arm qemu-system-x86 mmdebstrap device-tree-compiler cpio e2fsprogs kmod
INFERNO_VERSION := 0.12.8

.PHONY: setup serve site labs labs-arm64 ci-labs test bench clean

setup: $(VENV)/.stamp debs inferno actionlint

$(VENV)/.stamp: requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

.PHONY: debs
debs:
	@missing=$$(for p in $(DEBS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -q >/dev/null; \
	  avail=""; for p in $$missing; do \
	    if apt-cache policy $$p 2>/dev/null | grep -q 'Candidate: [0-9]'; then avail="$$avail $$p"; \
	    elif [ $$p = linux-perf ]; then avail="$$avail linux-tools-common linux-tools-$$(uname -r)"; \
	    else echo "note: no Debian package $$p here; labs skip the steps that need it"; fi; \
	  done; \
	  echo "installing packages:$$avail"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$avail >/dev/null || echo "note: some packages did not install"; \
	else \
	  echo "note: missing Debian packages (labs will skip the steps that need them): $$missing"; \
	fi

.PHONY: inferno
inferno:
	@if [ -x $(TOOLS)/bin/inferno-flamegraph ]; then exit 0; fi; \
	if command -v cargo >/dev/null; then \
	  echo "installing inferno $(INFERNO_VERSION) into $(TOOLS) (cargo)"; \
	  cargo install -q --locked --root $(TOOLS) inferno@$(INFERNO_VERSION); \
	else \
	  echo "note: cargo not found: flame graph steps will be skipped"; \
	fi

ACTIONLINT_VERSION := v1.7.12
.PHONY: actionlint
actionlint:
	@if [ -x $(TOOLS)/bin/actionlint ]; then exit 0; fi; \
	if command -v go >/dev/null; then \
	  echo "installing actionlint $(ACTIONLINT_VERSION) into $(TOOLS) (go install)"; \
	  GOBIN=$(TOOLS)/bin go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION); \
	else \
	  echo "note: go not found: the workflow lint test will be skipped"; \
	fi

serve: setup
	$(PY) -m mkdocs serve --strict -a 127.0.0.1:8000

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
labs-arm64: setup
	@for run in labs/*/run.sh; do \
	  echo "== $$run --guest arm64"; \
	  bash $$run --guest arm64 $(if $(FULL),,--quick) $(if $(OUT),--out $(OUT)) || echo "$$run exited $$?"; \
	done

# What a CI runner runs and uploads (see .github/workflows/labs.yml): LABS=a,b HOST=label FULL=1
LABS ?=
ci-labs: setup
	bash .github/ci-labs.sh $(if $(FULL),--full) $(if $(HOST),--host $(HOST)) $(if $(LABS),--labs $(LABS))

test: setup
	$(PY) -m pytest

bench: setup
	$(PY) tests/bench.py

clean:
	rm -rf site .pytest_cache test-artifacts
