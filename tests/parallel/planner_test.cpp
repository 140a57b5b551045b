// The planner: model cost read from GGUF headers (exact against the files), the catalogs,
// cluster files, predictions and the choice between splits.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../dist/dist_harness.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/hparams.h"
#include "model/synthetic/synthetic.h"
#include "parallel/auto_plan.h"
#include "parallel/catalog.h"
#include "parallel/cluster.h"
#include "parallel/memory.h"
#include "parallel/model_cost.h"
#include "parallel/plan.h"
#include "parallel/predict.h"
#include "tensor/error.h"
#include "test_data.h"

namespace orchard::parallel {
namespace {

namespace fs = std::filesystem;

// Parameters of a dense Llama from its hyper-parameters alone (no tensor table).
uint64_t llama_params(const HParams& hp, bool tied) {
  const uint64_t d = static_cast<uint64_t>(hp.dim), q = static_cast<uint64_t>(hp.q_dim()),
                 kv = static_cast<uint64_t>(hp.kv_dim()), f = static_cast<uint64_t>(hp.ffn_dim),
                 v = static_cast<uint64_t>(hp.n_vocab);
  const uint64_t layer = d * q + 2 * d * kv + q * d + 3 * d * f + 2 * d;
  return static_cast<uint64_t>(hp.n_layers) * layer + v * d * (tied ? 1 : 2) + d;
}

TEST(ModelCost, Stories260KCountsEveryParameterAndByteOfTheFile) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  auto f = GGUFFile::open(test::data_file("models/stories260K.gguf").string());
  const ModelCost c = ModelCost::from_gguf(*f);
  // The golden README: dim 64, 5 layers, 8 heads (4 KV), head 8, FFN 172, vocab 512, all F32,
  // separate output matrix.
  const uint64_t layer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 172 + 2 * 64;
  EXPECT_EQ(c.params, 5 * layer + 2 * 512 * 64 + 64);
  EXPECT_EQ(c.params, 292800u);
  EXPECT_EQ(c.active_params, c.params);
  EXPECT_DOUBLE_EQ(c.bytes, 4.0 * static_cast<double>(c.params));
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_FALSE(c.tied);
  EXPECT_EQ(c.kv_elems_per_layer, 2 * 4 * 8);
  EXPECT_DOUBLE_EQ(c.kv_bytes(0, 5, 1, 100), 5.0 * 100 * 64 * 4);
  // Every layer holds the same bytes; a tensor-parallel half holds half.
  EXPECT_DOUBLE_EQ(total(c.layer_bytes[0]), 4.0 * layer);
  EXPECT_DOUBLE_EQ(c.held_bytes(0, 5, 2, false, false), 4.0 * 5 * layer / 2);
}

TEST(ModelCost, EveryGoldenFileMatchesItsHyperParametersAndItsDataSection) {
  ORCHARD_REQUIRE_DATA();
  std::vector<fs::path> files = {test::data_file("models/stories260K.gguf"),
                                 test::data_file("golden/stories260K.Q8_0.gguf"),
                                 test::data_file("golden/stories260K.Q4_0.gguf")};
  for (const auto& e : fs::directory_iterator(test::data_file("golden/quant")))
    if (e.path().extension() == ".gguf") files.push_back(e.path());
  ASSERT_GT(files.size(), 10u);
  for (const fs::path& p : files) {
    SCOPED_TRACE(p.string());
    auto f = GGUFFile::open(p.string());
    const HParams hp = HParams::from_gguf(*f);
    const ModelCost c = ModelCost::from_gguf(*f);
    EXPECT_EQ(c.params, llama_params(hp, c.tied));
    // Bytes: each tensor's blocks, and together the data section less its alignment padding.
    double blocks = 0;
    for (const GGUFTensorInfo& t : f->tensors()) {
      const TypeInfo& ti = type_info(t.type);
      blocks += static_cast<double>(t.n_elements() / ti.block_elems) * static_cast<double>(ti.block_bytes);
    }
    EXPECT_DOUBLE_EQ(c.bytes, blocks);
    const double section = static_cast<double>(f->file_size() - f->data_offset());
    EXPECT_LE(c.bytes, section);
    EXPECT_LT(section - c.bytes, static_cast<double>(f->alignment() * f->tensors().size()));
    // Held by layer, embeddings and head adds up to the whole.
    EXPECT_NEAR(c.held_bytes(0, c.n_layers, 1, true, true), c.bytes, 1e-6 * c.bytes);
  }
}

TEST(ModelCost, AShapeGivesTheSameCountsAsTheFileWrittenInThatShape) {
  const fs::path dir = fs::temp_directory_path() / ("orchard-cost-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "small.gguf").string();
  const auto& shape = orchard::model_shape("tiny");
  write_synthetic_model(shape, DType::Q8_0, 1, path);
  auto f = GGUFFile::open(path);
  const ModelCost from_file = ModelCost::from_gguf(*f);
  ModelSpec s;
  s.name = "tiny";
  s.n_layers = shape.n_layers;
  s.dim = shape.dim;
  s.n_heads = shape.n_heads;
  s.n_kv_heads = shape.n_kv_heads;
  s.head_dim = shape.dim / shape.n_heads;
  s.ffn_dim = shape.ffn_dim;
  s.n_vocab = shape.n_vocab;
  s.tied_embeddings = from_file.tied;
  s.type = DType::Q8_0;
  const ModelCost from_spec = ModelCost::from_shape(s);
  EXPECT_EQ(from_spec.params, from_file.params);
  EXPECT_DOUBLE_EQ(from_spec.bytes, from_file.bytes);
  EXPECT_DOUBLE_EQ(total(from_spec.layer_bytes[1]), total(from_file.layer_bytes[1]));
  EXPECT_DOUBLE_EQ(from_spec.flops_per_token(0, s.n_layers, 10, true), from_file.flops_per_token(0, s.n_layers, 10, true));
  fs::remove_all(dir);
}

// A MoE model's header for cost tests: only shapes and types matter, so every tensor is F32
// zeros.
GGUFWriter moe_header(const std::string& arch, int layers, int dim, int heads, int kv_heads, int experts, int used) {
  GGUFWriter w;
  w.set_string("general.architecture", arch);
  w.set_u32(arch + ".block_count", static_cast<uint32_t>(layers));
  w.set_u32(arch + ".embedding_length", static_cast<uint32_t>(dim));
  w.set_u32(arch + ".attention.head_count", static_cast<uint32_t>(heads));
  w.set_u32(arch + ".attention.head_count_kv", static_cast<uint32_t>(kv_heads));
  w.set_u32(arch + ".expert_count", static_cast<uint32_t>(experts));
  w.set_u32(arch + ".expert_used_count", static_cast<uint32_t>(used));
  return w;
}

void add_f32(GGUFWriter& w, const std::string& name, std::vector<int64_t> ne) {
  int64_t n = 1;
  for (int64_t x : ne) n *= x;
  w.add_tensor(name, DType::F32, ne, std::vector<uint8_t>(static_cast<size_t>(n) * 4));
}

TEST(ModelCost, MixtureOfExpertsCountsOnlyTheExpertsATokenUses) {
  // A two-layer MoE header: 8 experts, 2 used.
  GGUFWriter w = moe_header("qwen3moe", 2, 64, 4, 2, 8, 2);
  auto add = [&](const std::string& name, std::vector<int64_t> ne) { add_f32(w, name, std::move(ne)); };
  add("token_embd.weight", {64, 100});
  add("output.weight", {64, 100});
  add("output_norm.weight", {64});
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_q.weight", {64, 64});
    add(p + "attn_k.weight", {64, 32});
    add(p + "attn_v.weight", {64, 32});
    add(p + "attn_output.weight", {64, 64});
    add(p + "ffn_gate_inp.weight", {64, 8});
    add(p + "ffn_gate_exps.weight", {64, 16, 8});
    add(p + "ffn_up_exps.weight", {64, 16, 8});
    add(p + "ffn_down_exps.weight", {16, 64, 8});
  }
  const auto bytes = w.to_bytes();
  auto f = GGUFFile::from_memory(bytes, "moe");
  const ModelCost c = ModelCost::from_gguf(*f);
  const uint64_t attn = 64 * 64 * 2 + 64 * 32 * 2, router = 64 * 8, experts = 3 * 64 * 16 * 8;
  EXPECT_EQ(c.params, 2 * (attn + router + experts) + 2 * 64 * 100 + 64);
  EXPECT_EQ(c.active_params, 2 * (attn + router + experts * 2 / 8) + 2 * 64 * 100 + 64);
  EXPECT_EQ(c.n_experts, 8);
  EXPECT_DOUBLE_EQ(total(c.read_per_token(0, 2, 1, false)), 4.0 * 2 * (attn + router + experts / 4));
}

TEST(ModelCost, RoutedAndSharedExpertsAreKeptApartForExpertParallelPlans) {
  // Two layers: a dense first layer, then 4 routed experts (2 used) and a shared expert.
  GGUFWriter w = moe_header("qwen2moe", 2, 32, 4, 4, 4, 2);
  auto add = [&](const std::string& name, std::vector<int64_t> ne) { add_f32(w, name, std::move(ne)); };
  add("token_embd.weight", {32, 50});
  add("output.weight", {32, 50});
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_output"}) add(p + t + ".weight", {32, 32});
    if (l == 0) {
      for (const char* t : {"ffn_gate", "ffn_up", "ffn_down"}) add(p + t + ".weight", {32, 64});
      continue;
    }
    add(p + "ffn_gate_inp.weight", {32, 4});
    for (const char* t : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) add(p + t + ".weight", {32, 16, 4});
    for (const char* t : {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"}) add(p + t + ".weight", {32, 16});
    add(p + "ffn_gate_inp_shexp.weight", {32, 1});
  }
  const auto bytes = w.to_bytes();
  auto f = GGUFFile::from_memory(bytes, "moe");
  const ModelCost c = ModelCost::from_gguf(*f);
  const double attn = 4.0 * 4 * 32 * 32, router = 4.0 * 32 * 4, experts = 4.0 * 3 * 32 * 16 * 4,
               shared = 4.0 * (3 * 32 * 16 + 32);
  EXPECT_FALSE(c.moe_layer(0));
  EXPECT_TRUE(c.moe_layer(1));
  EXPECT_EQ(c.moe_layers(0, 2), 1);
  EXPECT_DOUBLE_EQ(total(c.layer_experts[1]), experts);
  EXPECT_DOUBLE_EQ(total(c.layer_shared[1]), shared);
  EXPECT_EQ(c.layer_expert_params[1], 3u * 32 * 16 * 4);
  // Every rank reads attention and the router; the shared expert and the routed ones apart.
  EXPECT_DOUBLE_EQ(total(c.replicated_read(1)), attn + router);
  EXPECT_DOUBLE_EQ(total(c.replicated_read(0)), total(c.layer_active[0]));
  // Rank 0 of 2 holds experts 0-1, rank 1 experts 2-3, each half the shared expert's columns;
  // both the whole attention and dense layer (split 1), the embeddings and half the head.
  const double dense = 4.0 * 4 * 32 * 32 + 4.0 * 3 * 32 * 64, embed = 4.0 * 32 * 50;
  EXPECT_DOUBLE_EQ(c.expert_held_bytes(0, 2, 0, 2, 2, 1, true, true),
                   dense + attn + router + experts / 2 + shared / 2 + embed + embed / 2);
  EXPECT_DOUBLE_EQ(c.expert_held_bytes(0, 2, 2, 4, 2, 1, true, true),
                   dense + attn + router + experts / 2 + shared / 2 + embed + embed / 2);
  // Attention and dense layers split 2 ways with the experts.
  EXPECT_DOUBLE_EQ(c.expert_held_bytes(0, 2, 0, 2, 2, 2, true, true),
                   (dense + attn + router) / 2 + experts / 2 + shared / 2 + embed + embed / 2);
  // All four ranks together hold one copy of the experts and one of the head.
  double all = 0;
  for (int64_t e = 0; e < 4; ++e) all += c.expert_held_bytes(0, 2, e, e + 1, 4, 1, false, true);
  EXPECT_DOUBLE_EQ(all, 4 * (dense + attn + router) + experts + shared + embed);
  // A prompt chunk touches more experts than one token: 1 − (1 − 2/4)^3 of them for 3 tokens.
  EXPECT_DOUBLE_EQ(total(c.read_per_chunk(1, 2, 1, 3)), attn + router + shared + experts * 7 / 8);
  EXPECT_DOUBLE_EQ(total(c.read_per_chunk(1, 2, 1, 1)), total(c.read_per_token(1, 2, 1, false)));
}

TEST(ModelCost, LatentAttentionCachesTheCompressedKVAndMixedCheckpointsKeepTheirFormats) {
  const ModelCost v3 = ModelCost::from_shape(model_spec("deepseek-v3", DType::Q8_0));
  EXPECT_TRUE(v3.mla);
  EXPECT_EQ(v3.kv_elems_per_layer, 512 + 64);  // kv_lora_rank + rope dims, not heads × head size
  EXPECT_DOUBLE_EQ(v3.kv_bytes(0, 61, 1, 1000, 2), 61.0 * 1000 * 576 * 2);
  // Absorbed attention: scores over 512 + 64 and values over 512 per head and position.
  EXPECT_DOUBLE_EQ(v3.attn_flops_per_pos, 2.0 * 128 * (512 + 64 + 512));
  EXPECT_EQ(v3.moe_layers(0, 61), 58);
  EXPECT_NEAR(static_cast<double>(ModelCost::from_shape(model_spec("moe-816b", DType::Q4_0)).params), 816e9, 2e9);
  // Kimi K2 Thinking: int4 routed experts, everything else BF16.
  const ModelCost q4 = ModelCost::from_shape(model_spec("kimi-k2", DType::Q4_0));
  const ModelCost thinking = ModelCost::from_shape(model_spec("kimi-k2-thinking", DType::Q4_0));
  EXPECT_EQ(thinking.params, q4.params);
  EXPECT_EQ(thinking.layer_experts[5].count(DType::BF16), 0u);
  EXPECT_DOUBLE_EQ(total(thinking.layer_experts[5]), total(q4.layer_experts[5]));
  // The same weights at 2 bytes each instead of Q4_0's 18 per 32.
  EXPECT_NEAR(thinking.replicated_read(5).at(DType::BF16), q4.replicated_read(5).at(DType::Q4_0) * 2 * 32 / 18, 1.0);
  EXPECT_GT(thinking.bytes, q4.bytes + 10e9);
}

TEST(ModelCost, TheSlowestRankOfAnExpertGroupIsExpectedOverTheRouting) {
  // One rank does all the work.
  EXPECT_DOUBLE_EQ(expected_slowest({8}, 2, {1.5}, {0.25}), 1.5 + 2 * 0.25);
  // 2 of 4 experts over two ranks of 2: both on one rank with probability 2/6, else one each.
  EXPECT_NEAR(expected_slowest({2, 2}, 2, {0, 0}, {1, 1}), 2.0 * 2 / 6 + 1.0 * 4 / 6, 1e-12);
  // Rank 0 also runs a shared expert (0.5): (2,0) → 2.5, (1,1) → 1.5, (0,2) → 2.
  EXPECT_NEAR(expected_slowest({2, 2}, 2, {0.5, 0}, {1, 1}), (2.5 + 4 * 1.5 + 2) / 6, 1e-12);
  // Eight of 256 experts over four ranks: more than the mean of 2 land on the busiest.
  const double busiest = expected_slowest({64, 64, 64, 64}, 8, {0, 0, 0, 0}, {1, 1, 1, 1});
  EXPECT_GT(busiest, 3.0);
  EXPECT_LT(busiest, 4.5);
  // Unequal shares load the larger rank.
  EXPECT_GT(expected_slowest({128, 64, 32, 32}, 8, {0, 0, 0, 0}, {1, 1, 1, 1}), busiest);
}

TEST(ModelCost, KnownShapesMatchTheirPublishedSizes) {
  struct Case {
    const char* name;
    double params, active;
  } cases[] = {{"llama-2-7b", 6.74e9, 6.74e9},     {"llama-3.1-8b", 8.03e9, 8.03e9},
               {"llama-3.3-70b", 70.6e9, 70.6e9},  {"llama-3.1-405b", 405.9e9, 405.9e9},
               {"deepseek-v3", 671e9, 37e9},       {"kimi-k2", 1.04e12, 32.9e9},
               {"qwen3-235b-a22b", 235e9, 22e9},   {"qwen3-30b-a3b", 30.5e9, 3.3e9}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const ModelCost c = ModelCost::from_shape(model_spec(k.name, DType::F16));
    EXPECT_NEAR(static_cast<double>(c.params), k.params, 0.03 * k.params);
    EXPECT_NEAR(static_cast<double>(c.active_params), k.active, 0.10 * k.active);
    EXPECT_NEAR(c.bytes, 2.0 * static_cast<double>(c.params), 0.01 * c.bytes);  // F16 but norms F32
  }
  const ModelCost sized = ModelCost::from_shape(model_spec("70B", DType::Q4_0));
  EXPECT_NEAR(static_cast<double>(sized.params), 70e9, 0.05 * 70e9);
  EXPECT_THROW(model_spec("no-such-model", DType::Q4_0), Error);
}

TEST(Catalog, BuiltinCarriesTheMachinesAndLinksTheIssueNames) {
  const Catalog& c = Catalog::builtin();
  EXPECT_TRUE(c.machine("m3-ultra").rdma);
  EXPECT_EQ(c.machine("m3-ultra").thunderbolt, 5);
  EXPECT_EQ(c.machine("m4").thunderbolt, 4);  // Mac mini M4: Thunderbolt 4
  EXPECT_EQ(c.machine("m4-pro").thunderbolt, 5);
  EXPECT_FALSE(c.machine("m4").rdma);
  for (const char* id : {"m1", "m1-pro", "m1-max", "m1-ultra", "m2-ultra", "m3-max", "m4-max", "m5"})
    EXPECT_GT(c.machine(id).mem_bw_gbs, 0) << id;
  EXPECT_LT(c.link("tb5-rdma").latency_us, 50);
  EXPECT_GE(c.link("tb5-tcp").latency_us, 100);
  try {
    c.machine("m9-mega");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m3-ultra"), std::string::npos) << e.what();
  }
  // Two cables double bandwidth and leave latency alone.
  ClusterLink one{c.link("tb5-rdma"), 1}, two{c.link("tb5-rdma"), 2};
  EXPECT_DOUBLE_EQ(two.gbs(), 2 * one.gbs());
  EXPECT_DOUBLE_EQ(two.latency_us(), one.latency_us());
}

TEST(Catalog, MeasuredNodeRoundTripsThroughJson) {
  MachineSpec m;
  m.id = "box";
  m.measured = true;
  m.cores = 8;
  m.memory_gib = {64};
  m.membw_gbs.at_count = {{1, 20}, {8, 80}};
  m.matvec_gbs[DType::Q4_0].at_count = {{1, 15}, {8, 70}};
  m.local_allsum["shm"][2] = LinkFit{2, 10, 4, 3};
  const MachineSpec back = machine_from_json(machine_to_json(m), "test");
  EXPECT_EQ(back.cores, 8);
  EXPECT_DOUBLE_EQ(back.matvec_gbs.at(DType::Q4_0).at(8), 70);
  EXPECT_DOUBLE_EQ(back.local_allsum.at("shm").at(2).hop_us, 3);
  // Between measured counts the rate is interpolated; below, scaled; above, saturated.
  EXPECT_DOUBLE_EQ(back.membw_gbs.at(4), 20 + 60.0 * 3 / 7);
  EXPECT_DOUBLE_EQ(back.membw_gbs.at(16), 80);
  EXPECT_THROW(machine_from_json(nlohmann::json{{"id", "x"}}, "test"), Error);  // no memory
  // A count written as a huge float is refused by name (nlohmann's get<int>() would cast it: UB).
  try {
    machine_from_json(nlohmann::json::parse(R"({"id": "x", "memory_gib": [64], "gpu_cores": 1e54})"), "test");
    ADD_FAILURE() << "accepted gpu_cores 1e54";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpu_cores"), std::string::npos) << e.what();
  }
}

TEST(Memory, ComputedSizesSaturateInsteadOfOverflowing) {
  EXPECT_EQ(saturating_u64(1536.7), 1536u);
  EXPECT_EQ(saturating_u64(-5), 0u);
  EXPECT_EQ(saturating_u64(std::nan("")), 0u);
  EXPECT_EQ(saturating_u64(4.07508e20), UINT64_MAX);  // node_register_fuzz's model, 810 M wide
  EXPECT_EQ(saturating_u64(18446744073709551616.0), UINT64_MAX);
  EXPECT_EQ(format_size(2.5 * 1024 * 1024 * 1024), format_bytes(uint64_t{5} << 29));
}

TEST(Cluster, FileExpandsCountsAndRefusesBadInput) {
  const Catalog& cat = Catalog::builtin();
  const ClusterSpec c = ClusterSpec::parse(
      R"({"nodes": [{"machine": "m3-ultra", "memory_gib": 512, "count": 2}, {"machine": "m3-ultra:256", "count": 2}],
          "link": {"type": "tb5-rdma", "cables": 2}, "price_kwh": 0.2})",
      ".", cat);
  ASSERT_EQ(c.nodes.size(), 4u);
  EXPECT_EQ(c.nodes[0].name, "m3-ultra-1");
  EXPECT_DOUBLE_EQ(c.nodes[3].memory_gib, 256);
  EXPECT_DOUBLE_EQ(c.link.gbs(), 2 * cat.link("tb5-rdma").gbs);
  EXPECT_DOUBLE_EQ(c.price_kwh, 0.2);
  EXPECT_NE(c.describe().find("2 × Apple M3 Ultra 512 GiB"), std::string::npos) << c.describe();
  auto refused = [&](const std::string& text, const std::string& says) {
    try {
      ClusterSpec::parse(text, ".", cat);
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused("{", "not valid JSON");
  refused(R"({"nodes": []})", "non-empty");
  refused(R"({"nodes": [{"machine": "m9"}]})", "unknown machine");
  refused(R"({"nodes": [{"machine": "m4"}, {"machine": "m4"}]})", "link");
  refused(R"({"nodes": [{"machine": "m4", "ranks": 0}]})", "ranks");
  refused(R"({"nodes": [{"file": "/nonexistent/node.json"}]})", "cannot open");
  refused(R"({"nodes": [{"machine": 5}]})", "cluster file");
  refused(R"({"nodes": [{"machine": "m4", "ranks": 1e300}]})", "ranks");
  refused(R"({"nodes": [{"machine": "m4"}], "local": {"extra_latency_us": 5e129}})", "extra_latency_us");
  refused(R"({"nodes": [{"machine": "m4"}], "price_kwh": -1})", "price_kwh");
}

ClusterSpec pair(const std::string& machine, const std::string& link, int n = 2) {
  ClusterSpec c;
  for (int i = 0; i < n; ++i) c.nodes.push_back(catalog_node(Catalog::builtin(), machine));
  c.link.spec = Catalog::builtin().link(link);
  return c;
}

TEST(Planner, TensorOnLowLatencyLinksPipelineOnHighLatencyOnes) {
  // 405B in Q4_0 (~230 GB) fits on neither 256 GiB machine alone (192 GiB usable each).
  const ModelCost m = ModelCost::from_shape(model_spec("llama-3.1-405b", DType::Q4_0));
  const PredictOptions o;
  const Prediction rdma = choose_plan(m, pair("m3-ultra:256", "tb5-rdma"), o);
  EXPECT_EQ(rdma.candidate.label(), "tensor 2");
  const Prediction wifi = choose_plan(m, pair("m3-ultra:256", "wifi6"), o);
  EXPECT_EQ(wifi.candidate.label(), "pipeline 2");
  // The communication term is what separates them.
  EXPECT_GT(wifi.comm_s, 0);
  const auto plans = rank_plans(m, pair("m3-ultra:256", "wifi6"), o);
  for (const Prediction& p : plans)
    if (p.candidate.label() == "tensor 2") {
      EXPECT_GT(p.comm_s, 10 * rdma.comm_s);
    }
  // A model that fits on one machine runs on one when the link is slow.
  const ModelCost small = ModelCost::from_shape(model_spec("llama-3.1-8b", DType::Q4_0));
  EXPECT_EQ(choose_plan(small, pair("m4-pro", "wifi6"), o).candidate.label(), "single");
  EXPECT_EQ(choose_plan(small, pair("m4-pro", "tb5-rdma"), o).candidate.label(), "tensor 2");
}

TEST(Planner, RefusesWhenNothingFitsNamingTheShortfall) {
  const ModelCost m = ModelCost::from_shape(model_spec("kimi-k2", DType::Q4_0));
  try {
    choose_plan(m, pair("m4-pro:64", "tb5-rdma"), PredictOptions{});
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("nothing fits"), std::string::npos) << what;
    EXPECT_NE(what.find("short by"), std::string::npos) << what;
    EXPECT_NE(what.find("needs"), std::string::npos) << what;
  }
  // Four 512 GiB M3 Ultras hold it.
  const Prediction p = choose_plan(m, pair("m3-ultra:512", "tb5-rdma", 4), PredictOptions{});
  EXPECT_TRUE(p.fits);
  EXPECT_GE(p.candidate.n_nodes, 2);
}

TEST(Planner, PredictionsMoveTheWayThePhysicsSays) {
  const ModelCost m = ModelCost::from_shape(model_spec("llama-3.3-70b", DType::Q4_0));
  PredictOptions o;
  ClusterSpec fast = pair("m2-ultra:192", "tb5-rdma"), slow = pair("m2-ultra:192", "tb4-tcp");
  Candidate single{Kind::kPipeline, 1, 1, 1}, tensor{Kind::kTensor, 1, 2, 2}, pipe{Kind::kPipeline, 2, 1, 2};
  const Prediction s = predict(m, fast, single, o), tf = predict(m, fast, tensor, o), ts = predict(m, slow, tensor, o);
  const Prediction pf = predict(m, fast, pipe, o);
  EXPECT_EQ(s.comm_s, 0);
  EXPECT_EQ(s.exchanged_bytes, 0);
  // Tensor: each of 2 ranks sends 2 partial sums of 8192 floats per layer and its vocabulary
  // slice; pipeline: one hop of 8192 floats.
  EXPECT_DOUBLE_EQ(tf.exchanged_bytes, 2 * (2.0 * 80 * 8192 * 4 + 4.0 * (128256 / 2)));
  EXPECT_DOUBLE_EQ(predict(m, fast, pipe, o).exchanged_bytes, 8192.0 * 4);
  EXPECT_GT(tf.tg_tps, s.tg_tps);          // half the bytes each, cheap syncs
  EXPECT_LT(ts.tg_tps, tf.tg_tps);         // same split, slower link
  EXPECT_NEAR(pf.compute_s, s.compute_s, 0.02 * s.compute_s);  // stages take turns
  EXPECT_LT(pf.memory[0].need, 0.6 * s.memory[0].need);       // but each holds half
  // Generation is memory-bound: time per token ≈ bytes / (bandwidth × efficiency) plus a fixed
  // cost per layer (KV reads at this context are a small extra).
  const MachineSpec& u = Catalog::builtin().machine("m2-ultra");
  const double bytes = total(m.read_per_token(0, m.n_layers, 1, true));
  EXPECT_NEAR(s.token_s, bytes / (u.mem_bw_gbs * 1e9 * u.gen_efficiency) + 80 * u.layer_overhead_us * 1e-6,
              0.03 * s.token_s);
  // Energy from the catalog's power figures; a longer context costs KV memory.
  EXPECT_TRUE(std::isfinite(s.joules_per_token));
  EXPECT_GT(s.joules_per_token, 0);
  o.n_ctx = 65536;
  const Prediction long_ctx = predict(m, fast, single, o);
  EXPECT_GT(long_ctx.memory[0].need, s.memory[0].need + 10e9);
  // A cache of halves holds the same context in half the KV bytes.
  o.kv_type = KVType::F16;
  EXPECT_NEAR(long_ctx.memory[0].need - predict(m, fast, single, o).memory[0].need, m.kv_bytes(0, 80, 1, 65536) / 2,
              1e6);
  o.kv_type = KVType::F32;
  EXPECT_THROW(predict(m, fast, Candidate{Kind::kTensor, 1, 4, 2}, o), Error);  // 2 ranks, not 4
}

TEST(Planner, ExpertPlansHoldTheReplicatedPartAndAShareOfTheExperts) {
  const ModelCost m = ModelCost::from_shape(model_spec("deepseek-v3", DType::Q4_0));
  const ClusterSpec four = pair("m3-ultra:256", "tb5-rdma", 4);
  PredictOptions o;
  const Prediction ex = predict(m, four, Candidate{Kind::kExpert, 1, 4, 4}, o);
  EXPECT_EQ(ex.candidate.label(), "expert 4");
  EXPECT_TRUE(ex.unsupported.empty());
  // Apart from the KV cache and scratch (the same on every rank), each machine holds a quarter
  // of everything: attention and dense layers split by heads and columns (128 KV heads), a
  // quarter of the routed experts and of the shared experts' columns; the head split four
  // ways, the embeddings whole.
  double split = total(m.embed_bytes) + total(m.head_bytes) / 4;
  for (int64_t l = 0; l < m.n_layers; ++l) split += total(m.layer_bytes[static_cast<size_t>(l)]) / 4;
  const double extra = ex.memory[1].need - split;
  EXPECT_GT(extra, m.kv_bytes(0, m.n_layers, 1, o.n_ctx));  // the whole latent cache: every head reads it
  EXPECT_LT(extra, m.kv_bytes(0, m.n_layers, 1, o.n_ctx) + 2e9);
  EXPECT_DOUBLE_EQ(ex.memory[0].need, ex.memory[1].need);
  EXPECT_DOUBLE_EQ(ex.memory[2].need, ex.memory[3].need);
  // A longer context costs each rank the whole cache, a tensor rank too (latent attention).
  o.n_ctx = 32768;
  const Prediction ex_long = predict(m, four, Candidate{Kind::kExpert, 1, 4, 4}, o);
  EXPECT_NEAR(ex_long.memory[1].need - ex.memory[1].need, m.kv_bytes(0, m.n_layers, 1, 32768 - 4096), 1e6);
  o.n_ctx = 4096;
  // Communication: attention and FFN each end in an all_sum of the hidden state, as in tensor
  // parallel, and the vocabulary is gathered.
  EXPECT_DOUBLE_EQ(ex.exchanged_bytes, 4 * (2 * 61.0 * 7168 * 4 + 4.0 * (129280 / 4)));
  const Prediction tp = predict(m, four, Candidate{Kind::kTensor, 1, 4, 4}, o);
  EXPECT_GT(ex.comm_s, 0);
  EXPECT_DOUBLE_EQ(ex.comm_s, tp.comm_s);
  EXPECT_TRUE(tp.unsupported.empty());  // tensor ranks split every expert's columns
  // ... and so each reads a quarter of every chosen expert: less than the busiest expert rank.
  EXPECT_LT(tp.compute_s, ex.compute_s);
  // Kept whole (fewer KV heads than ranks), attention is summed with the experts once per MoE
  // layer.
  ModelSpec few = model_spec("deepseek-v3", DType::Q4_0);
  few.n_kv_heads = 2;
  const Prediction whole = predict(ModelCost::from_shape(few), four, Candidate{Kind::kExpert, 1, 4, 4}, o);
  EXPECT_DOUBLE_EQ(whole.exchanged_bytes, 4 * (58.0 * 7168 * 4 + 4.0 * (129280 / 4)));
  EXPECT_GT(whole.memory[1].need, ex.memory[1].need);
  // Each token reads the replicated part plus the busiest rank's experts: more than a quarter
  // of the active bytes, less than all of them.
  const Prediction one = predict(m, pair("m3-ultra:512", "tb5-rdma", 1), Candidate{}, o);
  EXPECT_LT(ex.compute_s, 0.8 * one.compute_s);
  EXPECT_GT(ex.compute_s, 0.25 * one.compute_s);
  // Fewer machines than experts only: a dense model has none to split.
  const ModelCost dense = ModelCost::from_shape(model_spec("llama-3.3-70b", DType::Q4_0));
  EXPECT_THROW(predict(dense, four, Candidate{Kind::kExpert, 1, 4, 4}, o), Error);
  for (const Prediction& p : rank_plans(dense, four, o)) EXPECT_NE(p.candidate.kind, Kind::kExpert);
}

TEST(Planner, SplitExpertsForLatentAttentionOnFastLinksPipelineOnSlowOnes) {
  // DeepSeek V3 in Q4_0 (~360 GiB) on four 256 GiB M3 Ultras: the choice is between splitting
  // each layer (tensor: every expert's columns; expert: whole experts spread, the heads split
  // either way) and splitting the layers. Both layer splits exchange the same sums; tensor ranks
  // share a token's experts evenly where whole experts leave the layer to the busiest rank.
  const ModelCost m = ModelCost::from_shape(model_spec("deepseek-v3", DType::Q4_0));
  const PredictOptions o;
  const Prediction rdma = choose_plan(m, pair("m3-ultra:256", "tb5-rdma", 4), o);
  EXPECT_EQ(rdma.candidate.label(), "tensor 4");
  EXPECT_TRUE(rdma.unsupported.empty());
  const auto plans = rank_plans(m, pair("m3-ultra:256", "tb5-rdma", 4), o);
  ASSERT_FALSE(plans.empty());
  EXPECT_EQ(plans.front().candidate.label(), "tensor 4");
  const auto expert4 = std::find_if(plans.begin(), plans.end(), [](const Prediction& p) { return p.candidate.label() == "expert 4"; });
  ASSERT_NE(expert4, plans.end());
  EXPECT_LT(expert4->tg_tps, plans.front().tg_tps);
  // One 10 GbE hop per layer still pays; 300 µs of TCP over Thunderbolt does not.
  EXPECT_EQ(choose_plan(m, pair("m3-ultra:256", "eth-10g", 4), o).candidate.kind, Kind::kTensor);
  EXPECT_EQ(choose_plan(m, pair("m3-ultra:256", "tb5-tcp", 4), o).candidate.kind, Kind::kPipeline);
  // The catalog's per-MoE-layer cost is charged once per MoE layer per token.
  ClusterSpec free_moe = pair("m3-ultra:512", "tb5-rdma", 1);
  free_moe.nodes[0].machine.moe_layer_overhead_us = 0;
  const Prediction with = predict(m, pair("m3-ultra:512", "tb5-rdma", 1), Candidate{}, o);
  const Prediction without = predict(m, free_moe, Candidate{}, o);
  EXPECT_NEAR(with.token_s - without.token_s,
              58 * Catalog::builtin().machine("m3-ultra").moe_layer_overhead_us * 1e-6, 1e-9);
}

TEST(Planner, MeasuredNodesShareTheirCoresBetweenRanks) {
  MachineSpec box;
  box.id = "box";
  box.measured = true;
  box.cores = 2;
  box.memory_gib = {16};
  box.matvec_gbs[DType::F32].at_count = {{1, 10}, {2, 16}};
  box.membw_gbs.at_count = {{1, 10}, {2, 16}};
  box.local_allsum["shm"][2] = LinkFit{1, 5, 2, 2};
  box.local_allsum["shm"][4] = LinkFit{10, 2, 40, 40};
  ClusterSpec one;
  one.nodes.push_back(NodeSpec{"box", box, 16, 1, 1});
  ClusterSpec two = one, four = one;
  two.nodes[0].ranks = 2;
  four.nodes[0].ranks = 4;
  ModelSpec s = model_spec("llama-2-7b", DType::F32);
  s.n_vocab = 1000;
  const ModelCost m = ModelCost::from_shape(s);
  PredictOptions o;
  o.n_ctx = 256;
  const Prediction alone = predict(m, one, Candidate{Kind::kPipeline, 1, 1, 1}, o);
  const Prediction t2 = predict(m, two, Candidate{Kind::kTensor, 1, 2, 1}, o);
  const Prediction t4 = predict(m, four, Candidate{Kind::kTensor, 1, 4, 1}, o);
  const Prediction p4 = predict(m, four, Candidate{Kind::kPipeline, 4, 1, 1}, o);
  // Two ranks on two cores stream at the 2-thread rate; four ranks cannot do better.
  EXPECT_NEAR(t2.compute_s, alone.compute_s * 10 / 16, 0.02 * alone.compute_s);
  EXPECT_NEAR(t4.compute_s, t2.compute_s, 0.02 * t2.compute_s);
  EXPECT_GT(t4.comm_s, t2.comm_s);  // oversubscribed syncs cost more (measured 40 µs vs 2)
  EXPECT_NEAR(p4.compute_s, alone.compute_s, 0.02 * alone.compute_s);
  EXPECT_FALSE(std::isfinite(alone.joules_per_token));  // no power figures measured
  // Emulated latency adds to every local message.
  ClusterSpec slow = two;
  slow.local_extra_latency_us = 300;
  const Prediction t2slow = predict(m, slow, Candidate{Kind::kTensor, 1, 2, 1}, o);
  EXPECT_NEAR(t2slow.comm_s - t2.comm_s, (2 * 32 + 1 + 1) * 300e-6, 1e-5);
}

TEST(Planner, EveryRankGetsTheSameAutomaticChoice) {
  const fs::path dir = fs::temp_directory_path() / ("orchard-auto-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "tiny.gguf").string();
  write_synthetic_model(orchard::model_shape("tiny"), DType::Q8_0, 1, path);
  std::vector<AutoChoice> got(2);
  dist::testing::run_ranks("tcp", 2, [&](dist::Group& g) {
    got[static_cast<size_t>(g.rank())] = choose_split(g, path, {}, 1, PredictOptions{});
  });
  EXPECT_EQ(got[0].kind, got[1].kind);
  EXPECT_EQ(got[0].tp, got[1].tp);
  EXPECT_NE(got[0].why.find("planner chose"), std::string::npos);
  // A bad model path fails every rank instead of leaving the others waiting.
  EXPECT_THROW(dist::testing::run_ranks("tcp", 2, [&](dist::Group& g) {
                 choose_split(g, (dir / "missing.gguf").string(), {}, 1, PredictOptions{});
               }),
               Error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace orchard::parallel
