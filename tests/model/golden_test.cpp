// The engine against llama.cpp's golden outputs (../shared/data/golden): greedy token ids,
// teacher-forced logits within the tolerances the golden READMEs state, and perplexity.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <span>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/engine.h"
#include "model/perplexity.h"
#include "model/golden_json.h"
#include "test_data.h"

namespace orchard {
namespace {

using nlohmann::json;

using test::read_json;

std::unique_ptr<Engine> load_engine(const std::string& rel, KVType kv_type = KVType::F32) {
  EngineOptions o;
  o.model_path = test::data_file(rel).string();
  o.n_ctx = 512;
  o.kv_type = kv_type;
  return Engine::load(o);
}

struct LogitDiff {
  double max = 0, mean = 0;
  int argmax_checked = 0, argmax_agree = 0;
};

// Feeds prompt_ids + generated_ids[:-1] in one batch and compares the logits at the last prompt
// position onwards with the golden rows. Argmax is compared only where the golden top-1/top-2
// gap exceeds `gap`.
LogitDiff teacher_forced(Engine& e, const json& g, const std::vector<float>& golden, double gap) {
  std::vector<int32_t> ids = g["prompt_ids"].get<std::vector<int32_t>>();
  const auto gen = g["generated_ids"].get<std::vector<int32_t>>();
  ids.insert(ids.end(), gen.begin(), gen.end() - 1);
  const int64_t n_vocab = e.hparams().n_vocab;
  const size_t rows = gen.size(), first = g["prompt_ids"].size() - 1;
  EXPECT_EQ(golden.size(), rows * n_vocab);
  auto kv = e.new_cache();
  std::vector<float> logits;
  e.model().forward(ids, *kv, logits, /*all_logits=*/true);
  LogitDiff d;
  double sum = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* mine = &logits[(first + r) * n_vocab];
    const float* ref = &golden[r * n_vocab];
    for (int64_t i = 0; i < n_vocab; ++i) {
      const double diff = std::fabs(static_cast<double>(mine[i]) - ref[i]);
      d.max = std::max(d.max, diff);
      sum += diff;
    }
    const auto& top = g["steps"][r]["top"];
    if (top[0][1].get<double>() - top[1][1].get<double>() > gap) {
      ++d.argmax_checked;
      d.argmax_agree += argmax(mine, n_vocab) == top[0][0].get<int32_t>();
    }
  }
  d.mean = sum / static_cast<double>(rows * n_vocab);
  return d;
}

struct StoriesCase {
  const char* model;   // under shared/data
  const char* prefix;  // golden file prefix
  double max_tol, mean_tol, ppl;
};

class StoriesGolden : public ::testing::TestWithParam<StoriesCase> {};

TEST_P(StoriesGolden, GreedyTokensMatchLlamaCpp) {
  ORCHARD_REQUIRE_FILES(GetParam().model);
  const auto& c = GetParam();
  auto e = load_engine(c.model);
  for (const char* prompt : {"once_upon_a_time", "the_little_dog"}) {
    json g = read_json(test::data_file(std::string("golden/") + c.prefix + prompt + ".greedy64.kvf32.json"));
    GenerateOptions o;
    o.max_tokens = 64;
    o.sampling = SamplerOptions::greedy();
    auto r = e->generate(g["prompt"].get<std::string>(), o);
    EXPECT_EQ(r.prompt_tokens, g["prompt_ids"].get<std::vector<int32_t>>()) << prompt;
    EXPECT_EQ(r.tokens, g["generated_ids"].get<std::vector<int32_t>>()) << prompt;
    EXPECT_EQ(r.text, g["generated_text"].get<std::string>()) << prompt;
  }
}

TEST_P(StoriesGolden, LogitsWithinTolerance) {
  ORCHARD_REQUIRE_FILES(GetParam().model);
  const auto& c = GetParam();
  auto e = load_engine(c.model);
  for (const char* prompt : {"once_upon_a_time", "the_little_dog"}) {
    const std::string base = std::string("golden/") + c.prefix + prompt + ".greedy64.kvf32";
    json g = read_json(test::data_file(base + ".json"));
    auto golden = test::read_f32(test::data_file(base + ".logits.f32"));
    LogitDiff d = teacher_forced(*e, g, golden, 2 * c.max_tol);
    EXPECT_LE(d.max, c.max_tol) << prompt;
    EXPECT_LE(d.mean, c.mean_tol) << prompt;
    EXPECT_EQ(d.argmax_agree, d.argmax_checked) << prompt;
    EXPECT_GT(d.argmax_checked, 16) << prompt;
    std::printf("%s %s: max |dlogit| %.3g, mean %.3g, argmax %d/%d\n", c.model, prompt, d.max,
                d.mean, d.argmax_agree, d.argmax_checked);
  }
}

TEST_P(StoriesGolden, PerplexityWithinOnePercent) {
  ORCHARD_REQUIRE_FILES(GetParam().model);
  const auto& c = GetParam();
  auto e = load_engine(c.model);
  std::ifstream in(test::data_file("golden/stories260K.ppl_text.txt"), std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  PerplexityResult r = perplexity(*e, text, 128);
  EXPECT_EQ(r.n_tokens, 791);
  EXPECT_EQ(r.n_chunks, 6);
  EXPECT_EQ(r.n_scored, 378);
  EXPECT_NEAR(r.ppl, c.ppl, 0.01 * c.ppl);
  std::printf("%s: PPL %.4f (llama.cpp %.4f)\n", c.model, r.ppl, c.ppl);
}

// An F16 KV cache against llama.cpp's F16-KV run of the F32 model: the same greedy tokens, and
// logits within a few hundredths. llama.cpp also rounds the queries and the softmax output to
// halves before the products with the cache, where Orchard keeps them in float32, so the match
// is looser than F32's (measured: max 0.032 / 0.016, mean 0.0018 / 0.0019; llama.cpp's own F16
// and F32 runs differ by up to 0.024). The cache must really hold halves: the logits move
// away from the F32 cache's.
TEST(StoriesGoldenF16KV, GreedyTokensAndLogitsFollowLlamaCppsF16KVRun) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  auto e = load_engine("models/stories260K.gguf", KVType::F16);
  for (const char* prompt : {"once_upon_a_time", "the_little_dog"}) {
    const std::string base = std::string("golden/stories260K.") + prompt + ".greedy64.";
    json g16 = read_json(test::data_file(base + "kvf16.json"));
    json g32 = read_json(test::data_file(base + "kvf32.json"));
    GenerateOptions o;
    o.max_tokens = 64;
    o.sampling = SamplerOptions::greedy();
    auto r = e->generate(g16["prompt"].get<std::string>(), o);
    EXPECT_EQ(r.tokens, g16["generated_ids"].get<std::vector<int32_t>>()) << prompt;
    LogitDiff to16 = teacher_forced(*e, g16, test::read_f32(test::data_file(base + "kvf16.logits.f32")), 0.1);
    LogitDiff to32 = teacher_forced(*e, g32, test::read_f32(test::data_file(base + "kvf32.logits.f32")), 0.1);
    std::printf("%s, f16 KV: max |dlogit| vs llama.cpp f16 KV %.3g (mean %.3g), vs f32 KV %.3g (mean %.3g)\n", prompt,
                to16.max, to16.mean, to32.max, to32.mean);
    EXPECT_LE(to16.max, 0.06) << prompt;
    EXPECT_LE(to16.mean, 0.004) << prompt;
    EXPECT_EQ(to16.argmax_agree, to16.argmax_checked) << prompt;
    EXPECT_GT(to16.argmax_checked, 16) << prompt;
    EXPECT_GT(to32.max, 1e-3) << prompt << ": as close to the F32-KV run as an F32 cache is";
  }
}

// Tolerances: golden/README.md. F32 is tight (same math in float32); quantized files use the
// README's suggestion for an engine computing in float32 with an F32 KV cache.
INSTANTIATE_TEST_SUITE_P(
    Stories260K, StoriesGolden,
    ::testing::Values(StoriesCase{"models/stories260K.gguf", "stories260K.", 1e-3, 1e-4, 4.0211},
                      StoriesCase{"golden/stories260K.Q8_0.gguf", "stories260K.Q8_0.", 0.75, 0.1, 4.0209},
                      StoriesCase{"golden/stories260K.Q4_0.gguf", "stories260K.Q4_0.", 0.75, 0.1, 4.3297}),
    [](const auto& info) {
      const std::string m = info.param.model;
      return m.find("Q8_0") != std::string::npos ? std::string("Q8_0")
             : m.find("Q4_0") != std::string::npos ? std::string("Q4_0") : std::string("F32");
    });

struct QuantCase {
  const char* variant;
  double max_tol, mean_tol;
};

class QuantZooGolden : public ::testing::TestWithParam<QuantCase> {};

TEST_P(QuantZooGolden, TeacherForcedLogitsWithinTolerance) {
  ORCHARD_REQUIRE_DATA();
  const auto& c = GetParam();
  const std::string base = std::string("golden/quant/randllama.") + c.variant;
  auto e = load_engine(base + ".gguf");
  json g = read_json(test::data_file(base + ".once_upon_a_time.greedy16.kvf32.json"));
  auto golden = test::read_f32(test::data_file(base + ".once_upon_a_time.greedy16.kvf32.logits.f32"));
  LogitDiff d = teacher_forced(*e, g, golden, 2 * c.max_tol);
  EXPECT_LE(d.max, c.max_tol);
  EXPECT_LE(d.mean, c.mean_tol);
  EXPECT_EQ(d.argmax_agree, d.argmax_checked);
  std::printf("%s: max |dlogit| %.3g, mean %.3g, argmax %d/%d\n", c.variant, d.max, d.mean,
              d.argmax_agree, d.argmax_checked);
}

// Tolerances from golden/quant/README.md ("Suggested tolerances").
INSTANTIATE_TEST_SUITE_P(
    RandLlama, QuantZooGolden,
    ::testing::Values(QuantCase{"F32", 1e-4, 1e-5}, QuantCase{"F16", 2e-3, 3e-4},
                      QuantCase{"BF16", 1.5e-2, 2e-3}, QuantCase{"Q8_0", 0.04, 0.006},
                      QuantCase{"Q6_K", 0.06, 0.01}, QuantCase{"Q5_K_S", 0.06, 0.01},
                      QuantCase{"Q5_1", 0.06, 0.01}, QuantCase{"Q5_0", 0.06, 0.01},
                      QuantCase{"Q4_K_S", 0.06, 0.01}, QuantCase{"Q4_1", 0.06, 0.01},
                      QuantCase{"Q4_0", 0.06, 0.01}, QuantCase{"Q3_K_S", 0.06, 0.01},
                      QuantCase{"Q2_K", 0.06, 0.01}),
    [](const auto& info) { return std::string(info.param.variant); });

}  // namespace
}  // namespace orchard

