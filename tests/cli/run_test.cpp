// `orchard run` and `orchard generate --parallel`: a model split over local ranks prints the
// same greedy text as one process, and memory budgets are honoured or refused clearly.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "cli_run.h"
#include "test_data.h"

namespace orchard {
namespace {

std::string model() { return test::data_file("models/stories260K.gguf").string(); }
std::string common() { return " -m " + model() + " -p 'The little dog' -n 48 --temp 0 -t 1 -c 256"; }

TEST(Run, EverySplitPrintsTheSingleProcessText) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  const Out single = run("generate" + common());
  ASSERT_EQ(single.code, 0) << single.err;
  ASSERT_GT(single.out.size(), 40u);
  for (const char* backend : {"shm", "tcp"})
    for (const std::string split : {"--nodes 2 --parallel pipeline", "--nodes 3 --parallel pipeline",
                                    "--nodes 2 --parallel tensor", "--nodes 4 --parallel tensor",
                                    "--nodes 4 --parallel hybrid --tp 2"}) {
      const Out r = run("run " + split + " --backend " + backend + common() + " --chunk 2");
      EXPECT_EQ(r.code, 0) << split << " " << backend << ": " << r.err;
      EXPECT_EQ(r.out, single.out) << split << " " << backend;
      EXPECT_NE(r.err.find("stats:"), std::string::npos) << r.err;
    }
}

TEST(Run, ModelLargerThanOneBudgetRunsAcrossRanksAndIsRefusedOtherwise) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  // stories260K needs ~1.6 MiB with a 256-token context; 1.2 MiB is too little for one rank
  // but two pipeline stages of ~1 MiB each fit.
  const Out alone = run("generate" + common() + " --mem 1.2M");
  EXPECT_NE(alone.code, 0);
  EXPECT_NE(alone.err.find("does not fit"), std::string::npos) << alone.err;
  EXPECT_NE(alone.err.find("budget is 1.2 MiB"), std::string::npos) << alone.err;
  const Out split = run("run --nodes 2 --parallel pipeline" + common() + " --mem 1.2M");
  EXPECT_EQ(split.code, 0) << split.err;
  EXPECT_EQ(split.out, run("generate" + common()).out);
  // Uneven budgets move layers to the bigger rank.
  const Out uneven = run("run --nodes 2 --parallel pipeline" + common() + " --mem 0.9M,2M");
  EXPECT_EQ(uneven.code, 0) << uneven.err;
  EXPECT_NE(uneven.err.find("rank 0: stage 0, layers 0-1"), std::string::npos) << uneven.err;
  // Two ranks that are both too small: refused, naming both budgets.
  const Out small = run("run --nodes 2 --parallel pipeline" + common() + " --mem 0.5M");
  EXPECT_NE(small.code, 0);
  EXPECT_NE(small.err.find("Budgets: 0.5 MiB, 0.5 MiB"), std::string::npos) << small.err;
}

TEST(Run, ParallelOutsideAJobSaysHowToStartOne) {
  const Out r = run("generate --parallel tensor -n 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("orchard run --nodes N"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace orchard
