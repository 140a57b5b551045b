#!/usr/bin/env bash
# Cross-builds Orchard for aarch64 and runs the kernel and engine tests under qemu-user, so the
# NEON kernels are checked against the scalar reference on every change. One plain Armv8-A
# build: its SDOT and SMMLA tiles are compiled for those extensions by pragma and chosen at run
# time (platform::arm_features), as on a Mac or a Graviton. The engine tests run on qemu's "max"
# CPU (SDOT and SMMLA, as Apple M2 and later); the kernel tests again on a Neoverse N1 (SDOT
# without SMMLA, as M1) and on a Cortex-A72 (neither: the widening fallbacks).
# Binaries are linked statically: Debian 12's qemu-user (7.2) hangs creating threads in
# dynamically linked aarch64 programs on this machine, and statically linked ones run fine.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO=sudo
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update
fi
need=()
for p in g++-aarch64-linux-gnu qemu-user libpcre2-dev:arm64 libgtest-dev:arm64 libssl-dev:arm64; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${need[@]}"
fi
dir=build-arm
cmake -S . -B "$dir" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DCMAKE_CXX_FLAGS="-march=armv8-a" -DORCHARD_STATIC=ON -DORCHARD_UNITY=ON >/dev/null
cmake --build "$dir" -j "$(nproc)" --target tensor_tests model_tests
QEMU_CPU=max ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" -R '^(Kernels|Attention|Levels|LatentAttention|Ops|AllWeightTypes|Matmul|Quant|Zoo|Fp16|Bf16|ThreadPool|Stories260K|RandLlama|Sampler|SyntheticModel|BatchForward|Formats/BatchForward|Golden/MoeGolden[.].*_F32[^_]|MoeFile|MoeRouting)'
for cpu in neoverse-n1 cortex-a72; do
  QEMU_CPU=$cpu ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" -R '^(Kernels|Attention|Ops|AllWeightTypes|Matmul)'
done
