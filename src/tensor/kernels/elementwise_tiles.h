#pragma once
// SwiGLU and RoPE's rotation (tensor/ops.h) written once over a vector type of 4 or 8 floats
// (AVX2: avx2_elementwise.cpp, NEON: neon_elementwise.cpp; AVX-512 has its own,
// avx512_activations.cpp and avx512_rope.cpp). libm's scalar expf made SwiGLU a visible share
// of a prompt (one e^x per FFN element per token), and a token's rotations, one call per head,
// a visible share of a batched decoding step for small heads.
//
// Include after the ISA's target switch. V supplies Reg, kWidth, zero(), splat(x),
// load(const float*), store(float*, r), fma(a, b, acc) = a·b + acc, fms(a, b, c) = a·b − c
// (one rounding), sub, mul, div, add, exp (avx2_exp.h's contract), and
// load_pairs(p, a, b) / store_pairs(p, a, b): 2·kWidth floats at p as the even elements in a
// and the odd ones in b, in order, and back.
#include <algorithm>
#include <cstdint>

namespace orchard::kernels::elementwise {

// out = g·σ(g)·u = g·u / (1 + e^−g). Where e^−g saturates (g < −88.7) the quotient is ~0, where
// it flushes to 0 (g > 87.3) it is g·u: the limits of the exact function. A short last chunk
// goes through a padded copy, so every element gets the vector's rounding.
template <class V>
void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  using Reg = typename V::Reg;
  constexpr int W = V::kWidth;
  const Reg one = V::splat(1.0f);
  const auto one_chunk = [&](const float* g, const float* u, float* o) {
    const Reg gv = V::load(g), uv = V::load(u);
    V::store(o, V::div(V::mul(gv, uv), V::add(one, V::exp(V::sub(V::zero(), gv)))));
  };
  int64_t i = 0;
  for (; i + W <= n; i += W) one_chunk(gate + i, up + i, out + i);
  if (i == n) return;
  float g[W] = {}, u[W] = {}, o[W];
  std::copy(gate + i, gate + n, g);
  std::copy(up + i, up + n, u);
  one_chunk(g, u, o);
  std::copy(o, o + (n - i), out + i);
}

// rope_rotate's fused scalar expression (tensor/ops.cpp), so the same bits:
//   a' = fma(a, cos, −(b·sin)),  b' = fma(a, sin, b·cos)
// for the pairs (i, i + half) (neox) or (2i, 2i + 1). Returns the pairs it rotated (whole
// registers); rope_rotate does the rest.
template <class V>
int64_t rope_rotate(float* head, int64_t n_rot, const float* cs, bool neox) {
  using Reg = typename V::Reg;
  constexpr int W = V::kWidth;
  const int64_t half = n_rot / 2;
  int64_t i = 0;
  for (; i + W <= half; i += W) {
    const Reg c = V::load(cs + i), s = V::load(cs + half + i);
    Reg a, b;
    if (neox) a = V::load(head + i), b = V::load(head + half + i);
    else V::load_pairs(head + 2 * i, a, b);
    const Reg a2 = V::fms(a, c, V::mul(b, s)), b2 = V::fma(a, s, V::mul(b, c));
    if (neox) V::store(head + i, a2), V::store(head + half + i, b2);
    else V::store_pairs(head + 2 * i, a2, b2);
  }
  return i;
}

}  // namespace orchard::kernels::elementwise
