#!/usr/bin/env bash
# Installs what the tests, benchmarks and demo need on Debian 12, run as root (or with sudo).
# Every step checks first and does nothing when already satisfied, so a second run is quick.
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

say() { printf 'deps: %s\n' "$*"; }
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }

# 1. Debian packages, chosen by the commands we need.
pkgs=()
have mariadbd || pkgs+=(mariadb-server)
{ have mariadb && have mariadb-install-db && have mysqlslap; } || pkgs+=(mariadb-client)
have sysbench || pkgs+=(sysbench)
# The Galera provider, for the routing tests' three-node cluster (a dependency of
# Debian's mariadb-server, but a machine may have mariadbd from elsewhere).
{ [ -e /usr/lib/galera/libgalera_smm.so ] || [ -e /usr/lib/libgalera_smm.so ]; } || pkgs+=(galera-4)
# etcd for the fleet tests ([fleet] etcd); protoc and its well-known types to build
# the etcd client's gRPC definitions.
have etcd || pkgs+=(etcd-server)
have protoc || pkgs+=(protobuf-compiler)
[ -e /usr/include/google/protobuf/descriptor.proto ] || pkgs+=(libprotobuf-dev)
# HAProxy, the TCP proxy `sluice bench cache --scenarios haproxy` sets beside Sluice.
have haproxy || pkgs+=(haproxy)
# The Debian package's tests: systemd-analyze verifies its unit, systemd-sysusers and
# deb-systemd-helper (init-system-helpers) run in its maintainer scripts. Installing
# systemd does not make it the init of a machine or container that runs another.
{ have systemd-analyze && have systemd-sysusers && have deb-systemd-helper; } || pkgs+=(systemd init-system-helpers)
have python3 || pkgs+=(python3)
# venv needs ensurepip, which Debian ships in python3-venv.
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || pkgs+=(python3-venv)
have node || pkgs+=(nodejs)
have npm || pkgs+=(npm)
# Headless Chromium for the dashboard's browser test (tests/clients/node/dashboard.js).
[ -x /usr/bin/chromium ] || pkgs+=(chromium chromium-driver)

if [ "${#pkgs[@]}" -gt 0 ]; then
  say "installing ${pkgs[*]}"
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${pkgs[@]}"
fi

# mysqlslap is part of mariadb-client; say so plainly if a packaging change ever moves it.
have mysqlslap || { say "mysqlslap not found after installing mariadb-client" >&2; exit 1; }

# 2. Rust components used by `make test`, when rustup manages the toolchain.
if have rustup; then
  cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
  cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
fi

# 3. Python venv for the PyMySQL compatibility script.
req=tests/clients/python/requirements.txt
stamp=.venv/.requirements.sha256
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c '' >/dev/null 2>&1 \
   || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "creating .venv from $req"
  rm -rf .venv
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -r "$req"
  echo "$want" > "$stamp"
fi

# 4. Node modules for the mysql2 compatibility script, exactly as locked.
node_dir=tests/clients/node
stamp="$node_dir/node_modules/.package-lock.sha256"
want="$(sha256sum "$node_dir/package-lock.json" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "npm ci in $node_dir"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
fi

# 5. Jaeger, the OpenTelemetry trace receiver of the tracing tests (sluice_sandbox::Jaeger),
# built from source with Go into .tools/bin, as Debian packages no Jaeger. v1.42.0's
# all-in-one has the OTLP receivers, memory storage and the query API in one binary, and
# it is the newest release `go install pkg@version` builds: every later go.mod, Jaeger
# v2's included (same module), has a `replace` directive, which that form refuses.
jaeger_version=v1.42.0
jaeger_go_min=1.19        # the `go` line of its go.mod, Debian 12's golang-go
jaeger_go_fetch=1.19.13   # the Go fetched when no Go that new can be installed
jaeger=.tools/bin/jaeger-all-in-one
stamp=.tools/bin/.jaeger-all-in-one.version
# Whether the Go at $1 runs and is at least $jaeger_go_min.
go_new_enough() {
  local version
  version="$("$1" version 2>/dev/null | awk '{print $3}')" || return 1
  version="${version#go}"
  [ -n "$version" ] && printf '%s\n%s\n' "$jaeger_go_min" "$version" | sort -V -C
}
# A Go distribution of $jaeger_go_fetch in .tools/go, fetched as a module through the
# proxy the Go at $1 is configured with. The module cache holds it read-only and not
# executable, so it is copied out and made so.
fetch_go() {
  local dir
  dir="$("$1" mod download -json \
    "golang.org/toolchain@v0.0.1-go$jaeger_go_fetch.$("$1" env GOOS)-$("$1" env GOARCH)" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  rm -rf .tools/go
  cp -R "$dir" .tools/go
  chmod -R u+w .tools/go
  chmod +x .tools/go/bin/* .tools/go/pkg/tool/*/*
}
if [ ! -x "$jaeger" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$jaeger_version" ]; then
  mkdir -p .tools/bin
  if go_new_enough go; then
    go=go
  elif go_new_enough .tools/go/bin/go; then
    go=.tools/go/bin/go
  else
    if ! command -v go >/dev/null 2>&1; then
      say "installing golang-go"
      $SUDO apt-get update -q
      $SUDO apt-get install -y -q --no-install-recommends golang-go
    fi
    if go_new_enough go; then
      go=go
    else
      say "$(go version) is older than Go $jaeger_go_min: fetching Go $jaeger_go_fetch into .tools/go"
      fetch_go go
      go=.tools/go/bin/go
    fi
  fi
  say "building Jaeger $jaeger_version with $("$go" version) (a minute or two)"
  # Into a directory of its own, so that an interrupted build leaves no binary behind.
  rm -rf .tools/build
  GOBIN="$PWD/.tools/build" "$go" install "github.com/jaegertracing/jaeger/cmd/all-in-one@$jaeger_version"
  mv .tools/build/all-in-one "$jaeger"
  rmdir .tools/build
  echo "$jaeger_version" > "$stamp"
fi
