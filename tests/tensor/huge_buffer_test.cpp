#include "tensor/huge_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace orchard {
namespace {

// Every byte of a buffer is usable and starts zeroed, whatever its size.
void expect_whole_and_zeroed(const HugeBuffer& b) {
  ASSERT_NE(b.data(), nullptr);
  for (size_t i = 0; i < b.size(); i += 4093) EXPECT_EQ(b.data()[i], 0) << "byte " << i;
  EXPECT_EQ(b.data()[b.size() - 1], 0);
  std::memset(b.data(), 0xA5, b.size());
  EXPECT_EQ(b.data()[b.size() - 1], 0xA5);
}

TEST(HugeBuffer, SmallAndLargeBuffersAreWholeAndZeroed) {
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, size_t{3} << 20, (size_t{17} << 20) + 12345}) {
    HugeBuffer b(bytes);
    EXPECT_EQ(b.size(), bytes);
    expect_whole_and_zeroed(b);
  }
  HugeBuffer empty(0);
  EXPECT_EQ(empty.data(), nullptr);
}

TEST(HugeBuffer, BuffersOfAHugePageOrMoreStartOnAHugePageBoundary) {
#ifdef ORCHARD_HUGE_BUFFER_ON_HEAP
  GTEST_SKIP() << "under AddressSanitizer the bytes come from the heap";
#else
  // The kernel backs only whole, aligned 2 MiB pieces with huge pages: a 2.4 MB matrix that
  // started anywhere else had none.
  for (size_t bytes : {HugeBuffer::kHugePage, size_t{2516582}, size_t{9437184}, size_t{40} << 20}) {
    HugeBuffer b(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % HugeBuffer::kHugePage, 0u) << bytes << " bytes";
  }
#endif
}

// Activation vectors start on a cache line (so a tile's 32-float rows are two lines, not three),
// large ones on a huge page; they grow, shrink and copy like any vector.
TEST(ActivationVector, StartsOnACacheLineAndLargeOnesOnAHugePage) {
  for (size_t n : {size_t{1}, size_t{1000}, size_t{1} << 19, (size_t{5} << 20) + 7}) {
    ActivationVector v(n, 1.5f);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u) << n << " floats";
#ifndef ORCHARD_HUGE_BUFFER_ON_HEAP
    if (n * sizeof(float) >= HugeBuffer::kHugePage) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % HugeBuffer::kHugePage, 0u) << n << " floats";
    }
#endif
    EXPECT_EQ(v[n - 1], 1.5f);
    v.resize(2 * n, 2.0f);  // moves the elements into a larger allocation
    EXPECT_EQ(v[n - 1], 1.5f);
    EXPECT_EQ(v[2 * n - 1], 2.0f);
    ActivationVector copy = v;
    EXPECT_EQ(copy, v);
    v.clear();
    v.shrink_to_fit();
    EXPECT_EQ(copy[2 * n - 1], 2.0f);
  }
}

}  // namespace
}  // namespace orchard
