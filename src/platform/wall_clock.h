#pragma once
// Wall-clock time in milliseconds since the Unix epoch: what signed requests, ledger lines and
// job rows record (steady_clock is for measuring intervals, never for these).

#include <chrono>
#include <cstdint>

namespace orchard::platform {

inline int64_t unix_time_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace orchard::platform
