#pragma once
// Inputs whose sums are exact in f32, f16 and bf16 (multiples of 1/4 in
// [-2, 2]), so every rank and the reference must agree bit for bit.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dist/group.h"
#include "tensor/f16.h"

namespace orchard::dist::testing {

inline float test_value(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 13) % 17) - 8) * 0.25f;
}

inline std::vector<uint8_t> filled(DType t, int rank, size_t count) {
  std::vector<uint8_t> out(count * dtype_size(t));
  for (size_t i = 0; i < count; ++i) {
    const float v = test_value(rank, i);
    if (t == DType::F32) {
      std::memcpy(out.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = t == DType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

inline float element(const std::vector<uint8_t>& buf, DType t, size_t i) {
  if (t == DType::F32) {
    float v;
    std::memcpy(&v, buf.data() + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, buf.data() + 2 * i, 2);
  return t == DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

// "" when buf holds the sum over n ranks, else what is wrong.
inline std::string check_sum(const std::vector<uint8_t>& buf, DType t, int n, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += test_value(r, i);
    const float got = element(buf, t, i);
    if (got != want)
      return "element " + std::to_string(i) + " of " + std::to_string(count) + " (" + dtype_name(t) + ", " +
             std::to_string(n) + " ranks) is " + std::to_string(got) + ", want " + std::to_string(want);
  }
  return "";
}

}  // namespace orchard::dist::testing
