// Continuous batching must not change what any sequence computes: a batch of sequences at
// different positions gives each the logits it gets alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include "model/engine.h"
#include "model/synthetic/synthetic.h"
#include "tensor/error.h"
#include "test_data.h"

namespace orchard {
namespace {

std::unique_ptr<Engine> tiny_engine(DType type, KVType kv_type = KVType::F32) {
  const auto path = std::filesystem::path(::testing::TempDir()) / ("batch-tiny-" + std::string(type_name(type)) + ".gguf");
  if (!std::filesystem::exists(path)) write_synthetic_model(model_shape("tiny"), type, 11, path.string());
  EngineOptions o;
  o.model_path = path.string();
  o.threads = 2;
  o.n_ctx = 256;
  o.kv_type = kv_type;
  return Engine::load(o);
}

float max_abs_diff(const float* a, const float* b, int64_t n) {
  float d = 0;
  for (int64_t i = 0; i < n; ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// Seventeen sequences each take one step of token 7 after history(i): sequence 16 alone, 0–15
// together. 16 and 1 share a history (i % 3 == 1): true when 16's logits alone are the same bits
// as 1's among the sixteen.
bool alone_is_the_same_bits_among_sixteen(Engine& e, const std::function<std::vector<int32_t>(int)>& history) {
  const int64_t nv = e.hparams().n_vocab;
  std::vector<std::unique_ptr<KVCache>> kv;
  std::vector<float> scratch, alone, batched;
  for (int i = 0; i < 17; ++i) {
    kv.push_back(e.new_cache());
    e.model().forward(history(i), *kv.back(), scratch);
  }
  std::vector<int32_t> next = {7};
  std::vector<BatchSeq> one = {{next, kv[16].get()}};
  e.model().forward_batch(one, alone);
  std::vector<BatchSeq> many;
  for (int i = 0; i < 16; ++i) many.push_back({next, kv[i].get()});
  e.model().forward_batch(many, batched);
  return std::memcmp(alone.data(), &batched[1 * static_cast<size_t>(nv)], static_cast<size_t>(nv) * sizeof(float)) == 0;
}

class BatchForward : public ::testing::TestWithParam<DType> {};

TEST_P(BatchForward, EachSequenceGetsTheLogitsItGetsAlone) {
  auto e = tiny_engine(GetParam());
  Model& m = e->model();
  const int64_t nv = m.hparams().n_vocab;
  // Three sequences with different histories: one fresh, two already some way in.
  std::vector<std::vector<int32_t>> history = {{}, {5, 9, 13, 2, 7}, {3, 3, 8}};
  std::vector<std::vector<int32_t>> next = {{1, 4, 6, 8, 10, 12}, {17}, {21, 22}};
  std::vector<std::unique_ptr<KVCache>> alone, batched;
  std::vector<float> scratch;
  for (size_t s = 0; s < history.size(); ++s) {
    alone.push_back(e->new_cache());
    batched.push_back(e->new_cache());
    if (!history[s].empty()) {
      m.forward(history[s], *alone[s], scratch);
      m.forward(history[s], *batched[s], scratch);
    }
  }
  std::vector<BatchSeq> batch;
  for (size_t s = 0; s < next.size(); ++s) batch.push_back({next[s], batched[s].get()});
  std::vector<float> logits;
  m.forward_batch(batch, logits);
  ASSERT_EQ(logits.size(), next.size() * static_cast<size_t>(nv));
  for (size_t s = 0; s < next.size(); ++s) {
    std::vector<float> ref;
    m.forward(next[s], *alone[s], ref);
    ASSERT_EQ(ref.size(), static_cast<size_t>(nv));
    // Batched rows may take the matrix-matrix kernels where one row took the vector ones.
    EXPECT_LT(max_abs_diff(ref.data(), &logits[s * nv], nv), 2e-2f) << "sequence " << s;
    EXPECT_EQ(argmax(ref.data(), nv), argmax(&logits[s * nv], nv)) << "sequence " << s;
    EXPECT_EQ(batched[s]->size(), alone[s]->size());
  }
  // A decode step for all three together continues each one correctly.
  std::vector<std::vector<int32_t>> step = {{2}, {2}, {2}};
  batch.clear();
  for (size_t s = 0; s < step.size(); ++s) batch.push_back({step[s], batched[s].get()});
  m.forward_batch(batch, logits);
  for (size_t s = 0; s < step.size(); ++s) {
    std::vector<float> ref;
    m.forward(step[s], *alone[s], ref);
    EXPECT_LT(max_abs_diff(ref.data(), &logits[s * nv], nv), 2e-2f) << "sequence " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, BatchForward, ::testing::Values(DType::F32, DType::Q8_0, DType::Q4_0),
                         [](const auto& info) { return std::string(type_name(info.param)); });

TEST(BatchForward, FullCacheIsRefusedBeforeAnythingChanges) {
  auto e = tiny_engine(DType::Q8_0);
  Model& m = e->model();
  auto a = m.new_cache(4), b = m.new_cache(4);
  std::vector<int32_t> two = {1, 2}, five = {1, 2, 3, 4, 5};
  std::vector<BatchSeq> batch = {{two, a.get()}, {five, b.get()}};
  std::vector<float> logits;
  EXPECT_THROW(m.forward_batch(batch, logits), Error);
  EXPECT_EQ(a->size(), 0);
  EXPECT_EQ(b->size(), 0);
}

// Served models are batch-invariant: a sequence's logits are the same bits whether it runs
// alone or among 15 others, in every weight format (each takes one kernel for any row count).
TEST(BatchForward, BatchInvariantModelsGiveTheSameBitsInEveryFormat) {
  ORCHARD_REQUIRE_DATA();
  const auto dir = test::shared_data() / "golden" / "quant";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    EngineOptions o;
    o.model_path = entry.path().string();
    o.threads = 2;
    o.n_ctx = 64;
    auto e = Engine::load(o);
    e->model().set_batch_invariant(true);
    // Sequences at the same place, some with different histories.
    EXPECT_TRUE(alone_is_the_same_bits_among_sixteen(*e, [](int i) { return std::vector<int32_t>{1, 5 + i % 3, 9, 13}; }))
        << entry.path().filename();
    ++checked;
  }
  EXPECT_GE(checked, 10) << "expected the golden quantization zoo in " << dir;
}

// The same for mixtures of experts and latent attention: a decoding row goes through its chosen
// experts alone (one shared input preparation) or grouped with other rows routed to the same
// expert, and through latent attention alone or among others; its bits must not change.
TEST(BatchForward, MixtureOfExpertsModelsAreBatchInvariant) {
  ORCHARD_REQUIRE_DATA();
  int checked = 0;
  for (const char* dir : {"moe", "qwen3"})
    for (const auto& entry : std::filesystem::directory_iterator(test::shared_data() / "golden" / dir)) {
      const std::string name = entry.path().filename().string();
      if (entry.path().extension() != ".gguf" || name.rfind("qwen2.", 0) == 0 || name.rfind("qwen3.", 0) == 0) continue;
      for (KVType kv : {KVType::F32, KVType::F16}) {
        EngineOptions o;
        o.model_path = entry.path().string();
        o.threads = 2;
        o.n_ctx = 64;
        o.kv_type = kv;
        auto e = Engine::load(o);
        e->model().set_batch_invariant(true);
        EXPECT_TRUE(alone_is_the_same_bits_among_sixteen(*e, [](int i) { return std::vector<int32_t>{1, 300 + i % 3, 9, 413}; }))
            << name << (kv == KVType::F16 ? ", f16 cache" : "");
        ++checked;
      }
    }
  EXPECT_GE(checked, 20);
}

// A cache of halves: half the bytes, a sequence's bits the same alone or among 15 others (the
// decoding kernel's halves path), and logits near those of a float cache, prompt and steps.
TEST(BatchForward, HalfCacheIsBatchInvariantAndNearTheFloatCache) {
  auto e16 = tiny_engine(DType::Q8_0, KVType::F16), e32 = tiny_engine(DType::Q8_0, KVType::F32);
  EXPECT_EQ(e16->new_cache()->bytes() * 2, e32->new_cache()->bytes());
  for (Engine* e : {e16.get(), e32.get()}) e->model().set_batch_invariant(true);
  const int64_t nv = e16->hparams().n_vocab;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 45; ++i) prompt.push_back(3 + (i * 37) % 200);  // past one key panel
  std::vector<float> l16, l32;
  auto c16 = e16->new_cache(), c32 = e32->new_cache();
  e16->model().forward(prompt, *c16, l16);
  e32->model().forward(prompt, *c32, l32);
  float worst = max_abs_diff(l16.data(), l32.data(), nv);
  for (int32_t t : {7, 11, 13}) {
    std::vector<int32_t> one = {t};
    e16->model().forward(one, *c16, l16);
    e32->model().forward(one, *c32, l32);
    worst = std::max(worst, max_abs_diff(l16.data(), l32.data(), nv));
  }
  std::printf("tiny Q8_0: max |dlogit| between a half and a float cache %.3g\n", worst);
  EXPECT_GT(worst, 0.0f);
  EXPECT_LT(worst, 5e-2f);

  EXPECT_TRUE(alone_is_the_same_bits_among_sixteen(*e16, [&](int i) {
    std::vector<int32_t> history = prompt;
    history.push_back(5 + i % 3);
    return history;
  }));
}

}  // namespace
}  // namespace orchard
