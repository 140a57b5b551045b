// `orchard bench` as a user runs it: llama-bench's table, the roofline table, clear refusals.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "cli/cli_run.h"

namespace orchard {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() { return fs::temp_directory_path() / ("orchard-bench-" + std::to_string(getpid())); }

// Models made once for the suite, removed after it.
class Bench : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { fs::remove_all(temp_dir()); }
};

fs::path tiny_model(const std::string& type) {
  const fs::path d = temp_dir();
  fs::create_directories(d);
  const fs::path model = d / ("tiny-" + type + ".gguf");
  if (!fs::exists(model)) {
    const Out mk = run("make-model --shape tiny --type " + type + " -o " + model.string());
    EXPECT_EQ(mk.code, 0) << mk.err;
  }
  return model;
}

TEST_F(Bench, PrintsPromptAndGenerationRowsAndTheRooflineOfEachRepetition) {
  const fs::path model = tiny_model("Q4_0");
  const Out b = run("bench -m " + model.string() + " -p 8 -n 4 -r 3 -t 1 --roofline");
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_NE(b.out.find("| threads | test | t/s (median of 3) | stddev |"), std::string::npos) << b.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(b.out, m, std::regex(R"(\| 1 \| pp8 \| ([0-9.]+) \|)"))) << b.out;
  EXPECT_GT(std::stod(m[1]), 0.0);
  ASSERT_TRUE(std::regex_search(b.out, m, std::regex(R"(\| 1 \| tg4 \| ([0-9.]+) \| [0-9.]+ \|)"))) << b.out;
  const double tg = std::stod(m[1]);
  EXPECT_GT(tg, 0.0);

  // Bytes per token: every matrix once plus one embedding row, so less than the file and more
  // than half of it (the embedding table is a small share of the tiny shape).
  ASSERT_TRUE(std::regex_search(b.out, m, std::regex(R"(roofline: ([0-9.]+) MB of weights read per generated token)")))
      << b.out;
  const double mb = std::stod(m[1]);
  const double file_mb = static_cast<double>(fs::file_size(model)) / 1e6;
  EXPECT_LT(mb, file_mb);
  EXPECT_GT(mb, 0.5 * file_mb);

  // | threads | test | t/s | weights GB/s | read GB/s | share (median, range) |
  ASSERT_TRUE(std::regex_search(
      b.out, m, std::regex(R"(\| 1 \| tg4 \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9]+) % \(([0-9]+)–([0-9]+) %\) \|)")))
      << b.out;
  EXPECT_DOUBLE_EQ(std::stod(m[1]), tg);  // the same median as the first table's
  // weights GB/s = bytes per token × tokens per second, each printed rounded
  const double expect = mb * tg / 1000.0;
  EXPECT_NEAR(std::stod(m[2]), expect, 0.051 + expect * (0.0051 / mb + 0.0051 / tg));
  EXPECT_GT(std::stod(m[3]), 0.0);
  const int share = std::stoi(m[4]), lo = std::stoi(m[5]), hi = std::stoi(m[6]);
  EXPECT_GT(share, 0);
  EXPECT_LE(lo, share);
  EXPECT_LE(share, hi);
}

TEST_F(Bench, WithoutRooflineThereIsNoRooflineTable) {
  const Out b = run("bench -m " + tiny_model("Q8_0").string() + " -p 0 -n 2 -r 1 -t 1");
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_NE(b.out.find("| 1 | tg2 |"), std::string::npos) << b.out;
  EXPECT_EQ(b.out.find("pp"), std::string::npos) << b.out;  // -p 0 skips prompt processing
  EXPECT_EQ(b.out.find("roofline"), std::string::npos) << b.out;
}

TEST_F(Bench, RefusesZeroRepetitionsAndAMissingModel) {
  const Out zero = run("bench -m " + tiny_model("Q8_0").string() + " -r 0");
  EXPECT_NE(zero.code, 0);
  EXPECT_NE(zero.err.find("--repetitions"), std::string::npos) << zero.err;
  const Out missing = run("bench -m /nonexistent/model.gguf");
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.err.find("/nonexistent/model.gguf"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace orchard
