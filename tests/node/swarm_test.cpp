// `orchard network load`'s swarm (node/swarm.h) against a real coordinator: hundreds of nodes,
// each registered with its own key and holding a long-poll, on a coordinator with four handler
// threads — where a thread-per-connection server would have starved after four — while a client's
// streamed chats are placed on the two worker nodes and come back whole.
#include "node/swarm.h"

#include <gtest/gtest.h>

#include "network/coordinator_fixture.h"
#include "network/job_store.h"

namespace orchard::node {
namespace {

TEST(Swarm, HundredsOfParkedNodePollsOnFourThreadsAndChatsStillStreamThroughWorkers) {
  network::test::RunningCoordinator c("swarm", [](network::CoordinatorOptions& o) {
    o.http_threads = 4;
    o.requests_per_minute_per_key = 0;
    o.store.heartbeat_timeout_ms = 4000;  // the swarm's polls (every second) keep its nodes alive
  });
  SwarmOptions o;
  o.port = c.port;
  o.api_key = c.api_key("swarm-client");
  o.nodes = 300;
  o.workers = 2;
  o.chats = 20;
  o.poll_wait_s = 1;
  o.settle_s = 0.5;
  const SwarmReport r = run_swarm(o);
  EXPECT_EQ(r.registered, 302);
  EXPECT_EQ(r.polling, 302) << "not every node's long-poll was open when the chats began";
  EXPECT_EQ(r.chats_ok, 20) << r.first_error;
  EXPECT_EQ(r.ttft_ms.size(), 20u);
  EXPECT_EQ(r.errors, 0) << r.first_error;
  // The coordinator saw them as nodes: every one registered in its store, the chats run by the workers.
  auto store = network::JobStore::open(c.files().jobs);
  EXPECT_EQ(store.nodes().size(), 302u);
}

TEST(Swarm, QuantileIsTheNearestRank) {
  EXPECT_EQ(quantile({}, 0.5), 0);
  EXPECT_EQ(quantile({5, 1, 3, 2, 4}, 0.5), 3);
  EXPECT_EQ(quantile({5, 1, 3, 2, 4}, 0.99), 5);
  EXPECT_EQ(quantile({5, 1, 3, 2, 4}, 0.0), 1);
}

}  // namespace
}  // namespace orchard::node
