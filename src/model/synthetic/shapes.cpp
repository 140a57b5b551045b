#include "model/synthetic/synthetic.h"

#include "tensor/error.h"

namespace orchard {

const std::vector<ModelShape>& model_shapes() {
  // 1b follows TinyLlama / Llama-3.2-1B proportions with Llama 2's vocabulary size.
  static const std::vector<ModelShape> shapes = {
      {"tiny", "dim 256, 4 layers, 8 heads (4 KV), FFN 768, vocab 4096", 256, 4, 8, 4, 768, 4096, 2048},
      {"small", "dim 768, 12 layers, 12 heads (4 KV), FFN 2048, vocab 32000", 768, 12, 12, 4, 2048, 32000, 4096},
      {"1b", "dim 2048, 16 layers, 32 heads (8 KV), FFN 8192, vocab 32000", 2048, 16, 32, 8, 8192, 32000, 4096},
  };
  return shapes;
}

const ModelShape& model_shape(const std::string& name) {
  std::string known;
  for (const auto& s : model_shapes()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw Error("unknown model shape '" + name + "' (known: " + known + ")");
}

}  // namespace orchard
