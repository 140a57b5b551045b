#pragma once
// Open-addressing hash indexes for the two lookups tokenizers do most: token text -> id and
// (left, right) symbol pair -> merge. Vocabularies reach 150k tokens and 280k merges; a node per
// entry (std::unordered_map) costs a cache miss per probe and a malloc per insert, which made the
// Llama 3 vocabulary take most of a second to load.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace orchard {

// Maps the strings of a vector to their indices. The vector must outlive the index and not change.
class TextIndex {
 public:
  // Duplicate texts resolve to the last index, as llama.cpp's token_to_id map does.
  void build(const std::vector<std::string>& texts);
  int32_t find(std::string_view text) const;  // -1 when absent

 private:
  struct Slot {
    uint32_t hash_bits;
    int32_t id;  // -1: empty
  };
  static uint64_t hash(std::string_view text);
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  const std::vector<std::string>* texts_ = nullptr;
};

// Maps a pair of non-negative ids to a value; first insertion of a pair wins.
template <typename Value>
class PairIndex {
 public:
  void reserve(size_t n) {
    size_t capacity = 16;
    while (capacity < n + n / 2) capacity <<= 1;  // load factor at most 2/3 before growing
    slots_.assign(capacity, Slot{kEmpty, Value{}});
    mask_ = capacity - 1;
    size_ = 0;
  }
  bool insert(int32_t left, int32_t right, const Value& value) {
    if (3 * (size_ + 1) > 2 * slots_.size()) grow();
    const uint64_t key = make_key(left, right);
    for (uint64_t i = probe_start(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return false;
      if (slots_[i].key == kEmpty) {
        slots_[i] = Slot{key, value};
        ++size_;
        return true;
      }
    }
  }
  const Value* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = make_key(left, right);
    for (uint64_t i = probe_start(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key;
    Value value;
  };
  static uint64_t make_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  uint64_t probe_start(uint64_t key) const {
    // Fibonacci hashing spreads the structured keys; the high bits are the best mixed.
    return ((key * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    reserve(old.empty() ? 8 : old.size() * 2);
    for (const Slot& s : old)
      if (s.key != kEmpty)
        insert(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key & 0xFFFFFFFFu), s.value);
  }
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace orchard
