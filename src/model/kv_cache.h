#pragma once
// Keys and values of every position seen so far, per layer, in float32.
#include <cstdint>
#include <memory>

#include "model/hparams.h"
#include "tensor/error.h"

namespace orchard {

class KVCache {
 public:
  KVCache(const HParams& hp, int64_t n_ctx) : KVCache(hp.n_layers, hp.kv_dim(), n_ctx) {}
  // A shard's cache: its layers (indexed from 0) and its KV heads.
  KVCache(int64_t n_layers, int64_t kv_dim, int64_t n_ctx)
      : n_ctx_(n_ctx), kv_dim_(kv_dim),
        elems_(static_cast<size_t>(n_layers * n_ctx * kv_dim)),
        // Left uninitialised: only positions already written are ever read, and a large
        // context then costs memory only as it fills.
        k_(new float[elems_]),
        v_(new float[elems_]) {}

  int64_t capacity() const { return n_ctx_; }
  int64_t size() const { return used_; }       // positions filled
  void clear() { used_ = 0; }
  // Drops positions >= n (e.g. to re-run a suffix).
  void truncate(int64_t n) { if (n < used_) used_ = n; }

  // Throws a clear error when `n` more positions do not fit.
  void reserve(int64_t n) const {
    if (used_ + n > n_ctx_)
      throw Error("context is full: " + std::to_string(used_) + " positions used + " +
                  std::to_string(n) + " new > context size " + std::to_string(n_ctx_) +
                  " (raise --ctx)");
  }
  void advance(int64_t n) { used_ += n; }

  float* k(int64_t layer, int64_t pos) { return &k_[static_cast<size_t>((layer * n_ctx_ + pos) * kv_dim_)]; }
  float* v(int64_t layer, int64_t pos) { return &v_[static_cast<size_t>((layer * n_ctx_ + pos) * kv_dim_)]; }
  size_t bytes() const { return 2 * elems_ * sizeof(float); }

 private:
  int64_t n_ctx_, kv_dim_;
  int64_t used_ = 0;
  size_t elems_;
  std::unique_ptr<float[]> k_, v_;
};

}  // namespace orchard
