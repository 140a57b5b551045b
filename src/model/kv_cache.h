#pragma once
// Keys and values of every position seen so far, per layer, as floats or IEEE halves (KVType,
// tensor/attention.h). Values are rows, one per position; keys are kept per KV head in the
// attention kernel's transposed panels, written once when a position is added.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/hparams.h"
#include "tensor/attention.h"
#include "tensor/error.h"
#include "tensor/huge_buffer.h"

namespace orchard {

class KVCache {
 public:
  KVCache(const HParams& hp, int64_t n_ctx, KVType type = KVType::F32)
      : KVCache(hp.n_layers, hp.n_kv_heads, hp.head_dim, n_ctx, type) {}
  // A shard's cache: its layers (indexed from 0) and its KV heads. `values` false: keys only
  // (latent attention keeps one row per position, its values being part of its keys).
  KVCache(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, int64_t n_ctx, KVType type = KVType::F32,
          bool values = true)
      : type_(type), elem_(kv_type_bytes(type)), n_ctx_(n_ctx), kv_dim_(n_kv_heads * head_dim), head_dim_(head_dim),
        head_keys_(key_panels_size(n_ctx, head_dim)),
        elems_(values ? static_cast<size_t>(n_layers * n_ctx * kv_dim_) : 0),
        k_elems_(static_cast<size_t>(n_layers * n_kv_heads * head_keys_)),
        n_kv_heads_(n_kv_heads),
        // Mapped, not touched: only positions already written are ever read (a key panel is
        // zeroed when its first position is written), so a large context costs memory only as
        // it fills. In huge pages: with 4 KiB ones a fresh cache took a page fault every other
        // position per layer on the 1b shape (a value row is 2 KiB), and writing one token's
        // keys and values cost ~30 µs per layer instead of ~8.
        k_(k_elems_ * elem_),
        v_(elems_ * elem_),
        halves_(type == KVType::F16 ? static_cast<size_t>(kv_dim_) : 0) {}

  KVType type() const { return type_; }

  int64_t capacity() const { return n_ctx_; }
  int64_t size() const { return used_; }       // positions filled
  void clear() { used_ = 0; }
  // Drops positions >= n (e.g. to re-run a suffix).
  void truncate(int64_t n) { if (n < used_) used_ = n; }

  // Makes this cache hold `src`'s first n positions (a prompt prefix another sequence already
  // computed): their keys' whole panels and their value rows, then nothing after them. `src`
  // must have this cache's shape.
  void copy_prefix(const KVCache& src, int64_t n) {
    if (src.type_ != type_ || src.n_ctx_ != n_ctx_ || src.kv_dim_ != kv_dim_ || src.head_dim_ != head_dim_ ||
        src.k_elems_ != k_elems_ || src.elems_ != elems_)
      throw Error("copy_prefix: the two caches differ in shape");
    if (n < 0 || n > src.used_)
      throw Error("copy_prefix: " + std::to_string(n) + " positions asked of a cache holding " + std::to_string(src.used_));
    if (&src == this) return truncate(n);
    const int64_t layers = n_kv_heads_ > 0 ? static_cast<int64_t>(k_elems_) / (n_kv_heads_ * head_keys_) : 0;
    const size_t key_bytes = static_cast<size_t>(key_panels_size(n, head_dim_)) * elem_;
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t h = 0; h < n_kv_heads_; ++h)
        std::copy_n(src.k_.data() + k_index(l, h) * elem_, key_bytes, k_.data() + k_index(l, h) * elem_);
      if (elems_ > 0)
        std::copy_n(src.v_.data() + v_index(l, 0) * elem_, static_cast<size_t>(n * kv_dim_) * elem_,
                    v_.data() + v_index(l, 0) * elem_);
    }
    used_ = n;
  }

  // Throws a clear error when `n` more positions do not fit.
  void reserve(int64_t n) const {
    if (used_ + n > n_ctx_)
      throw Error("context is full: " + std::to_string(used_) + " positions used + " +
                  std::to_string(n) + " new > context size " + std::to_string(n_ctx_) +
                  " (raise --ctx)");
  }
  void advance(int64_t n) { used_ += n; }

  // KV head `kvh`'s key panels in `layer` (key_offset() finds a position's element), of type().
  const void* k_panels(int64_t layer, int64_t kvh) const { return k_.data() + k_index(layer, kvh) * elem_; }
  // Elements from one KV head's key panels to the next's.
  int64_t k_head_stride() const { return head_keys_; }
  // Writes position `pos`'s keys, all KV heads side by side (kv_dim values).
  void store_k(int64_t layer, int64_t pos, const float* keys) {
    if (type_ == KVType::F32) {
      for (int64_t h = 0; h < n_kv_heads_; ++h)
        store_key(reinterpret_cast<float*>(k_.data()) + k_index(layer, h), head_dim_, pos, keys + h * head_dim_);
      return;
    }
    to_halves(keys, halves_.data(), kv_dim_);
    for (int64_t h = 0; h < n_kv_heads_; ++h)
      store_key(reinterpret_cast<uint16_t*>(k_.data()) + k_index(layer, h), head_dim_, pos, halves_.data() + h * head_dim_);
  }
  // Writes position `pos`'s values (kv_dim values).
  void store_v(int64_t layer, int64_t pos, const float* values) {
    uint8_t* row = v_.data() + v_index(layer, pos) * elem_;
    if (type_ == KVType::F32) std::copy_n(values, kv_dim_, reinterpret_cast<float*>(row));
    else to_halves(values, reinterpret_cast<uint16_t*>(row), kv_dim_);
  }
  // KV head `kvh`'s values at position 0 of `layer`; position p's lie p·kv_dim elements on.
  const void* v_head(int64_t layer, int64_t kvh) const {
    return v_.data() + (v_index(layer, 0) + static_cast<size_t>(kvh * head_dim_)) * elem_;
  }
  size_t bytes() const { return (k_elems_ + elems_) * elem_; }

 private:
  KVType type_;
  size_t elem_;  // bytes per element
  int64_t n_ctx_, kv_dim_, head_dim_, head_keys_;
  int64_t used_ = 0;
  size_t elems_, k_elems_;
  int64_t n_kv_heads_;
  HugeBuffer k_, v_;
  std::vector<uint16_t> halves_;  // F16: a position's keys converted, before they are spread out

  size_t k_index(int64_t layer, int64_t kvh) const { return static_cast<size_t>((layer * n_kv_heads_ + kvh) * head_keys_); }
  size_t v_index(int64_t layer, int64_t pos) const { return static_cast<size_t>((layer * n_ctx_ + pos) * kv_dim_); }
};

}  // namespace orchard
