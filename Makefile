# wasmctrl developer entry points: `make dev` (run it) and `make test` (everything CI checks).
# `make help` lists the targets. Needs only the rustup toolchain the machine ships with; `make deps`
# installs the rest (see scripts/install-deps.sh).

CARGO ?= cargo

# Cargo's target directory, honouring CARGO_TARGET_DIR like cargo itself does.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
WASMCTRL := $(TARGET_DIR)/debug/wasmctrl
# Built components: the example plugins (what `make dev` serves) and, apart from them, the plugins
# only tests and benchmarks use. Tests find both through WASMCTRL_PLUGIN_DIR and
# WASMCTRL_TEST_PLUGIN_DIR, set below for cargo test/bench. Not `target/plugins`: that is where
# `wasmctrl build` writes by default, and a plugin built there with a shared target directory
# must not land in the directory `make dev` serves.
PLUGIN_OUT := $(TARGET_DIR)/dev-plugins
TEST_PLUGIN_OUT := $(TARGET_DIR)/test-plugins
PLUGIN_DIRS := WASMCTRL_PLUGIN_DIR=$(PLUGIN_OUT) WASMCTRL_TEST_PLUGIN_DIR=$(TEST_PLUGIN_OUT)

# Every crate directory that has a Cargo.toml; empty lists make the plugin targets no-ops.
PLUGINS := $(patsubst %/Cargo.toml,%,$(wildcard plugins/*/Cargo.toml))
TEST_PLUGINS := $(patsubst %/Cargo.toml,%,$(wildcard tests/plugins/*/Cargo.toml))
# Plugins written in Python (a pyproject.toml) and TypeScript (a package.json): the seeds beside
# the Rust ones, and test plugins. All go with the test plugins: `make dev` serves the Rust
# seeds, and a second VirtualMachine controller beside the first would write the same statuses
# twice.
PY_PLUGINS := $(patsubst %/pyproject.toml,%,$(wildcard plugins/*/pyproject.toml tests/plugins/*/pyproject.toml))
TS_PLUGINS := $(patsubst %/package.json,%,$(wildcard plugins/*/package.json tests/plugins/*/package.json))
TS_SDK := sdk/typescript

# What builds and tests plugins in other languages (scripts/install-plugin-tools.sh, run by
# `make deps`): componentize-py and pytest in a virtual environment, and each npm project's
# dependencies (componentize-js, esbuild, TypeScript).
TOOLS := $(TARGET_DIR)/tools
PYTHON_TOOLS := $(TOOLS)/python/bin

# Build plugin crates into the shared target directory: standalone plugin crates (own
# [workspace]) would otherwise each compile their own wasm std, which takes minutes on the
# Debian toolchain.
# PLUGIN_BUILD_FLAGS: `make dev` and `make test` build with `--dev` (the `plugin-dev` profile:
# seconds per plugin); `make bench` and deploy manifests with the release `plugin` profile (LTO,
# what `wasmctrl push` ships), which benchmarks measure.
PLUGIN_BUILD_FLAGS ?=
BUILD_PLUGINS = WASMCTRL_COMPONENTIZE_PY=$(PYTHON_TOOLS)/componentize-py CARGO_TARGET_DIR=$(TARGET_DIR) $(WASMCTRL) build $(PLUGIN_BUILD_FLAGS)

# Steps run in the order written: cargo parallelises inside each step, and `test` must end with
# the test run's summary.
.NOTPARALLEL:
.DEFAULT_GOAL := help
.PHONY: help deps host plugins test-plugins sdk-tests image deploy-manifests sdk-package test bench dev fmt fmt-check clippy clean clean-plugins

help: ## List the targets
	@awk 'BEGIN { FS = ":.*## " } /^[a-z-]+:.*## / { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

deps: ## Install missing system dependencies (wasm32 toolchain, PostgreSQL, kubectl, umoci, skopeo) and the Python plugin tools
	@scripts/install-deps.sh
	@scripts/install-plugin-tools.sh $(TOOLS) $(TS_SDK) $(TS_PLUGINS)

# How `host` builds the binary. `make test` builds it within the test build instead: tests'
# dev-dependencies turn on features (tokio's test-util, k8s-openapi's schemars, ...), and a
# binary built apart would compile every crate whose features differ a second time.
HOST_BUILD ?= build -p wasmctrl --bin wasmctrl
host: ## Build the wasmctrl binary (debug)
	$(CARGO) $(HOST_BUILD)

plugins: deps host ## Build every plugins/*/ crate into target/dev-plugins/<name>.wasm
ifneq ($(PLUGINS),)
	$(BUILD_PLUGINS) --out-dir $(PLUGIN_OUT) $(PLUGINS)
else
	@echo "plugins: no plugin crates under plugins/ yet, nothing to build"
