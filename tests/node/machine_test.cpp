// The lending policy: dedicated lends always; when-idle only under the load threshold, inside
// the window (which may span midnight) and, with --idle-after, once the user has been away long
// enough; a malformed window or duration is an error naming it.
#include "node/machine.h"

#include <gtest/gtest.h>

#include "tensor/error.h"

namespace orchard::node {
namespace {

constexpr int at(int h, int m) { return h * 60 + m; }

// Each text in `bad` must be refused by `set` with an error that quotes it.
template <class Set>
void expect_refused(std::initializer_list<const char*> bad, Set set) {
  for (const char* text : bad) {
    try {
      set(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + text + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(LendingPolicy, DedicatedLendsWhateverTheLoadAndTime) {
  LendingPolicy p;
  p.mode = protocol::Lending::Dedicated;
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
  expect_refused({"", "22:00", "25:00-07:00", "22:00-07:60", "10:00-10:00", "night"},
                 [&](const char* t) { p.set_window(t); });
}

TEST(LendingPolicy, IdleAfterWaitsForTheUserToBeAwayLongEnough) {
  LendingPolicy p;
  p.max_load = 0.5;
  p.set_idle_after("5m");
  EXPECT_EQ(p.idle_after_ms, 300'000);
  EXPECT_EQ(p.refusal(0.1, at(12, 0), 301'000), "");
  EXPECT_NE(p.refusal(0.1, at(12, 0), 12'000).find("the user was active 12s ago (lending after 300s without input)"),
            std::string::npos);
  EXPECT_TRUE(p.user_is_active(12'000));
  EXPECT_FALSE(p.user_is_active(301'000));
  // Unknown activity is not idleness; load still counts once the user is away.
  EXPECT_NE(p.refusal(0.1, at(12, 0), std::nullopt).find("cannot tell when the user was last active"), std::string::npos);
  EXPECT_TRUE(p.user_is_active(std::nullopt));
  EXPECT_NE(p.refusal(0.9, at(12, 0), 301'000).find("above 0.50"), std::string::npos);
  // Dedicated ignores the user; without --idle-after the user is not consulted.
  p.mode = protocol::Lending::Dedicated;
  EXPECT_EQ(p.refusal(0.1, at(12, 0), 0), "");
  EXPECT_FALSE(p.user_is_active(0));
  LendingPolicy plain;
  EXPECT_EQ(plain.refusal(0.1, at(12, 0), 0), "");
  EXPECT_FALSE(plain.user_is_active(std::nullopt));
}

TEST(LendingPolicy, IdleAfterDurations) {
  LendingPolicy p;
  p.set_idle_after("90s");
  EXPECT_EQ(p.idle_after_ms, 90'000);
  p.set_idle_after("1h");
  EXPECT_EQ(p.idle_after_ms, 3'600'000);
  p.set_idle_after("300");
  EXPECT_EQ(p.idle_after_ms, 300'000);
  p.set_idle_after("2.5m");
  EXPECT_EQ(p.idle_after_ms, 150'000);
  expect_refused({"", "soon", "5x", "-1m", "5 m", "5mm"}, [&](const char* t) { p.set_idle_after(t); });
}

TEST(Machine, DescribesThisMachine) {
  EXPECT_GT(total_memory_bytes(), 0u);
  EXPECT_GE(cpu_cores(), 1);
  EXPECT_GT(measure_bandwidth_gbs(size_t{8} << 20), 0);
  EXPECT_FALSE(host_name().empty());
}

}  // namespace
}  // namespace orchard::node
