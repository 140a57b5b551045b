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
# Clean builds compile each target's files in groups of sixteen (ORCHARD_UNITY): 2.8× less
# compiler time than file by file (~720 against 1,997 CPU-seconds for the normal build; 857 in
# groups of eight).
phase "building"
scripts/build.sh -DORCHARD_UNITY=ON
# One clang build under ASan + UBSan runs the tests and, with ORCHARD_FUZZ, holds the fuzzers too
# (the libraries are compiled once for both).
fuzz_dir=build-fuzz
if [[ "${ORCHARD_SKIP_SANITIZERS:-0}" != 1 ]]; then
  phase "building and testing under ASan + UBSan (and building the fuzzers)"
  # The AVX-512 kernels only where this CPU can run them (as the kernels' dispatch asks: F, BW,
  # VL and VNNI); elsewhere they would be compiled under the sanitizers and never run.
  avx512=ON
  for f in avx512f avx512bw avx512vl avx512_vnni; do grep -qw "$f" /proc/cpuinfo || avx512=OFF; done
  BUILD_DIR=build-asan scripts/build.sh -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DORCHARD_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS=-O1 -DORCHARD_UNITY=ON \
    -DORCHARD_AVX512_KERNELS=$avx512
  # Some tests take 10–40× longer under the sanitizers than without, and run in the normal
  # build below. Five compute-bound ones (100, 54, 37, 23 and 19 s of a 2-core run): the MPI
  # ranks, calibration, the placement index's randomised comparison, weight repacking and
  # K-quant writing; here the smaller tests of the same parts still reach their code, except the
  # MPI backend's (its one test is that run of ranks under mpirun). The 16M-element all-sums on
  # 3–5 ranks (290 s together; the 2-rank ones stay, as do the smaller sums on every rank
  # count). And e2e_structured (189 s against 13): real npm clients asking for structured
  # output, whose server paths the Server.Json* tests run here. And the four CoordinatorKill
  # runs (78 s): SIGKILLed coordinators and the ledger after restart — processes and SQL, which
  # the sanitizers add nothing to beyond the coordinator and ledger tests that stay.
  slow_under_sanitizers='^(Mpi\.RanksUnderMpirunPassEveryCollectiveCheck|Plan\.CalibrationWritesANodeFileThatPlansAndRunsUse|NodeIndex\.ChoosesWhatPlaceChoosesOverEveryNodeThroughChanges|ModelWeights\.ReleasingWhilePackingNeverTakesBytesStillToBePacked|MakeModelKQuants\.TensorForTensorWhatLlamaQuantizeWrites|Backends/Collectives\.AllSumOf16MElements/[a-z_]*_[3-9]ranks .*|e2e_structured|CoordinatorKill\..*)$'
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
  FUZZ_BUILD_DIR=$fuzz_dir scripts/fuzz.sh "${ORCHARD_FUZZ_SECONDS:-20}"
fi
phase "every test on the normal build"
ctest --test-dir build --output-on-failure -j "$(nproc)"