endif

# The TypeScript plugins import the SDK's compiled JavaScript (`tsc`, a few seconds).
test-plugins: deps host ## Build every tests/plugins/*/ crate and every Python and TypeScript plugin into target/test-plugins/<name>.wasm
ifneq ($(TEST_PLUGINS)$(PY_PLUGINS)$(TS_PLUGINS),)
	$(if $(TS_PLUGINS),cd $(TS_SDK) && npm run --silent prepare)
	$(BUILD_PLUGINS) --out-dir $(TEST_PLUGIN_OUT) $(TEST_PLUGINS) $(PY_PLUGINS) $(TS_PLUGINS)
else
	@echo "test-plugins: no test plugin crates under tests/plugins/, nothing to build"
endif

# The host's OCI image from local artifacts only (no registry, no engine; the Dockerfile is for
# where those exist). `test` builds it first: host/tests/it/image.rs runs it.
# IMAGE_PROFILE=dev packs the debug binary: `test` does, to test the image without a second,
# release build of everything.
IMAGE_PROFILE ?= release
image: deps ## Build the host's OCI image as target/image/wasmctrl.tar (scripts/image.sh)
	PROFILE="$(IMAGE_PROFILE)" HOST_BUILD="$(HOST_BUILD)" CARGO="$(CARGO)" CARGO_TARGET_DIR="$(TARGET_DIR)" scripts/image.sh

# examples/deploy: the RBAC the example plugins need, generated (a test fails when the checked-in
# file drifts from it), and the plugins themselves for its ConfigMaps (not checked in).
DEPLOY := examples/deploy
RBAC_ARGS := --plugins $(PLUGIN_OUT) --crds examples --namespace wasmctrl --service-account wasmctrl
WEBHOOK_ARGS := --plugins $(PLUGIN_OUT) --crds examples --namespace wasmctrl

