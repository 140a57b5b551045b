// ORCHARD_LINK_LATENCY_US / ORCHARD_LINK_GBPS slow the tcp backend down as a
// slower link would. These check the injected delay is applied (a lower
// bound, which a loaded machine can only make larger), not any speed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <vector>

#include "dist_harness.h"

namespace orchard::dist {
namespace {

using Clock = std::chrono::steady_clock;

TEST(LinkEmulation, LatencyIsAddedToEveryMessage) {
  testing::run_ranks(
      "tcp", 2,
      [](Group& g) {
        std::vector<float> v(16, 1.0f);
        g.barrier();
        const auto t0 = Clock::now();
        for (int i = 0; i < 10; ++i) {
          if (g.rank() == 0) {
            g.send(v.data(), 64, 1);
            g.recv(v.data(), 64, 1);
          } else {
            g.recv(v.data(), 64, 0);
            g.send(v.data(), 64, 0);
          }
        }
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        EXPECT_GE(ms, 20 * 2.0) << "20 one-way messages at 2 ms each";
      },
      [](Config& c) { c.link_latency_us = 2000; });
}

TEST(LinkEmulation, BandwidthCapStretchesLargeMessages) {
  // The ranks are threads of this process: the receiver times from the moment the sender
  // starts, not from its own way out of the barrier, which may come later (by ~8 ms once under
  // ASan on two busy cores) and shorten what it sees.
  std::atomic<Clock::rep> send_start{0};
  testing::run_ranks(
      "tcp", 2,
      [&](Group& g) {
        std::vector<uint8_t> buf(1 << 20, 7);
        g.barrier();
        if (g.rank() == 0) {
          send_start.store(Clock::now().time_since_epoch().count());
          g.send(buf.data(), buf.size(), 1);
        } else {
          g.recv(buf.data(), buf.size(), 0);
        }
        const Clock::time_point t0{Clock::duration{send_start.load()}};
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        // 1 MiB at 0.1 Gbit/s is 84 ms; the receiver waits at least that.
        if (g.rank() == 1) {
          EXPECT_GE(ms, 80.0);
        }
        EXPECT_EQ(buf[12345], 7);
      },
      [](Config& c) { c.link_gbps = 0.1; });
}

}  // namespace
}  // namespace orchard::dist
