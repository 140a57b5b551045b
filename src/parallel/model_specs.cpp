// Shapes of well-known models, from their published configurations (config.json on the
// Hugging Face hub), for plans of models that are not on this machine.
#include <cmath>
#include <cstdlib>

#include "parallel/model_cost.h"
#include "tensor/error.h"

namespace orchard::parallel {
namespace {

ModelSpec dense(const char* name, int64_t layers, int64_t dim, int64_t heads, int64_t kv, int64_t ffn, int64_t vocab,
                 bool tied = false) {
  ModelSpec s;
  s.name = name;
  s.n_layers = layers;
  s.dim = dim;
  s.n_heads = heads;
  s.n_kv_heads = kv;
  s.head_dim = dim / heads;
  s.ffn_dim = ffn;
  s.n_vocab = vocab;
  s.tied_embeddings = tied;
  return s;
}

// DeepSeek-V3-style: multi-head latent attention, a few dense layers, then routed experts.
ModelSpec mla_moe(const char* name, int64_t heads, int64_t dense_layers, int64_t experts, int64_t vocab) {
  ModelSpec s = dense(name, 61, 7168, heads, heads, 18432, vocab);
  s.head_dim = 192;
  s.q_lora_rank = 1536;
  s.kv_lora_rank = 512;
  s.rope_dim = 64;
  s.nope_dim = 128;
  s.v_head_dim = 128;
  s.n_dense_layers = dense_layers;
  s.n_experts = experts;
  s.n_experts_used = 8;
  s.n_shared_experts = 1;
  s.expert_ffn_dim = 2048;
  return s;
}

// Kimi K2 Thinking as Moonshot publishes it: quantization-aware-trained int4 routed experts
// (W4A16, one scale per 32 weights: Q4_0's 4.5 bits), everything else BF16.
ModelSpec kimi_k2_thinking() {
  ModelSpec s = mla_moe("kimi-k2-thinking", 64, 1, 384, 163840);
  s.non_expert_type = DType::BF16;
  return s;
}

ModelSpec gqa_moe(const char* name, int64_t layers, int64_t dim, int64_t heads, int64_t kv, int64_t experts,
                   int64_t used, int64_t expert_ffn, int64_t vocab) {
  ModelSpec s = dense(name, layers, dim, heads, kv, 0, vocab);
  s.head_dim = 128;
  s.n_experts = experts;
  s.n_experts_used = used;
  s.expert_ffn_dim = expert_ffn;
  return s;
}

std::vector<ModelSpec> shapes() {
  return {
      dense("llama-2-7b", 32, 4096, 32, 32, 11008, 32000),
      dense("llama-2-70b", 80, 8192, 64, 8, 28672, 32000),
      dense("llama-3.2-3b", 28, 3072, 24, 8, 8192, 128256, true),
      dense("llama-3.1-8b", 32, 4096, 32, 8, 14336, 128256),
      dense("llama-3.3-70b", 80, 8192, 64, 8, 28672, 128256),
      dense("llama-3.1-405b", 126, 16384, 128, 8, 53248, 128256),
      dense("mistral-7b", 32, 4096, 32, 8, 14336, 32768),
      dense("qwen2.5-72b", 80, 8192, 64, 8, 29568, 152064),
      gqa_moe("qwen3-30b-a3b", 48, 2048, 32, 4, 128, 8, 768, 151936),
      gqa_moe("qwen3-235b-a22b", 94, 4096, 64, 4, 128, 8, 1536, 151936),
      mla_moe("deepseek-v3", 128, 3, 256, 129280),
      mla_moe("kimi-k2", 64, 1, 384, 163840),
      kimi_k2_thinking(),
      // The question docs/planner.md answers for four M5 Ultras: an 816 B mixture of experts,
      // taken as DeepSeek V3 with its routed experts scaled from 256 to 313 per layer (816.6 B
      // in all, 37.6 B active: 8 routed + 1 shared expert per token, as V3).
      mla_moe("moe-816b", 128, 3, 313, 129280),
  };
}

// "70B", "1.5T", "7e9" → parameters; 0 when the text is not a size.
double parse_count(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || v <= 0) return 0;
  std::string unit(end);
  if (unit == "B" || unit == "b") v *= 1e9;
  else if (unit == "M" || unit == "m") v *= 1e6;
  else if (unit == "T" || unit == "t") v *= 1e12;
  else if (!unit.empty()) return 0;
  return v;
}

}  // namespace

std::vector<std::string> known_model_specs() {
  std::vector<std::string> names;
  for (const ModelSpec& s : shapes()) names.push_back(s.name);
  return names;
}

ModelSpec model_spec(const std::string& name, DType type) {
  for (ModelSpec s : shapes())
    if (s.name == name) {
      s.type = type;
      return s;
    }
  const double params = parse_count(name);
  if (params < 1e6) {
    std::string list;
    for (const std::string& n : known_model_specs()) list += (list.empty() ? "" : ", ") + n;
    throw Error("unknown model '" + name + "': give a GGUF file, a size such as 70B, or one of: " + list);
  }
  // Dense Llama shape: depth grows with width (about dim/128 layers), 128-wide heads, 8 KV
  // heads, and the FFN width that makes the count come out right.
  const double vocab = 128256;
  const double dim = std::max(512.0, std::round(std::cbrt(params * 128.0 / 12.0) / 256.0) * 256.0);
  const double layers = std::max(2.0, std::round(dim / 128.0));
  const double heads = dim / 128.0, kv = std::min(8.0, heads);
  const double attn = 2 * dim * dim + 2 * dim * kv * 128.0;
  const double ffn = std::max(256.0, std::round(((params - 2 * vocab * dim) / layers - attn) / (3 * dim) / 256.0) * 256.0);
  ModelSpec s = dense("dense", static_cast<int64_t>(layers), static_cast<int64_t>(dim),
                       static_cast<int64_t>(heads), static_cast<int64_t>(kv), static_cast<int64_t>(ffn),
                       static_cast<int64_t>(vocab));
  s.name = "dense-" + name;
  s.type = type;
  return s;
}

}  // namespace orchard::parallel
