#include "model/hparams.h"

#include <algorithm>
#include <array>

#include "model/gguf.h"
#include "tensor/error.h"

namespace orchard {
namespace {

// Sizes above this are refused: no real model comes near, and products of two stay far from
// overflowing int64.
constexpr int64_t kMaxSize = int64_t{1} << 24;

int64_t required_int(const GGUFFile& f, const std::string& key) {
  auto v = f.get_int(key);
  if (!v) throw Error(f.path() + ": missing metadata key '" + key + "'");
  if (*v <= 0 || *v > kMaxSize)
    throw Error(f.path() + ": metadata key '" + key + "' must lie in 1.." + std::to_string(kMaxSize) + ", got " +
                std::to_string(*v));
  return *v;
}

// An optional count: absent is `fallback`; present must lie in [lo, hi].
int64_t count_in(const GGUFFile& f, const std::string& key, int64_t fallback, int64_t lo, int64_t hi) {
  auto v = f.get_int(key);
  if (!v) return fallback;
  if (*v < lo || *v > hi)
    throw Error(f.path() + ": metadata key '" + key + "' is " + std::to_string(*v) + ", outside " +
                std::to_string(lo) + ".." + std::to_string(hi));
  return *v;
}

constexpr std::array kArchitectures = {"llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "deepseek2"};

// The routed experts: counts, widths and how their scores and weights are formed, as
// llama.cpp reads each architecture (mixtral is `llama` with expert_count > 0).
void read_experts(const GGUFFile& f, const std::string& p, HParams& h) {
  const bool moe_arch = h.arch == "qwen2moe" || h.arch == "qwen3moe" || h.arch == "deepseek2";
  if (!moe_arch && h.arch != "llama") return;  // qwen2 / qwen3 are dense whatever keys they carry
  constexpr int64_t kMaxExperts = 1 << 16;
  h.n_expert = moe_arch ? required_int(f, p + "expert_count") : count_in(f, p + "expert_count", 0, 0, kMaxExperts);
  if (h.n_expert > kMaxExperts)
    throw Error(f.path() + ": metadata key '" + p + "expert_count' is " + std::to_string(h.n_expert) +
                ", more than " + std::to_string(kMaxExperts));
  if (h.n_expert == 0) return;
  h.n_expert_used = required_int(f, p + "expert_used_count");
  if (h.n_expert_used > h.n_expert)
    throw Error(f.path() + ": metadata key '" + p + "expert_used_count' is " + std::to_string(h.n_expert_used) +
                ", more than expert_count " + std::to_string(h.n_expert));
  const int64_t ff_default = h.arch == "llama" ? h.ffn_dim : h.arch == "deepseek2" ? 0 : h.ffn_dim / h.n_expert_used;
  h.expert_ffn_dim = count_in(f, p + "expert_feed_forward_length", ff_default, 1, kMaxSize);
  if (h.expert_ffn_dim <= 0) throw Error(f.path() + ": missing metadata key '" + p + "expert_feed_forward_length'");

  if (h.arch == "qwen2moe") {
    h.shared_ffn_dim = count_in(f, p + "expert_shared_feed_forward_length", h.ffn_dim, 1, kMaxSize);
    h.shared_gate = true;
  }
  if (h.arch == "deepseek2") {
    const int64_t n_shared = count_in(f, p + "expert_shared_count", 0, 0, kMaxExperts);
    h.shared_ffn_dim = n_shared * h.expert_ffn_dim;
    h.n_dense_lead = count_in(f, p + "leading_dense_block_count", 0, 0, h.n_layers);
    // 0 ("none") is what DeepSeek-V2 files carry: softmax, as llama.cpp reads them.
    const int64_t func = count_in(f, p + "expert_gating_func", 1, 0, 2);
    h.gating = func == 2 ? ExpertGating::Sigmoid : ExpertGating::Softmax;
    h.expert_weights_norm = f.get_bool(p + "expert_weights_norm").value_or(false);
    const double scale = f.get_float(p + "expert_weights_scale").value_or(1.0);
    if (!(scale > 0 && scale < 1e6))
      throw Error(f.path() + ": metadata key '" + p + "expert_weights_scale' is " + std::to_string(scale) +
                  ", not a positive scale");
    h.expert_weights_scale = static_cast<float>(scale);
  } else {
    // mixtral and qwen3moe renormalise the chosen experts' probabilities; qwen2moe does not.
    h.expert_weights_norm = h.arch != "qwen2moe";
  }

  h.n_expert_groups = count_in(f, p + "expert_group_count", 0, 0, h.n_expert);
  if (h.n_expert_groups > 1) {
    if (h.n_expert % h.n_expert_groups != 0)
      throw Error(f.path() + ": metadata key '" + p + "expert_group_count' (" + std::to_string(h.n_expert_groups) +
                  ") does not divide expert_count " + std::to_string(h.n_expert));
    h.n_group_used = count_in(f, p + "expert_group_used_count", h.n_expert_groups, 1, h.n_expert_groups);
    if (h.n_group_used * (h.n_expert / h.n_expert_groups) < h.n_expert_used)
      throw Error(f.path() + ": metadata key '" + p + "expert_group_used_count' (" + std::to_string(h.n_group_used) +
                  " groups of " + std::to_string(h.n_expert / h.n_expert_groups) + ") leaves fewer experts than " +
                  "expert_used_count " + std::to_string(h.n_expert_used));
  } else {
    h.n_expert_groups = 0;
  }
}

// Multi-head latent attention: queries through an optional low-rank pair, keys and values
// expanded per head from a compressed latent of kv_lora_rank values.
void read_latent_attention(const GGUFFile& f, const std::string& p, HParams& h) {
  h.q_lora_rank = count_in(f, p + "attention.q_lora_rank", 0, 0, kMaxSize);
  h.kv_lora_rank = required_int(f, p + "attention.kv_lora_rank");
  h.head_dim = required_int(f, p + "attention.key_length");
  h.v_head_dim = required_int(f, p + "attention.value_length");
  if (h.n_rot <= 0 || h.n_rot >= h.head_dim || h.n_rot % 2 != 0)
    throw Error(f.path() + ": rope.dimension_count " + std::to_string(h.n_rot) +
                " must be even and below the key length " + std::to_string(h.head_dim));
}

}  // namespace

HParams HParams::from_gguf(const GGUFFile& f) {
  HParams h;
  auto arch = f.get_string("general.architecture");
  if (!arch) throw Error(f.path() + ": missing metadata key 'general.architecture'");
  h.arch = *arch;
  if (std::find(kArchitectures.begin(), kArchitectures.end(), h.arch) == kArchitectures.end())
    throw Error(f.path() + ": architecture '" + h.arch +
                "' is not supported (supported: llama, qwen2, qwen2moe, qwen3, qwen3moe, deepseek2)");
  h.name = f.get_string("general.name").value_or(h.arch);
  const std::string p = h.arch + ".";

  h.dim = required_int(f, p + "embedding_length");
  h.n_layers = required_int(f, p + "block_count");
  h.n_heads = required_int(f, p + "attention.head_count");
  h.n_kv_heads = count_in(f, p + "attention.head_count_kv", h.n_heads, 1, h.n_heads);
  h.ffn_dim = required_int(f, p + "feed_forward_length");
  h.n_ctx_train = count_in(f, p + "context_length", 2048, 1, int64_t{1} << 40);
  h.head_dim = count_in(f, p + "attention.key_length", std::max<int64_t>(1, h.dim / h.n_heads), 1, kMaxSize);
  if (h.n_kv_heads <= 0 || h.n_heads % h.n_kv_heads != 0)
    throw Error(f.path() + ": head_count " + std::to_string(h.n_heads) +
                " is not a multiple of head_count_kv " + std::to_string(h.n_kv_heads));
  h.rms_eps = static_cast<float>(f.get_float(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  h.rope_base = static_cast<float>(f.get_float(p + "rope.freq_base").value_or(10000.0));
  h.n_rot = count_in(f, p + "rope.dimension_count", h.head_dim, 0, kMaxSize);
  if (h.arch == "deepseek2") {
    read_latent_attention(f, p, h);
  } else {
    h.v_head_dim = h.head_dim;
    if (auto vlen = f.get_int(p + "attention.value_length"); vlen && *vlen != h.head_dim)
      throw Error(f.path() + ": attention.value_length " + std::to_string(*vlen) +
                  " differs from key_length " + std::to_string(h.head_dim) + " (not supported)");
    if (h.n_rot <= 0 || h.n_rot > h.head_dim || h.n_rot % 2 != 0)
      throw Error(f.path() + ": rope.dimension_count " + std::to_string(h.n_rot) +
                  " must be even and at most the head size " + std::to_string(h.head_dim));
  }
  auto scaling = f.get_string(p + "rope.scaling.type").value_or("none");
  if (scaling == "linear") {
    double factor = f.get_float(p + "rope.scaling.factor").value_or(1.0);
    if (factor <= 0) throw Error(f.path() + ": rope.scaling.factor must be positive");
    h.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling == "yarn") {
    const double factor = f.get_float(p + "rope.scaling.factor").value_or(1.0);
    if (!(factor >= 1.0 && factor < 1e6)) throw Error(f.path() + ": rope.scaling.factor must lie in 1..1e6 for yarn");
    h.rope_freq_scale = static_cast<float>(1.0 / factor);
    h.rope_yarn = true;
    h.yarn_orig_ctx = count_in(f, p + "rope.scaling.original_context_length", h.n_ctx_train, 1, int64_t{1} << 40);
  } else if (scaling != "none" && scaling != "llama3") {
    // llama3 scaling arrives as the rope_freqs tensor, read with the weights.
    throw Error(f.path() + ": rope scaling '" + scaling + "' is not supported");
  }
  h.rope_order = (h.arch == "llama" || h.arch == "deepseek2") ? RopeOrder::Normal : RopeOrder::NeoX;
  if (h.arch == "deepseek2") {
    const double mul = f.get_float(p + "rope.scaling.yarn_log_multiplier").value_or(0.0);
    if (!(mul >= 0 && mul < 10)) throw Error(f.path() + ": rope.scaling.yarn_log_multiplier must lie in 0..10");
    h.yarn_log_mul = static_cast<float>(mul);
  }
  h.attn_bias = h.arch == "qwen2" || h.arch == "qwen2moe";
  h.qk_norm = h.arch == "qwen3" || h.arch == "qwen3moe";
  read_experts(f, p, h);

  if (const auto* tokens = f.get_string_array("tokenizer.ggml.tokens"))
    h.n_vocab = static_cast<int64_t>(tokens->size());
  h.n_vocab = count_in(f, p + "vocab_size", h.n_vocab, 1, kMaxSize);
  if (h.n_vocab <= 0) throw Error(f.path() + ": no vocabulary (neither tokenizer.ggml.tokens nor " + p + "vocab_size)");
  return h;
}

}  // namespace orchard
