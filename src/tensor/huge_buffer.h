#pragma once
// Memory for weights that are streamed once per token, for KV caches and for long prompts'
// activations: anonymous pages with transparent huge pages requested, touched only when used.
// Weights behind 4 KiB pages ran the generation kernels at ~40 % of their huge-page speed
// (docs/benchmarks.md), so copies of weights (tensor-parallel column slices) live here rather
// than in std::vector.
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "platform/platform.h"


// Under AddressSanitizer the bytes come from the heap instead, so reads and writes past the end
// of a buffer are still caught (mapped memory has no red zones).
#if defined(__SANITIZE_ADDRESS__)
#define ORCHARD_HUGE_BUFFER_ON_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ORCHARD_HUGE_BUFFER_ON_HEAP 1
#endif
#endif

namespace orchard {

class HugeBuffer {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;

  explicit HugeBuffer(size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
#ifdef ORCHARD_HUGE_BUFFER_ON_HEAP
    data_ = new (std::align_val_t{64}) uint8_t[bytes]();  // zeroed, as fresh mapped pages are
#else
    map_bytes_ = mapped_length(bytes);
    data_ = map_pages(bytes);
#endif
  }
  ~HugeBuffer() {
    if (!data_) return;
#ifdef ORCHARD_HUGE_BUFFER_ON_HEAP
    ::operator delete[](data_, std::align_val_t{64});
#else
    ::munmap(data_, map_bytes_);
#endif
  }
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
  // The kernel backs only the whole, aligned 2 MiB pieces of a mapping with huge pages, and
  // places a mapping on a 2 MiB boundary at most when its length is a multiple of that: a
  // 2.4 MiB matrix mapped as asked got none, and one model's small matrices (q, k, v, wo: 16 %
  // of its bytes) then streamed from 4 KiB pages. So a buffer of 2 MiB or more starts on a
  // boundary, and one of 16 MiB or more is rounded up to whole huge pages (at most 1/8 more).
  static size_t mapped_length(size_t bytes) {
    return bytes >= 8 * kHugePage ? round_up(bytes, kHugePage) : round_up(bytes, 4096);
  }
  // Zeroed pages for `bytes`, mapped_length(bytes) long, with huge pages requested.
  static uint8_t* map_pages(size_t bytes) {
    const size_t length = mapped_length(bytes);
    uint8_t* data;
    if (bytes < kHugePage) {
      data = static_cast<uint8_t*>(map_or_throw(length));
    } else {
      const size_t reserve = length + kHugePage;
      auto* raw = static_cast<uint8_t*>(map_or_throw(reserve));
      const size_t head = round_up(reinterpret_cast<uintptr_t>(raw), kHugePage) - reinterpret_cast<uintptr_t>(raw);
      if (head) ::munmap(raw, head);
      if (reserve - head > length) ::munmap(raw + head + length, reserve - head - length);
      data = raw + head;
    }
    platform::advise_huge_pages(data, length);
    return data;
  }
  static void* map_or_throw(size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return p;
  }

  uint8_t* data_ = nullptr;
  size_t size_;
  [[maybe_unused]] size_t map_bytes_ = 0;  // the mapping's length (whole pages)

  template <class T>
  friend struct HugePageAllocator;
};

// std::vector storage for a long prompt's activations. From the heap they start 16 bytes past a
// page (so a tile's 32-float output rows straddle three cache lines) on 4 KiB pages (so its
// twelve rows, 8–32 KB apart, are twelve TLB entries): an F16 prompt's FMA tiles stalled on
// their outputs for a sixth of their time. Vectors of 2 MiB or more get their own huge-page
// mapping; smaller ones come from the heap, 64-byte aligned.
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
#ifndef ORCHARD_HUGE_BUFFER_ON_HEAP
    if (bytes >= HugeBuffer::kHugePage) return reinterpret_cast<T*>(HugeBuffer::map_pages(bytes));
#endif
    return static_cast<T*>(::operator new(bytes, std::align_val_t{64}));
  }
  void deallocate(T* p, [[maybe_unused]] size_t n) {
#ifndef ORCHARD_HUGE_BUFFER_ON_HEAP
    if (const size_t bytes = n * sizeof(T); bytes >= HugeBuffer::kHugePage) {
      ::munmap(p, HugeBuffer::mapped_length(bytes));
      return;
    }
#endif
    ::operator delete(p, std::align_val_t{64});
  }
  friend bool operator==(const HugePageAllocator&, const HugePageAllocator&) { return true; }
};

// A float vector for activations (see HugePageAllocator).
using ActivationVector = std::vector<float, HugePageAllocator<float>>;

}  // namespace orchard