deploy-manifests: plugins ## Regenerate examples/deploy's RBAC and CRDs and examples/deploy-webhooks' configurations from the plugins and the host; copy the plugins, gzip-compressed, to examples/deploy/plugins/
	@mkdir -p $(DEPLOY)/plugins
	for f in $(PLUGIN_OUT)/*.wasm; do gzip -9 -n -c "$$f" > $(DEPLOY)/plugins/$$(basename "$$f").gz; done
	{ echo "# Generated by make deploy-manifests (wasmctrl rbac $(subst $(CURDIR)/,,$(RBAC_ARGS))); do not edit."; \
	  $(WASMCTRL) rbac $(RBAC_ARGS); } > $(DEPLOY)/rbac.yaml.tmp
	mv $(DEPLOY)/rbac.yaml.tmp $(DEPLOY)/rbac.yaml
	{ echo "# Generated by make deploy-manifests (wasmctrl rbac --plugin-resources-only); do not edit."; \
	  $(WASMCTRL) rbac $(RBAC_ARGS) --plugin-resources-only; } > examples/deploy-registry/plugin-resources-rbac.yaml.tmp
	mv examples/deploy-registry/plugin-resources-rbac.yaml.tmp examples/deploy-registry/plugin-resources-rbac.yaml
	{ echo "# Generated by make deploy-manifests (wasmctrl rbac --sharding-only); do not edit."; \
	  $(WASMCTRL) rbac $(RBAC_ARGS) --sharding-only; } > examples/deploy-sharded/sharding-rbac.yaml.tmp
	mv examples/deploy-sharded/sharding-rbac.yaml.tmp examples/deploy-sharded/sharding-rbac.yaml
	$(WASMCTRL) crds > $(DEPLOY)/crds.yaml
	{ echo "# Generated by make deploy-manifests (wasmctrl webhooks $(subst $(CURDIR)/,,$(WEBHOOK_ARGS))); do not edit."; \
	  $(WASMCTRL) webhooks $(WEBHOOK_ARGS); } > examples/deploy-webhooks/webhooks.yaml.tmp
	mv examples/deploy-webhooks/webhooks.yaml.tmp examples/deploy-webhooks/webhooks.yaml

# The SDK as crates.io would receive it, verified by building the packaged sources alone (so its
# own copy of the WIT must be inside). wasmctrl-core is packaged with it: the SDK depends on it
# and neither is on crates.io yet. --allow-dirty: `make test` runs on work in progress too.
# scripts/sdk-package.sh says why it first removes what cargo kept of them from earlier runs.
sdk-package: ## Package wasmctrl-sdk (with wasmctrl-core) and build the packages as a user would
	CARGO="$(CARGO)" CARGO_TARGET_DIR="$(TARGET_DIR)" scripts/sdk-package.sh

# WASMCTRL_PLUGIN_DIR / WASMCTRL_TEST_PLUGIN_DIR: where tests find built plugins, wherever
# CARGO_TARGET_DIR points.
test: IMAGE_PROFILE = dev
test: HOST_BUILD = test --workspace --no-run
# Tests run under cargo-nextest, each in a process of its own (host/tests/it/main.rs says why);
# the doc tests, which nextest does not run, go first so that nextest's summary ends the output.
# The Python and TypeScript SDKs' and plugins' own tests, natively: pytest and node's test
# runner, each directory its own run (each has its own configuration).
sdk-tests: deps ## Run the Python and TypeScript SDKs' and plugins' native tests (pytest, node --test)
	@for dir in sdk/python $(PY_PLUGINS); do \
	  echo "pytest $$dir"; (cd $$dir && $(PYTHON_TOOLS)/python -m pytest -q) || exit 1; \
	done
	@for dir in $(TS_SDK) $(TS_PLUGINS); do \
	  echo "npm test $$dir"; (cd $$dir && npm test --silent) || exit 1; \
	done

# Plugins for the tests are built with `plugin-dev`: the same code, the same behaviour (neither
# profile has debug assertions or overflow checks; both abort on panic), without a fat-LTO link
# of each of the 13 Rust plugins one after another: 298 s for all of them against about 550 s
# with `plugin` (a cold run, Debian toolchain, 2 cores), four minutes of CI's time.
test: PLUGIN_BUILD_FLAGS = --dev
test: deps fmt-check clippy sdk-tests plugins test-plugins image sdk-package ## Everything CI runs: format, lints, plugins, all tests
	$(CARGO) test --workspace --doc
	$(PLUGIN_DIRS) $(CARGO) nextest run --workspace --no-fail-fast

# Whole-controller benchmarks take knobs from the environment for quicker runs:
# WASMCTRL_BENCH_OBJECTS (convergence, 10000), WASMCTRL_BENCH_VMS (convergence, 5000),
# WASMCTRL_BENCH_VMS_LARGE (convergence, 100000; 0 skips), WASMCTRL_BENCH_LARGE_ROUNDS (1),
# WASMCTRL_BENCH_WORKLOADS (convergence, things,languages,vm; vm compares the host with two native baselines), WASMCTRL_BENCH_CALLS (convergence's languages, 300), WASMCTRL_BENCH_STORM (convergence, 10; 0 skips), WASMCTRL_BENCH_CACHE_OBJECTS (memory, 100000),
# WASMCTRL_BENCH_RELOADS (lifecycle, 20), WASMCTRL_BENCH_ADMISSION_RATES (admission, 200,1000),
# WASMCTRL_BENCH_ADMISSION_SECONDS (admission, 10), WASMCTRL_BENCH_ROUNDS (5; admission 3).
# Cargo runs bench targets in name order; convergence goes last, so that its VirtualMachine
# comparison's `convergence(vm): ...` line ends the output.
HOST_BENCHES := $(filter-out convergence,$(basename $(notdir $(wildcard host/benches/*.rs))))
bench: plugins test-plugins ## Build the plugins, then run the benchmarks
	$(PLUGIN_DIRS) $(CARGO) bench -p wasmctrl $(addprefix --bench ,$(HOST_BENCHES))
	$(PLUGIN_DIRS) $(CARGO) bench -p wasmctrl --bench convergence

# The postgres-writer example needs a database: a private PostgreSQL under the target directory,
# started for the session and stopped when it ends (Ctrl-C included).
DEV_POSTGRES := $(TARGET_DIR)/dev-postgres

dev: PLUGIN_BUILD_FLAGS = --dev
dev: plugins ## Build the plugins (plugin-dev profile) and run the controller against examples/ (with a private PostgreSQL)
	@conn=$$(scripts/dev-postgres.sh start $(DEV_POSTGRES)) || exit 1; \
	trap 'scripts/dev-postgres.sh stop $(DEV_POSTGRES)' EXIT INT TERM; \
	echo "PostgreSQL for the postgres-writer example: $$conn"; \
	echo "$(WASMCTRL) dev --plugins $(PLUGIN_OUT) --apply examples/ --sql students=<that>"; \
	$(WASMCTRL) dev --plugins $(PLUGIN_OUT) --apply examples/ --sql "students=$$conn"

fmt: ## Format all code
	$(CARGO) fmt --all

fmt-check: ## Check formatting without changing files
	$(CARGO) fmt --all -- --check

clippy: ## Lint everything, warnings as errors (the host also as the production image builds it)
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy -p wasmctrl --no-default-features -- -D warnings

clean-plugins: ## Remove built plugin components (keeps compiled std and dependencies)
	rm -rf $(sort $(PLUGIN_OUT) $(TEST_PLUGIN_OUT))

clean: ## Remove everything cargo built (the next Debian-toolchain plugin build recompiles std)
	$(CARGO) clean
