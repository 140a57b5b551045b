#include "model/synthetic/synthetic.h"

#include "tensor/error.h"

namespace orchard {

const std::vector<ModelShape>& model_shapes() {
  // 1b follows TinyLlama / Llama-3.2-1B proportions with Llama 2's vocabulary size.
  static const std::vector<ModelShape> shapes = {
      {"tiny", "dim 256, 4 layers, 8 heads (4 KV), FFN 768, vocab 4096", 256, 4, 8, 4, 768, 4096, 2048},
      {"small", "dim 768, 12 layers, 12 heads (4 KV), FFN 2048, vocab 32000", 768, 12, 12, 4, 2048, 32000, 4096},
      {"1b", "dim 2048, 16 layers, 32 heads (8 KV), FFN 8192, vocab 32000", 2048, 16, 32, 8, 8192, 32000, 4096},
      // DeepSeek-V3's layout scaled down: latent attention, 1 dense layer first, then routed
      // experts (sigmoid scores with a selection bias) beside one shared expert.
      {"moe-tiny", "deepseek2: dim 256, 4 layers, 8 heads, latent attention (kv rank 64), 16 experts (4 used) of FFN 128 + 1 shared, vocab 4096",
       256, 4, 8, 8, 768, 4096, 2048, MoeShape{16, 4, 128, 1, 1, 128, 64, 32, 16, 32}},
      // ~3.6 B parameters (2 GB in Q4_0), ~9 % of them read per token: 6 of 64 experts.
      {"moe-small", "deepseek2: dim 1536, 16 layers, 12 heads, latent attention (kv rank 256), 64 experts (6 used) of FFN 768 + 1 shared, vocab 32000",
       1536, 16, 12, 12, 4096, 32000, 4096, MoeShape{64, 6, 768, 1, 1, 384, 256, 64, 32, 64}},
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
