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
