#include "model/engine.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "model/grammar/grammar_mask.h"
#include "model/text_output.h"
#include "tensor/error.h"
#include "tensor/threadpool.h"

namespace orchard {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::unique_ptr<Engine> Engine::load(const EngineOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  set_threads(opts.threads);
  std::unique_ptr<Engine> e(new Engine());
  // A shard reads only its own tensors' bytes: its resident memory follows its share.
  const bool whole = opts.shard.layer_begin == 0 && opts.shard.layer_end < 0 && opts.shard.embed &&
                     opts.shard.head && opts.shard.kv_head_end < 0 && opts.shard.ffn_end < 0 &&
                     opts.shard.vocab_end < 0;
  if (whole || opts.mmap)
    e->file_ = GGUFFile::open(opts.model_path, opts.mmap ? GGUFLoad::Map : GGUFLoad::Read);
  else
    e->file_ = GGUFFile::open_selected(opts.model_path, [&](const GGUFFile& header) {
      return ModelWeights::byte_ranges(header, HParams::from_gguf(header), opts.shard);
    });
  e->tok_ = Tokenizer::from_gguf(*e->file_);
  e->model_ = std::make_unique<Model>(*e->file_, opts.repack, opts.shard, opts.partial_sum);
  const HParams& hp = e->model_->hparams();
  if (e->tok_->vocab_size() != hp.n_vocab)
    throw Error(opts.model_path + ": tokenizer has " + std::to_string(e->tok_->vocab_size()) +
                " tokens but token_embd.weight has " + std::to_string(hp.n_vocab) + " rows");
  e->n_ctx_ = opts.n_ctx > 0 ? opts.n_ctx : std::min<int64_t>(hp.n_ctx_train, 4096);
  e->kv_type_ = opts.kv_type;
  e->load_ms_ = ms_since(t0);
  return e;
}

std::unique_ptr<KVCache> Engine::new_cache() const {
  return model_->new_cache(n_ctx_, kv_type_);
}

GenerateResult Engine::generate(const std::string& prompt, const GenerateOptions& opts,
                                const std::function<bool(const std::string&)>& on_text) {
  return generate_tokens(tok_->encode(prompt, opts.add_special, opts.parse_special), opts, on_text);
}

namespace {

OnPiece text_only(const std::function<bool(const std::string&)>& on_text) {
  if (!on_text) return {};
  return [&on_text](const std::string& text, std::span<const TokenId>) { return on_text(text); };
}

}  // namespace

GenerateResult Engine::generate_tokens(const std::vector<TokenId>& prompt,
                                       const GenerateOptions& opts,
                                       const std::function<bool(const std::string&)>& on_text) {
  return generate_pieces(prompt, opts, text_only(on_text));
}

GenerateResult Engine::generate_pieces(const std::vector<TokenId>& prompt, const GenerateOptions& opts,
                                       const OnPiece& on_piece) {
  if (prompt.empty()) throw Error("the prompt is empty (no tokens to start from)");
  auto kv = new_cache();
  LocalForward local(*model_, *kv);
  return run(local, prompt, opts, on_piece);
}

GenerateResult Engine::generate_with(Forward& forward, const std::string& prompt, const GenerateOptions& opts,
                                     const std::function<bool(const std::string&)>& on_text) {
  return run(forward, tok_->encode(prompt, opts.add_special, opts.parse_special), opts, text_only(on_text));
}

GenerateResult Engine::run(Forward& fwd, const std::vector<TokenId>& prompt, const GenerateOptions& opts,
                           const OnPiece& on_piece) {
  GenerateResult r;
  r.prompt_tokens = prompt;
  if (prompt.empty()) throw Error("the prompt is empty (no tokens to start from)");
  Sampler sampler(opts.sampling);
  for (TokenId t : prompt) sampler.accept(t);

  const int64_t n_vocab = hparams().n_vocab;
  // A grammar (structured output): tokens it refuses are masked before each draw, as the
  // server's scheduler does (model/grammar/grammar_mask.h).
  std::optional<GrammarVocab> gv;
  uint32_t state = 0;
  std::vector<float> masked;
  if (opts.grammar && fwd.is_sampler()) {
    std::call_once(pieces_once_, [&] { pieces_ = std::make_shared<const VocabPieces>(VocabPieces::of(*tok_, n_vocab)); });
    gv.emplace(opts.grammar, pieces_->trie);
    state = gv->dfa().start();
  }
  std::vector<float> logits;
  auto t0 = std::chrono::steady_clock::now();
  fwd.feed(prompt, logits);
  r.prompt_ms = ms_since(t0);

  TextOutput out(opts.stop);
  size_t unshown = 0;  // r.tokens[unshown..] have not been reported with a piece yet
  auto report = [&](const std::string& text) {
    const std::span<const TokenId> tokens(r.tokens.data() + unshown, r.tokens.size() - unshown);
    unshown = r.tokens.size();
    return on_piece(text, tokens);
  };
  r.finish_reason = "length";
  auto t1 = std::chrono::steady_clock::now();
  for (int32_t i = 0; i < opts.max_tokens; ++i) {
    // The sampler decides; everyone else follows its decision (-1: stop here).
    TokenId decision = -1;
    if (fwd.is_sampler()) {
      const float* row = logits.data();
      if (gv) {
        // Tables past their budget start over; the reply's state is kept as a matcher.
        const GrammarMatcher keep = gv->dfa().matcher(state);
        if (gv->trim(kMaxGrammarStates, kMaxGrammarListed)) state = gv->dfa().intern(keep);
        const int64_t left = std::min<int64_t>(opts.max_tokens - i, fwd.capacity() - fwd.positions());
        row = mask_logits(*gv, state, row, n_vocab, left, pieces_->eog, masked);
      }
      if (!row) {
        r.finish_reason = "stop";  // the grammar admits nothing more
        decision = fwd.agree(-1);
        break;
      }
      TokenId next = sampler.sample(row, n_vocab);
      bool go_on = true;
      if (gv && !tok_->is_eog(next)) {
        state = advance(gv->dfa(), state, pieces_->pieces[static_cast<size_t>(next)]);
        // Whole and nothing may follow (or, with NaN logits, refused): this token is the last.
        if (state == GrammarDfa::kDead || (gv->dfa().complete(state) && !gv->dfa().can_continue(state))) {
          r.finish_reason = "stop";
          go_on = false;
        }
      }
      if (opts.stop_at_eog && tok_->is_eog(next)) {
        r.finish_reason = "stop";
        go_on = false;
      } else {
        r.tokens.push_back(next);
        sampler.accept(next);
        const std::string text = out.push(tok_->token_to_piece(next));
        if (!text.empty() && on_piece && !report(text)) {
          r.finish_reason = "cancelled";
          go_on = false;
        } else if (out.stopped()) {
          r.finish_reason = "stop";
          go_on = false;
        } else if (i + 1 == opts.max_tokens) {
          go_on = false;
        } else if (fwd.positions() >= fwd.capacity()) {
          r.finish_reason = "length";
          go_on = false;
        }
      }
      decision = go_on ? next : -1;
    }
    decision = fwd.agree(decision);
    if (decision < 0) break;
    if (!fwd.is_sampler()) r.tokens.push_back(decision);
    fwd.feed(std::span<const TokenId>(&decision, 1), logits);
  }
  if (fwd.is_sampler() && r.finish_reason != "cancelled") {
    const std::string rest = out.flush();
    if (!rest.empty() && on_piece) report(rest);
  }
  r.gen_ms = ms_since(t1);
  r.text = out.shown();
  return r;
}

}  // namespace orchard
