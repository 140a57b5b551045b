// `orchard bench` as a user runs it: llama-bench's table, the roofline table, clear refusals.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_run.h"

namespace orchard {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() { return fs::temp_directory_path() / ("orchard-bench-" + std::to_string(getpid())); }

// The cells of every table row of `out` whose first two cells are `threads` and `test`.
std::vector<std::vector<std::string>> rows(const std::string& out, const std::string& threads, const std::string& test) {
  std::vector<std::vector<std::string>> found;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '|') continue;
    std::vector<std::string> cells;
    std::istringstream parts(line.substr(1));
    for (std::string cell; std::getline(parts, cell, '|');) {
      const size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
    }
    if (cells.size() >= 2 && cells[0] == threads && cells[1] == test) found.push_back(cells);
  }
  return found;
}

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
  const auto pp = rows(b.out, "1", "pp8");
  ASSERT_EQ(pp.size(), 1u) << b.out;
  EXPECT_GT(std::stod(pp[0][2]), 0.0);
  const auto tg = rows(b.out, "1", "tg4");  // the speed table's row, then the roofline table's
  ASSERT_EQ(tg.size(), 2u) << b.out;
  const double tps = std::stod(tg[0][2]);
  EXPECT_GT(tps, 0.0);

  // Bytes per token: every matrix once plus one embedding row, so less than the file and more
  // than half of it (the embedding table is a small share of the tiny shape).
  const std::string key = "roofline: ";
  const size_t at = b.out.find(key);
  ASSERT_NE(at, std::string::npos) << b.out;
  const double mb = std::stod(b.out.substr(at + key.size()));
  EXPECT_NE(b.out.find(" MB of weights read per generated token", at), std::string::npos) << b.out;
  const double file_mb = static_cast<double>(fs::file_size(model)) / 1e6;
  EXPECT_LT(mb, file_mb);
  EXPECT_GT(mb, 0.5 * file_mb);

  // | threads | test | t/s | weights GB/s | read GB/s | share (median, range) |
  const std::vector<std::string>& roof = tg[1];
  ASSERT_EQ(roof.size(), 6u) << b.out;
  EXPECT_DOUBLE_EQ(std::stod(roof[2]), tps);  // the same median as the first table's
  // weights GB/s = bytes per token × tokens per second, each printed rounded
  const double expect = mb * tps / 1000.0;
  EXPECT_NEAR(std::stod(roof[3]), expect, 0.051 + expect * (0.0051 / mb + 0.0051 / tps));
  EXPECT_GT(std::stod(roof[4]), 0.0);
  int share = -1, lo = -1, hi = -1;
  ASSERT_EQ(std::sscanf(roof[5].c_str(), "%d %% (%d–%d %%)", &share, &lo, &hi), 3) << roof[5];
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

// Joules per token from the CPU package's energy counter: here a file in RAPL's layout that a
// thread advances while the benchmark runs (0.2 J every 2 ms: at most 100 W), and no counter.
TEST_F(Bench, ReportsJoulesPerTokenFromTheEnergyCounterOrSaysUnavailable) {
  const fs::path model = tiny_model("Q8_0");
  const fs::path dir = temp_dir() / "powercap";
  fs::create_directories(dir);
  const fs::path counter = dir / "energy_uj";
  std::atomic<bool> done{false};
  std::thread ticking([&] {
    for (uint64_t uj = 0; !done; uj += 200'000) {
      std::ofstream(dir / "energy_uj.tmp") << uj << "\n";
      fs::rename(dir / "energy_uj.tmp", counter);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  setenv("ORCHARD_ENERGY_FILE", counter.c_str(), 1);
  const Out b = run("bench -m " + model.string() + " -p 256 -n 64 -r 3 -t 1");
  done = true;
  ticking.join();
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_NE(b.out.find("| stddev | J/token |"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("energy: CPU package counter " + counter.string()), std::string::npos) << b.out;
  for (const char* test : {"pp256", "tg64"}) {
    const auto r = rows(b.out, "1", test);
    ASSERT_EQ(r.size(), 1u) << b.out;
    ASSERT_EQ(r[0].size(), 5u) << b.out;
    // J/token = watts / (tokens/s). The counter runs at most 100 W (less when the ticking
    // thread oversleeps on a busy host), and each repetition may see one tick more; joules are
    // summed over the 3 repetitions and set against the median repetition's speed, which on a
    // loaded host differs from the mean by tens of percent, so the bound allows half as much
    // again; a unit or counter mistake is off by far more. The prompt is long enough (several
    // ms at most speeds) that the counter moves at all.
    const double j = std::stod(r[0][4]), tps = std::stod(r[0][2]), tick = 0.2 / 64;
    EXPECT_LE(j, 100.0 / tps * 1.5 + tick) << b.out;
    EXPECT_GT(j, 0.0) << b.out;
  }

  setenv("ORCHARD_ENERGY_FILE", "/nonexistent/energy_uj", 1);
  const Out none = run("bench -m " + model.string() + " -p 0 -n 2 -r 1 -t 1");
  unsetenv("ORCHARD_ENERGY_FILE");
  ASSERT_EQ(none.code, 0) << none.err;
  const auto r = rows(none.out, "1", "tg2");
  ASSERT_EQ(r.size(), 1u) << none.out;
  EXPECT_EQ(r[0][4], "unavailable");
  EXPECT_NE(none.out.find("energy: unavailable: /nonexistent/energy_uj cannot be read"), std::string::npos) << none.out;
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

namespace orchard {
namespace {

// `orchard bench comm` times both collectives on every backend asked for: a header and one row
// per size each, the all_to_all sizes whole blocks per rank.
TEST(BenchComm, AllSumAndAllToAllRowsForEachBackend) {
  const Out r = run("bench comm --backend tcp,shm -n 2 --min-bytes 1K --max-bytes 4K --iters 3");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* backend : {"tcp", "shm"})
    for (const char* op : {"all_sum", "all_to_all"}) {
      const std::string header = std::string("# ") + op + " f32 | backend " + backend + " | 2 ranks";
      const size_t at = r.out.find(header);
      ASSERT_NE(at, std::string::npos) << header << "\n" << r.out;
      std::istringstream lines(r.out.substr(at));
      std::string line;
      std::getline(lines, line);  // the header
      std::getline(lines, line);  // the column names
      for (const char* bytes : {"1024", "2048", "4096"}) {
        ASSERT_TRUE(std::getline(lines, line)) << header;
        std::istringstream cells(line);
        std::string first;
        double elements = 0, us = 0;
        cells >> first >> elements >> us;
        EXPECT_EQ(first, bytes) << header << ": " << line;
        EXPECT_EQ(elements, std::stod(bytes) / 4) << line;
        EXPECT_GT(us, 0) << line;
      }
    }
  const Out bad = run("bench comm --backend tcp -n 2 --op all_gather --max-bytes 8");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("all_gather"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace orchard
