# hpcforge: the two commands are `make demo` and `make test`.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
CARGO ?= cargo
TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
PROVIDER_DIR := $(TARGET_DIR)/debug
EMULATOR := acceptance-tests/emulator
VENV := $(EMULATOR)/.venv
PYTHON ?= python3
# The acceptance tests as `--test NAME` arguments. Cargo calls select with --workspace, never
# `-p acceptance-tests`, whose narrower feature resolution rebuilds tokio and everything above it.
ACCEPTANCE_TESTS := $(patsubst acceptance-tests/tests/%.rs,--test %,$(wildcard acceptance-tests/tests/*.rs))

.PHONY: build-arm64 release bench bench-provider bench-resume bench-image bench-boot bench-cluster bench-build all build test unit acceptance emulator-test tf-check docs docs-check emulator-venv emulator demo demo-destroy fmt lint clean

all: build

## build: the provider and the other binaries (debug)
build:
	$(CARGO) build --workspace

## build-arm64: the provider for linux_arm64 (debug), packaged beside linux_amd64 by the install test (needs `rustup target add aarch64-unknown-linux-gnu` and Debian's gcc-aarch64-linux-gnu)
build-arm64:
	scripts/cross-build.sh aarch64-unknown-linux-gnu -p terraform-provider-hpc

## emulator-venv: the local AWS emulator's Python environment (moto, pinned)
emulator-venv: $(VENV)/.installed
$(VENV)/.installed: $(EMULATOR)/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r $(EMULATOR)/requirements.txt
	touch $@

## test: unit tests, emulator tests, terraform fmt/validate, docs up to date, acceptance tests (real terraform + emulator)
test: emulator-venv build build-arm64 tf-check docs-check
	scripts/run-tests.sh $(PROVIDER_DIR)

unit:
	$(CARGO) test --workspace --lib --bins

acceptance: emulator-venv build build-arm64
	HPC_PROVIDER_DIR=$(PROVIDER_DIR) $(CARGO) test --workspace $(ACCEPTANCE_TESTS)

emulator-test: emulator-venv
	cd $(EMULATOR) && .venv/bin/python -m pytest -q -p no:cacheprovider

## tf-check: terraform fmt and validate for every example and module
tf-check: build
	terraform fmt -check -recursive $(wildcard examples modules)
	scripts/tf-validate.sh $(PROVIDER_DIR)

## docs: regenerate docs/ (registry layout, from the provider schema and examples/) and the module READMEs' inputs/outputs tables
docs:
	$(CARGO) build -p terraform-provider-hpc
	$(PYTHON) scripts/gen-docs.py --provider-dir $(PROVIDER_DIR)

## docs-check: fail, naming the files, when committed docs differ from what `make docs` writes
docs-check: build
	$(PYTHON) scripts/gen-docs.py --provider-dir $(PROVIDER_DIR) --check

## emulator: run the emulator in the foreground on port 4566
emulator: emulator-venv
	$(EMULATOR)/serve --port 4566

## demo: as root, boot examples/quickstart on the emulator's local EC2 and run a user's job (else: apply it against the API only)
demo: emulator-venv
	$(CARGO) build -p terraform-provider-hpc -p hpc-image -p hpc-node
	scripts/demo.sh up $(PROVIDER_DIR)

## demo-destroy: destroy what the demo made and stop its emulator
demo-destroy:
	scripts/demo.sh down $(PROVIDER_DIR)

fmt:
	$(CARGO) fmt --all
	terraform fmt -recursive $(wildcard examples modules)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf .demo $(VENV)

## release: build the provider (release profile) and package it under dist/: the registry's files and a provider mirror (HPC_RELEASE_GPG_KEY=<key id> or UNSIGNED=1; PLATFORMS, DIST)
release:
	scripts/release.sh

## bench: measure hpcforge (release build) against its anchors; writes bench/results and BENCHMARKS.md
bench: bench-provider bench-image bench-boot bench-cluster bench-build

## bench-provider: plans, memory, hpc-node resume and the quickstart apply (about 10 minutes)
bench-provider: emulator-venv
	$(CARGO) build --release -p terraform-provider-hpc -p hpc-node -p hpc-image
	$(PYTHON) bench/bench.py $(TARGET_DIR)/release

## bench-resume: only hpc-node resume of 1,000 nodes again, the rest of the provider part kept (release build)
bench-resume: emulator-venv
	$(CARGO) build --release -p terraform-provider-hpc -p hpc-node
	$(PYTHON) bench/bench.py $(TARGET_DIR)/release --only resume

## bench-image: only hpc-image's bake, re-bake and upload measures (root; about 8 minutes)
bench-image: emulator-venv
	$(CARGO) build --release -p hpc-node -p hpc-image
	$(PYTHON) bench/image.py $(TARGET_DIR)/release

## bench-boot: the emulator's boot mode: launch → user data, memory per instance, the test image (root; about 5 minutes)
bench-boot: emulator-venv
	$(CARGO) build -p hpc-node -p hpc-image
	$(VENV)/bin/python bench/boot.py $(TARGET_DIR)/debug

## bench-cluster: a booted cluster's start-up (head and compute node: machine boot vs our init; sbatch → running), through make demo with the debug build the tests bake (root; about 6 minutes)
bench-cluster: emulator-venv
	$(CARGO) build -p terraform-provider-hpc -p hpc-node -p hpc-image
	$(VENV)/bin/python bench/cluster.py $(TARGET_DIR)/debug

## bench-build: cold and warm `cargo build` of the workspace and one `make test` (about 25 minutes)
bench-build:
	$(PYTHON) bench/build.py
