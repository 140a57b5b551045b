#pragma once
// Causal attention of a block of queries against one KV head, as matrix products: the scores
// Q·Kᵀ and the mix P·V each go through an outer-product micro-kernel instead of a dot product
// and a horizontal sum per position (a prompt's attention ran at a twentieth of the machine's
// multiply-add rate that way).
#include <cstdint>

namespace orchard {

// Query row (t, g) — token t < ntok, query head g < group of this KV head — lies at
// q + t·tok_stride + g·head_dim, and its output at the same offset from out. Token t sees
// positions [0, len[t]) of k and v, whose position p lies at k + p·kv_stride (v alike).
struct AttendArgs {
  const float* q = nullptr;
  float* out = nullptr;
  int64_t tok_stride = 0;
  int64_t ntok = 0;
  int64_t group = 1;
  const int64_t* len = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t kv_stride = 0;
  int64_t head_dim = 0;
  float scale = 1.0f;
};

// Whether this CPU has the kernel for heads of `head_dim` (else callers keep their own loop).
bool attend_available(int64_t head_dim);

// out_row = softmax(scale · q_row·Kᵀ over the visible positions) · V for every query row, on the
// calling thread. Each output is the same bits whichever other rows share the call, so a
// server batching requests stays batch-invariant. Requires attend_available(head_dim).
void attend(const AttendArgs& a);

}  // namespace orchard
