#include "model/perplexity.h"

#include <cmath>

#include "model/engine.h"
#include "tensor/error.h"

namespace orchard {

PerplexityResult perplexity(Engine& engine, const std::string& text, int64_t n_ctx,
                            const std::function<void(int64_t, int64_t, double)>& on_chunk) {
  const Tokenizer& tok = engine.tokenizer();
  std::vector<TokenId> ids = tok.encode(text, /*add_special=*/true);
  PerplexityResult r;
  r.n_tokens = static_cast<int64_t>(ids.size());
  if (n_ctx < 4) throw Error("perplexity: context " + std::to_string(n_ctx) + " is too small");
  if (n_ctx > engine.n_ctx())
    throw Error("perplexity: chunk size " + std::to_string(n_ctx) + " exceeds the context size " +
                std::to_string(engine.n_ctx()) + " (raise --ctx)");
  r.n_chunks = r.n_tokens / n_ctx;
  if (r.n_chunks == 0)
    throw Error("perplexity: the text has " + std::to_string(r.n_tokens) +
                " tokens, fewer than one chunk of " + std::to_string(n_ctx));

  const int64_t n_vocab = engine.hparams().n_vocab;
  const int64_t first = n_ctx / 2;  // score positions first … n_ctx-2 (predicting the next)
  auto kv = engine.new_cache();
  std::vector<float> logits;
  double nll = 0, nll2 = 0;
  for (int64_t c = 0; c < r.n_chunks; ++c) {
    std::vector<TokenId> chunk(ids.begin() + c * n_ctx, ids.begin() + (c + 1) * n_ctx);
    if (tok.bos() >= 0) chunk[0] = tok.bos();
    kv->clear();
    engine.model().forward(chunk, *kv, logits, /*all_logits=*/true);
    for (int64_t pos = first; pos < n_ctx - 1; ++pos) {
      const float* row = &logits[static_cast<size_t>(pos * n_vocab)];
      float max = row[0];
      for (int64_t i = 1; i < n_vocab; ++i) max = std::max(max, row[i]);
      double sum = 0;
      for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(row[i] - max));
      const double logprob = row[ids[c * n_ctx + pos + 1]] - max - std::log(sum);
      nll -= logprob;
      nll2 += logprob * logprob;
      ++r.n_scored;
    }
    r.cumulative.push_back(std::exp(nll / static_cast<double>(r.n_scored)));
    if (on_chunk) on_chunk(c + 1, r.n_chunks, r.cumulative.back());
  }
  const double n = static_cast<double>(r.n_scored);
  const double mean = nll / n;
  const double var = nll2 / n - mean * mean;
  r.ppl = std::exp(mean);
  r.ppl_stderr = var > 0 && n > 1 ? r.ppl * std::sqrt(var / (n - 1)) : 0;
  return r;
}

}  // namespace orchard
