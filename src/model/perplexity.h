#pragma once
// Perplexity over a text, computed the way llama.cpp's `perplexity` tool does so figures compare:
// the tokens (BOS first) are cut into non-overlapping chunks of n_ctx; each chunk starts with
// BOS from an empty cache, and only its second half is scored.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace orchard {

class Engine;

struct PerplexityResult {
  double ppl = 0;
  double ppl_stderr = 0;            // standard error propagated to PPL
  std::vector<double> cumulative;   // PPL after each chunk
  int64_t n_chunks = 0;
  int64_t n_scored = 0;             // tokens scored
  int64_t n_tokens = 0;             // tokens in the text
};

// on_chunk(i, n_chunks, cumulative_ppl) reports progress after each chunk.
PerplexityResult perplexity(Engine& engine, const std::string& text, int64_t n_ctx,
                            const std::function<void(int64_t, int64_t, double)>& on_chunk = {});

}  // namespace orchard
