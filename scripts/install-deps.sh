#!/usr/bin/env bash
# Installs the Debian 12 packages Orchard builds and tests with. Safe to run again.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config ccache
  clang libclang-rt-14-dev             # libFuzzer and sanitizer runtimes
  libgtest-dev libgmock-dev libbenchmark-dev
  libhwy-dev                           # bench/hwy_q8_0_bench: Highway beside our kernels
  libcli11-dev nlohmann-json3-dev libpcre2-dev
  libcpp-httplib-dev                   # orchard serve and orchard pull
  libboost-dev                         # Asio and Beast: the coordinator's event-driven server
  libssl-dev                           # HMAC for authenticated rank connections
  libsqlite3-dev                       # the network layer's credit ledger
  libpq-dev postgresql                 # the network's PostgreSQL backend and its tests
  libopenmpi-dev openmpi-bin           # the mpi backend and its tests
  libibverbs-dev                       # the rdma backend (runs against a fake here)
  iproute2                             # network namespaces for the multi-host test
  curl                                 # the demo's request to orchard serve
  openssl                              # certificates for the TLS end-to-end test
  chromium                             # the web page's end-to-end test (headless)
  python3-jinja2                       # the reference renderer tool-calling templates are checked against
)
# node and npm run the end-to-end tests (tests/e2e, node 18 or newer). Debian's packages only
# when one is missing: a NodeSource nodejs already bundles npm and conflicts with Debian's.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
