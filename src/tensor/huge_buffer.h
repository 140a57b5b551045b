#pragma once
// Memory for weights that are streamed once per token, and for KV caches: anonymous pages with
// transparent huge pages requested, touched only when used. Weights behind 4 KiB pages ran the
// generation kernels at ~40 % of their huge-page speed (docs/benchmarks.md), so copies of weights
// (tensor-parallel column slices) live here rather than in std::vector.
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>

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
  explicit HugeBuffer(size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
#ifdef ORCHARD_HUGE_BUFFER_ON_HEAP
    data_ = new (std::align_val_t{64}) uint8_t[bytes]();  // zeroed, as fresh mapped pages are
#else
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    ::madvise(p, bytes, MADV_HUGEPAGE);
    data_ = static_cast<uint8_t*>(p);
#endif
  }
  ~HugeBuffer() {
    if (!data_) return;
#ifdef ORCHARD_HUGE_BUFFER_ON_HEAP
    ::operator delete[](data_, std::align_val_t{64});
#else
    ::munmap(data_, size_);
#endif
  }
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_;
};

}  // namespace orchard
