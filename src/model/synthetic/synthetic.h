#pragma once
// Built-in models: GGUF files with seeded random weights and a generated (but real, working)
// SentencePiece-style vocabulary, in the shapes of real models. They let Orchard demo and
// benchmark itself on a fresh machine with no download; their text is meaningless.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/synthetic/file_type.h"
#include "tensor/types.h"

namespace orchard {

// A DeepSeek-like mixture of experts (GGUF `deepseek2`): latent attention, sigmoid routing
// with a selection bias, normalised and scaled weights, one shared expert, dense first layers.
struct MoeShape {
  int64_t n_expert = 0, n_expert_used = 0, expert_ffn_dim = 0, n_shared = 1, n_dense_lead = 1;
  int64_t q_lora_rank = 0, kv_lora_rank = 0, nope_dim = 0, rope_dim = 0, v_head_dim = 0;
};

struct ModelShape {
  std::string name;
  std::string description;
  int64_t dim, n_layers, n_heads, n_kv_heads, ffn_dim, n_vocab, n_ctx;
  MoeShape moe = {};  // n_expert == 0: a dense llama
};

const std::vector<ModelShape>& model_shapes();
// Throws orchard::Error listing the known shapes when `name` is not one.
const ModelShape& model_shape(const std::string& name);

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // TokenType values
};

// <unk>, <s>, </s>, the 256 byte tokens, printable ASCII, then "▁word" pieces (each with all
// its prefixes, so SentencePiece merging reaches it) from English words and then generated
// syllable words until n_vocab entries exist.
Vocabulary make_vocabulary(int64_t n_vocab);

// Writes the model; `progress(done, total)` is called as tensors are generated. `ft`: the formats
// of its matrices (file_type.h); a DType puts every matrix in that format.
void write_synthetic_model(const ModelShape& shape, const FileType& ft, uint64_t seed, const std::string& path,
                           const std::function<void(int64_t, int64_t)>& progress = {});
void write_synthetic_model(const ModelShape& shape, DType type, uint64_t seed,
                           const std::string& path,
                           const std::function<void(int64_t, int64_t)>& progress = {});

// The built-in default model (the `tiny` shape in Q8_0), created on first use in the cache
// folder ($ORCHARD_HOME, else $XDG_CACHE_HOME/orchard, else ~/.cache/orchard).
std::string default_model_path(bool create_if_missing = true);
std::string orchard_home();

}  // namespace orchard
