# Thin glue around cargo and the test dependencies. See docs/TESTING.md.

CARGO ?= cargo
# Arguments for cargo itself, e.g. CARGO_TEST_ARGS='-p sluice-cli --test integration'.
CARGO_TEST_ARGS ?=
# Arguments for the test binaries (after `--`), e.g. TEST_ARGS='--test-threads=1 handshake'.
TEST_ARGS ?= --test-threads=4

# Every recipe line runs in its own shell, so the limit is raised where it is needed.
# Integration tests and benchmarks open many sockets (clients, proxy, several servers).
RAISE_NOFILE = ulimit -n 65536 2>/dev/null || ulimit -n "$$(ulimit -Hn)" 2>/dev/null || true

.PHONY: all deps deb-deps build deb test lint fmt fmt-check clippy demo fuzz fuzz-seeds fuzz-deps clean distclean

all: build

## deps: install MariaDB, sysbench, the Python venv, the Node modules and cargo-deb (idempotent)
deps: deb-deps
	@bash scripts/deps.sh

# cargo-deb, which builds the Debian package; installed only when missing.
deb-deps:
	@command -v cargo-deb >/dev/null 2>&1 || $(CARGO) install cargo-deb --version '^3.8' --locked

## build: release build of the sluice binary
build:
	$(CARGO) build --release -p sluice-cli

## deb: the Debian package with the systemd service, in target/debian/ (packaging/debian/)
# sluice_VERSION_ARCH.deb, and sluice-dbgsym_VERSION_ARCH.ddeb with the debug information.
deb: deb-deps build
	$(CARGO) deb -p sluice-cli --no-build

## test: everything CI runs
# The release build comes first: the package tests (crates/cli/tests/integration/service.rs)
# make the Debian package from it.
test: deps fmt-check clippy build
	$(RAISE_NOFILE); $(CARGO) test --workspace $(CARGO_TEST_ARGS) -- $(TEST_ARGS)

## lint: formatting and clippy, no changes made
lint: fmt-check clippy

fmt-check:
	$(CARGO) fmt --all --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## fmt: format the code in place
fmt:
	$(CARGO) fmt --all

## demo: start servers and Sluice, run the benchmark demo
demo: deps build
	$(RAISE_NOFILE); ./target/release/sluice bench --demo

## fuzz: run each fuzz target for FUZZ_SECONDS, one after the other (needs nightly and cargo-fuzz)
# FUZZ_TARGETS='sql binlog' runs only those; docs/TESTING.md, "Fuzzing", says what each checks.
# Each run reads fuzz/seeds/<target> (kept in git) and fuzz/corpus/<target> (ignored), and
# adds what it finds to the latter.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= handshake scanner packet sql statement binlog response execute shard
fuzz: fuzz-deps
	cd fuzz && for t in $(FUZZ_TARGETS); do mkdir -p corpus/$$t && \
	  $(CARGO) +nightly fuzz run $$t corpus/$$t seeds/$$t -- -max_total_time=$(FUZZ_SECONDS) || exit 1; done

## fuzz-seeds: run each fuzz target once over its seeds, and stop (a regression check, no fuzzing)
fuzz-seeds: fuzz-deps
	cd fuzz && for t in $(FUZZ_TARGETS); do \
	  $(CARGO) +nightly fuzz run $$t seeds/$$t -- -runs=0 || exit 1; done

fuzz-deps:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked

## clean: remove build output
clean:
	$(CARGO) clean

## distclean: also remove the Python venv, the Node modules and the .tools (Jaeger, Go) made by `deps`
distclean: clean
	rm -rf .venv tests/clients/node/node_modules .tools
