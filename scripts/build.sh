#!/usr/bin/env bash
# Configures and builds Orchard into build/ (Release with line-table debug info). Extra args go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# ccache caches files compiled against a precompiled header (ORCHARD_PCH) only when told that
# the header's macros and __TIME__ may be trusted.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros}"
cmake -S . -B "${BUILD_DIR:-build}" -G Ninja "${launcher[@]}" "$@" >/dev/null
cmake --build "${BUILD_DIR:-build}" -j "$(nproc)"
