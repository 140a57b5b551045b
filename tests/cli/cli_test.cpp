// The `orchard` command as a user runs it: exit codes, help, streamed text, clear errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "test_data.h"

namespace orchard {
namespace {

namespace fs = std::filesystem;

struct CmdResult {
  int code;
  std::string out;  // stdout and stderr together
};

CmdResult run_merged(const std::string& args) {
  const std::string cmd = test::orchard_binary() + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, ""};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

fs::path cli_temp_dir() {
  fs::path d = fs::temp_directory_path() / ("orchard-cli-" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

TEST(Cli, HelpListsSubcommandsAndEachHasHelp) {
  CmdResult r = run_merged("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* sub : {"generate", "info", "perplexity", "make-model"}) {
    EXPECT_NE(r.out.find(sub), std::string::npos) << sub;
    CmdResult h = run_merged(std::string(sub) + " --help");
    EXPECT_EQ(h.code, 0) << sub;
    EXPECT_NE(h.out.find("OPTIONS"), std::string::npos) << h.out;
  }
}

// Cluster members compare this string: it must be the project's version, not a stale copy.
TEST(Cli, VersionIsTheProjectsVersion) {
  CmdResult r = run_merged("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, std::string("orchard ") + ORCHARD_PROJECT_VERSION + "\n");
}

TEST(Cli, ClusterCommandsHaveHelpAndStatusNamesAMissingAgent) {
  for (const char* sub : {"cluster --help", "cluster up --help", "cluster status --help"}) {
    CmdResult h = run_merged(sub);
    EXPECT_EQ(h.code, 0) << sub;
    EXPECT_NE(h.out.find("OPTIONS"), std::string::npos) << h.out;
  }
  CmdResult none = run_merged("cluster status --port 1");
  EXPECT_NE(none.code, 0);
  EXPECT_NE(none.out.find("no agent answers on 127.0.0.1:1 (start one with `orchard cluster up`)"), std::string::npos)
      << none.out;
  CmdResult nosecret = run_merged("cluster up --port 0 --probe-port 0 --interface lo");
  EXPECT_NE(nosecret.code, 0);
  EXPECT_NE(nosecret.out.find("a secret is needed"), std::string::npos) << nosecret.out;
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  CmdResult open = run_merged("cluster up --secret s --interface lo --api-host 0.0.0.0 -m " +
                              test::data_file("models/stories260K.gguf").string());
  EXPECT_NE(open.code, 0);
  EXPECT_NE(open.out.find("--api-host 0.0.0.0 serves beyond this machine: give --api-key-file FILE"),
            std::string::npos)
      << open.out;
}

TEST(Cli, UnknownSubcommandFails) {
  EXPECT_NE(run_merged("frobnicate").code, 0);
  EXPECT_NE(run_merged("").code, 0);
}

// Greedy 64 tokens of stories260K after "Once upon a time" with `extra` options, checked against
// llama.cpp's text in `golden` (a file under golden/); returns the run_merged for further checks.
CmdResult expect_greedy_golden(const std::string& extra, const std::string& golden) {
  const auto model = test::data_file("models/stories260K.gguf").string();
  CmdResult r = run_merged("generate -m " + model + " -p 'Once upon a time' -n 64 --temp 0 -t 1" + extra);
  EXPECT_EQ(r.code, 0) << r.out;
  std::ifstream in(test::data_file("golden/" + golden));
  auto g = nlohmann::json::parse(in);
  EXPECT_NE(r.out.find("Once upon a time" + g["generated_text"].get<std::string>()), std::string::npos)
      << r.out;
  return r;
}

TEST(Cli, GenerateStreamsGoldenTextAndStats) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  CmdResult r = expect_greedy_golden("", "stories260K.once_upon_a_time.greedy64.kvf32.json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("generation 64 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos);
}

// --kv-type f16 runs with a cache of halves (llama.cpp's f16-KV greedy text); anything but f16
// or f32 is refused naming the value.
TEST(Cli, KvTypeTakesF16OrF32AndNamesABadValue) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  expect_greedy_golden(" --kv-type f16", "stories260K.once_upon_a_time.greedy64.kvf16.json");
  const auto model = test::data_file("models/stories260K.gguf").string();
  CmdResult bad = run_merged("generate -m " + model + " -n 2 --kv-type f17");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("'f17' is not f32 or f16"), std::string::npos) << bad.out;
}

TEST(Cli, InfoPrintsMetadataAndTensors) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  CmdResult r = run_merged("info " + test::data_file("models/stories260K.gguf").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("llama.embedding_length"), std::string::npos);
  EXPECT_NE(r.out.find("token_embd.weight"), std::string::npos);
}

TEST(Cli, CorruptOrMissingModelGivesClearErrorAndNonZeroExit) {
  const fs::path d = cli_temp_dir();
  const fs::path bad = d / "bad.gguf";
  std::ofstream(bad) << "GGUF this is not a model";
  CmdResult r = run_merged("generate -m " + bad.string() + " -n 4");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("bad.gguf"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("terminate"), std::string::npos) << r.out;  // no uncaught exception
  CmdResult m = run_merged("info " + (d / "missing.gguf").string());
  EXPECT_NE(m.code, 0);
  EXPECT_NE(m.out.find("missing.gguf"), std::string::npos) << m.out;
  fs::remove_all(d);
}

TEST(Cli, MakeModelThenGenerateSaysTextIsMeaningless) {
  const fs::path d = cli_temp_dir();
  const fs::path model = d / "tiny.gguf";
  CmdResult mk = run_merged("make-model --shape tiny --type Q4_0 -o " + model.string());
  ASSERT_EQ(mk.code, 0) << mk.out;
  EXPECT_NE(mk.out.find("meaningless"), std::string::npos);
  CmdResult g = run_merged("generate -m " + model.string() + " -p 'the water' -n 8 --seed 3");
  EXPECT_EQ(g.code, 0) << g.out;
  EXPECT_NE(g.out.find("generation 8 tokens"), std::string::npos) << g.out;
  CmdResult bad = run_merged("make-model --shape nope -o " + (d / "x.gguf").string());
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("unknown model shape 'nope'"), std::string::npos) << bad.out;
  fs::remove_all(d);
}

TEST(Cli, DefaultModelIsBuiltInWhenNoneGiven) {
  const fs::path d = cli_temp_dir();
  // CmdResult with a private home so the test never touches the user's cache.
  const std::string env = "ORCHARD_HOME=" + (d / "home").string() + " ";
  const std::string cmd = env + test::orchard_binary() + " generate -n 4 -p 'the' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 0) << out;
  EXPECT_NE(out.find("built-in synthetic model"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(d / "home" / "models" / "orchard-tiny-Q8_0.gguf"));
  fs::remove_all(d);
}

TEST(Cli, PerplexityMatchesGolden) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  CmdResult r = run_merged("perplexity -m " + test::data_file("models/stories260K.gguf").string() + " -f " +
              test::data_file("golden/stories260K.ppl_text.txt").string() + " -c 128");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PPL = 4.02"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace orchard
