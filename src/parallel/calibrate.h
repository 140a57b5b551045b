#pragma once
// Measures this machine for the planner (`orchard plan --calibrate`): memory read bandwidth,
// the kernels' weight-streaming rate per format (generation) and FLOP rate (prompt), the
// thread pool's fork/join cost, all_sum time between ranks on loopback (shm and tcp, with
// emulated latencies if asked), and power from the platform's energy counter (Linux RAPL) when the kernel exposes
// them. The result is a node description (MachineSpec) that cluster files can name.
#include <functional>
#include <string>
#include <vector>

#include "parallel/catalog.h"

namespace orchard::parallel {

struct CalibrateOptions {
  std::vector<DType> types = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K};
  std::vector<int> threads;           // empty: 1 … all cores
  std::vector<int> ranks = {2, 4};    // local all_sum rank counts
  std::vector<std::string> backends = {"shm", "tcp"};
  std::vector<double> emulate_us;     // tcp links with these emulated latencies too
  double seconds = 0.25;              // per measured point
  std::function<void(const std::string&)> progress;
};

MachineSpec calibrate(const CalibrateOptions& options);

// Re-measures a node's compute figures (bandwidth, fork/join, kernel rates for `types`) at the
// thread counts it has, keeping its communication figures. On a shared machine whose speed
// drifts from minute to minute, a prediction made right after this uses the speed of the moment.
void refresh_compute(MachineSpec& m, const std::vector<DType>& types, double seconds);


}  // namespace orchard::parallel
