// The leader's orders to cluster members: what they carry, that only the secret signs them, and
// the backend a job runs over.
#include <gtest/gtest.h>

#include <functional>

#include "serve/cluster_job.h"
#include "tensor/error.h"

namespace orchard::serve {
namespace {

JobOrder sample_order() {
  JobOrder o;
  o.job = "cluster-0a1b2c3d4e5f";
  o.leader = "00112233aabbccdd";
  o.rank = 2;
  o.size = 4;
  o.coordinator = "10.240.1.1:52183";
  o.host = "10.240.1.2";
  o.routes = {{0, "10.240.1.1"}, {1, "10.240.3.1"}, {3, "10.240.5.2"}};
  o.kind = "pipeline";
  o.backend = "rdma";
  o.tp = 0;
  o.model_bytes = 1185376;
  o.issued_ms = 1796673681000;
  return o;
}

TEST(JobOrder, RoundTripsThroughJson) {
  const JobOrder a = sample_order();
  const JobOrder b = JobOrder::from_json(nlohmann::json::parse(a.to_json().dump()));
  EXPECT_EQ(b.job, a.job);
  EXPECT_EQ(b.leader, a.leader);
  EXPECT_EQ(b.rank, 2);
  EXPECT_EQ(b.size, 4);
  EXPECT_EQ(b.coordinator, a.coordinator);
  EXPECT_EQ(b.host, a.host);
  EXPECT_EQ(b.routes, a.routes);
  EXPECT_EQ(b.kind, "pipeline");
  EXPECT_EQ(b.backend, "rdma");
  EXPECT_EQ(b.model_bytes, a.model_bytes);
  EXPECT_EQ(b.issued_ms, a.issued_ms);
}

TEST(JobOrder, MalformedOrdersAreRefusedByField) {
  auto error = [](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json j = sample_order().to_json();
    change(j);
    try {
      JobOrder::from_json(j);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error([](nlohmann::json& j) { j.erase("rank"); }), "job order: missing \"rank\"");
  EXPECT_EQ(error([](nlohmann::json& j) { j["size"] = "four"; }), "job order: \"size\" has the wrong type");
  EXPECT_EQ(error([](nlohmann::json& j) { j["rank"] = 4; }), "job order: rank 4 of 4 is not a rank");
  EXPECT_EQ(error([](nlohmann::json& j) { j["routes"] = nlohmann::json::array(); }),
            "job order: \"routes\" must be an object");
  EXPECT_EQ(error([](nlohmann::json& j) { j["routes"]["x"] = "1.2.3.4"; }), "job order: route 'x' is not a rank");
  EXPECT_EQ(error([](nlohmann::json& j) { j["routes"]["1"] = 5; }), "job order: route 1 is not an address");
  EXPECT_EQ(error([](nlohmann::json& j) { j["backend"] = "smoke"; }), "job order: backend 'smoke' is not tcp or rdma");
  EXPECT_THROW(JobOrder::from_json(nlohmann::json::array()), Error);
}

TEST(JobOrder, OnlyTheSecretSignsAnOrder) {
  const std::string body = sample_order().to_json().dump();
  const std::string signature = sign_order(body, "cluster secret");
  EXPECT_EQ(signature.size(), 64u);
  EXPECT_TRUE(order_signed(body, signature, "cluster secret"));
  EXPECT_FALSE(order_signed(body, signature, "another secret"));
  std::string changed = body;
  changed[changed.find("\"rank\":2") + 7] = '3';
  EXPECT_FALSE(order_signed(changed, signature, "cluster secret"));
  EXPECT_FALSE(order_signed(body, signature.substr(1), "cluster secret"));
  EXPECT_FALSE(order_signed(body, "", "cluster secret"));
}

TEST(JobBackend, RdmaOnlyWhenEveryMachineHasADevice) {
  EXPECT_EQ(job_backend("auto", {{"rdma_en3"}, {"rdma_en5", "rdma_en6"}}), "rdma");
  EXPECT_EQ(job_backend("auto", {{"rdma_en3"}, {}}), "tcp");
  EXPECT_EQ(job_backend("auto", {}), "tcp");
  EXPECT_EQ(job_backend("tcp", {{"rdma_en3"}, {"rdma_en5"}}), "tcp");
  EXPECT_EQ(job_backend("rdma", {{"rdma_en3"}, {"rdma_en5"}}), "rdma");
  EXPECT_THROW(job_backend("rdma", {{"rdma_en3"}, {}}), Error);
  EXPECT_THROW(job_backend("carrier-pigeon", {}), Error);
}

}  // namespace
}  // namespace orchard::serve
