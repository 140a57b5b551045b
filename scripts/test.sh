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
# One clang build under ASan + UBSan runs the tests and, with ORCHARD_FUZZ, holds the fuzzers too
# (the libraries are compiled once for both).
fuzz_dir=build-fuzz
if [[ "${ORCHARD_SKIP_SANITIZERS:-0}" != 1 ]]; then
  phase "building and testing under ASan + UBSan (and building the fuzzers)"
  BUILD_DIR=build-asan scripts/build.sh -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DORCHARD_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS=-O1
  # Five compute-bound tests take 20–40× longer under the sanitizers than without (100, 54, 37,
  # 23 and 19 s of a 2-core run): the MPI ranks, calibration, the placement index's randomised
  # comparison, weight repacking and K-quant writing. They run in the normal build below; here
  # the smaller tests of the same parts still reach their code, except the MPI backend's (its
  # one test is that run of ranks under mpirun).
  slow_under_sanitizers='^(Mpi\.RanksUnderMpirunPassEveryCollectiveCheck|Plan\.CalibrationWritesANodeFileThatPlansAndRunsUse|NodeIndex\.ChoosesWhatPlaceChoosesOverEveryNodeThroughChanges|ModelWeights\.ReleasingWhilePackingNeverTakesBytesStillToBePacked|MakeModelKQuants\.TensorForTensorWhatLlamaQuantizeWrites)$'
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -E "$slow_under_sanitizers"
  fuzz_dir=build-asan
fi
if [[ "${ORCHARD_SKIP_ARM:-0}" != 1 ]]; then
  phase "aarch64 under qemu"
  scripts/test-arm.sh
fi
if [[ "${ORCHARD_SKIP_FUZZ:-0}" != 1 ]]; then
  phase "fuzzing"
  FUZZ_BUILD_DIR=$fuzz_dir scripts/fuzz.sh "${ORCHARD_FUZZ_SECONDS:-30}"
fi
phase "every test on the normal build"
ctest --test-dir build --output-on-failure -j "$(nproc)"
