#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <unistd.h>

#include "model/engine.h"
#include "model/gguf.h"
#include "model/synthetic/synthetic.h"
#include "tensor/error.h"
#include "tensor/quant.h"

namespace orchard {
namespace {

namespace fs = std::filesystem;

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("orchard-test-" + std::to_string(::getpid()) + "-" + name);
}

TEST(SyntheticModel, VocabularyHasRequestedSizeAndUniquePieces) {
  Vocabulary v = make_vocabulary(4096);
  ASSERT_EQ(v.tokens.size(), 4096u);
  EXPECT_EQ(v.tokens[1], "<s>");
  EXPECT_EQ(v.tokens[3 + 0x41], "<0x41>");
  std::set<std::string> unique(v.tokens.begin(), v.tokens.end());
  EXPECT_EQ(unique.size(), v.tokens.size());
  EXPECT_EQ(make_vocabulary(32000).tokens.size(), 32000u);
}

TEST(SyntheticModel, WrittenFileLoadsBackBitExactly) {
  for (DType type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
    const fs::path p = temp_path(std::string("tiny-") + type_name(type) + ".gguf");
    const ModelShape& s = model_shape("tiny");
    write_synthetic_model(s, type, 7, p.string());
    const fs::path p2 = temp_path("tiny-again.gguf");
    write_synthetic_model(s, type, 7, p2.string());
    auto f = GGUFFile::open(p.string());
    auto f2 = GGUFFile::open(p2.string());
    // Same seed → the same bytes, tensor by tensor.
    ASSERT_EQ(f->tensors().size(), static_cast<size_t>(3 + 9 * s.n_layers));
    for (const auto& t : f->tensors()) {
      const auto* t2 = f2->find_tensor(t.name);
      ASSERT_NE(t2, nullptr);
      ASSERT_EQ(t.nbytes, t2->nbytes);
      EXPECT_EQ(0, std::memcmp(f->tensor_data(t), f2->tensor_data(*t2), t.nbytes)) << t.name;
    }
    const auto* q = f->find_tensor("blk.0.attn_q.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->type, type);
    EXPECT_EQ(q->ne, (std::vector<int64_t>{s.dim, s.dim}));
    EXPECT_EQ(f->get_int("llama.block_count"), s.n_layers);
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")->size(), static_cast<size_t>(s.n_vocab));
    // Weights are dequantizable with roughly the intended spread (std 0.02).
    std::vector<float> row(s.dim);
    dequantize_row(q->type, f->tensor_data(*q), row.data(), s.dim);
    double ss = 0;
    for (float x : row) ss += x * x;
    EXPECT_NEAR(std::sqrt(ss / s.dim), 0.02, 0.004);
    fs::remove(p);
    fs::remove(p2);
  }
}

TEST(SyntheticModel, DifferentSeedsGiveDifferentWeights) {
  const fs::path a = temp_path("seed-a.gguf"), b = temp_path("seed-b.gguf");
  write_synthetic_model(model_shape("tiny"), DType::Q4_0, 1, a.string());
  write_synthetic_model(model_shape("tiny"), DType::Q4_0, 2, b.string());
  auto fa = GGUFFile::open(a.string()), fb = GGUFFile::open(b.string());
  const auto* ta = fa->find_tensor("output.weight");
  const auto* tb = fb->find_tensor("output.weight");
  EXPECT_NE(0, std::memcmp(fa->tensor_data(*ta), fb->tensor_data(*tb), ta->nbytes));
  fs::remove(a);
  fs::remove(b);
}

TEST(SyntheticModel, UnknownShapeAndTypeAreRefused) {
  EXPECT_THROW(model_shape("huge"), Error);
  EXPECT_THROW(write_synthetic_model(model_shape("tiny"), DType::Q3_K, 1, temp_path("x").string()), Error);
}

TEST(SyntheticModel, GeneratesDeterministicallyAndTokenizesWords) {
  const fs::path p = temp_path("gen.gguf");
  write_synthetic_model(model_shape("tiny"), DType::Q8_0, 42, p.string());
  EngineOptions eo;
  eo.model_path = p.string();
  auto e = Engine::load(eo);
  // Common words are whole tokens: "▁the" and "▁cat"-like pieces, BOS first.
  auto ids = e->tokenizer().encode("the water", true);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(e->tokenizer().decode(ids), "the water");
  GenerateOptions o;
  o.max_tokens = 16;
  o.sampling.seed = 5;
  auto r1 = e->generate("the water", o);
  auto r2 = e->generate("the water", o);
  EXPECT_EQ(r1.tokens, r2.tokens);
  EXPECT_EQ(r1.tokens.size(), 16u);
  fs::remove(p);
}

TEST(SyntheticModel, FullContextGivesClearError) {
  const fs::path p = temp_path("ctx.gguf");
  write_synthetic_model(model_shape("tiny"), DType::Q8_0, 42, p.string());
  EngineOptions eo;
  eo.model_path = p.string();
  eo.n_ctx = 8;
  auto e = Engine::load(eo);
  auto kv = e->new_cache();
  std::vector<int32_t> ids(9, 5);
  std::vector<float> logits;
  try {
    e->model().forward(ids, *kv, logits);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("context is full"), std::string::npos) << err.what();
  }
  fs::remove(p);
}

}  // namespace
}  // namespace orchard
