#!/usr/bin/env bash
# The whole test suite: installs, builds, then runs every test under AddressSanitizer +
# UndefinedBehaviorSanitizer, the kernel and engine tests cross-built for aarch64 under qemu,
# a short fuzzing run of the GGUF parser, and last every test on the normal build (so the run
# closes with that summary).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
phase() { echo "== test.sh: $1 (at $((SECONDS - start)) s)"; }
phase "installing dependencies"
scripts/install-deps.sh
phase "building"
scripts/build.sh
if [[ "${ORCHARD_SKIP_SANITIZERS:-0}" != 1 ]]; then
  phase "building and testing under ASan + UBSan"
  BUILD_DIR=build-asan scripts/build.sh -DORCHARD_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS=-O1
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$(nproc)"
fi
if [[ "${ORCHARD_SKIP_ARM:-0}" != 1 ]]; then
  phase "aarch64 under qemu"
  scripts/test-arm.sh
fi
if [[ "${ORCHARD_SKIP_FUZZ:-0}" != 1 ]]; then
  phase "fuzzing"
  scripts/fuzz.sh "${ORCHARD_FUZZ_SECONDS:-30}"
fi
phase "every test on the normal build"
ctest --test-dir build --output-on-failure -j "$(nproc)"
