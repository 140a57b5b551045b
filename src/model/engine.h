#pragma once
// A loaded model ready to generate: file mapping, tokenizer, weights, and a generation loop.
// Kept free of I/O so the CLI, the HTTP server and the node agent all drive the same code.
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "model/forward.h"
#include "model/gguf.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/tokenizer/tokenizer.h"

namespace orchard {

struct Grammar;
struct VocabPieces;

struct EngineOptions {
  std::string model_path;
  int threads = 0;        // 0: all hardware threads
  int64_t n_ctx = 0;      // 0: min(training context, 4096)
  bool mmap = false;      // run from the page cache instead of a huge-page copy (less memory, slower)
  bool repack = true;     // keep a repacked copy of Q4_0/Q8_0 matrices for faster prompts
  KVType kv_type = KVType::F32;  // what KV caches keep keys and values in (f16: half the memory)
  Shard shard;            // the part of the model this rank holds (all of it by default)
  PartialSum* partial_sum = nullptr;  // tensor parallel: sums partial results across ranks
};

struct GenerateOptions {
  int32_t max_tokens = 128;
  SamplerOptions sampling;
  bool add_special = true;              // BOS as the vocabulary asks
  bool parse_special = false;           // treat "<|…|>" text in the prompt as special tokens
  bool stop_at_eog = true;
  std::vector<std::string> stop;        // stop strings (not included in the output)
  // ≥ 0: the server reports each generated token's log-probability and this many most likely
  // alternatives (OpenAI's logprobs / top_logprobs); −1: not asked.
  int32_t logprobs = -1;
  // The reply is a sentence of this grammar (JSON mode, a JSON schema): the server samples only
  // tokens that keep it one, closes it in time for max_tokens, and stops when it is whole and
  // nothing may follow.
  std::shared_ptr<const Grammar> grammar;
};

struct GenerateResult {
  std::vector<TokenId> prompt_tokens;
  std::vector<TokenId> tokens;          // generated ids
  std::string text;                     // generated text
  std::string finish_reason;            // "stop" (EOG or stop string), "length", "cancelled"
  double prompt_ms = 0;
  double gen_ms = 0;
};

// A piece of text a client may see, with the ids of the tokens generated since the previous
// piece (a token whose text was held back, for a stop string or an incomplete UTF-8 character,
// comes with the piece that shows it). Returning false cancels. The node agent streams these,
// so a job resumed elsewhere can continue from exactly the tokens shown.
using OnPiece = std::function<bool(const std::string& text, std::span<const TokenId> tokens)>;

class Engine {
 public:
  static std::unique_ptr<Engine> load(const EngineOptions& opts);

  const Tokenizer& tokenizer() const { return *tok_; }
  Model& model() { return *model_; }
  const GGUFFile& file() const { return *file_; }
  const HParams& hparams() const { return model_->hparams(); }
  int64_t n_ctx() const { return n_ctx_; }
  KVType kv_type() const { return kv_type_; }
  double load_ms() const { return load_ms_; }

  std::unique_ptr<KVCache> new_cache() const;

  // Streams text through `on_text` (valid UTF-8 pieces); returning false from it cancels.
  GenerateResult generate(const std::string& prompt, const GenerateOptions& opts,
                          const std::function<bool(const std::string&)>& on_text = {});
  // Same, from token ids (no tokenization of a prompt).
  GenerateResult generate_tokens(const std::vector<TokenId>& prompt, const GenerateOptions& opts,
                                 const std::function<bool(const std::string&)>& on_text = {});
  // Same, reporting each piece's tokens too.
  GenerateResult generate_pieces(const std::vector<TokenId>& prompt, const GenerateOptions& opts,
                                 const OnPiece& on_piece);
  // Same through another Forward (a distributed one): every rank calls it; only the sampler's
  // result holds the text, and only the sampler calls on_text.
  GenerateResult generate_with(Forward& forward, const std::string& prompt, const GenerateOptions& opts,
                               const std::function<bool(const std::string&)>& on_text = {});
  // Pieces with their tokens, through another Forward (a cluster's steps, as the node agent of a
  // cabled group runs them from rank 0).
  GenerateResult generate_pieces_with(Forward& forward, const std::vector<TokenId>& prompt, const GenerateOptions& opts,
                                      const OnPiece& on_piece) {
    return run(forward, prompt, opts, on_piece);
  }

 private:
  Engine() = default;
  GenerateResult run(Forward& forward, const std::vector<TokenId>& prompt, const GenerateOptions& opts,
                     const OnPiece& on_piece);
  std::unique_ptr<GGUFFile> file_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<Model> model_;
  // The vocabulary's pieces for grammars (GenerateOptions::grammar), made at the first use.
  std::once_flag pieces_once_;
  std::shared_ptr<const VocabPieces> pieces_;
  int64_t n_ctx_ = 0;
  KVType kv_type_ = KVType::F32;
  double load_ms_ = 0;
};

}  // namespace orchard
