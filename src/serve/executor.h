#pragma once
// What the scheduler drives: a fixed number of KV-cache slots and one call that advances any
// of them by some tokens in one step. On one machine that is a batched forward pass over all
// of them; in a cluster, rank 0 tells every rank the same steps in the same order.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/engine.h"

namespace orchard::serve {

struct SlotFeed {
  int slot = 0;
  // Positions of the slot kept before `tokens` are appended: -1 all of them (a request going
  // on), 0 none (a new request), k the first k (a new request sharing that prefix: the prompt
  // cache).
  int64_t keep = -1;
  // A slot whose first `keep` positions are copied into this one first (it holds more of the
  // new request's prefix); -1: none. Every feed's copy is made before any feed truncates or
  // appends, so the source may be a slot this same step restarts.
  int copy_from = -1;
  std::vector<TokenId> tokens;     // appended after the slot's positions
};

// Applies the feeds' copies, then their truncations, to the slots' caches (what every executor
// does before running a step); throws naming the feed when one asks for what cannot be.
void prepare_slots(std::span<const SlotFeed> feeds, std::span<const std::unique_ptr<KVCache>> caches);

class Executor {
 public:
  virtual ~Executor() = default;
  virtual int slots() const = 0;
  virtual int64_t slot_capacity() const = 0;  // positions one slot holds
  virtual int64_t n_vocab() const = 0;
  // Runs every feed (at most one per slot); `logits` gets one row of n_vocab per feed, in order:
  // the logits after that feed's last token.
  virtual void step(std::span<const SlotFeed> feeds, std::vector<float>& logits) = 0;
};

// The whole model on this machine: every step is one batched forward pass.
class LocalExecutor : public Executor {
 public:
  LocalExecutor(Engine& engine, int slots);
  int slots() const override { return static_cast<int>(caches_.size()); }
  int64_t slot_capacity() const override { return engine_.n_ctx(); }
  int64_t n_vocab() const override { return engine_.hparams().n_vocab; }
  void step(std::span<const SlotFeed> feeds, std::vector<float>& logits) override;

 private:
  Engine& engine_;
  std::vector<std::unique_ptr<KVCache>> caches_;
};

}  // namespace orchard::serve
