// Cluster files and node descriptions come from users: any bytes must give a parsed cluster
// (and a prediction for it) or an orchard::Error, nothing else.
#include <cstddef>
#include <cstdint>
#include <string>

#include "parallel/cluster.h"
#include "parallel/model_cost.h"
#include "parallel/predict.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orchard::parallel;
  static const ModelCost model = ModelCost::from_shape(model_spec("llama-2-7b", orchard::DType::Q4_0));
  try {
    const ClusterSpec c = ClusterSpec::parse(std::string(reinterpret_cast<const char*>(data), size), "", Catalog::builtin());
    if (c.nodes.size() <= 64 && c.total_ranks() <= 256) rank_plans(model, c, PredictOptions{});
  } catch (const orchard::Error&) {
  }
  return 0;
}
