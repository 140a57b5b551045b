#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "model/sampler.h"

namespace orchard {
namespace {

std::vector<float> logits_of(std::initializer_list<float> l) { return std::vector<float>(l); }

TEST(Sampler, GreedyPicksLargestAndLowerIdOnTies) {
  Sampler s(SamplerOptions::greedy());
  auto l = logits_of({0.1f, 3.0f, 3.0f, -1.0f});
  EXPECT_EQ(s.sample(l.data(), 4), 1);
  EXPECT_EQ(argmax(l.data(), 4), 1);
}

// argmax runs sixteen lanes and then a tail: the answer must be the first largest wherever it
// sits (any lane, the tail, a tie across lanes), for every length around the lane width.
TEST(Sampler, ArgmaxFindsTheFirstLargestAtEveryPositionAndLength) {
  for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 100, 32000}) {
    std::vector<float> l(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) l[i] = -1000.0f + static_cast<float>((i * 37) % 101);
    for (int64_t at : {int64_t{0}, n / 3, n - 1}) {
      std::vector<float> m = l;
      m[at] = 5.0f;
      EXPECT_EQ(argmax(m.data(), n), at) << n << " values, largest at " << at;
      if (at + 1 < n) {
        m[n - 1] = 5.0f;  // a tie later on: the first one wins
        EXPECT_EQ(argmax(m.data(), n), at) << n << " values, tie from " << at;
      }
    }
  }
  const std::vector<float> all_negative(40, -3.0f);
  EXPECT_EQ(argmax(all_negative.data(), 40), 0);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  std::vector<float> l(100);
  for (int i = 0; i < 100; ++i) l[i] = static_cast<float>(i % 7) * 0.1f;
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0;
  auto draw = [&](uint64_t seed) {
    o.seed = seed;
    Sampler s(o);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.sample(l.data(), 100));
    return out;
  };
  EXPECT_EQ(draw(1), draw(1));
  EXPECT_NE(draw(1), draw(2));
}

TEST(Sampler, TopKRestrictsToKBest) {
  std::vector<float> l = {5, 4, 3, 2, 1, 0};
  SamplerOptions o;
  o.temperature = 5.0f;  // flat: any survivor is likely
  o.top_k = 2;
  o.top_p = 1.0f;
  o.min_p = 0;
  Sampler s(o);
  for (int i = 0; i < 200; ++i) EXPECT_LT(s.sample(l.data(), 6), 2);
}

TEST(Sampler, TopPKeepsSmallestSetReachingP) {
  // Softmax of {10, 9.9, 0, …}: the first two hold ~all the mass; top-p 0.5 keeps only id 0.
  std::vector<float> l = {10, 9.9f, 0, 0, 0};
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 0.5f;
  o.min_p = 0;
  Sampler s(o);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(s.sample(l.data(), 5), 0);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  std::vector<float> l = {2.0f, 1.9f, -5.0f, -6.0f};
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.1f;  // ids 2, 3 have p < 0.1 · p_max
  Sampler s(o);
  std::map<int32_t, int> seen;
  for (int i = 0; i < 500; ++i) ++seen[s.sample(l.data(), 4)];
  EXPECT_EQ(seen.count(2) + seen.count(3), 0u);
  EXPECT_GT(seen[0], 0);
  EXPECT_GT(seen[1], 0);
}

TEST(Sampler, TemperatureSharpensDistribution) {
  std::vector<float> l = {1.0f, 0.0f};
  auto share_of_best = [&](float t) {
    SamplerOptions o;
    o.temperature = t;
    o.top_k = 0;
    o.top_p = 1.0f;
    o.min_p = 0;
    Sampler s(o);
    int best = 0;
    for (int i = 0; i < 2000; ++i) best += s.sample(l.data(), 2) == 0;
    return best / 2000.0;
  };
  EXPECT_GT(share_of_best(0.2f), 0.95);   // e^5 : 1
  EXPECT_LT(share_of_best(5.0f), 0.65);   // e^0.2 : 1 ≈ 0.55
}

TEST(Sampler, RepetitionPenaltyAvoidsRecentTokens) {
  std::vector<float> l = {2.0f, 1.8f};
  SamplerOptions o = SamplerOptions::greedy();
  o.repeat_penalty = 1.5f;  // 2.0 / 1.5 = 1.33 < 1.8
  Sampler s(o);
  EXPECT_EQ(s.sample(l.data(), 2), 0);
  s.accept(0);
  EXPECT_EQ(s.sample(l.data(), 2), 1);
  // Negative logits are pushed further down, not up.
  std::vector<float> neg = {-1.0f, -1.2f};
  Sampler s2(o);
  s2.accept(0);
  EXPECT_EQ(s2.sample(neg.data(), 2), 1);
}

