#pragma once
// What the generation loop needs from a model: feed tokens, get the next-token logits. On one
// machine that is Model::forward; across machines (src/parallel) the ranks run their
// shards in step and one of them, the sampler, gets the logits and decides every next token,
// which agree() hands to all the others.
#include <cstdint>
#include <span>
#include <vector>

#include "model/kv_cache.h"
#include "model/tokenizer/tokenizer.h"

namespace orchard {

class Model;

class Forward {
 public:
  virtual ~Forward() = default;
  // Feeds `tokens` after the positions already seen. On the sampler, `logits` receives the
  // last token's logits over the whole vocabulary; elsewhere it is left alone.
  virtual void feed(std::span<const TokenId> tokens, std::vector<float>& logits) = 0;
  virtual int64_t positions() const = 0;
  virtual int64_t capacity() const = 0;
  virtual bool is_sampler() const { return true; }
  // Every rank calls it with the sampler's decision (its own argument is ignored elsewhere)
  // and gets that decision back: the next token to feed, or -1 to stop.
  virtual TokenId agree(TokenId decision) { return decision; }
};

// One machine, the whole model.
class LocalForward : public Forward {
 public:
  LocalForward(Model& model, KVCache& kv) : model_(model), kv_(kv) {}
  void feed(std::span<const TokenId> tokens, std::vector<float>& logits) override;
  int64_t positions() const override { return kv_.size(); }
  int64_t capacity() const override { return kv_.capacity(); }

 private:
  Model& model_;
  KVCache& kv_;
};

}  // namespace orchard
