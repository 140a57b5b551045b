#pragma once
// Causal attention of a block of queries against one KV head, as matrix products: the scores
// Q·Kᵀ and the mix P·V each go through an outer-product micro-kernel instead of a dot product
// and a horizontal sum per position (a prompt's attention ran at a twentieth of the machine's
// multiply-add rate that way).
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace orchard {

// What a KV cache keeps keys and values in. F16 (IEEE halves, llama.cpp's default) is half the
// memory and, in a decoding step of many sequences whose keys and values stay in no cache,
// close to half the attention's time; F32 gives llama.cpp's `-ctk f32 -ctv f32` logits.
enum class KVType : uint8_t { F32, F16 };
inline size_t kv_type_bytes(KVType t) { return t == KVType::F16 ? 2 : 4; }
const char* kv_type_name(KVType t);  // "f32", "f16"
bool kv_type_from_name(std::string_view name, KVType& out);

// Keys are kept transposed, in panels of 32 positions: position p's element d of one KV head
// lies at key_offset(p, d, head_dim) from the head's first panel. The scores Q·Kᵀ want the
// positions in vector lanes; stored this way a step reads each key once instead of
// transposing every visible key of every sequence again at every step.
constexpr int64_t kKeyPanel = 32;
inline int64_t key_offset(int64_t pos, int64_t d, int64_t head_dim) {
  return (pos / kKeyPanel) * head_dim * kKeyPanel + d * kKeyPanel + pos % kKeyPanel;
}
// Elements one head's panels take for `positions` positions.
inline int64_t key_panels_size(int64_t positions, int64_t head_dim) {
  return (positions + kKeyPanel - 1) / kKeyPanel * kKeyPanel * head_dim;
}
// Writes `key` (head_dim elements, float or uint16_t halves) as position `pos` of the panels at
// `panels`. The first position of a panel zeroes it, so lanes past the last position hold
// numbers, never garbage.
template <class T>
void store_key(T* panels, int64_t head_dim, int64_t pos, const T* key);

// n floats to halves, rounded to nearest even, and back: tensor/f16.h's conversions (the same
// bits on every CPU), vectorized where the CPU can.
void to_halves(const float* x, uint16_t* out, int64_t n);
void to_floats(const uint16_t* h, float* out, int64_t n);

// Query row (t, g) — token t < ntok, query head g < group of this KV head — lies at
// q + t·tok_stride + g·head_dim, and its output at the same offset from out. Token t sees
// positions [0, len[t]) of k and v: k is the head's key panels (above), and position p of v
// lies at v + p·kv_stride.
// A call may cover n_kv KV heads side by side: head j's query rows (and outputs) start
// j·group·head_dim after q's (out's), its key panels k_head_stride elements after k, and its
// values head_dim after v.
struct AttendArgs {
  const float* q = nullptr;
  float* out = nullptr;
  int64_t tok_stride = 0;
  int64_t ntok = 0;
  int64_t group = 1;
  const int64_t* len = nullptr;
  KVType kv_type = KVType::F32;  // what k and v hold: floats or halves
  const void* k = nullptr;       // key panels
  const void* v = nullptr;
  int64_t kv_stride = 0;
  int64_t head_dim = 0;
  float scale = 1.0f;
  int64_t n_kv = 1;
  int64_t k_head_stride = 0;
};

// Whether this CPU has the kernel for heads of `head_dim` (else callers keep their own loop).
bool attend_available(int64_t head_dim);

// out_row = softmax(scale · q_row·Kᵀ over the visible positions) · V for every query row, on the
// calling thread. Each output is the same bits whichever other rows and heads share the call,
// so a server batching requests stays batch-invariant. Requires attend_available(head_dim).
void attend(const AttendArgs& a);

}  // namespace orchard
