// Mixture-of-experts files Orchard must refuse, each with an error naming the field at fault;
// expert routing against hand-computed choices. The micro files built here are also the GGUF
// fuzzer's MoE seeds: ORCHARD_WRITE_FUZZ_SEEDS=DIR writes them there (fuzz/corpus holds them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>

#include "model/blocks/moe_routing.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/hparams.h"
#include "model/model.h"
#include "model/weights.h"
#include "tensor/error.h"

namespace orchard {
namespace {

// Knobs a corruption turns; the defaults make a well-formed micro model.
struct Micro {
  std::string arch = "llama";        // "llama" (mixtral layout) or "deepseek2"
  std::map<std::string, int64_t> keys;  // integer keys (without the arch prefix) replacing the defaults
  std::map<std::string, std::vector<int64_t>> shapes;  // tensor ne replacing the defaults
  std::vector<std::string> drop;     // tensors left out
  std::map<std::string, std::string> strings;  // string keys (without the arch prefix)
  std::map<std::string, float> floats;         // float keys (without the arch prefix)
};

using Keys = std::map<std::string, int64_t>;
using Shapes = std::map<std::string, std::vector<int64_t>>;
Micro micro(const std::string& arch, Keys keys = {}, Shapes shapes = {}, std::vector<std::string> drop = {}) {
  Micro m;
  m.arch = arch;
  m.keys = std::move(keys);
  m.shapes = std::move(shapes);
  m.drop = std::move(drop);
  return m;
}

std::vector<uint8_t> floats(const std::vector<int64_t>& ne, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> dist(0.0f, 0.2f);
  std::vector<uint8_t> out(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    const float x = dist(rng) + (ne.size() == 1 ? 1.0f : 0.0f);
    std::memcpy(&out[static_cast<size_t>(i) * 4], &x, 4);
  }
  return out;
}

std::vector<uint8_t> build(const Micro& m) {
  const bool ds = m.arch == "deepseek2";
  const std::string a = m.arch + ".";
  std::map<std::string, int64_t> k = {{"embedding_length", 16}, {"block_count", 2}, {"feed_forward_length", 32},
                                      {"attention.head_count", 2}, {"attention.head_count_kv", ds ? 2 : 1},
                                      {"vocab_size", 8}, {"expert_count", 4}, {"expert_used_count", 2},
                                      {"expert_feed_forward_length", 16}};
  if (ds) {
    for (auto [key, v] : std::map<std::string, int64_t>{{"attention.q_lora_rank", 8}, {"attention.kv_lora_rank", 8},
                                                         {"attention.key_length", 12}, {"attention.value_length", 8},
                                                         {"rope.dimension_count", 4}, {"leading_dense_block_count", 1},
                                                         {"expert_shared_count", 1}, {"expert_gating_func", 2}})
      k[key] = v;
  }
  for (const auto& [key, v] : m.keys) k[key] = v;
  GGUFWriter w;
  w.set_string("general.architecture", m.arch);
  for (const auto& [key, v] : k)
    if (v >= 0) w.set_u32(a + key, static_cast<uint32_t>(v));
  for (const auto& [key, v] : m.strings) w.set_string(a + key, v);
  for (const auto& [key, v] : m.floats) w.set_f32(a + key, v);
  if (ds) {
    w.set_bool(a + "expert_weights_norm", true);
    w.set_f32(a + "expert_weights_scale", 2.5f);
  }
  const int64_t d = 16, v = 8;
  std::vector<std::pair<std::string, std::vector<int64_t>>> ts = {{"token_embd.weight", {d, v}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    ts.push_back({p + "attn_norm.weight", {d}});
    if (ds) {
      for (auto& t : std::vector<std::pair<std::string, std::vector<int64_t>>>{
               {"attn_q_a.weight", {d, 8}}, {"attn_q_a_norm.weight", {8}}, {"attn_q_b.weight", {8, 24}},
               {"attn_kv_a_mqa.weight", {d, 12}}, {"attn_kv_a_norm.weight", {8}}, {"attn_kv_b.weight", {8, 32}},
               {"attn_output.weight", {16, d}}})
        ts.push_back({p + t.first, t.second});
    } else {
      for (auto& t : std::vector<std::pair<std::string, std::vector<int64_t>>>{
               {"attn_q.weight", {d, d}}, {"attn_k.weight", {d, 8}}, {"attn_v.weight", {d, 8}}, {"attn_output.weight", {d, d}}})
        ts.push_back({p + t.first, t.second});
    }
    ts.push_back({p + "ffn_norm.weight", {d}});
    if (ds && l == 0) {
      for (auto& t : std::vector<std::pair<std::string, std::vector<int64_t>>>{
               {"ffn_gate.weight", {d, 32}}, {"ffn_up.weight", {d, 32}}, {"ffn_down.weight", {32, d}}})
        ts.push_back({p + t.first, t.second});
      continue;
    }
    ts.push_back({p + "ffn_gate_inp.weight", {d, 4}});
    if (ds) ts.push_back({p + "exp_probs_b.bias", {4}});
    ts.push_back({p + "ffn_gate_exps.weight", {d, 16, 4}});
    ts.push_back({p + "ffn_up_exps.weight", {d, 16, 4}});
    ts.push_back({p + "ffn_down_exps.weight", {16, d, 4}});
    if (ds)
      for (auto& t : std::vector<std::pair<std::string, std::vector<int64_t>>>{
               {"ffn_gate_shexp.weight", {d, 16}}, {"ffn_up_shexp.weight", {d, 16}}, {"ffn_down_shexp.weight", {16, d}}})
        ts.push_back({p + t.first, t.second});
  }
  ts.push_back({"output_norm.weight", {d}});
  ts.push_back({"output.weight", {d, v}});
  uint64_t seed = 1;
  for (auto& [name, ne] : ts) {
    if (std::find(m.drop.begin(), m.drop.end(), name) != m.drop.end()) continue;
    if (auto it = m.shapes.find(name); it != m.shapes.end()) ne = it->second;
    w.add_tensor(name, DType::F32, ne, floats(ne, seed++));
  }
  return w.to_bytes();
}

// Loads the micro model and runs a 3-token forward pass; returns the error text, "" when it ran.
std::string load_error(const Micro& m) {
  const auto bytes = build(m);
  try {
    auto f = GGUFFile::from_memory(bytes, "micro.gguf");
    Model model(*f, /*repack=*/false);
    auto kv = model.new_cache(16);
    std::vector<float> logits;
    const int32_t ids[] = {1, 2, 3};
    model.forward(ids, *kv, logits);
    for (float x : logits)
      if (!std::isfinite(x)) return "non-finite logits";
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MoeFile, WellFormedMicroModelsRun) {
  EXPECT_EQ(load_error(micro("llama")), "");
  EXPECT_EQ(load_error(micro("deepseek2")), "");
  if (const char* dir = std::getenv("ORCHARD_WRITE_FUZZ_SEEDS")) {
    for (const char* arch : {"llama", "deepseek2"}) {
      const auto bytes = build(micro(arch));
      std::ofstream(std::filesystem::path(dir) / (std::string("moe-") + arch + ".gguf"), std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
  }
}

TEST(MoeFile, BadExpertFieldsAreRefusedByName) {
  struct Bad {
    Micro m;
    std::string names;
  };
  const std::vector<Bad> cases = {
      {micro("llama", {{"expert_used_count", 5}}), "expert_used_count"},
      {micro("llama", {{"expert_used_count", 0}}), "expert_used_count"},
      {micro("llama", {{"expert_count", 8}}), "expert_count 8"},  // the tensors hold 4
      {micro("llama", {}, {{"blk.1.ffn_up_exps.weight", {16, 16}}}), "blk.1.ffn_up_exps.weight"},
      {micro("llama", {}, {{"blk.0.ffn_down_exps.weight", {16, 16, 3}}}), "blk.0.ffn_down_exps.weight"},
      {micro("llama", {}, {}, {"blk.0.ffn_gate_inp.weight"}), "blk.0.ffn_gate_inp.weight"},
      {micro("llama", {{"expert_group_count", 3}}), "expert_group_count"},
      {micro("llama", {{"expert_group_count", 4}, {"expert_group_used_count", 1}}), "expert_group_used_count"},
      {micro("llama", {{"expert_feed_forward_length", 0}}), "expert_feed_forward_length"},
      {micro("deepseek2", {{"leading_dense_block_count", 3}}), "leading_dense_block_count"},
      {micro("deepseek2", {{"expert_gating_func", 7}}), "expert_gating_func"},
      {micro("deepseek2", {{"attention.kv_lora_rank", -1}}), "kv_lora_rank"},
      {micro("deepseek2", {{"rope.dimension_count", 12}}), "rope.dimension_count"},
      {micro("deepseek2", {}, {{"blk.1.attn_kv_b.weight", {8, 30}}}), "blk.1.attn_kv_b.weight"},
      {micro("deepseek2", {}, {}, {"blk.1.exp_probs_b.bias"}), ""},  // optional: runs without it
  };
  for (const Bad& c : cases) {
    const std::string err = load_error(c.m);
    if (c.names.empty()) {
      EXPECT_EQ(err, "");
      continue;
    }
    EXPECT_NE(err.find(c.names), std::string::npos) << "expected an error naming " << c.names << ", got: " << err;
  }
}

// DeepSeek-V3 files scale RoPE with YaRN: such a file loads and runs, and its scaling keys are
// checked (a factor below 1 is refused, naming the key).
TEST(MoeFile, YarnScaledLatentAttentionRunsAndBadFactorsAreRefused) {
  Micro m = micro("deepseek2");
  m.strings["rope.scaling.type"] = "yarn";
  m.floats["rope.scaling.factor"] = 40.0f;
  m.floats["rope.scaling.yarn_log_multiplier"] = 0.1f;
  m.keys["rope.scaling.original_context_length"] = 64;
  EXPECT_EQ(load_error(m), "");
  m.floats["rope.scaling.factor"] = 0.5f;
  EXPECT_NE(load_error(m).find("rope.scaling.factor"), std::string::npos) << load_error(m);
  m.floats["rope.scaling.factor"] = 4.0f;
  m.strings["rope.scaling.type"] = "longrope";
  EXPECT_NE(load_error(m).find("longrope"), std::string::npos) << load_error(m);
}

TEST(MoeRouting, SoftmaxTopKNormalisedAsMixtral) {
  RouterConfig c;
  c.n_expert = 4;
  c.n_used = 2;
  c.normalise = true;
  const float logits[] = {0.0f, 2.0f, 1.0f, -1.0f};
  int32_t ex[2];
  float w[2];
  std::vector<float> scratch;
  route_token(c, logits, nullptr, ex, w, scratch);
  EXPECT_EQ(ex[0], 1);
  EXPECT_EQ(ex[1], 2);
  // p1 / (p1 + p2) = e² / (e² + e)
  EXPECT_NEAR(w[0], std::exp(2.0) / (std::exp(2.0) + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(w[0] + w[1], 1.0, 1e-6);
  c.normalise = false;  // qwen2moe: the softmax probabilities as they are
  route_token(c, logits, nullptr, ex, w, scratch);
  const double z = std::exp(0.0) + std::exp(2.0) + std::exp(1.0) + std::exp(-1.0);
  EXPECT_NEAR(w[1], std::exp(1.0) / z, 1e-6);
}

TEST(MoeRouting, SigmoidBiasSelectsButDoesNotWeigh) {
  RouterConfig c;
  c.n_expert = 4;
  c.n_used = 2;
  c.gating = ExpertGating::Sigmoid;
  c.normalise = true;
  c.scale = 2.5f;
  const float logits[] = {3.0f, 2.0f, 0.0f, -2.0f};
  const float bias[] = {0.0f, 0.0f, 0.0f, 2.0f};  // lifts expert 3 above expert 1
  int32_t ex[2];
  float w[2];
  std::vector<float> scratch;
  route_token(c, logits, bias, ex, w, scratch);
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  EXPECT_EQ(ex[0], 3);  // sig(-2) + 2 = 2.12 is the best selection score
  EXPECT_EQ(ex[1], 0);
  EXPECT_NEAR(w[0], 2.5 * sig(-2) / (sig(-2) + sig(3)), 1e-6);
  EXPECT_NEAR(w[1], 2.5 * sig(3) / (sig(-2) + sig(3)), 1e-6);
}

TEST(MoeRouting, GroupLimitedRoutingKeepsTheBestGroupsByTheirTopTwo) {
  // 8 experts in 4 groups of 2; keep 2 groups. Group sums: g0 = 0.9+0.0, g1 = 0.5+0.5,
  // g2 = 0.8+0.3, g3 = 0.2+0.1: g2 and g1 stay, so expert 0 (the best single score) is out.
  RouterConfig c;
  c.n_expert = 8;
  c.n_used = 2;
  c.gating = ExpertGating::Sigmoid;
  c.n_groups = 4;
  c.n_groups_used = 2;
  auto logit = [](double p) { return static_cast<float>(std::log(p / (1 - p))); };
  const float logits[] = {logit(0.9), logit(0.01), logit(0.5), logit(0.5), logit(0.8), logit(0.3), logit(0.2), logit(0.1)};
  int32_t ex[2];
  float w[2];
  std::vector<float> scratch;
  route_token(c, logits, nullptr, ex, w, scratch);
  EXPECT_EQ(ex[0], 4);
  EXPECT_TRUE(ex[1] == 2 || ex[1] == 3);
  c.n_groups = 0;  // without the limit expert 0 wins
  route_token(c, logits, nullptr, ex, w, scratch);
  EXPECT_EQ(ex[0], 0);
}

}  // namespace
}  // namespace orchard
