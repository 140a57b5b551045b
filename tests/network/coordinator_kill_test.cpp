// The coordinator SIGKILLed under load and restarted (issue 8's acceptance), on SQLite files and
// on PostgreSQL: real processes — two `orchard network serve` replicas sharing the stores,
// three `orchard node`s with stories260K — and client threads that submit 240 short jobs
// through the OpenAI endpoint. After some have finished, one coordinator is killed mid-flight
// and started again on the same data and port. The client contract under
// test: a client whose request broke (connection reset, 5xx) sends the same request again with
// the same Idempotency-Key, and gets the same job's answer. In the end every job the store
// holds as done is paid exactly once, nothing else is paid, and the ledger verifies, its head
// signed by the one key the replicas share.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <set>

#include "dist/process_harness.h"
#include "network/coordinator.h"
#include "network/job_store.h"
#include "network/ledger.h"
#include "network/protocol_names.h"
#include "network/store_backends.h"
#include "network/test_files.h"
#include "network/test_processes.h"
#include "test_data.h"

namespace orchard::network {
namespace {

using dist::testing::Proc;
using nlohmann::json;
using test::free_port;
using test::kill_and_wait;
using test::wait_healthy;

constexpr int kJobs = 240;
constexpr int kClients = 8;
constexpr int kKillAfter = 60;  // answers received before the SIGKILL
constexpr int kNodes = 3;

struct Answer {
  std::string job_id, text;
  int tries = 0;
};

// One job as a client that follows the contract: the same request with the same key until an
// answer comes (or a minute passes).
Answer ask(int port, const std::string& key, int i) {
  const json body = {{"model", "stories260K"},
                     {"prompt", "Once upon a time, number " + std::to_string(i)},
                     {"max_tokens", 8},
                     {"temperature", 0}};
  const httplib::Headers headers = {{"Authorization", "Bearer " + key},
                                    {"Idempotency-Key", "kill-test-" + std::to_string(i)}};
  Answer a;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    ++a.tries;
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(1, 0);
    c.set_read_timeout(30, 0);
    auto r = c.Post("/v1/completions", headers, body.dump(), "application/json");
    if (r && r->status == 200) {
      a.job_id = r->get_header_value("X-Orchard-Job");
      a.text = json::parse(r->body)["choices"][0]["text"].get<std::string>();
      return a;
    }
    if (r && r->status < 500) {
      ADD_FAILURE() << "job " << i << ": HTTP " << r->status << " " << r->body;
      return a;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ADD_FAILURE() << "job " << i << ": no answer within a minute (" << a.tries << " tries)";
  return a;
}

// `db_url`: empty for the SQLite files under the data folder, else a PostgreSQL URL.
// `replicas` coordinators share the stores; nodes and clients are split between them, and the
// first is the one killed (with one, the whole network loses its coordinator for a moment).
void run_kill_test(const std::string& name, const std::string& db_url, int replicas = 2) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  const std::string bin = ::orchard::test::orchard_binary();
  const std::string model = ::orchard::test::data_file("models/stories260K.gguf").string();
  const auto dir = test::fresh_dir(name);
  const std::vector<std::string> db_args =
      db_url.empty() ? std::vector<std::string>{"--data", dir.string()} : std::vector<std::string>{"--db", db_url};
  const CoordinatorFiles files = coordinator_files(dir, db_url);

  auto with = [&](std::vector<std::string> argv, const std::vector<std::string>& more) {
    argv.insert(argv.end(), more.begin(), more.end());
    return argv;
  };
  const std::string key = test::api_key(bin, "alice", db_args);
  ASSERT_FALSE(key.empty());

  // Short leases: an attempt whose node never heard of it (the reply died with the
  // coordinator) moves on within seconds.
  std::vector<int> ports;
  std::vector<std::vector<std::string>> serve;
  std::vector<Proc> coordinators;
  for (int r = 0; r < replicas; ++r) {
    ports.push_back(free_port());
    serve.push_back(with({bin, "network", "serve", "--port", std::to_string(ports.back()), "--lease", "3",
                          "--heartbeat-timeout", "5", "--http-threads", "32", "--audit-window", "0", "--audit-rate", "0"},
                         db_args));
    // On PostgreSQL the ledger-signing key is a file each replica is given (the same one); on
    // SQLite it is the data folder's.
    if (!db_url.empty()) serve.back() = with(serve.back(), {"--key", files.signing_key.string()});
    coordinators.push_back(dist::testing::spawn(serve.back(), {}, name + "-coordinator-" + std::to_string(r)));
  }
  std::vector<Proc> nodes;
  for (int n = 0; n < kNodes; ++n)
    nodes.push_back(dist::testing::spawn(
        {bin, "node", "--coordinator", "http://127.0.0.1:" + std::to_string(ports[static_cast<size_t>(n % replicas)]), "-m", model, "--name",
         "stories260K", "--key", (dir / ("node" + std::to_string(n) + ".key")).string(), "--owner", "bob", "--dedicated",
         "--bandwidth", "20", "-t", "1", "--poll-wait", "2"},
        {}, name + "-node-" + std::to_string(n)));
  auto stop_all = [&] {
    for (Proc& n : nodes) kill_and_wait(n, SIGKILL);
    for (Proc& c : coordinators) kill_and_wait(c, SIGKILL);
  };
  for (int r = 0; r < replicas && !::testing::Test::HasFatalFailure(); ++r)
    wait_healthy(ports[static_cast<size_t>(r)], kNodes, coordinators[static_cast<size_t>(r)]);
  if (::testing::Test::HasFatalFailure()) return stop_all();

  std::vector<Answer> answers(kJobs);
  std::atomic<int> next{0}, answered{0};
  std::vector<std::thread> clients;
  // Three quarters of the clients ask the replica that will be killed: at that moment nearly
  // all of them are waiting on an answer from it.
  for (int c = 0; c < kClients; ++c)
    clients.emplace_back([&, port = ports[c < kClients * 3 / 4 || replicas == 1 ? 0 : 1]] {
      for (int i = next++; i < kJobs; i = next++) {
        answers[static_cast<size_t>(i)] = ask(port, key, i);
        ++answered;
      }
    });
  while (answered < kKillAfter) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill_and_wait(coordinators[0], SIGKILL);
  const int answered_at_kill = answered;
  coordinators[0] = dist::testing::spawn(serve[0], {}, name + "-coordinator-0-restarted");
  for (std::thread& t : clients) t.join();
  for (Proc& c : coordinators) kill_and_wait(c, SIGTERM);
  for (Proc& n : nodes) kill_and_wait(n, SIGTERM);
  for (const Proc& c : coordinators) EXPECT_EQ(dist::testing::exit_code(c), 0) << c.err();
  ASSERT_LT(answered_at_kill, kJobs) << "every job had finished before the kill: the test tested nothing";

  // Every client got an answer, to its own job; some had to ask again because of the kill.
  std::set<std::string> ids;
  int retried = 0;
  for (const Answer& a : answers) {
    EXPECT_FALSE(a.job_id.empty());
    EXPECT_FALSE(a.text.empty()) << a.job_id;
    ids.insert(a.job_id);
    retried += a.tries > 1;
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kJobs));
  EXPECT_GT(retried, 0) << "no client request was cut by the kill";

