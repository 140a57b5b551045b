#pragma once
// IEEE half and bfloat16 conversions (round-to-nearest-even), scalar and exact.
#include <cstdint>
#include <cstring>

namespace orchard {

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);

inline float bf16_to_fp32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t fp32_to_bf16(float f);

}  // namespace orchard
