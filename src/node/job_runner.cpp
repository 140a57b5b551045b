#include "node/job_runner.h"

#include <filesystem>

#include "node/model_hash_cache.h"
#include "protocol/messages.h"
#include "parallel/model_cost.h"
#include "serve/openai.h"
#include "serve/service.h"

namespace orchard::node {

protocol::ModelInfo describe_model(const std::string& path, const std::string& name) {
  auto header = GGUFFile::open(path, GGUFLoad::Map);
  const auto cost = parallel::ModelCost::from_gguf(*header);
  protocol::ModelInfo m;
  m.name = name;
  m.file_bytes = std::filesystem::file_size(path);
  // Its content, for the coordinator to match against a pinned name (hashed once per file).
  m.sha256 = model_sha256(path);
  parallel::ModelSpec& s = m.shape;
  s.name = name;
  s.n_layers = cost.n_layers;
  s.dim = cost.dim;
  s.n_heads = cost.n_heads;
  s.n_kv_heads = cost.n_kv_heads;
  s.head_dim = cost.head_dim;
  s.ffn_dim = cost.ffn_dim;
  s.n_vocab = cost.n_vocab;
  s.tied_embeddings = cost.tied;
  // The format most layer bytes are in: what the planner streams per token.
  parallel::BytesByType bytes;
  for (const auto& layer : cost.layer_bytes)
    for (const auto& [type, b] : layer) bytes[type] += b;
  double most = -1;
  for (const auto& [type, b] : bytes)
    if (b > most) most = b, s.type = type;
  return m;
}

namespace {

// One slot of an executor as a Forward: each feed is one step of that slot, so the engine's own
// generation loop (sampling, stop strings, pieces with their tokens) drives a cluster's ranks.
// The logits reach rank 0, where this runs; the other ranks follow the steps.
class SlotForward : public Forward {
 public:
  SlotForward(serve::Executor& exec, int slot) : exec_(exec), slot_(slot) {}
  void feed(std::span<const TokenId> tokens, std::vector<float>& logits) override {
    const serve::SlotFeed f{slot_, positions_ == 0 ? 0 : -1, -1, std::vector<TokenId>(tokens.begin(), tokens.end())};
    exec_.step(std::span<const serve::SlotFeed>(&f, 1), logits);
    positions_ += static_cast<int64_t>(tokens.size());
  }
  int64_t positions() const override { return positions_; }
  int64_t capacity() const override { return exec_.slot_capacity(); }

 private:
  serve::Executor& exec_;
  int slot_;
  int64_t positions_ = 0;
};

// A sequence on this machine: the forward pass and the KV cache it fills.
class OwnedForward : public Forward {
 public:
  OwnedForward(Model& model, std::unique_ptr<KVCache> kv) : kv_(std::move(kv)), forward_(model, *kv_) {}
  void feed(std::span<const TokenId> tokens, std::vector<float>& logits) override { forward_.feed(tokens, logits); }
  int64_t positions() const override { return forward_.positions(); }
  int64_t capacity() const override { return forward_.capacity(); }

 private:
  std::unique_ptr<KVCache> kv_;
  LocalForward forward_;
};

std::string stem(const std::string& path, const std::string& name) {
  return name.empty() ? std::filesystem::path(path).stem().string() : name;
}

}  // namespace

GenerateResult ServedModel::generate(const std::vector<TokenId>& tokens, const GenerateOptions& options,
                                     const OnPiece& on_piece) {
  if (!executor) return engine->generate_pieces(tokens, options, on_piece);
  SlotForward forward(*executor, 0);
  return engine->generate_pieces_with(forward, tokens, options, on_piece);
}

std::unique_ptr<Forward> ServedModel::sequence() {
  if (executor) return std::make_unique<SlotForward>(*executor, 0);
  return std::make_unique<OwnedForward>(engine->model(), engine->new_cache());
}

ServedModel load_served_model(const std::string& path, const std::string& name, int threads, int64_t ctx,
                              KVType kv_type) {
  ServedModel m;
  m.path = path;
  m.name = stem(path, name);
  EngineOptions eo;
  eo.model_path = path;
  eo.threads = threads;
  eo.n_ctx = ctx;
  eo.kv_type = kv_type;
  m.owned_engine = Engine::load(eo);
  m.engine = m.owned_engine.get();
  m.chat = serve::ChatTemplate::from_gguf(m.engine->file(), m.engine->tokenizer());
  m.info = describe_model(path, m.name);
  return m;
}

ServedModel group_served_model(const std::string& path, const std::string& name, Engine& engine,
                               serve::Executor& executor) {
  ServedModel m;
  m.path = path;
  m.name = stem(path, name);
  m.engine = &engine;
  m.executor = &executor;
  m.chat = serve::ChatTemplate::from_gguf(engine.file(), engine.tokenizer());
  m.info = describe_model(path, m.name);
  return m;
}

PreparedJob prepare_job(const protocol::Work& w, const ServedModel& m) {
  if (!w.request.is_object() || !w.request.contains("body") || !w.request.contains("api"))
    throw Error("job " + w.job_id + ": the request is not {\"api\", \"body\"}");
  const std::string api = w.request.value("api", "");
  if (api != protocol::kChatApi && api != protocol::kCompletionsApi)
    throw Error("job " + w.job_id + ": unknown api '" + api + "'");
  const bool chat = api == protocol::kChatApi;
  serve::OpenAIRequest r = serve::read_openai_request(w.request["body"], chat, GenerateOptions{});
  PreparedJob p;
  p.options = r.options;
  const Tokenizer& tok = m.engine->tokenizer();
  p.tokens = chat ? serve::chat_prompt_tokens(m.chat, tok, r.messages, p.options) : serve::text_prompt_tokens(tok, r.prompt);
  p.prompt_tokens = p.tokens.size();
  if (static_cast<int64_t>(p.prompt_tokens) >= m.engine->n_ctx())
    throw Error("the prompt (" + std::to_string(p.prompt_tokens) + " tokens) does not fit the context of '" + m.name +
                "' on this node (" + std::to_string(m.engine->n_ctx()) + " tokens)");
  for (const auto& chunk : w.output_tokens) {
    p.tokens.insert(p.tokens.end(), chunk.begin(), chunk.end());
    p.generated_before += static_cast<int64_t>(chunk.size());
  }
  p.next_index = static_cast<int64_t>(w.output.size());
  // The coordinator's max_tokens is the job's (it applied its default); what is left is ours.
  p.options.max_tokens = static_cast<int32_t>(std::max<int64_t>(0, w.max_tokens - p.generated_before));
  return p;
}

}  // namespace orchard::node
