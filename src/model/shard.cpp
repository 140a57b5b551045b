#include "model/shard.h"

#include "tensor/error.h"

namespace orchard {
namespace {

void fix(int64_t& begin, int64_t& end, int64_t size, const char* what) {
  if (end < 0) end = size;
  if (begin < 0 || begin >= end || end > size)
    throw Error(std::string("shard: ") + what + " range [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") is empty or outside [0, " + std::to_string(size) + ")");
}

}  // namespace

Shard Shard::resolved(const HParams& hp) const {
  Shard s = *this;
  fix(s.layer_begin, s.layer_end, hp.n_layers, "layer");
  fix(s.kv_head_begin, s.kv_head_end, hp.n_kv_heads, "KV head");
  fix(s.ffn_begin, s.ffn_end, hp.ffn_dim, "FFN column");
  fix(s.vocab_begin, s.vocab_end, hp.n_vocab, "vocabulary");
  if (hp.n_expert > 0) {
    fix(s.expert_begin, s.expert_end, hp.n_expert, "expert");
    if (hp.expert_ffn_dim > 0) fix(s.expert_ffn_begin, s.expert_ffn_end, hp.expert_ffn_dim, "expert FFN column");
    else s.expert_ffn_begin = s.expert_ffn_end = 0;
  } else {
    s.expert_begin = s.expert_end = s.expert_ffn_begin = s.expert_ffn_end = 0;
  }
  // [0, 0): none of the shared experts' columns (an expert group with more ranks than blocks).
  if (hp.shared_ffn_dim > 0 && !(s.shexp_begin == 0 && s.shexp_end == 0))
    fix(s.shexp_begin, s.shexp_end, hp.shared_ffn_dim, "shared-expert column");
  else s.shexp_begin = s.shexp_end = 0;
  return s;
}

bool Shard::splits_tensors(const HParams& hp) const {
  const Shard s = resolved(hp);
  return s.n_kv_heads() != hp.n_kv_heads || s.n_ffn() != hp.ffn_dim || s.n_vocab() != hp.n_vocab ||
         s.n_experts() != hp.n_expert || s.n_shexp() != hp.shared_ffn_dim || s.n_expert_ffn() != hp.expert_ffn_dim;
}

std::string Shard::describe() const {
  // A range left at -1 (not resolved against a model) means all of it.
  auto range = [](int64_t begin, int64_t end) {
    return end < 0 ? (begin == 0 ? std::string("all") : std::to_string(begin) + "-end")
                   : std::to_string(begin) + "-" + std::to_string(end - 1);
  };
  std::string d = "layers " + range(layer_begin, layer_end);
  if (embed) d += " +embeddings";
  if (head) d += " +head";
  d += ", KV heads " + range(kv_head_begin, kv_head_end) + ", FFN " + range(ffn_begin, ffn_end) + ", vocab " +
       range(vocab_begin, vocab_end);
  if (expert_end > 0 || expert_begin > 0) d += ", experts " + range(expert_begin, expert_end);
  if (shexp_end > 0 || shexp_begin > 0) d += ", shared-expert FFN " + range(shexp_begin, shexp_end);
  if (expert_ffn_end > 0 || expert_ffn_begin > 0) d += ", expert FFN " + range(expert_ffn_begin, expert_ffn_end);
  return d;
}

}  // namespace orchard
