#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/error.h"

namespace orchard {

// Sixteen running maxima, each with the first position it was seen at, then the first of the
// best lanes: the one-pass loop carries one index from step to step and stays scalar, while
// this vectorizes (greedy serving runs it over the vocabulary once per token of every sequence).
int32_t argmax(const float* x, int64_t n) {
  constexpr int kLanes = 16;
  float lane[kLanes];
  int32_t at[kLanes];
  for (int j = 0; j < kLanes; ++j) lane[j] = -std::numeric_limits<float>::infinity(), at[j] = 0;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const bool more = x[i + j] > lane[j];
      lane[j] = more ? x[i + j] : lane[j];
      at[j] = more ? static_cast<int32_t>(i + j) : at[j];
    }
  float best = -std::numeric_limits<float>::infinity();
  int32_t best_at = 0;
  for (int j = 0; j < kLanes; ++j)
    if (lane[j] > best || (lane[j] == best && at[j] < best_at)) best = lane[j], best_at = at[j];
  for (; i < n; ++i)
    if (x[i] > best) best = x[i], best_at = static_cast<int32_t>(i);
  return best_at;
}

namespace {

// What the options do to the logits before any choice, in llama.cpp's order: the bias, then
// the repetition penalty (CTRL paper: shrink positive logits, grow negative ones, once per
// distinct token of `recent`), then the frequency and presence penalties by each token's count.
template <class LogitOf>
void adjust_logits(std::vector<int32_t> recent, const SamplerOptions& o, int64_t n_vocab, LogitOf logit_of) {
  for (const auto& [id, bias] : o.logit_bias)
    if (id >= 0 && id < n_vocab) logit_of(id) += bias;
  if ((o.repeat_penalty == 1.0f && o.frequency_penalty == 0.0f && o.presence_penalty == 0.0f) || recent.empty()) return;
  std::sort(recent.begin(), recent.end());
  for (size_t i = 0; i < recent.size();) {
    size_t j = i;
    while (j < recent.size() && recent[j] == recent[i]) ++j;
    const int32_t id = recent[i];
    const auto count = static_cast<float>(j - i);
    i = j;
    if (id < 0 || id >= n_vocab) continue;
    float& l = logit_of(id);
    if (o.repeat_penalty != 1.0f) l = l > 0 ? l / o.repeat_penalty : l * o.repeat_penalty;
    l -= count * o.frequency_penalty + o.presence_penalty;
  }
}

}  // namespace

Sampler::Sampler(const SamplerOptions& opts) : opts_(opts), rng_(opts.seed) {
  if (opts.top_p <= 0) throw Error("top_p must be > 0");
  if (opts.repeat_penalty <= 0) throw Error("repeat_penalty must be > 0");
}

void Sampler::reset() {
  rng_.seed(opts_.seed);
  recent_.clear();
}

void Sampler::accept(int32_t token) {
  if (opts_.repeat_last_n <= 0) return;
  recent_.push_back(token);
  while (static_cast<int32_t>(recent_.size()) > opts_.repeat_last_n) recent_.pop_front();
}

int32_t Sampler::sample(const float* logits, int64_t n_vocab) {
  // Greedy without a penalty needs no candidate list (a server samples every token of every
  // request here).
  const bool penalties = opts_.repeat_penalty != 1.0f || opts_.frequency_penalty != 0.0f || opts_.presence_penalty != 0.0f;
  if (opts_.temperature <= 0 && opts_.logit_bias.empty() && (!penalties || recent_.empty())) return argmax(logits, n_vocab);
  cand_.resize(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) cand_[i] = {static_cast<int32_t>(i), logits[i], 0.0f};

  adjust_logits(std::vector<int32_t>(recent_.begin(), recent_.end()), opts_, n_vocab,
                [&](int32_t id) -> float& { return cand_[id].logit; });

  if (opts_.temperature <= 0) {
    size_t best = 0;
    for (size_t i = 1; i < cand_.size(); ++i)
      if (cand_[i].logit > cand_[best].logit) best = i;
    return cand_[best].id;
  }

  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  };
  size_t keep = cand_.size();
  if (opts_.top_k > 0 && static_cast<size_t>(opts_.top_k) < keep) {
    keep = static_cast<size_t>(opts_.top_k);
    std::partial_sort(cand_.begin(), cand_.begin() + keep, cand_.end(), by_logit);
    cand_.resize(keep);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }

  // Probabilities at temperature 1 decide the top-p / min-p cut, as in llama.cpp.
  auto normalize = [&] {
    const float max = cand_.front().logit;
    double sum = 0;
    for (auto& c : cand_) sum += (c.p = std::exp(c.logit - max));
    for (auto& c : cand_) c.p = static_cast<float>(c.p / sum);
  };
  normalize();
  if (opts_.top_p < 1.0f) {
    double cum = 0;
    size_t n = 0;
    while (n < cand_.size()) {
      cum += cand_[n++].p;
      if (cum >= opts_.top_p) break;
    }
    cand_.resize(std::max<size_t>(n, 1));
  }
  if (opts_.min_p > 0) {
    const float cut = cand_.front().p * opts_.min_p;
    size_t n = 1;
    while (n < cand_.size() && cand_[n].p >= cut) ++n;
    cand_.resize(n);
  }

  // p_i ∝ exp(logit_i / T) over the survivors, then one seeded draw.
  for (auto& c : cand_) c.logit /= opts_.temperature;
  normalize();
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  double r = uni(rng_), cum = 0;
  for (const auto& c : cand_) {
    cum += c.p;
    if (r < cum) return c.id;
  }
  return cand_.back().id;
}

TokenScore score_token(const float* logits, int64_t n_vocab, const SamplerOptions& opts, std::span<const int32_t> recent,
                       int32_t token) {
  if (token < 0 || token >= n_vocab) throw Error("score_token: token " + std::to_string(token) + " is outside the vocabulary");
  std::vector<float> l(logits, logits + n_vocab);
  // The same bias and penalties, on the same tokens, as Sampler::sample.
  adjust_logits(std::vector<int32_t>(recent.begin(), recent.end()), opts, n_vocab, [&](int32_t id) -> float& { return l[id]; });
  TokenScore s;
  const float max = *std::max_element(l.begin(), l.end());
  s.gap = max - l[token];
  const double t = opts.temperature > 0 ? opts.temperature : 1.0;
  // p_i = exp(z_i) / Z with z_i = (l_i − max) / T; in doubles, so a 150k vocabulary sums exactly enough.
  double z_sum = 0, zexp_sum = 0, sqrt_sum = 0;
  for (float v : l) {
    const double z = (v - max) / t;
    const double e = std::exp(z);
    z_sum += e;
    zexp_sum += e * z;
    sqrt_sum += std::exp(z / 2);
  }
  const double log_z = std::log(z_sum);
  // Each is ≥ 0 in exact arithmetic; rounding must not make a report look malformed.
  s.surprisal = std::max(0.0, log_z - (l[token] - max) / t);
  s.entropy = std::max(0.0, log_z - zexp_sum / z_sum);
  // Σ √p = Σ exp(z/2) / √Z.
  s.renyi_half = std::max(0.0, 2 * (std::log(sqrt_sum) - log_z / 2));
  return s;
}

}  // namespace orchard
