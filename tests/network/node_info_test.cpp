// What a node reports: the JSON round trip, and malformed descriptions refused with the field.
#include "network/protocol_names.h"

#include <gtest/gtest.h>

#include <functional>

#include "network/nodes_fixture.h"
#include "tensor/error.h"

namespace orchard::network {
namespace {

using nlohmann::json;
using namespace orchard::network::testing;

json pair_json() {
  return json::parse(R"({
    "id": "studio-pair", "owner": "alice", "hardware": "workstation",
    "machines": [{"name": "studio-1", "chip": "m3-ultra", "memory_bytes": 274877906944, "mem_bw_gbs": 819, "cores": 32},
                 {"name": "studio-2", "chip": "m3-ultra", "memory_bytes": 274877906944, "mem_bw_gbs": 819, "cores": 32}],
    "group": {"members": ["studio-2", "studio-1"], "link": "tb5-rdma", "latency_us": 12, "gbs": 5},
    "models": [{"name": "llama-70b", "file_bytes": 39969475584, "type": "q4_0",
                "shape": {"layers": 80, "dim": 8192, "heads": 64, "kv_heads": 8, "ffn_dim": 28672, "vocab": 128256}},
               {"name": "llama-8b", "spec": "llama-3.1-8b", "type": "q8_0"}],
    "max_context": 32768, "max_jobs": 2, "lending": "dedicated", "load": 0.25, "status": "draining"})");
}

// The message of the error parsing `j` throws ("" when it parses).
std::string error_of(const json& j) {
  try {
    node_info_from_json(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NodeInfo, ReadsAGroupAndRoundTrips) {
  const NodeInfo n = node_info_from_json(pair_json());
  EXPECT_EQ(n.id, "studio-pair");
  EXPECT_EQ(n.hardware, HardwareClass::Workstation);
  ASSERT_EQ(n.machines.size(), 2u);
  EXPECT_EQ(n.machines[1].memory_bytes, 274877906944u);
  ASSERT_TRUE(n.group);
  EXPECT_EQ(n.group->link, "tb5-rdma");
  EXPECT_DOUBLE_EQ(n.group->latency_us, 12);
  ASSERT_NE(n.find_model("llama-70b"), nullptr);
  EXPECT_EQ(n.find_model("llama-70b")->shape.n_layers, 80);
  EXPECT_EQ(n.find_model("llama-70b")->shape.head_dim, 128);  // dim / heads when not given
  EXPECT_EQ(n.find_model("llama-8b")->shape.n_kv_heads, 8);   // from the planner's table
  EXPECT_EQ(n.find_model("llama-8b")->shape.type, DType::Q8_0);
  EXPECT_EQ(n.lending, Lending::Dedicated);
  EXPECT_EQ(n.max_jobs, 2);
  EXPECT_DOUBLE_EQ(n.state.load, 0.25);
  EXPECT_EQ(n.state.status, NodeStatus::Draining);
  EXPECT_EQ(to_json(node_info_from_json(to_json(n))), to_json(n));
  EXPECT_EQ(to_json(n)["models"][1]["spec"], "llama-3.1-8b");
}

TEST(NodeInfo, DefaultsForTheOptionalFields) {
  const NodeInfo n = parse_node_info(
      R"({"id": "laptop", "owner": "bob", "machines": [{"name": "m", "memory_bytes": 17179869184, "mem_bw_gbs": 60,
          "cores": 8}], "models": [], "max_context": 8192})");
  EXPECT_EQ(n.hardware, HardwareClass::Laptop);  // never priced above what it claimed
  EXPECT_EQ(n.lending, Lending::WhenIdle);
  EXPECT_EQ(n.max_jobs, 1);
  EXPECT_EQ(n.state.status, NodeStatus::Available);
  EXPECT_FALSE(n.group);
}

// A model's content hash travels with its description, and an absent one stays absent.
TEST(NodeInfo, AModelsSha256RoundTrips) {
  NodeInfo n = node_info_from_json(pair_json());
  ASSERT_FALSE(n.models.empty());
  EXPECT_TRUE(n.models[0].sha256.empty());
  n.models[0].sha256 = std::string(64, 'e');
  const NodeInfo back = node_info_from_json(to_json(n));
  EXPECT_EQ(back.models[0].sha256, std::string(64, 'e'));
  EXPECT_FALSE(to_json(node_info_from_json(pair_json()))["models"][0].contains("sha256"));
}

// A region is a country of the world map's (its centroid) or a point rounded to whole degrees;
// a node's description carries it, rounded to 0.1°, never more precise.
TEST(NodeInfo, ARegionIsACountryOrACoarsePointAndRoundTrips) {
  ASSERT_EQ(protocol::countries().size(), 177u);
  const protocol::Region de = protocol::parse_region("germany");
  EXPECT_EQ(de.name, "Germany");
  EXPECT_NEAR(de.lat, 51.2, 1);
  EXPECT_NEAR(de.lon, 10.4, 1);
  EXPECT_EQ(protocol::parse_region("United States of America").name, "United States of America");
  const protocol::Region sydney = protocol::parse_region("-33.87,151.21");
  EXPECT_EQ(sydney.name, "34°S 151°E");
  EXPECT_EQ(sydney.lat, -34);
  EXPECT_EQ(sydney.lon, 151);
  EXPECT_EQ(protocol::parse_region("40.4,-3.7").name, "40°N 4°W");
  for (const char* bad : {"Atlantis", "91,0", "10,181", "1,", ",2", "1,2,3", "nan,1", ""})
    EXPECT_THROW(protocol::parse_region(bad), Error) << bad;
  NodeInfo n = node_info_from_json(pair_json());
  EXPECT_FALSE(n.region);
  EXPECT_FALSE(to_json(n).contains("region"));
  n.region = protocol::Region{"Somewhere", 12.3456, -45.6789};
  const NodeInfo back = node_info_from_json(to_json(n));
  ASSERT_TRUE(back.region);
  EXPECT_EQ(back.region->name, "Somewhere");
  EXPECT_DOUBLE_EQ(back.region->lat, 12.3);
  EXPECT_DOUBLE_EQ(back.region->lon, -45.7);
}

