// The node side of the wire protocol: what a node reads from the coordinator round-trips, and
// a reply that would make it misbehave is an orchard::Error naming the field.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "network/protocol_names.h"
#include "tensor/error.h"

namespace orchard::network {
namespace {

using nlohmann::json;

Work sample_work() {
  Work w;
  w.job_id = "job-7";
  w.attempt = 2;
  w.model = "small-8b";
  w.request = {{"api", kCompletionsApi}, {"body", {{"prompt", "Hi"}}}};
  w.n_ctx = 64;
  w.max_tokens = 16;
  w.output = {"Hel", "lo"};
  w.output_tokens = {{5, 6}, {7}};
  w.lease_deadline_ms = 123456;
  w.plan = "single";
  return w;
}

TEST(Protocol, WorkRoundTrips) {
  const Work back = work_from_json(to_json(sample_work()));
  EXPECT_EQ(back.job_id, "job-7");
  EXPECT_EQ(back.attempt, 2);
  EXPECT_EQ(back.max_tokens, 16);
  EXPECT_EQ(back.output, (std::vector<std::string>{"Hel", "lo"}));
  EXPECT_EQ(back.output_tokens, (std::vector<std::vector<int32_t>>{{5, 6}, {7}}));
  EXPECT_EQ(back.plan, "single");
  EXPECT_EQ(to_json(back), to_json(sample_work()));
}

TEST(Protocol, RefusesWorkThatDoesNotAddUpNamingTheField) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& j) { j["max_tokens"] = -5; }, "max_tokens"},
      {[](json& j) { j["max_tokens"] = 0; }, "max_tokens"},
      {[](json& j) { j["max_tokens"] = 65; }, "max_tokens"},  // more than the context
      {[](json& j) { j["n_ctx"] = 0; }, "n_ctx"},
      // Floats where integers belong: out of range, or not whole, never a wild cast.
      {[](json& j) { j["attempt"] = 1e54; }, "'attempt' is out of range"},
      {[](json& j) { j["max_tokens"] = 2.5; }, "'max_tokens' has the wrong type"},
      {[](json& j) { j["output"][0]["tokens"] = json::array({1, 1e10}); }, "'tokens' is out of range"},
      {[](json& j) { j["output"][1]["index"] = 0; }, "out of order"},
      {[](json& j) { j.erase("lease_deadline_ms"); }, "'lease_deadline_ms' is missing"},
  };
  for (const auto& [edit, says] : cases) {
    json j = to_json(sample_work());
    edit(j);
    try {
      work_from_json(j);
      ADD_FAILURE() << "accepted " << j.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what() << " (wanted " << says << ")";
    }
  }
}

}  // namespace
}  // namespace orchard::network
