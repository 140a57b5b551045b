#pragma once
// Counters and latency histograms the server exposes at /metrics in Prometheus' text format
// (and the web page's cluster panel reads tokens/s from). Thread-safe; cheap enough to update
// per token.
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "platform/energy_meter.h"

namespace orchard::serve {

class Histogram {
 public:
  // Upper bounds in seconds, ascending; +Inf is implicit.
  explicit Histogram(std::initializer_list<double> bounds);
  void observe(double seconds);
  // The metric's lines (_bucket, _sum, _count) under `name`.
  std::string render(const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;   // per bucket, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void request(const std::string& endpoint, int status);
  void prompt_tokens(int64_t n);
  // A request placed in a slot: of its prompt, `cached` tokens the slot held, `computed` to run.
  void prompt_placed(int64_t cached, int64_t computed);
  void first_token(double ttft_s);
  void token(double since_previous_s);      // one generated token after the first
  void generated(int64_t n);                // generated tokens (first included)
  void set_queue(int64_t waiting, int64_t active_slots, int64_t slots);
  void rejected(const std::string& why);    // queue full, prompt too long…

  // Generated tokens per second over the last few seconds (all requests together).
  double tokens_per_second() const;
  int64_t queue_waiting() const;
  int64_t active_slots() const;
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, uint64_t> rejected_;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0, cached_prompt_tokens_ = 0, computed_prompt_tokens_ = 0;
  int64_t waiting_ = 0, active_ = 0, slots_ = 0;
  Histogram ttft_, token_latency_;
  platform::EnergyMeter energy_;  // the CPU package's energy since the server started
  // (time, tokens) of recent generation, for the tokens/s gauge.
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> recent_;
};

}  // namespace orchard::serve
