#pragma once
// What a rank must hold for its shard: its weights (row and column slices counted at their
// share), replicated pieces (norms, embeddings on the first stage), its KV cache for the
// context, and scratch buffers. Used to size pipeline stages to memory budgets and to refuse
// plans that do not fit, before anything is loaded.
#include <cstdint>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/hparams.h"
#include "model/shard.h"

namespace orchard::parallel {

struct ShardBytes {
  uint64_t weights = 0, kv = 0, scratch = 0;
  uint64_t total() const { return weights + kv + scratch; }
};

// f32 activations one token of a prompt chunk keeps in flight: residual, norm, q/k/v and
// attention, gate/up, logits (`kv_elems`: K and V together; `vocab`: this rank's rows).
double activation_bytes_per_token(int64_t dim, int64_t q_dim, int64_t kv_elems, int64_t ffn_dim, int64_t vocab);

ShardBytes shard_bytes(const GGUFFile& file, const HParams& hp, const Shard& shard, int64_t n_ctx, int64_t chunk,
                       size_t kv_elem_bytes = sizeof(float));

// "512M", "8G", "1.5GiB", "300000000" → bytes; throws orchard::Error naming the text.
uint64_t parse_bytes(const std::string& text);
std::string format_bytes(uint64_t bytes);
// A computed figure, rounded down to whole bytes and saturating at UINT64_MAX (0 for negative
// or NaN): node descriptions and cluster files can describe any model, and a double beyond
// uint64_t's range cast as it is would be undefined behaviour (node_register_fuzz).
uint64_t saturating_u64(double x);
std::string format_size(double bytes);

}  // namespace orchard::parallel
