#pragma once
// Tokens per second "now": what arrived over the last few seconds, overall and per node, for the
// world page. In memory and per coordinator: a replica sharing the files counts only the output
// it received itself, and a restart starts from zero.
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

namespace orchard::network {

class RateMeter {
 public:
  explicit RateMeter(int64_t window_ms = 10'000) : window_ms_(window_ms) {}

  void add(const std::string& node, int64_t tokens, int64_t now_ms) {
    std::lock_guard lock(mu_);
    samples_.push_back({now_ms, node, tokens});
    prune(now_ms);
  }
  // Tokens per second over the window ending at `now_ms`, by node ("" is the total).
  std::map<std::string, double> rates(int64_t now_ms) {
    std::lock_guard lock(mu_);
    prune(now_ms);
    std::map<std::string, double> out{{"", 0.0}};
    const double seconds = static_cast<double>(window_ms_) / 1000.0;
    for (const Sample& s : samples_) {
      out[""] += static_cast<double>(s.tokens) / seconds;
      out[s.node] += static_cast<double>(s.tokens) / seconds;
    }
    return out;
  }

 private:
  struct Sample {
    int64_t at_ms;
    std::string node;
    int64_t tokens;
  };
  void prune(int64_t now_ms) {
    while (!samples_.empty() && samples_.front().at_ms <= now_ms - window_ms_) samples_.pop_front();
  }
  const int64_t window_ms_;
  std::mutex mu_;
  std::deque<Sample> samples_;
};

}  // namespace orchard::network
