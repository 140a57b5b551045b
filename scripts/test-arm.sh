#!/usr/bin/env bash
# Cross-builds Orchard for aarch64 and runs the kernel and engine tests under qemu-user, so the
# NEON kernels are checked against the scalar reference on every change. Two builds: plain
# Armv8-A NEON, run on an emulated Cortex-A72 (no SDOT: the widening fallbacks), and Armv8.2-A
# with the int8 dot-product instruction as the target, run on qemu's "max" CPU (SDOT and SMMLA,
# as Apple M2 and later) and its kernel tests again on a Neoverse N1 (SDOT without SMMLA, as M1).
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
for variant in armv8-a armv8.2-a+dotprod; do
  dir=build-arm-${variant%%+*}
  [[ $variant == *dotprod ]] && dir=build-arm-dotprod
  cmake -S . -B "$dir" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
    -DCMAKE_CXX_FLAGS="-march=$variant" -DORCHARD_STATIC=ON >/dev/null
  cmake --build "$dir" -j "$(nproc)" --target tensor_tests model_tests
  cpu=max
  [[ $variant == armv8-a ]] && cpu=cortex-a72
  QEMU_CPU=$cpu ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" -R '^(Kernels|Attention|Levels|LatentAttention|Ops|AllWeightTypes|Matmul|Quant|Zoo|Fp16|Bf16|ThreadPool|Stories260K|RandLlama|Sampler|SyntheticModel|BatchForward|Formats/BatchForward|Golden/MoeGolden[.].*_F32[^_]|MoeFile|MoeRouting)'
done
QEMU_CPU=neoverse-n1 ctest --test-dir build-arm-dotprod --output-on-failure -j "$(nproc)" -R '^(Kernels|Attention|Ops|AllWeightTypes|Matmul)'