TEST(NodeInfo, RefusesMalformedDescriptionsNamingTheField) {
  struct Case {
    std::string what;
    std::function<void(json&)> edit;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"missing memory", [](json& j) { j["machines"][1].erase("memory_bytes"); },
       "node 'studio-pair': machines[1].memory_bytes: missing"},
      {"negative memory", [](json& j) { j["machines"][0]["memory_bytes"] = -5; },
       "machines[0].memory_bytes: expected a positive integer"},
      {"text bandwidth", [](json& j) { j["machines"][0]["mem_bw_gbs"] = "fast"; }, "machines[0].mem_bw_gbs: expected a number"},
      {"no group", [](json& j) { j.erase("group"); }, "group: missing: several machines form one node only as a cabled group"},
      {"group members", [](json& j) { j["group"]["members"] = {"studio-1", "elsewhere"}; },
       "group.members: must name exactly the node's machines"},
      {"unknown link unmeasured", [](json& j) { j["group"] = {{"members", {"studio-1", "studio-2"}}, {"link", "pigeon"}}; },
       "group.latency_us: missing"},
      {"duplicate machine", [](json& j) { j["machines"][1]["name"] = "studio-1"; }, "machines[1].name: 'studio-1' names two machines"},
      {"unknown spec", [](json& j) { j["models"][1]["spec"] = "gpt-17"; }, "models[1].spec:"},
      {"short sha256", [](json& j) { j["models"][0]["sha256"] = "abc"; }, "models[0].sha256: expected 64 lowercase hex digits"},
      {"upper-case sha256", [](json& j) { j["models"][0]["sha256"] = std::string(64, 'A'); },
       "models[0].sha256: expected 64 lowercase hex digits"},
      {"both shape and spec", [](json& j) { j["models"][1]["shape"] = j["models"][0]["shape"]; }, "models[1]: expected exactly one of"},
      {"bad type", [](json& j) { j["models"][0]["type"] = "q3_banana"; }, "models[0].type: 'q3_banana' is not a weight format"},
      {"kv heads above heads", [](json& j) { j["models"][0]["shape"]["kv_heads"] = 65; }, "models[0].shape.kv_heads"},
      {"load above one", [](json& j) { j["load"] = 1.5; }, "load: expected a number in [0, 1]"},
      {"bad status", [](json& j) { j["status"] = "asleep"; }, "status: expected one of 'available', 'busy', 'draining'"},
      {"bad lending", [](json& j) { j["lending"] = "sometimes"; }, "lending: expected one of 'dedicated', 'when-idle'"},
      {"no owner", [](json& j) { j.erase("owner"); }, "node 'studio-pair': owner: missing"},
      {"empty id", [](json& j) { j["id"] = ""; }, "node: id: expected a non-empty string"},
      {"not an object", [](json& j) { j = json::array(); }, "node: expected a JSON object"},
      {"region off the globe", [](json& j) { j["region"] = {{"name", "Atlantis"}, {"lat", 91}, {"lon", 0}}; },
       "region.lat: expected a number in [-90, 90]"},
      {"region without a name", [](json& j) { j["region"] = {{"lat", 1}, {"lon", 2}}; }, "region.name: missing"},
      {"region with a control character", [](json& j) { j["region"] = {{"name", "a\nb"}, {"lat", 1}, {"lon", 2}}; },
       "region: region.name: control characters"},
  };
  for (const Case& c : cases) {
    json j = pair_json();
    c.edit(j);
    const std::string e = error_of(j);
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.what << ": " << e;
  }
  try {
    parse_node_info("{\"id\": ");
    FAIL() << "parsed broken JSON";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
}

TEST(NodeInfo, HeartbeatRoundTripsAndRefusesBadValues) {
  const HeartbeatState h = heartbeat_from_json(json::parse(R"({"load": 0.5, "status": "busy", "running": ["job-1"]})"));
  EXPECT_DOUBLE_EQ(h.load, 0.5);
  EXPECT_EQ(h.status, NodeStatus::Busy);
  ASSERT_TRUE(h.running);
  EXPECT_EQ(*h.running, std::vector<std::string>{"job-1"});
  EXPECT_EQ(to_json(heartbeat_from_json(to_json(h))), to_json(h));
  EXPECT_FALSE(heartbeat_from_json(json::object()).running);
  EXPECT_THROW(heartbeat_from_json(json::parse(R"({"load": -1})")), Error);
  EXPECT_THROW(heartbeat_from_json(json::parse(R"({"running": [3]})")), Error);
}

TEST(NodeInfo, FixtureNodesAreValid) {
  EXPECT_EQ(to_json(node_info_from_json(to_json(group("pair", 3, 48, 200)))), to_json(group("pair", 3, 48, 200)));
  EXPECT_EQ(error_of(to_json(single("one", 16, 100))), "");
}

}  // namespace
}  // namespace orchard::network
