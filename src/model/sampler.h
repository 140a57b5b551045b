#pragma once
// Chooses the next token from logits: repetition penalty, then top-k, top-p, min-p and
// temperature (the order llama.cpp uses), then a seeded draw. temperature <= 0 is greedy.
#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace orchard {

struct SamplerOptions {
  float temperature = 0.8f;
  int32_t top_k = 40;          // <= 0: off
  float top_p = 0.95f;         // >= 1: off
  float min_p = 0.05f;         // <= 0: off
  float repeat_penalty = 1.0f; // 1: off
  int32_t repeat_last_n = 64;  // window of recent tokens the penalty looks at
  uint64_t seed = 0xC0FFEE;    // same seed, same logits → same tokens
  // OpenAI's penalties, as llama.cpp applies them over the same window as repeat_penalty:
  // logit −= count·frequency_penalty + (count > 0)·presence_penalty. 0: off.
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  // Added to a token's logit before anything else samples (OpenAI's logit_bias: −100 bans,
  // 100 all but forces).
  std::vector<std::pair<int32_t, float>> logit_bias;

  static SamplerOptions greedy() {
    SamplerOptions o;
    o.temperature = 0;
    return o;
  }
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& opts);

  // Picks a token from n_vocab logits (not modified).
  int32_t sample(const float* logits, int64_t n_vocab);
  // Tells the sampler a token became part of the context (prompt or generated).
  void accept(int32_t token);
  void reset();

  const SamplerOptions& options() const { return opts_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };
  SamplerOptions opts_;
  std::mt19937_64 rng_;
  std::deque<int32_t> recent_;
  std::vector<Candidate> cand_;
};

// How a token looks to the sampler that could have chosen it: what an audit of another
// machine's output measures (network/verification). `recent` is the context the repetition
// penalty looks at (the last repeat_last_n tokens of prompt and output before this one).
struct TokenScore {
  float gap = 0;          // the best logit minus this token's, after the penalty (0: it was the argmax)
  double surprisal = 0;   // −ln p(token), p the softmax at the temperature (1 when greedy) over the
                          // whole vocabulary: no top-k / top-p / min-p cut
  double entropy = 0;     // Σ −p ln p: the surprisal an honest draw has on average
  double renyi_half = 0;  // 2 ln Σ √p (Rényi entropy of order ½): bounds the tail of honest surprisals
};
TokenScore score_token(const float* logits, int64_t n_vocab, const SamplerOptions& opts, std::span<const int32_t> recent,
                       int32_t token);

// Index of the largest value; ties go to the lower index (as llama.cpp's greedy sampler).
int32_t argmax(const float* x, int64_t n);

}  // namespace orchard
