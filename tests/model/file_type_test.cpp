// make-model's K-quant files against llama-quantize: the tiny shape written directly as Q4_K_M,
// Q5_K_M, Q4_K_S and Q6_K must hold, tensor for tensor, the formats and the bytes llama-quantize
// (2026-08) wrote when quantizing the same shape written as F32 (tests/data/golden/
// make-model.tiny.llama-quantize.json: each tensor's format and the sha256 of its bytes).
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "model/synthetic/synthetic.h"
#include "tensor/error.h"
#include "test_data.h"

namespace orchard {
namespace {

std::string sha256_hex(const uint8_t* p, size_t n) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(p, n, md, &len, EVP_sha256(), nullptr);
  std::string hex;
  char b[3];
  for (unsigned i = 0; i < len; ++i) {
    std::snprintf(b, sizeof b, "%02x", md[i]);
    hex += b;
  }
  return hex;
}

TEST(MakeModelKQuants, TensorForTensorWhatLlamaQuantizeWrites) {
  ORCHARD_REQUIRE_FILES("golden/make-model.tiny.llama-quantize.json");
  std::ifstream in(test::data_file("golden/make-model.tiny.llama-quantize.json"));
  const nlohmann::json golden = nlohmann::json::parse(in);
  for (const char* name : {"Q4_K_M", "Q5_K_M", "Q4_K_S", "Q6_K"}) {
    SCOPED_TRACE(name);
    const auto path = std::filesystem::path(::testing::TempDir()) / (std::string("tiny-") + name + ".gguf");
    const FileType ft = parse_file_type(name);
    write_synthetic_model(model_shape("tiny"), ft, 42, path.string());
    auto f = GGUFFile::open(path.string());
    EXPECT_EQ(f->get_int("general.file_type").value_or(-1), static_cast<int64_t>(ft.ftype));
    const nlohmann::json& want = golden.at(name);
    ASSERT_EQ(f->tensors().size(), want.size());
    for (const GGUFTensorInfo& t : f->tensors()) {
      SCOPED_TRACE(t.name);
      ASSERT_TRUE(want.contains(t.name));
      EXPECT_EQ(type_name(t.type), want[t.name][0].get<std::string>());
      EXPECT_EQ(sha256_hex(f->tensor_data(t), t.nbytes), want[t.name][1].get<std::string>());
    }
    std::filesystem::remove(path);
  }
}

TEST(MakeModelKQuants, MixturesFollowLlamaQuantizesRulesAndRowsThatCannotHoldAKQuantFallBack) {
  const FileType m = parse_file_type("Q4_K_M");
  // 16 layers: the first and last two and every third between use more bits.
  for (int l : {0, 1, 4, 7, 10, 13, 14, 15})
    EXPECT_EQ(tensor_type(m, "blk." + std::to_string(l) + ".ffn_down_exps.weight", 16, 768), DType::Q6_K) << l;
  for (int l : {2, 3, 5, 6, 8, 9, 11, 12})
    EXPECT_EQ(tensor_type(m, "blk." + std::to_string(l) + ".ffn_down.weight", 16, 768), DType::Q4_K) << l;
  EXPECT_EQ(tensor_type(m, "blk.0.attn_kv_b.weight", 16, 256), DType::Q6_K);
  EXPECT_EQ(tensor_type(m, "blk.2.attn_q.weight", 16, 256), DType::Q4_K);
  EXPECT_EQ(tensor_type(m, "output.weight", 16, 256), DType::Q6_K);
  EXPECT_EQ(tensor_type(m, "token_embd.weight", 16, 256), DType::Q4_K);
  // 384-wide rows (deepseek2's attn_q_b input) fall back as llama-quantize's do.
  EXPECT_EQ(tensor_type(m, "blk.2.attn_q_b.weight", 16, 384), DType::Q5_0);
  EXPECT_EQ(tensor_type(parse_file_type("Q5_K"), "blk.2.attn_q_b.weight", 16, 384), DType::Q5_1);
  EXPECT_EQ(tensor_type(parse_file_type("Q6_K"), "blk.2.attn_q_b.weight", 16, 384), DType::Q8_0);
  EXPECT_EQ(tensor_type(parse_file_type("Q6_K"), "blk.2.x.weight", 16, 100), DType::F16);
  // Plain types put every matrix in their format.
  EXPECT_EQ(tensor_type(parse_file_type("Q4_0"), "output.weight", 16, 256), DType::Q4_0);
  try {
    parse_file_type("Q3_K_L");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q4_K_M"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace orchard
