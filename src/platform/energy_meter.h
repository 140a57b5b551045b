#pragma once
// Joules used between two points of a run, from the platform's energy counter (wraps included).
#include <optional>

#include "platform/platform.h"

namespace orchard::platform {

class EnergyMeter {
 public:
  EnergyMeter() : start_(read_energy()) {}
  bool available() const { return start_.has_value(); }
  void restart() { start_ = read_energy(); }
  // Joules since construction or the last restart(); nullopt where there is no counter.
  std::optional<double> joules() const {
    if (!start_) return std::nullopt;
    const std::optional<EnergySample> now = read_energy();
    if (!now) return std::nullopt;
    uint64_t used = now->microjoules - start_->microjoules;
    if (now->microjoules < start_->microjoules)  // wrapped (once: a counter wraps every few minutes at most)
      used = now->range > 0 ? now->range - start_->microjoules + now->microjoules : 0;
    return static_cast<double>(used) * 1e-6;
  }

 private:
  std::optional<EnergySample> start_;
};

}  // namespace orchard::platform
