# The README's commands. Everything a fresh machine needs is installed here: a Python venv
# with the build tool and libraries (from PyPI) and the native module (built with the Rust
# toolchain the machine provides).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
DEPS := $(VENV)/.deps-stamp
SCENARIO ?= scenarios/three-regions.toml
# The linters, pinned so that a new release cannot fail a build that passed (bump on purpose).
# pandas-stubs: mypy --strict needs pandas' types.
# hypothesis: the property-based tests (tests/test_properties.py).
TEST_DEPS := "hypothesis==6.170.15"
LINT_DEPS := "ruff==0.17.6" "mypy==2.4.1" "pandas-stubs==3.1.0.261029"

.PHONY: run test test-rust test-python browser lab-tools bench lint build clean seeds-report validation-report vmlab vmlab-report vmlab-selftests vmlab-conformance docs-knobs

$(DEPS): pyproject.toml Makefile
	@command -v cargo >/dev/null || { echo "error: cargo (Rust toolchain) not found; this machine kind provides it via rustup" >&2; exit 1; }
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "maturin>=1.5,<2" "pydantic>=2" typer rich pandas pyarrow plotly pytest jsonschema $(TEST_DEPS) $(LINT_DEPS)
	touch $@

# Always rebuild: cargo is incremental, so an unchanged tree costs seconds. The runner binary
# (target/release/reclaimlab-runner) is what the lab starts on the real kernel.
build: $(DEPS)
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/maturin develop --release --quiet
	cargo build --release --quiet -p reclaimlab-runner

run: build
	$(VENV)/bin/reclaimlab compare $(SCENARIO)

test: lint test-rust test-python

# Debug build: page conservation is checked as the simulation runs.
test-rust:
	cargo test --workspace --exclude reclaimlab-py

test-python: build browser lab-tools
	$(PY) -m pytest -q

# The HTML report's browser test (tests/test_plot.py) draws it in headless Chromium: Debian's
# package is installed where apt-get is available to root; otherwise the test skips, saying why.
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 || \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; }; } || \
	  echo "note: chromium is not installed (needs root and apt-get); the browser test will skip"

# The lab's filesystems (docs/lab.md): mkfs.xfs comes with Debian's xfsprogs, installed where
# apt-get is available to root (ext4's e2fsprogs is part of every Debian system); otherwise the
# lab refuses xfs scenarios and the xfs lab test skips, saying why.
lab-tools:
	@command -v mkfs.xfs >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends xfsprogs >/dev/null 2>&1 || \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends xfsprogs >/dev/null; }; }; } || \
	  echo "note: mkfs.xfs is not installed (needs root and apt-get); the lab refuses xfs filesystems"

# The throughput cases (crates/reclaimlab-core/benches/throughput.rs), the CPU of a small
# `reclaimlab run` outside the core (tools/bench_startup.py), then the peer comparison
# with libCacheSim's LRU on the same Zipf trace (benches/peer_libcachesim.py; libcachesim from
# PyPI, pinned, into the venv: bench only, not build or test).
PEER_DEPS := "libcachesim==0.3.5"

bench: build
	cargo bench -p reclaimlab-core --bench throughput
	$(PY) tools/bench_startup.py
	@$(PY) -m pip install --quiet $(PEER_DEPS) || echo "note: libcachesim did not install; the peer comparison will skip"
	$(PY) crates/reclaimlab-core/benches/peer_libcachesim.py $$(cargo bench -p reclaimlab-core --bench throughput --no-run --message-format=json 2>/dev/null | \
	  $(PY) -c "import json, sys; print([m['executable'] for m in map(json.loads, sys.stdin) if m.get('executable')][-1])")

# Regenerate the knob table of docs/scenario.md from the core's declarations (knobs.rs).
docs-knobs: build
	$(PY) -m reclaimlab.knob_doc docs/scenario.md

