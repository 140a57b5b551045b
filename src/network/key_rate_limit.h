#pragma once
// Per-key request limits on the coordinator's client API (issue 26): a token bucket per API key,
// `per_minute` requests filling back evenly over a minute, so a key may burst up to that many
// and then goes at the sustained rate; other keys are not slowed. In memory, per coordinator
// process: replicas each allow the rate, a bound per replica rather than a global one.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace orchard::network {

class KeyRateLimiter {
 public:
  explicit KeyRateLimiter(int per_minute) : per_minute_(per_minute) {}
  // One request by `key` (its stored hash) at `now_ms`: nullopt when admitted, else the
  // milliseconds until it would be. A limit of 0 or less admits everything.
  std::optional<int64_t> admit(const std::string& key, int64_t now_ms);
  int per_minute() const { return per_minute_; }

 private:
  struct Bucket {
    double tokens = 0;
    int64_t at_ms = 0;
  };
  int per_minute_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
  int64_t last_prune_ms_ = 0;
};

}  // namespace orchard::network
