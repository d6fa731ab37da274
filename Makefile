# The README's commands. Everything a fresh machine needs is installed here: a Python venv
# with the build tool and libraries (from PyPI) and the native module (built with the Rust
# toolchain the machine provides).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
DEPS := $(VENV)/.deps-stamp
SCENARIO ?= scenarios/three-regions.toml

.PHONY: run test test-rust test-python bench lint build clean seeds-report validation-report vmlab

$(DEPS): pyproject.toml
	@command -v cargo >/dev/null || { echo "error: cargo (Rust toolchain) not found; this machine kind provides it via rustup" >&2; exit 1; }
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "maturin>=1.5,<2" "pydantic>=2" typer rich pandas pytest
	touch $@

# Always rebuild: cargo is incremental, so an unchanged tree costs seconds. The runner binary
# (target/release/reclaimlab-runner) is what the lab starts on the real kernel.
build: $(DEPS)
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/maturin develop --release --quiet
	cargo build --release --quiet -p reclaimlab-runner

run: build
	$(VENV)/bin/reclaimlab compare $(SCENARIO)

test: test-rust test-python

# Debug build: page conservation is checked as the simulation runs.
test-rust:
	cargo test --workspace --exclude reclaimlab-py

test-python: build
	$(PY) -m pytest -q

bench: build
	cargo bench -p reclaimlab-core --bench throughput

# Regenerate the tables of docs/seeds.md: each seed benchmark, published vs reclaimlab.
seeds-report: build
	$(PY) -m reclaimlab.report --update-doc docs/seeds.md scenarios/seeds/*.toml

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
	$(PY) -W ignore::RuntimeWarning:runpy -m reclaimlab.validate --update-doc docs/validation.md $(VALIDATION_RESULTS)

# The VM lab (docs/vmlab.md): QEMU, busybox-static and zstd from Debian's packages, then
# Debian's 6.1 and 6.12 kernels (apt-get download), the statically linked runner and the guest
# images, into a cache outside the repository (/var/cache/reclaimlab-vm for root; see
# python/reclaimlab/vm/cache.py). Needs root for apt-get; re-running it updates what changed.
VMLAB_PACKAGES = qemu-system-x86 busybox-static zstd

vmlab: build
	@[ "$$(id -u)" = 0 ] || { echo "error: make vmlab installs $(VMLAB_PACKAGES) with apt-get: run it as root" >&2; exit 1; }
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(VMLAB_PACKAGES) > /dev/null
	$(PY) -m reclaimlab.vm.install

lint:
	cargo clippy --workspace --all-targets -- -D warnings

clean:
	rm -rf $(VENV) target
