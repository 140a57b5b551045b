#pragma once
// What every ISA's attention kernel (avx512_attention.cpp, avx2_attention.cpp) does around its
// per-head work: one call may cover several KV heads side by side (tensor/attention.h), taken
// one after another; and scratch that only grows, since calls alternate between sequences of
// different lengths and a resize up zero-fills the new part every time.
#include <cstdint>
#include <vector>

#include "tensor/attention.h"

namespace orchard::kernels {

// head(h) for the arguments of each KV head of the call (T: the cache's element type).
template <class T, class Head>
void each_kv_head(const AttendArgs& a, Head head) {
  const int64_t head_rows = a.group * a.head_dim;
  for (int64_t j = 0; j < a.n_kv; ++j) {
    AttendArgs h = a;
    h.q += j * head_rows;
    h.out += j * head_rows;
    h.k = static_cast<const T*>(a.k) + j * a.k_head_stride;
    h.v = static_cast<const T*>(a.v) + j * a.head_dim;
    h.n_kv = 1;
    head(h);
  }
}

inline void grow(std::vector<float>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
}

}  // namespace orchard::kernels
