#pragma once
// A coordinator on a free localhost port over a fresh data folder (or a PostgreSQL database),
// with short leases and heartbeat timeouts so a dead node's job moves on within a couple of
// seconds, and the HTTP calls the coordinator tests make (client calls with an API key, signed node calls).
#include <functional>
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "network/api_keys.h"
#include "network/coordinator.h"
#include "network/protocol_names.h"
#include "network/test_files.h"

namespace orchard::network::test {

inline int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A data folder to start on as it is (a restart).
struct ExistingDir {
  std::filesystem::path path;
};

// A coordinator replica on a shared PostgreSQL database, signing with the key file given.
struct OnDatabase {
  std::string url;
  std::filesystem::path signing_key;
};

struct RunningCoordinator {
  std::filesystem::path dir;
  CoordinatorOptions options;
  std::unique_ptr<Coordinator> coordinator;
  std::thread thread;
  int port = 0;

  explicit RunningCoordinator(const std::string& name) : RunningCoordinator(ExistingDir{fresh_dir(name)}) {}
  // `tweak` changes the options before the coordinator starts.
  RunningCoordinator(const std::string& name, const std::function<void(CoordinatorOptions&)>& tweak)
      : dir(fresh_dir(name)) {
    options.data_dir = dir;
    start(200, tweak);
  }
  // `sign_every_ms`: how often the ledger head is signed (an hour: only at shutdown, or by the test).
  explicit RunningCoordinator(ExistingDir existing, int64_t sign_every_ms = 200) : dir(std::move(existing.path)) {
    options.data_dir = dir;
    start(sign_every_ms);
  }
  explicit RunningCoordinator(const OnDatabase& db) {
    options.database = db.url;
    options.signing_key = db.signing_key;
    start(200);
  }
  ~RunningCoordinator() {
    coordinator->stop();
    thread.join();
  }

  void start(int64_t sign_every_ms, const std::function<void(CoordinatorOptions&)>& tweak = {}) {
    CoordinatorOptions& o = options;
    o.port = 0;
    o.http_threads = 16;
    o.store.lease_ms = 1500;
    o.store.heartbeat_timeout_ms = 1500;
    o.store.queue_timeout_ms = 60'000;
    o.sweep_interval_ms = 100;
    o.sign_every_ms = sign_every_ms;
    o.default_max_tokens = 16;
    if (tweak) tweak(o);
    coordinator = std::make_unique<Coordinator>(o);
    port = coordinator->bind();
    thread = std::thread([this] { coordinator->run(); });
    // Serving once /health answers.
    for (int i = 0; i < 500; ++i) {
      if (auto r = client().Get("/health"); r && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "the coordinator did not start answering";
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
  CoordinatorFiles files() const {
    CoordinatorFiles f = coordinator_files(dir, options.database);
    if (!options.signing_key.empty()) f.signing_key = options.signing_key;
    return f;
  }
  std::string api_key(const std::string& account) const { return ApiKeys::open(files().api_keys).create(account); }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    return c;
  }
  // A client call with `key`; the reply's status and JSON (or raw body when it is not JSON).
  std::pair<int, nlohmann::json> post(const std::string& path, const nlohmann::json& body, const std::string& key) const {
    httplib::Headers h;
    if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
    auto r = client().Post(path, h, body.dump(), "application/json");
    if (!r) return {0, nullptr};
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    return {r->status, j.is_discarded() ? nlohmann::json(r->body) : j};
  }
  std::pair<int, nlohmann::json> get(const std::string& path, const std::string& key = {}) const {
    httplib::Headers h;
    if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
    auto r = client().Get(path, h);
    if (!r) return {0, nullptr};
    return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
  }
  // A streamed client call that reads the first bytes and hangs up (`headers`: the API key and
  // any other); returns the X-Orchard-Job of the answer.
  std::string stream_and_hang_up(const std::string& path, const nlohmann::json& body, const httplib::Headers& headers) const {
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.headers = headers;
    req.set_header("Content-Type", "application/json");
    req.body = body.dump();
    std::string job;
    req.response_handler = [&](const httplib::Response& r) {
      job = r.get_header_value("X-Orchard-Job");
      return true;
    };
    req.content_receiver = [](const char*, size_t, uint64_t, uint64_t) { return false; };
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    auto http = client();
    http.send(req, res, err);
    return job;
  }
  // A signed node call, with `headers` as sent (sign them with sign_request).
  std::pair<int, nlohmann::json> node_call(const std::string& method, const std::string& path, const std::string& body,
                                           const Headers& headers) const {
    httplib::Headers h(headers.begin(), headers.end());
    auto r = method == "GET" ? client().Get(path, h) : client().Post(path, h, body, "application/json");
    if (!r) return {0, nullptr};
    return {r->status, r->body.empty() ? nlohmann::json() : nlohmann::json::parse(r->body, nullptr, false)};
  }
  std::pair<int, nlohmann::json> node_post(const NodeIdentity& node, const std::string& path,
                                           const nlohmann::json& body) const {
    const std::string text = body.dump();
    return node_call("POST", path, text, sign_request(node, "POST", path, text, now_ms()));
  }
};

}  // namespace orchard::network::test