# Regenerate the tables of docs/seeds.md: each seed benchmark, published vs reclaimlab.
seeds-report: build
	$(VENV)/bin/reclaimlab report --update-doc docs/seeds.md scenarios/seeds/*.toml

# Re-run the simulator side of every recorded validation (results/validation/<s>.json, the
# codec checks excepted) against its stored kernel runs (no root, no kernel runs; the JSON is
# rewritten), then regenerate the tables of docs/validation.md.
VALIDATION_RESULTS = $(filter-out results/validation/codec-check%,$(wildcard results/validation/*.json))

validation-report: build
	@for f in $(VALIDATION_RESULTS); do \
	  s=$$(basename $$f .json); echo "validate $$s (kernel runs from $$f)"; \
	  compare=$$(grep -q '"kind": "validate-compare"' $$f && echo --compare); \
	  $(VENV)/bin/reclaimlab validate scenarios/validation/$$s.toml $$compare --kernel-results $$f --json $$f > /dev/null || exit 1; \
	done
	$(VENV)/bin/reclaimlab validation-report --update-doc docs/validation.md $(VALIDATION_RESULTS) \
	  $(foreach f,$(wildcard $(VM_KERNELS:%=results/validation/vm-%/*.json)),--other-kernel $(f))

# The VM lab (docs/vmlab.md): QEMU, busybox-static and zstd from Debian's packages, then
# Debian's 6.1 and 6.12 kernels (apt-get download), the statically linked runner and the guest
# images, into a cache outside the repository (/var/cache/reclaimlab-vm for root; see
# python/reclaimlab/vm/cache.py). Needs root for apt-get; re-running it updates what changed.
VMLAB_PACKAGES = qemu-system-x86 busybox-static zstd

vmlab: build
	@[ "$$(id -u)" = 0 ] || { echo "error: make vmlab installs $(VMLAB_PACKAGES) with apt-get: run it as root" >&2; exit 1; }
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(VMLAB_PACKAGES) > /dev/null
	$(VENV)/bin/reclaimlab lab vm-install
	$(VENV)/bin/reclaimlab lab vm-selftests

# The kernel's cgroup selftests (test_zswap, test_memcontrol) for each VM kernel
# (docs/conformance.md): Debian's linux-source-X.Y of the installed kernel's version
# (apt-get download), only tools/testing/selftests/cgroup and the headers it includes extracted
# into the VM cache, built there statically with the packaged Makefile. Run by `make vmlab`;
# needs the VM lab's kernels installed.
vmlab-selftests: build
	$(VENV)/bin/reclaimlab lab vm-selftests

# Run them in guests of both kernels and record the verdicts (results/conformance/<kernel>.json),
# which docs/conformance.md's table shows beside the simulator's.
CONFORMANCE_KERNELS = debian-6.12 debian-6.1

vmlab-conformance: vmlab-selftests
	@mkdir -p results/conformance
	@for k in $(CONFORMANCE_KERNELS); do \
	  $(VENV)/bin/reclaimlab lab selftests --kernel $$k --json results/conformance/$$k.json || exit 1; \
	done

# Re-run the simulator side of every recorded VM validation (results/validation/vm-<kernel>/,
# kernel runs kept) and write docs/validation-vm-<kernel>.md: the per-kernel error summary
# and each scenario's table (counters only: the guest's times are TCG times). The simulator runs the
# preset of the guest's kernel (--set kernel.version=<kernel>), whatever the scenario file says.
VM_KERNELS = 6.12 6.1

vmlab-report: build
	@for k in $(VM_KERNELS); do \
	  files=$$(ls results/validation/vm-$$k/*.json 2>/dev/null); [ -n "$$files" ] || continue; \
	  for f in $$files; do \
	    s=$$(basename $$f .json); echo "validate $$s (VM $$k runs from $$f)"; \
	    compare=$$(grep -q '"kind": "validate-compare"' $$f && echo --compare); \
	    $(VENV)/bin/reclaimlab validate scenarios/validation/vm/$$s.toml $$compare --set kernel.version=$$k --kernel-results $$f --json $$f > /dev/null || exit 1; \
	  done; \
	  { echo "# VM lab validation: Debian $$k guest, cgroup v2"; echo; \
	    echo "Generated by \`make vmlab-report\` from results/validation/vm-$$k/ (docs/vmlab.md). \"kernel\" is the guest's"; \
	    echo "kernel; phase times are the guest's under QEMU TCG and are never set against the simulator's."; echo; \
	    $(VENV)/bin/reclaimlab validation-report $$files; } > docs/validation-vm-$$k.md || exit 1; \
	done

# Rust: clippy with warnings as errors. Python: ruff (lint and format), mypy --strict on the
# package (config in pyproject.toml), and stubtest: the hand-written _core.pyi against the
# built native module (so lint needs `build`).
lint: build
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tests tools
	$(VENV)/bin/ruff format --check python tests tools
	$(VENV)/bin/mypy
	$(PY) -m mypy.stubtest reclaimlab._core

clean:
	rm -rf $(VENV) target
