// The rdma backend's own behaviour against the fake verbs: errors from the
// fabric surface as CommErrors naming the peer, and the flow control never
// overruns a receive ring however large the message.
#include <gtest/gtest.h>

#include <vector>

#include "dist/rdma/fake_verbs.h"
#include "dist_harness.h"

namespace orchard::dist {
namespace {

TEST(RdmaFake, MessagesLargerThanTheRingArriveIntact) {
  testing::run_ranks("rdma-fake", 2, [](Group& g) {
    // 5 MiB through 1 MiB rings, both directions at once (an all_gather).
    std::vector<uint32_t> mine(5 << 18), all(2 * mine.size());
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<uint32_t>(i * 2654435761u + g.rank());
    g.all_gather(mine.data(), all.data(), mine.size() * 4);
    for (int r = 0; r < 2; ++r)
      for (size_t i = 0; i < mine.size(); i += 4099)
        ASSERT_EQ(all[r * mine.size() + i], static_cast<uint32_t>(i * 2654435761u + r));
  });
}

TEST(RdmaFake, BrokenLinkFailsWithTheWriteErrorInsteadOfHanging) {
  rdma::fake_reset();
  try {
    testing::run_ranks("rdma-fake", 2, [&](Group& g) {
      std::vector<float> v(1000, 1.0f);
      g.all_sum(v.data(), v.size());
      g.barrier();
      // From here every RDMA write fails, as when a cable is pulled.
      if (g.rank() == 0) rdma::fake_break_links();
      for (int i = 0; i < 100; ++i) g.all_sum(v.data(), v.size());
    });
    ADD_FAILURE() << "collectives over broken links succeeded";
  } catch (const CommError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(msg.find("RDMA write failed: transport retry counter exceeded") != std::string::npos ||
                msg.find("left the group") != std::string::npos || msg.find("closed its connection") != std::string::npos)
        << msg;
  }
  rdma::fake_reset();
}

}  // namespace
}  // namespace orchard::dist
