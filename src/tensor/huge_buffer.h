#pragma once
// Memory for weights that are streamed once per token: anonymous pages with transparent huge
// pages requested. Weights behind 4 KiB pages ran the generation kernels at ~40 % of their
// huge-page speed (docs/benchmarks.md), so copies of weights (tensor-parallel column slices)
// live here rather than in std::vector.
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>

namespace orchard {

class HugeBuffer {
 public:
  explicit HugeBuffer(size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    ::madvise(p, bytes, MADV_HUGEPAGE);
    data_ = static_cast<uint8_t*>(p);
  }
  ~HugeBuffer() {
    if (data_) ::munmap(data_, size_);
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
