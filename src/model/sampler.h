#pragma once
// Chooses the next token from logits: repetition penalty, then top-k, top-p, min-p and
// temperature (the order llama.cpp uses), then a seeded draw. temperature <= 0 is greedy.
#include <cstdint>
#include <deque>
#include <random>
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

// Index of the largest value; ties go to the lower index (as llama.cpp's greedy sampler).
int32_t argmax(const float* x, int64_t n);

}  // namespace orchard
