// `orchard plan` as a user runs it: catalog listing, ranked plans for described clusters, a
// clear refusal when nothing fits, calibration into a node file, and `orchard run` choosing
// its split with the planner.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "test_data.h"

namespace orchard {
namespace {

namespace fs = std::filesystem;

TEST(Plan, ListShowsMachinesLinksAndShapes) {
  const Out r = run("plan --list");
  EXPECT_EQ(r.code, 0) << r.err;
  for (const char* s : {"m3-ultra", "m4-pro", "tb5-rdma", "wifi6", "kimi-k2"}) EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

TEST(Plan, RanksSplitsOfAModelNotOnDiskAndExplainsTheChoice) {
  const Out r = run("plan --params kimi-k2 --type Q4_0 --machine m3-ultra:512 --nodes 4 --link tb5-rdma --explain");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| tensor 4 | 4 | yes |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| single | 1 | no |"), std::string::npos) << r.out;  // ~580 GB > 384 GiB usable
  EXPECT_NE(r.out.find("chosen:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("communication"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("J per token"), std::string::npos) << r.out;
  // --json carries the same plans for programs.
  const Out j = run("plan --params llama-3.1-8b --machine m4-pro --nodes 2 --link tb5-tcp --json");
  ASSERT_EQ(j.code, 0) << j.err;
  const auto plans = nlohmann::json::parse(j.out);
  ASSERT_GE(plans.size(), 3u);
  EXPECT_TRUE(plans[0]["fits"].get<bool>());
  EXPECT_GT(plans[0]["tg_tokens_per_s"].get<double>(), plans[plans.size() - 1]["tg_tokens_per_s"].get<double>());
}

TEST(Plan, RefusesWhenNothingFitsAndRejectsBadClusterFiles) {
  const Out r = run("plan --params kimi-k2 --machine m4-pro:64 --nodes 2 --link tb5-rdma");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("nothing fits"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("short by"), std::string::npos) << r.err;
  const fs::path dir = fs::path(::testing::TempDir()) / ("orchard-plan-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "bad.json") << R"({"nodes": [{"machine": "m4"}, {"machine": "m4"}]})";
  const Out bad = run("plan --params 7B --cluster " + (dir / "bad.json").string());
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("link"), std::string::npos) << bad.err;
  const Out none = run("plan --params 7B --node " + (dir / "absent.json").string());
  EXPECT_NE(none.code, 0);
  EXPECT_NE(none.err.find("--calibrate"), std::string::npos) << none.err;
  fs::remove_all(dir);
}

TEST(Plan, CalibrationWritesANodeFileThatPlansAndRunsUse) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  const fs::path dir = fs::path(::testing::TempDir()) / ("orchard-cal-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string node = (dir / "node.json").string();
  const Out cal = run("plan --calibrate -o " + node + " --calibrate-types Q8_0 --calibrate-ranks 2 --seconds 0.02");
  ASSERT_EQ(cal.code, 0) << cal.err;
  const auto j = nlohmann::json::parse(std::ifstream(node));
  EXPECT_TRUE(j["measured"].get<bool>());
  EXPECT_GT(j["matvec_gbs"]["Q8_0"]["1"].get<double>(), 0);
  EXPECT_GT(j["local_allsum"]["shm"]["2"]["hop_us"].get<double>(), 0);
  const std::string model = test::data_file("models/stories260K.gguf").string();
  const Out plan = run("plan -m " + model + " --node " + node + " --ranks 2 -t 1 --explain");
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_NE(plan.out.find("| pipeline 2 |"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("| tensor 2 |"), std::string::npos) << plan.out;
  // orchard run without --parallel asks the planner, and the text is the single process's.
  const std::string common = " -m " + model + " -p 'The little dog' -n 24 --temp 0 -t 1 -c 256";
  const Out single = run("generate" + common);
  ASSERT_EQ(single.code, 0) << single.err;
  ::setenv("ORCHARD_NODE_FILE", node.c_str(), 1);
  const Out chosen = run("run --nodes 2" + common);
  ::unsetenv("ORCHARD_NODE_FILE");
  EXPECT_EQ(chosen.code, 0) << chosen.err;
  EXPECT_EQ(chosen.out, single.out);
  EXPECT_NE(chosen.err.find("planner chose"), std::string::npos) << chosen.err;
  EXPECT_NE(chosen.err.find(node), std::string::npos) << chosen.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace orchard
