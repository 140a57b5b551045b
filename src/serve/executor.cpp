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

void prepare_slots(std::span<const SlotFeed> feeds, std::span<const std::unique_ptr<KVCache>> caches) {
  const auto n = static_cast<int64_t>(caches.size());
  for (const SlotFeed& f : feeds) {
    if (f.slot < 0 || f.slot >= n) throw Error("no slot " + std::to_string(f.slot));
    if (f.copy_from >= n || f.copy_from < -1) throw Error("no slot " + std::to_string(f.copy_from) + " to copy from");
    if (f.keep < -1 || f.keep > caches[static_cast<size_t>(f.slot)]->capacity())
      throw Error("slot " + std::to_string(f.slot) + ": cannot keep " + std::to_string(f.keep) + " positions");
  }
  // Copies first (a source restarted by this same step still holds what it held), then the
  // truncations of the rest.
  auto copies = [](const SlotFeed& f) { return f.copy_from >= 0 && f.copy_from != f.slot && f.keep > 0; };
  for (const SlotFeed& f : feeds)
    if (copies(f)) caches[static_cast<size_t>(f.slot)]->copy_prefix(*caches[static_cast<size_t>(f.copy_from)], f.keep);
  for (const SlotFeed& f : feeds) {
    if (f.keep < 0 || copies(f)) continue;
    KVCache& kv = *caches[static_cast<size_t>(f.slot)];
    if (f.keep > kv.size())
      throw Error("slot " + std::to_string(f.slot) + " holds " + std::to_string(kv.size()) + " positions, not the " +
                  std::to_string(f.keep) + " to keep");
    kv.truncate(f.keep);
  }
}

void LocalExecutor::step(std::span<const SlotFeed> feeds, std::vector<float>& logits) {
  prepare_slots(feeds, caches_);
  std::vector<BatchSeq> batch;
  for (const SlotFeed& f : feeds) batch.push_back({f.tokens, caches_[static_cast<size_t>(f.slot)].get()});
  engine_.model().forward_batch(batch, logits);
}

}  // namespace orchard::serve
