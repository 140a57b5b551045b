#include "model/tokenizer/flat_index.h"

#include <functional>

namespace orchard {

uint64_t TextIndex::hash(std::string_view text) { return std::hash<std::string_view>{}(text); }

void TextIndex::build(const std::vector<std::string>& texts) {
  texts_ = &texts;
  size_t capacity = 16;
  while (capacity < 2 * texts.size()) capacity <<= 1;
  slots_.assign(capacity, Slot{0, -1});
  mask_ = capacity - 1;
  for (size_t id = 0; id < texts.size(); ++id) {
    const uint64_t h = hash(texts[id]);
    const auto bits = static_cast<uint32_t>(h >> 32);
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.id < 0) {
        slot = Slot{bits, static_cast<int32_t>(id)};
        break;
      }
      if (slot.hash_bits == bits && texts[slot.id] == texts[id]) {
        slot.id = static_cast<int32_t>(id);
        break;
      }
    }
  }
}

int32_t TextIndex::find(std::string_view text) const {
  if (slots_.empty()) return -1;
  const uint64_t h = hash(text);
  const auto bits = static_cast<uint32_t>(h >> 32);
  for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& slot = slots_[i];
    if (slot.id < 0) return -1;
    if (slot.hash_bits == bits && (*texts_)[slot.id] == text) return slot.id;
  }
}

}  // namespace orchard
