#include "serve/executor.h"

#include "tensor/error.h"

namespace orchard::serve {

LocalExecutor::LocalExecutor(Engine& engine, int slots) : engine_(engine) {
  if (slots < 1) throw Error("the server needs at least one slot (got " + std::to_string(slots) + ")");
  // Caches are allocated lazily by the kernel (pages touched as positions fill), so idle slots
  // cost address space, not memory.
  for (int i = 0; i < slots; ++i) caches_.push_back(engine_.new_cache());
  // A request's answer must not depend on who else is being served.
  engine_.model().set_batch_invariant(true);
}

void LocalExecutor::step(std::span<const SlotFeed> feeds, std::vector<float>& logits) {
  std::vector<BatchSeq> batch;
  for (const SlotFeed& f : feeds) {
    if (f.slot < 0 || f.slot >= slots()) throw Error("no slot " + std::to_string(f.slot));
    KVCache& kv = *caches_[static_cast<size_t>(f.slot)];
    if (f.reset) kv.clear();
    batch.push_back({f.tokens, &kv});
  }
  engine_.model().forward_batch(batch, logits);
}

}  // namespace orchard::serve