namespace orchard {
namespace {

// The repacked kernels and the plain ones add the same products in another order. The float
// difference is rounding-sized, but the next matmul quantizes its input to 8 bits, and a value
// rounded the other way there moves a small model's logits by ~0.1 (it varies with the build:
// greedy texts diverged at -O1 and not at -O2). So, as with llama.cpp's golden rows (whose
// README gives max 0.75, mean 0.1): the logits of one token sequence, fed as one prompt batch
// and then one token a step (the generation path), must agree within quantization noise, and
// the greedy picks wherever the top two are clearly apart.
TEST(RepackedWeights, SameLogitsAndGreedyPicksWithAndWithoutRepacking) {
  ORCHARD_REQUIRE_FILES("golden/stories260K.Q8_0.gguf", "golden/stories260K.Q4_0.gguf");
  for (const char* model : {"golden/stories260K.Q8_0.gguf", "golden/stories260K.Q4_0.gguf"}) {
    SCOPED_TRACE(model);
    std::vector<std::unique_ptr<Engine>> engines;
    for (bool repack : {true, false}) {
      EngineOptions o;
      o.model_path = test::data_file(model).string();
      o.n_ctx = 256;
      o.repack = repack;
      engines.push_back(Engine::load(o));
    }
    GenerateOptions g;
    g.max_tokens = 48;
    g.sampling = SamplerOptions::greedy();
    const GenerateResult r = engines[0]->generate("Once upon a time, in a small village", g);
    const std::vector<int32_t>& gen = r.tokens;
    ASSERT_EQ(gen.size(), 48u);
    std::vector<int32_t> ids(r.prompt_tokens.begin(), r.prompt_tokens.end());
    const size_t n_prompt = ids.size();
    ids.insert(ids.end(), gen.begin(), gen.end());
    const int64_t n_vocab = engines[0]->hparams().n_vocab;
    // rows[e][0]: every position from one batch; rows[e][1]: the prompt, then one token a step.
    std::vector<float> rows[2][2];
    for (int e = 0; e < 2; ++e) {
      auto kv = engines[e]->new_cache();
      engines[e]->model().forward(ids, *kv, rows[e][0], /*all_logits=*/true);
      auto kv1 = engines[e]->new_cache();
      std::vector<float> step;
      engines[e]->model().forward(std::span<const int32_t>(ids).first(n_prompt), *kv1, step, false);
      rows[e][1] = step;
      for (size_t i = n_prompt; i + 1 < ids.size(); ++i) {
        engines[e]->model().forward(std::span<const int32_t>(ids).subspan(i, 1), *kv1, step, false);
        rows[e][1].insert(rows[e][1].end(), step.begin(), step.end());
      }
    }
    const double max_tol = 0.5, mean_tol = 0.06, gap = 2 * max_tol;
    int checked = 0;
    for (int path = 0; path < 2; ++path) {
      const size_t n_rows = path == 0 ? ids.size() : ids.size() - n_prompt;
      ASSERT_EQ(rows[0][path].size(), n_rows * n_vocab);
      ASSERT_EQ(rows[1][path].size(), n_rows * n_vocab);
      double worst = 0, sum = 0;
      for (size_t r = 0; r < n_rows; ++r) {
        const float* a = &rows[0][path][r * n_vocab];
        const float* b = &rows[1][path][r * n_vocab];
        for (int64_t i = 0; i < n_vocab; ++i) {
          const double diff = std::fabs(static_cast<double>(a[i]) - b[i]);
          worst = std::max(worst, diff);
          sum += diff;
        }
        std::vector<float> sorted(b, b + n_vocab);
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
        if (sorted[0] - sorted[1] > gap) {
          ++checked;
          EXPECT_EQ(argmax(a, n_vocab), argmax(b, n_vocab)) << "path " << path << ", row " << r;
        }
      }
      const double mean = sum / static_cast<double>(n_rows * n_vocab);
      EXPECT_LE(worst, max_tol) << "path " << path;
      EXPECT_LE(mean, mean_tol) << "path " << path;
      std::printf("%s, %s: max |dlogit| %.3g, mean %.3g\n", model, path == 0 ? "prompt batch" : "token steps",
                  worst, mean);
    }
    EXPECT_GT(checked, static_cast<int>(ids.size() / 2));  // most rows are clear picks
  }
}

}  // namespace
}  // namespace orchard
