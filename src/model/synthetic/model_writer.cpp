#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "model/gguf_writer.h"
#include "model/synthetic/synthetic.h"
#include "tensor/error.h"
#include "tensor/quant.h"

namespace orchard {
namespace {

// splitmix64: tiny, fast, and good enough for weights nobody reads as text.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [-a, a]; a = std·√3 gives the wanted standard deviation.
  float uniform(float a) { return a * (static_cast<float>(next() >> 40) * (2.0f / 16777216.0f) - 1.0f); }
};

uint64_t hash_name(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ULL ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

std::vector<uint8_t> random_matrix(const std::string& name, int64_t rows, int64_t cols, DType type,
                                   uint64_t seed, float std) {
  Rng rng{hash_name(name, seed)};
  const size_t rb = row_bytes(type, cols);
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  std::vector<float> row(static_cast<size_t>(cols));
  const float a = std * std::sqrt(3.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& x : row) x = rng.uniform(a);
    quantize_row(type, row.data(), out.data() + rb * static_cast<size_t>(r), cols);
  }
  return out;
}

std::vector<uint8_t> ones(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n), 1.0f);
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// The hyper-parameter keys a deepseek2 file carries, all of those llama.cpp requires included.
void set_moe_keys(GGUFWriter& w, const ModelShape& s) {
  const MoeShape& m = s.moe;
  const std::string p = "deepseek2.";
  w.set_u32(p + "leading_dense_block_count", static_cast<uint32_t>(m.n_dense_lead));
  w.set_u32(p + "attention.q_lora_rank", static_cast<uint32_t>(m.q_lora_rank));
  w.set_u32(p + "attention.kv_lora_rank", static_cast<uint32_t>(m.kv_lora_rank));
  w.set_u32(p + "attention.key_length", static_cast<uint32_t>(m.nope_dim + m.rope_dim));
  w.set_u32(p + "attention.value_length", static_cast<uint32_t>(m.v_head_dim));
  w.set_u32(p + "expert_feed_forward_length", static_cast<uint32_t>(m.expert_ffn_dim));
  w.set_u32(p + "expert_count", static_cast<uint32_t>(m.n_expert));
  w.set_u32(p + "expert_used_count", static_cast<uint32_t>(m.n_expert_used));
  w.set_u32(p + "expert_shared_count", static_cast<uint32_t>(m.n_shared));
  w.set_f32(p + "expert_weights_scale", 2.5f);
  w.set_bool(p + "expert_weights_norm", true);
  w.set_u32(p + "expert_gating_func", 2);  // sigmoid
  w.set_f32(p + "rope.scaling.yarn_log_multiplier", 0.1f);
}

// A deepseek2 layer's tensors (latent attention; dense FFN or routed + shared experts). The
// router and the selection bias stay F32, as llama-quantize leaves them.
void add_moe_layer(GGUFWriter& w, const ModelShape& s, int64_t l, const FileType& ft, uint64_t seed,
                   const std::function<void(const std::string&, int64_t, int64_t)>& mat) {
  const MoeShape& m = s.moe;
  const std::string p = "blk." + std::to_string(l) + ".";
  const int64_t key = m.nope_dim + m.rope_dim;
  mat("attn_q_a.weight", m.q_lora_rank, s.dim);
  w.add_tensor(p + "attn_q_a_norm.weight", DType::F32, {m.q_lora_rank}, ones(m.q_lora_rank));
  mat("attn_q_b.weight", s.n_heads * key, m.q_lora_rank);
  mat("attn_kv_a_mqa.weight", m.kv_lora_rank + m.rope_dim, s.dim);
  w.add_tensor(p + "attn_kv_a_norm.weight", DType::F32, {m.kv_lora_rank}, ones(m.kv_lora_rank));
  mat("attn_kv_b.weight", s.n_heads * (m.nope_dim + m.v_head_dim), m.kv_lora_rank);
  mat("attn_output.weight", s.dim, s.n_heads * m.v_head_dim);
  w.add_tensor(p + "ffn_norm.weight", DType::F32, {s.dim}, ones(s.dim));
  if (l < m.n_dense_lead) {
    mat("ffn_gate.weight", s.ffn_dim, s.dim);
    mat("ffn_up.weight", s.ffn_dim, s.dim);
    mat("ffn_down.weight", s.dim, s.ffn_dim);
    return;
  }
  w.add_tensor(p + "ffn_gate_inp.weight", DType::F32, {s.dim, m.n_expert},
               random_matrix(p + "ffn_gate_inp.weight", m.n_expert, s.dim, DType::F32, seed, 0.5f));
  w.add_tensor(p + "exp_probs_b.bias", DType::F32, {m.n_expert},
               random_matrix(p + "exp_probs_b.bias", 1, m.n_expert, DType::F32, seed, 0.05f));
  auto experts = [&](const std::string& n, int64_t rows, int64_t cols) {
    const DType type = tensor_type(ft, p + n, s.n_layers, cols);
    std::vector<uint8_t> all;
    for (int64_t e = 0; e < m.n_expert; ++e) {
      const auto one = random_matrix(p + n + "." + std::to_string(e), rows, cols, type, seed, 0.02f);
      all.insert(all.end(), one.begin(), one.end());
    }
    w.add_tensor(p + n, type, {cols, rows, m.n_expert}, std::move(all));
  };
  experts("ffn_gate_exps.weight", m.expert_ffn_dim, s.dim);
  experts("ffn_up_exps.weight", m.expert_ffn_dim, s.dim);
  experts("ffn_down_exps.weight", s.dim, m.expert_ffn_dim);
  const int64_t shared = m.n_shared * m.expert_ffn_dim;
  mat("ffn_gate_shexp.weight", shared, s.dim);
  mat("ffn_up_shexp.weight", shared, s.dim);
  mat("ffn_down_shexp.weight", s.dim, shared);
}

}  // namespace

