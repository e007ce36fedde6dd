# wasmctrl developer entry points: `make dev` (run it) and `make test` (everything CI checks).
# `make help` lists the targets. Needs only the rustup toolchain the machine ships with; `make deps`
# installs the rest (see scripts/install-deps.sh).

CARGO ?= cargo

# Cargo's target directory, honouring CARGO_TARGET_DIR like cargo itself does.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
WASMCTRL := $(TARGET_DIR)/debug/wasmctrl
# Built components: the example plugins (what `make dev` serves) and, apart from them, the plugins
# only tests and benchmarks use. Tests find both through WASMCTRL_PLUGIN_DIR and
# WASMCTRL_TEST_PLUGIN_DIR, set below for cargo test/bench.
PLUGIN_OUT := $(TARGET_DIR)/plugins
TEST_PLUGIN_OUT := $(TARGET_DIR)/test-plugins
PLUGIN_DIRS := WASMCTRL_PLUGIN_DIR=$(PLUGIN_OUT) WASMCTRL_TEST_PLUGIN_DIR=$(TEST_PLUGIN_OUT)

# Every crate directory that has a Cargo.toml; empty lists make the plugin targets no-ops.
PLUGINS := $(patsubst %/Cargo.toml,%,$(wildcard plugins/*/Cargo.toml))
TEST_PLUGINS := $(patsubst %/Cargo.toml,%,$(wildcard tests/plugins/*/Cargo.toml))

# Build plugin crates into the shared target directory: standalone plugin crates (own
# [workspace]) would otherwise each compile their own wasm std, which takes minutes on the
# Debian toolchain.
BUILD_PLUGINS = CARGO_TARGET_DIR=$(TARGET_DIR) $(WASMCTRL) build

# Steps run in the order written: cargo parallelises inside each step, and `test` must end with
# cargo test's summary.
.NOTPARALLEL:
.DEFAULT_GOAL := help
.PHONY: help deps host plugins test-plugins image test bench dev fmt fmt-check clippy clean clean-plugins

help: ## List the targets
	@awk 'BEGIN { FS = ":.*## " } /^[a-z-]+:.*## / { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

deps: ## Install missing system dependencies (wasm32 toolchain, PostgreSQL, kubectl)
	@scripts/install-deps.sh

host: ## Build the wasmctrl binary (debug)
	$(CARGO) build -p wasmctrl --bin wasmctrl

plugins: deps host ## Build every plugins/*/ crate into target/plugins/<name>.wasm
ifneq ($(PLUGINS),)
	$(BUILD_PLUGINS) --out-dir $(PLUGIN_OUT) $(PLUGINS)
else
	@echo "plugins: no plugin crates under plugins/ yet, nothing to build"
endif

test-plugins: deps host ## Build every tests/plugins/*/ crate into target/test-plugins/<name>.wasm
ifneq ($(TEST_PLUGINS),)
	$(BUILD_PLUGINS) --out-dir $(TEST_PLUGIN_OUT) $(TEST_PLUGINS)
else
	@echo "test-plugins: no test plugin crates under tests/plugins/, nothing to build"
endif

# The host's OCI image from local artifacts only (no registry, no engine; the Dockerfile is for
# where those exist). `test` builds it first: host/tests/image.rs runs it.
image: deps ## Build the host's OCI image as target/image/wasmctrl.tar (scripts/image.sh)
	CARGO="$(CARGO)" CARGO_TARGET_DIR="$(TARGET_DIR)" scripts/image.sh

# WASMCTRL_PLUGIN_DIR / WASMCTRL_TEST_PLUGIN_DIR: where tests find built plugins, wherever
# CARGO_TARGET_DIR points.
test: deps fmt-check clippy plugins test-plugins image ## Everything CI runs: format, lints, plugins, all tests
	$(PLUGIN_DIRS) $(CARGO) test --workspace

bench: plugins test-plugins ## Build the plugins, then run the benchmarks
	$(PLUGIN_DIRS) $(CARGO) bench --workspace

# The postgres-writer example needs a database: a private PostgreSQL under the target directory,
# started for the session and stopped when it ends (Ctrl-C included).
DEV_POSTGRES := $(TARGET_DIR)/dev-postgres

dev: plugins ## Build the plugins and run the controller against examples/ (with a private PostgreSQL)
	@conn=$$(scripts/dev-postgres.sh start $(DEV_POSTGRES)) || exit 1; \
	trap 'scripts/dev-postgres.sh stop $(DEV_POSTGRES)' EXIT INT TERM; \
	echo "PostgreSQL for the postgres-writer example: $$conn"; \
	echo "$(WASMCTRL) dev --plugins $(PLUGIN_OUT) --apply examples/ --sql students=<that>"; \
	$(WASMCTRL) dev --plugins $(PLUGIN_OUT) --apply examples/ --sql "students=$$conn"

fmt: ## Format all code
	$(CARGO) fmt --all

fmt-check: ## Check formatting without changing files
	$(CARGO) fmt --all -- --check

clippy: ## Lint everything, warnings as errors
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean-plugins: ## Remove built plugin components (keeps compiled std and dependencies)
	rm -rf $(sort $(PLUGIN_OUT) $(TEST_PLUGIN_OUT))

clean: ## Remove everything cargo built (the next Debian-toolchain plugin build recompiles std)
	$(CARGO) clean
