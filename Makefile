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
LINT_DEPS := "ruff==0.17.6" "mypy==2.4.1" "pandas-stubs==3.1.0.261029"

.PHONY: run test test-rust test-python bench lint build clean seeds-report validation-report

$(DEPS): pyproject.toml Makefile
	@command -v cargo >/dev/null || { echo "error: cargo (Rust toolchain) not found; this machine kind provides it via rustup" >&2; exit 1; }
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "maturin>=1.5,<2" "pydantic>=2" typer rich pandas pytest $(LINT_DEPS)
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

test-python: build
	$(PY) -m pytest -q

bench: build
	cargo bench -p reclaimlab-core --bench throughput

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
	$(VENV)/bin/reclaimlab validation-report --update-doc docs/validation.md $(VALIDATION_RESULTS)

# Rust: clippy with warnings as errors. Python: ruff (lint and format), mypy --strict on the
# package (config in pyproject.toml), and stubtest: the hand-written _core.pyi against the
# built native module (so lint needs `build`).
lint: build
	cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tests
	$(VENV)/bin/ruff format --check python tests
	$(VENV)/bin/mypy
	$(PY) -m mypy.stubtest reclaimlab._core

clean:
	rm -rf $(VENV) target
