#include "model/hparams.h"

#include "model/gguf.h"
#include "tensor/error.h"

namespace orchard {
namespace {

int64_t required_int(const GGUFFile& f, const std::string& key) {
  auto v = f.get_int(key);
  if (!v) throw Error(f.path() + ": missing metadata key '" + key + "'");
  if (*v <= 0) throw Error(f.path() + ": metadata key '" + key + "' must be positive, got " +
                           std::to_string(*v));
  return *v;
}

}  // namespace

HParams HParams::from_gguf(const GGUFFile& f) {
  HParams h;
  auto arch = f.get_string("general.architecture");
  if (!arch) throw Error(f.path() + ": missing metadata key 'general.architecture'");
  h.arch = *arch;
  if (h.arch != "llama" && h.arch != "qwen2" && h.arch != "qwen3")
    throw Error(f.path() + ": architecture '" + h.arch +
                "' is not supported (supported: llama, qwen2, qwen3)");
  h.name = f.get_string("general.name").value_or(h.arch);
  const std::string p = h.arch + ".";

  h.dim = required_int(f, p + "embedding_length");
  h.n_layers = required_int(f, p + "block_count");
  h.n_heads = required_int(f, p + "attention.head_count");
  h.n_kv_heads = f.get_int(p + "attention.head_count_kv").value_or(h.n_heads);
  h.ffn_dim = required_int(f, p + "feed_forward_length");
  h.n_ctx_train = f.get_int(p + "context_length").value_or(2048);
  h.head_dim = f.get_int(p + "attention.key_length").value_or(h.dim / h.n_heads);
  if (auto vlen = f.get_int(p + "attention.value_length"); vlen && *vlen != h.head_dim)
    throw Error(f.path() + ": attention.value_length " + std::to_string(*vlen) +
                " differs from key_length " + std::to_string(h.head_dim) + " (not supported)");
  if (h.n_kv_heads <= 0 || h.n_heads % h.n_kv_heads != 0)
    throw Error(f.path() + ": head_count " + std::to_string(h.n_heads) +
                " is not a multiple of head_count_kv " + std::to_string(h.n_kv_heads));
  h.rms_eps = static_cast<float>(f.get_float(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  h.rope_base = static_cast<float>(f.get_float(p + "rope.freq_base").value_or(10000.0));
  h.n_rot = f.get_int(p + "rope.dimension_count").value_or(h.head_dim);
  if (h.n_rot <= 0 || h.n_rot > h.head_dim || h.n_rot % 2 != 0)
    throw Error(f.path() + ": rope.dimension_count " + std::to_string(h.n_rot) +
                " must be even and at most the head size " + std::to_string(h.head_dim));
  auto scaling = f.get_string(p + "rope.scaling.type").value_or("none");
  if (scaling == "linear") {
    double factor = f.get_float(p + "rope.scaling.factor").value_or(1.0);
    if (factor <= 0) throw Error(f.path() + ": rope.scaling.factor must be positive");
    h.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none" && scaling != "llama3") {
    // llama3 scaling arrives as the rope_freqs tensor, read with the weights.
    throw Error(f.path() + ": rope scaling '" + scaling + "' is not supported");
  }
  h.rope_order = (h.arch == "llama") ? RopeOrder::Normal : RopeOrder::NeoX;
  h.attn_bias = h.arch == "qwen2";
  h.qk_norm = h.arch == "qwen3";

  if (const auto* tokens = f.get_string_array("tokenizer.ggml.tokens"))
    h.n_vocab = static_cast<int64_t>(tokens->size());
  if (auto v = f.get_int(p + "vocab_size")) h.n_vocab = *v;
  return h;
}

}  // namespace orchard
