#include "network/key_rate_limit.h"

#include <algorithm>
#include <cmath>

namespace orchard::network {

std::optional<int64_t> KeyRateLimiter::admit(const std::string& key, int64_t now_ms) {
  if (per_minute_ <= 0) return std::nullopt;
  const double capacity = per_minute_, per_ms = per_minute_ / 60'000.0;
  std::lock_guard lock(mu_);
  // Buckets full again are the same as none: drop them once a minute so the map holds only the
  // keys active within the last minute.
  if (now_ms - last_prune_ms_ > 60'000) {
    std::erase_if(buckets_, [&](const auto& kv) { return kv.second.tokens + (now_ms - kv.second.at_ms) * per_ms >= capacity; });
    last_prune_ms_ = now_ms;
  }
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{capacity, now_ms});
  Bucket& b = it->second;
  if (!fresh) {
    b.tokens = std::min(capacity, b.tokens + std::max<int64_t>(0, now_ms - b.at_ms) * per_ms);
    b.at_ms = std::max(b.at_ms, now_ms);
  }
  if (b.tokens >= 1.0) {
    b.tokens -= 1.0;
    return std::nullopt;
  }
  return static_cast<int64_t>(std::ceil((1.0 - b.tokens) / per_ms));
}

}  // namespace orchard::network