void write_synthetic_model(const ModelShape& s, DType type, uint64_t seed, const std::string& path,
                           const std::function<void(int64_t, int64_t)>& progress) {
  write_synthetic_model(s, parse_file_type(type_name(type)), seed, path, progress);
}

void write_synthetic_model(const ModelShape& s, const FileType& ft, uint64_t seed, const std::string& path,
                           const std::function<void(int64_t, int64_t)>& progress) {
  GGUFWriter w;
  const bool moe = s.moe.n_expert > 0;
  const int64_t head_dim = moe ? s.moe.nope_dim + s.moe.rope_dim : s.dim / s.n_heads,
                kv_dim = s.n_kv_heads * head_dim;
  const std::string arch = moe ? "deepseek2" : "llama", a = arch + ".";
  w.set_string("general.architecture", arch);
  w.set_string("general.name", "orchard-synthetic-" + s.name);
  w.set_string("general.description",
               "Random weights (seed " + std::to_string(seed) +
                   ") made by `orchard make-model`: for demos and benchmarks; its text is meaningless.");
  w.set_u32("general.file_type", ft.ftype);
  w.set_u32(a + "context_length", static_cast<uint32_t>(s.n_ctx));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(s.dim));
  w.set_u32(a + "block_count", static_cast<uint32_t>(s.n_layers));
  w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.ffn_dim));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.n_heads));
  w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_kv_heads));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(moe ? s.moe.rope_dim : head_dim));
  w.set_f32(a + "rope.freq_base", 10000.0f);
  w.set_u32(a + "vocab_size", static_cast<uint32_t>(s.n_vocab));
  if (moe) set_moe_keys(w, s);

  Vocabulary v = make_vocabulary(s.n_vocab);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_f32_array("tokenizer.ggml.scores", v.scores);
  w.set_i32_array("tokenizer.ggml.token_type", v.types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);

  const int64_t total = 2 + s.n_layers;
  int64_t done = 0;
  auto step = [&] { if (progress) progress(++done, total); };
  const float std = 0.02f;
  // A matrix in the format the file type gives it.
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    const DType type = tensor_type(ft, name, s.n_layers, cols);
    w.add_tensor(name, type, {cols, rows}, random_matrix(name, rows, cols, type, seed, std));
  };
  matrix("token_embd.weight", s.n_vocab, s.dim);
  step();
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    auto mat = [&](const std::string& n, int64_t rows, int64_t cols) { matrix(p + n, rows, cols); };
    w.add_tensor(p + "attn_norm.weight", DType::F32, {s.dim}, ones(s.dim));
    if (moe) {
      add_moe_layer(w, s, l, ft, seed, mat);
      step();
      continue;
    }
    mat("attn_q.weight", s.dim, s.dim);
    mat("attn_k.weight", kv_dim, s.dim);
    mat("attn_v.weight", kv_dim, s.dim);
    mat("attn_output.weight", s.dim, s.dim);
    w.add_tensor(p + "ffn_norm.weight", DType::F32, {s.dim}, ones(s.dim));
    mat("ffn_gate.weight", s.ffn_dim, s.dim);
    mat("ffn_up.weight", s.ffn_dim, s.dim);
    mat("ffn_down.weight", s.dim, s.ffn_dim);
    step();
  }
  w.add_tensor("output_norm.weight", DType::F32, {s.dim}, ones(s.dim));
  matrix("output.weight", s.n_vocab, s.dim);
  step();
  w.write(path);
}

std::string orchard_home() {
  if (const char* h = std::getenv("ORCHARD_HOME"); h && *h) return h;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/orchard";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/orchard";
  return "/tmp/orchard";
}

std::string default_model_path(bool create_if_missing) {
  namespace fs = std::filesystem;
  const fs::path path = fs::path(orchard_home()) / "models" / "orchard-tiny-Q8_0.gguf";
  if (create_if_missing && !fs::exists(path)) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (ec) throw Error("cannot create " + path.parent_path().string() + ": " + ec.message());
    write_synthetic_model(model_shape("tiny"), DType::Q8_0, 42, path.string());
  }
  return path.string();
}

}  // namespace orchard
