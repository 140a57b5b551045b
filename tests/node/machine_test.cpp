// The lending policy: dedicated lends always; when-idle only under the load threshold and inside
// the window (which may span midnight); a malformed window is an error naming it.
#include "node/machine.h"

#include <gtest/gtest.h>

#include "tensor/error.h"

namespace orchard::node {
namespace {

constexpr int at(int h, int m) { return h * 60 + m; }

TEST(LendingPolicy, DedicatedLendsWhateverTheLoadAndTime) {
  LendingPolicy p;
  p.mode = network::Lending::Dedicated;
  p.set_window("22:00-07:00");
  EXPECT_EQ(p.refusal(3.0, at(12, 0)), "");
  EXPECT_EQ(p.refusal(std::nullopt, at(12, 0)), "");
}

TEST(LendingPolicy, WhenIdleFollowsTheLoadThreshold) {
  LendingPolicy p;
  p.max_load = 0.5;
  EXPECT_EQ(p.refusal(0.2, at(12, 0)), "");
  EXPECT_EQ(p.refusal(0.5, at(12, 0)), "");
  EXPECT_NE(p.refusal(0.9, at(12, 0)).find("0.90 per core is above 0.50"), std::string::npos);
  EXPECT_NE(p.refusal(std::nullopt, at(12, 0)), "");  // unknown load is not idle
}

TEST(LendingPolicy, AWindowSpanningMidnight) {
  LendingPolicy p;
  p.set_window("22:00-07:00");
  EXPECT_EQ(p.refusal(0.0, at(23, 30)), "");
  EXPECT_EQ(p.refusal(0.0, at(3, 0)), "");
  EXPECT_EQ(p.refusal(0.0, at(22, 0)), "");
  EXPECT_NE(p.refusal(0.0, at(7, 0)).find("outside the lending window 22:00-07:00"), std::string::npos);
  EXPECT_NE(p.refusal(0.0, at(12, 0)), "");
  p.set_window("09:30-17:00");
  EXPECT_EQ(p.refusal(0.0, at(9, 30)), "");
  EXPECT_NE(p.refusal(0.0, at(9, 29)), "");
}

TEST(LendingPolicy, MalformedWindowsAreErrors) {
  LendingPolicy p;
  for (const char* bad : {"", "22:00", "25:00-07:00", "22:00-07:60", "10:00-10:00", "night"}) {
    try {
      p.set_window(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(Machine, DescribesThisMachine) {
  EXPECT_GT(total_memory_bytes(), 0u);
  EXPECT_GE(cpu_cores(), 1);
  EXPECT_GT(measure_bandwidth_gbs(size_t{8} << 20), 0);
  EXPECT_FALSE(host_name().empty());
}

}  // namespace
}  // namespace orchard::node
