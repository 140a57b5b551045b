#include <cstdlib>
#include <cstring>

#include "platform/platform.h"
#include "tensor/kernels/kernels.h"

namespace orchard::kernels {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Neon: return "neon";
    default: return "scalar";
  }
}

namespace {

Isa best_supported() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // Every AVX2 CPU also has F16C (Haswell, Zen 1 onward), and clang 14 cannot query "f16c".
#if !defined(ORCHARD_NO_AVX512_KERNELS)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
      __builtin_cpu_supports("fma"))
    return Isa::Avx512;
#endif
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
  return Isa::Scalar;
#elif defined(__aarch64__)
  return Isa::Neon;  // NEON is mandatory on AArch64
#else
  return Isa::Scalar;
#endif
}

bool at_most(Isa want, Isa best) {
  if (want == Isa::Scalar) return true;
  if (want == Isa::Neon) return best == Isa::Neon;
  if (best == Isa::Avx512) return want == Isa::Avx2 || want == Isa::Avx512;
  return want == best;
}

}  // namespace

Isa detect_isa() {
  static const Isa isa = [] {
    const Isa best = best_supported();
    if (const char* env = std::getenv("ORCHARD_ISA")) {
      for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon})
        if (std::strcmp(env, isa_name(i)) == 0 && at_most(i, best)) return i;
    }
    return best;
  }();
  return isa;
}

Kernels lookup(DType w, Isa isa) {
  switch (isa) {
    case Isa::Avx512: {
      Kernels k = lookup_avx512(w);
      if (!k.gemm) k = lookup_avx2(w);
      add_avx512_prepared(w, k);
      // The K-quants' repacked rows: AVX2's 256-bit products with VNNI's fused multiply-adds
      // (they beat 512-bit row-major tiles: moe-small Q4_K_M generation at 2 threads 59.6
      // against 35.7 tokens/s before VNNI, one host).
      k.packed = avx512_packed(w) ? avx512_packed(w) : avx512_packed_k(w);
      add_avx512_many(w, k);
      return k;
    }
    case Isa::Avx2: {
      Kernels k = lookup_avx2(w);
      k.packed = avx2_packed(w) ? avx2_packed(w) : avx2_packed_k(w);
      return k;
    }
    case Isa::Neon: {
      Kernels k = lookup_neon(w);
      static const bool sdot = platform::arm_features().dotprod;
      k.packed = w == DType::F16 ? neon_f16_packed() : sdot ? neon_packed_dotprod(w) : neon_packed(w);
      return k;
    }
    default: return {};
  }
}

AttendFn lookup_attend(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return avx512_attend();
    case Isa::Avx2: return avx2_attend();
    case Isa::Neon: return neon_attend();
    default: return nullptr;
  }
}
LevelProductFn lookup_level_product(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return avx512_level_product();
    case Isa::Avx2: return avx2_level_product();
    case Isa::Neon: return neon_level_product();
    default: return nullptr;
  }
}
const LatentFns* lookup_latent(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return avx512_latent();
    case Isa::Avx2: return avx2_latent();
    case Isa::Neon: return neon_latent();
    default: return nullptr;
  }
}
SwigluFn lookup_swiglu(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return avx512_swiglu();
    case Isa::Avx2: return avx2_swiglu();
    case Isa::Neon: return neon_swiglu();
    default: return nullptr;
  }
}
RopeFn lookup_rope(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return avx512_rope();
    case Isa::Avx2: return avx2_rope();
    case Isa::Neon: return neon_rope();
    default: return nullptr;
  }
}
const HalfFns* lookup_half(Isa isa) {
  return isa == Isa::Avx512 ? avx512_half() : isa == Isa::Avx2 ? avx2_half() : isa == Isa::Neon ? neon_half() : nullptr;
}

#if !defined(__x86_64__)
Kernels lookup_avx2(DType) { return {}; }
const PackedKernels* avx2_packed(DType) { return nullptr; }
const PackedKernels* avx2_packed_k(DType) { return nullptr; }
AttendFn avx2_attend() { return nullptr; }
const HalfFns* avx2_half() { return nullptr; }
SwigluFn avx2_swiglu() { return nullptr; }
RopeFn avx2_rope() { return nullptr; }
LevelProductFn avx2_level_product() { return nullptr; }
const LatentFns* avx2_latent() { return nullptr; }
#endif
// Without the AVX-512 files (off x86, or ORCHARD_AVX512_KERNELS=OFF: the sanitizer build on a
// CPU that could not run them) best_supported() never answers Avx512 and these are never called.
#if !defined(__x86_64__) || defined(ORCHARD_NO_AVX512_KERNELS)
Kernels lookup_avx512(DType) { return {}; }
void add_avx512_prepared(DType, Kernels&) {}
const PackedKernels* avx512_packed(DType) { return nullptr; }
const PackedKernels* avx512_packed_k(DType) { return nullptr; }
void add_avx512_many(DType, Kernels&) {}
AttendFn avx512_attend() { return nullptr; }
SwigluFn avx512_swiglu() { return nullptr; }
RopeFn avx512_rope() { return nullptr; }
const HalfFns* avx512_half() { return nullptr; }
LevelProductFn avx512_level_product() { return nullptr; }
const LatentFns* avx512_latent() { return nullptr; }
#endif
#if !defined(__aarch64__)
Kernels lookup_neon(DType) { return {}; }
const HalfFns* neon_half() { return nullptr; }
AttendFn neon_attend() { return nullptr; }
SwigluFn neon_swiglu() { return nullptr; }
RopeFn neon_rope() { return nullptr; }
LevelProductFn neon_level_product() { return nullptr; }
const LatentFns* neon_latent() { return nullptr; }
const PackedKernels* neon_f16_packed() { return nullptr; }
const PackedKernels* neon_packed(DType) { return nullptr; }
const PackedKernels* neon_packed_dotprod(DType) { return nullptr; }
#endif

}  // namespace orchard::kernels
