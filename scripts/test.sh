#!/usr/bin/env bash
# The whole test suite: installs, builds, runs every test; then the same tests under
# AddressSanitizer + UndefinedBehaviorSanitizer, and a short fuzzing run of the parsers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
if [[ "${ORCHARD_SKIP_SANITIZERS:-0}" != 1 ]]; then
  BUILD_DIR=build-asan scripts/build.sh -DORCHARD_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS=-O1
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$(nproc)"
fi
if [[ "${ORCHARD_SKIP_FUZZ:-0}" != 1 && -x scripts/fuzz.sh ]]; then
  scripts/fuzz.sh "${ORCHARD_FUZZ_SECONDS:-30}"
fi