  // The store's done jobs and the ledger's entries are the same set, one entry each.
  auto store = JobStore::open(files.jobs);
  auto ledger = Ledger::open(files.ledger);
  const std::vector<Completion> done = store.completions();
  std::set<std::string> done_ids;
  for (const Completion& c : done) {
    done_ids.insert(c.job_id);
    const auto e = ledger.entry_for_job(c.job_id);
    ASSERT_TRUE(e) << c.job_id << " is done but unpaid";
    EXPECT_EQ(e->payer, "alice");
    EXPECT_EQ(e->payee, "bob");
    EXPECT_GT(e->amount, 0);
  }
  for (const std::string& id : ids) EXPECT_TRUE(done_ids.count(id)) << id << " answered but not done in the store";
  const VerifyReport report = ledger.verify();
  EXPECT_TRUE(report.ok()) << report.violations.front();
  EXPECT_EQ(report.entries, static_cast<int64_t>(done.size())) << "the ledger pays jobs the store does not hold as done";
  std::printf("%s: killed after %d of %d answers; %d requests retried; %zu jobs done, %lld paid\n", name.c_str(),
              answered_at_kill, kJobs, retried, done.size(), static_cast<long long>(report.entries));
  EXPECT_EQ(ledger.balance("alice") + ledger.balance("bob"), 0);
  EXPECT_LT(ledger.balance("alice"), 0);
  // The replicas signed the head with the one key (at the latest when they stopped), and the
  // ledger verifies against it.
  const std::string key_hex = NodeIdentity::load_or_create(files.signing_key).public_key_hex();
  const auto signed_head = ledger.latest_signed_head();
  ASSERT_TRUE(signed_head) << "no replica signed the ledger head";
  EXPECT_EQ(signed_head->public_key, key_hex);
  EXPECT_EQ(signed_head->seq, report.entries);
  test::run({bin, "network", "ledger", "--db", files.ledger, "--verify", "--trusted-key", key_hex}, name + "-verify");
}

TEST(CoordinatorKill, SqliteEveryFinishedJobIsPaidOnceAfterASigkill) { run_kill_test("kill-sqlite", ""); }

// The one coordinator of the network killed and restarted: nodes and clients all lose it.
TEST(CoordinatorKill, SqliteLoneCoordinatorKilledEveryFinishedJobIsPaidOnce) {
  run_kill_test("kill-sqlite-lone", "", 1);
}

TEST(CoordinatorKill, PostgresEveryFinishedJobIsPaidOnceAfterASigkill) {
  test::PostgresServer* pg = test::PostgresServer::require();
  if (!pg) return;
  run_kill_test("kill-postgresql", pg->fresh_database("kill"));
}

TEST(CoordinatorKill, PostgresLoneCoordinatorKilledEveryFinishedJobIsPaidOnce) {
  test::PostgresServer* pg = test::PostgresServer::require();
  if (!pg) return;
  run_kill_test("kill-postgresql-lone", pg->fresh_database("killlone"), 1);
}

}  // namespace
}  // namespace orchard::network