// OpenAI's frequency and presence penalties, as llama.cpp applies them over the repetition
// window: logit − count·frequency − (count > 0)·presence.
TEST(Sampler, FrequencyAndPresencePenaltiesSubtractByCount) {
  const std::vector<float> l = {2.0f, 1.5f, 0.1f};
  auto pick = [&](float freq, float presence) {
    SamplerOptions o = SamplerOptions::greedy();
    o.frequency_penalty = freq;
    o.presence_penalty = presence;
    Sampler s(o);
    for (int i = 0; i < 3; ++i) s.accept(0);  // token 0 seen three times, token 1 never
    return s.sample(l.data(), 3);
  };
  EXPECT_EQ(pick(0.0f, 0.0f), 0);
  EXPECT_EQ(pick(0.1f, 0.0f), 0);   // 2.0 − 0.3 = 1.7 > 1.5
  EXPECT_EQ(pick(0.2f, 0.0f), 1);   // 2.0 − 0.6 = 1.4 < 1.5
  EXPECT_EQ(pick(0.0f, 0.4f), 0);   // 1.6
  EXPECT_EQ(pick(0.0f, 0.6f), 1);   // 1.4
  EXPECT_EQ(pick(-0.5f, 0.0f), 0);  // negative: encourages repeats
  // The audit's view agrees: the gap to the best logit after the penalties.
  SamplerOptions o = SamplerOptions::greedy();
  o.frequency_penalty = 0.2f;
  const int32_t recent[] = {0, 0, 0};
  EXPECT_NEAR(score_token(l.data(), 3, o, recent, 0).gap, 0.1f, 1e-6);
  EXPECT_EQ(score_token(l.data(), 3, o, recent, 1).gap, 0.0f);
}

TEST(Sampler, LogitBiasShiftsOrBansTokens) {
  const std::vector<float> l = {2.0f, 1.5f, 0.1f};
  SamplerOptions o = SamplerOptions::greedy();
  o.logit_bias = {{0, -100.0f}};
  EXPECT_EQ(Sampler(o).sample(l.data(), 3), 1);
  o.logit_bias = {{2, 1.95f}};  // 0.1 + 1.95 = 2.05 > 2.0
  EXPECT_EQ(Sampler(o).sample(l.data(), 3), 2);
  o.logit_bias = {{7, 100.0f}};  // outside the vocabulary: ignored here (the server refuses it)
  EXPECT_EQ(Sampler(o).sample(l.data(), 3), 0);
  // Sampling at a temperature never draws a banned token.
  o = SamplerOptions();
  o.logit_bias = {{0, -100.0f}};
  Sampler s(o);
  for (int i = 0; i < 200; ++i) EXPECT_NE(s.sample(l.data(), 3), 0);
}

TEST(Sampler, RejectsNonsenseOptions) {
  SamplerOptions o;
  o.top_p = 0;
  EXPECT_THROW(Sampler{o}, std::exception);
}


// score_token against the softmax written out: the surprisal is −ln p at the temperature, the
// entropy and Rényi-½ entropy of that distribution, the gap the distance to the best logit,
// and the repetition penalty moves the same logits Sampler::sample moves.
TEST(Sampler, ScoreTokenIsTheSoftmaxsSurprisalEntropyAndGap) {
  const std::vector<float> l = {2.0f, 1.0f, -0.5f, 0.25f};
  for (float t : {1.0f, 0.7f}) {
    SamplerOptions o;
    o.temperature = t;
    std::vector<double> p(l.size());
    double z = 0;
    for (size_t i = 0; i < l.size(); ++i) z += (p[i] = std::exp(l[i] / t));
    double h = 0, sq = 0;
    for (double& v : p) v /= z, h -= v * std::log(v), sq += std::sqrt(v);
    for (int32_t tok = 0; tok < 4; ++tok) {
      const TokenScore s = score_token(l.data(), 4, o, {}, tok);
      EXPECT_NEAR(s.surprisal, -std::log(p[tok]), 1e-6) << "T " << t << " token " << tok;
      EXPECT_NEAR(s.entropy, h, 1e-6);
      EXPECT_NEAR(s.renyi_half, 2 * std::log(sq), 1e-6);
      EXPECT_FLOAT_EQ(s.gap, 2.0f - l[tok]);
    }
  }
  // Greedy: the gap alone decides; the surprisal is taken at temperature 1.
  const TokenScore g = score_token(l.data(), 4, SamplerOptions::greedy(), {}, 0);
  EXPECT_EQ(g.gap, 0.0f);
  EXPECT_GT(g.surprisal, 0.0);
  // The penalty halves token 0's positive logit (2 → 1): token 0 is now 0.0 below... token 1 ties it.
  SamplerOptions pen = SamplerOptions::greedy();
  pen.repeat_penalty = 2.0f;
  const std::vector<int32_t> recent = {0, 2};
  EXPECT_FLOAT_EQ(score_token(l.data(), 4, pen, recent, 1).gap, 0.0f);
  EXPECT_FLOAT_EQ(score_token(l.data(), 4, pen, recent, 2).gap, 1.0f - (-1.0f));
  Sampler sampler(pen);
  for (int32_t r : recent) sampler.accept(r);
  EXPECT_EQ(sampler.sample(l.data(), 4), 0) << "ties go to the lower id, as score_token's gap 0 says";
  EXPECT_THROW(score_token(l.data(), 4, pen, recent, 4), std::exception);
}

}  // namespace
}  // namespace orchard
