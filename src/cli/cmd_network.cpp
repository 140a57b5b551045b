// `orchard network …`: the network's tools. `serve` runs the coordinator, `api-key create`
// makes a client's key, `ledger` checks a credit ledger's invariants and shows balances.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/network_stores.h"
#include "network/api_keys.h"
#include "network/coordinator.h"
#include "network/protocol_names.h"
#include "network/database.h"
#include "network/ledger.h"
#include "network/model_pins.h"
#include "network/placement.h"
#include "network/simulate.h"
#include "node/job_runner.h"
#include "protocol/file_hash.h"
#include "tensor/error.h"

namespace orchard::cli {

network::CoordinatorFiles offline_stores(const std::string& dir, const std::string& db) {
  if (dir.empty() == db.empty()) throw Error("give the coordinator's --data DIR or its --db URL (one of them)");
  if (db.empty()) std::filesystem::create_directories(dir);
  return network::coordinator_files(dir, db);
}

namespace {

// Unix milliseconds as "2026-12-06 14:05:09".
std::string utc_time(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S", &tm);
  return b;
}

struct LedgerOpts {
  std::string db;
  bool verify = false;
  std::string balance;
  std::string trusted_key;  // hex Ed25519 public key
};

std::string credits_text(int64_t micro) {
  const bool neg = micro < 0;
  const uint64_t m = neg ? 0 - static_cast<uint64_t>(micro) : static_cast<uint64_t>(micro);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%llu.%06llu", neg ? "-" : "",
                static_cast<unsigned long long>(m / network::kMicroPerCredit),
                static_cast<unsigned long long>(m % network::kMicroPerCredit));
  return buf;
}

// The exit status: 0, or 1 when --verify found violations.
int ledger(const LedgerOpts& o) {
  // Looking at a ledger must not create one (a mistyped path would "verify" as empty). A
  // PostgreSQL database is taken as it is: the ledger's schema is made there if absent.
  if (!network::sql::is_postgres_url(o.db) && !std::filesystem::exists(o.db)) throw Error(o.db + ": no such ledger file");
  auto l = network::Ledger::open(o.db);
  if (!o.balance.empty()) {
    const int64_t b = l.balance(o.balance);
    std::printf("%s: %s credits (%lld micro-credits, %zu entries)\n", o.balance.c_str(), credits_text(b).c_str(),
                static_cast<long long>(b), l.entries_for(o.balance).size());
  }
  if (o.verify) {
    network::KeyPtr trusted;
    if (!o.trusted_key.empty()) trusted = network::public_key_from_hex(o.trusted_key);
    const auto r = l.verify(trusted.get());
    if (!r.ok()) {
      std::fflush(stdout);
      std::fprintf(stderr, "%s: ledger does not verify (%zu violation%s):\n", l.where().c_str(), r.violations.size(),
                   r.violations.size() == 1 ? "" : "s");
      for (const auto& v : r.violations) std::fprintf(stderr, "  %s\n", v.c_str());
      return 1;
    }
    std::printf("%s: ledger verifies: %lld entries, %lld signed heads, balances sum to zero\n", l.where().c_str(),
                static_cast<long long>(r.entries), static_cast<long long>(r.signed_heads));
  }
  if (o.balance.empty() && !o.verify) {
    const auto h = l.head();
    std::printf("%s: head seq %lld hash %s, %zu accounts\n", l.where().c_str(), static_cast<long long>(h.seq),
                h.hash.c_str(), l.accounts().size());
  }
  return 0;
}

network::Coordinator* g_coordinator = nullptr;

void stop_coordinator(int) {
  if (g_coordinator) g_coordinator->stop();  // only flags and closes the socket
}

struct CoordinatorOpts {
  network::CoordinatorOptions c;
  double heartbeat_timeout_s = 30, lease_s = 30, queue_timeout_s = 600, sign_every_s = 60;
  double audit_window_s = 600;
  CoordinatorOpts() {
    c.audit_rate = 0.05;
    c.canary_rate = 0.02;
    c.probation_jobs = 10;
    c.probation_audit_rate = 0.5;
  }
};

void serve(CoordinatorOpts& o) {
  if (o.c.data_dir.empty() && o.c.database.empty())
    throw Error("give --data DIR (SQLite files there) or --db postgresql://… (a database replicas share)");
  o.c.store.heartbeat_timeout_ms = static_cast<int64_t>(o.heartbeat_timeout_s * 1000);
  o.c.store.lease_ms = static_cast<int64_t>(o.lease_s * 1000);
  o.c.store.queue_timeout_ms = static_cast<int64_t>(o.queue_timeout_s * 1000);
  o.c.sign_every_ms = static_cast<int64_t>(o.sign_every_s * 1000);
  o.c.store.audit_window_ms = static_cast<int64_t>(o.audit_window_s * 1000);
  if (!(o.c.memory_proof_share >= 0 && o.c.memory_proof_share <= 1) || !(o.c.memory_proof_min_gbs > 0))
    throw Error("--memory-proof must be within [0, 1] and --memory-proof-min-gbs positive");
  if (o.c.store.audit_window_ms < 0 || !(o.c.audit_rate >= 0 && o.c.audit_rate <= 1) || o.c.probation_jobs < 0 ||
      !(o.c.probation_audit_rate >= 0 && o.c.probation_audit_rate <= 1) ||
      !(o.c.canary_rate >= 0 && o.c.canary_rate <= 1) || !(o.c.audit_rules.max_gap >= 0))
    throw Error(
        "--audit-window, --audit-max-gap and --probation-jobs must not be negative; --audit-rate, "
        "--probation-audit-rate and --canary-rate must be within [0, 1]");
  if (o.c.store.heartbeat_timeout_ms <= 0 || o.c.store.lease_ms <= 0 || o.c.store.queue_timeout_ms <= 0 ||
      o.c.sign_every_ms <= 0)
    throw Error("--heartbeat-timeout, --lease, --queue-timeout and --sign-every must be positive");
  network::Coordinator coordinator(o.c);
  const int port = coordinator.bind();
  g_coordinator = &coordinator;
  signal(SIGINT, stop_coordinator);
  signal(SIGTERM, stop_coordinator);
  std::fprintf(stderr,
               "orchard network serve: coordinator on %s://%s:%d, data in %s\n"
               "  world page: %s://%s:%d/ · clients: /v1/chat/completions /v1/completions /v1/models (Bearer API "
               "key) · nodes: /v1/node/… (signed) · /health /v1/world /v1/ledger/…\n",
               o.c.tls.enabled() ? "https" : "http", o.c.host.c_str(), port,
               o.c.database.empty() ? o.c.data_dir.string().c_str()
                                    : network::sql::without_password(o.c.database).c_str(),
               o.c.tls.enabled() ? "https" : "http", o.c.host.c_str(), port);
  coordinator.run();
  g_coordinator = nullptr;
  std::fprintf(stderr, "orchard network serve: stopped\n");
}

}  // namespace

void register_network(CLI::App& app) {
  auto* net = app.add_subcommand("network", "The volunteer network: the coordinator, API keys, the credit ledger");
  net->require_subcommand(1);

  register_network_canary(*net);
  register_network_load(*net);

  auto sim = std::make_shared<network::SimulateOptions>();
  auto sim_dir = std::make_shared<std::string>(), sim_db = std::make_shared<std::string>();
  auto* simulate = net->add_subcommand(
      "simulate", "Place jobs among simulated nodes with the real job store and scheduler; report placements/s and latency");
  simulate->add_option("--nodes", sim->nodes, "Simulated nodes")->capture_default_str()->check(CLI::Range(1, 10'000'000));
  simulate->add_option("--jobs", sim->jobs, "Jobs to place")->capture_default_str()->check(CLI::Range(1, 100'000'000));
  simulate->add_option("--seed", sim->seed, "Seed of the nodes' machines and the jobs' models")->capture_default_str();
  simulate->add_option("--batch", sim->batch, "Jobs the clients submit between two scheduler passes; each pass places them in one transaction")
      ->capture_default_str()
      ->check(CLI::Range(1, 100'000));
  simulate->add_flag("!--no-disk-wait", sim->wait_for_disk,
                     "Commit without waiting for the disk's flush, as `network serve --no-disk-wait`");
  simulate->add_option("--data", *sim_dir, "Folder for its job store (default: a fresh temporary one)")->type_name("DIR");
  simulate->add_option("--db,--database", *sim_db, "A PostgreSQL database for its job store instead")->type_name("URL");
  simulate->footer("Example:\n  orchard network simulate --nodes 10000 --jobs 2000");
  simulate->callback([sim, sim_dir, sim_db] {
    std::filesystem::path dir = *sim_dir;
    if (sim_db->empty() && dir.empty())
      dir = std::filesystem::temp_directory_path() / ("orchard-simulate-" + std::to_string(::getpid()));
    sim->store = sim_db->empty() ? offline_stores(dir.string(), "").jobs : *sim_db;
    if (sim_db->empty() && std::filesystem::exists(sim->store))
      throw Error(sim->store + " exists: simulate in an empty folder (its nodes would mix with the store's)");
    const network::SimulateReport r =
        network::simulate(*sim, [](const std::string& line) { std::fprintf(stderr, "simulate: %s\n", line.c_str()); });
    std::printf("%d nodes registered in %.2f s, indexed in %.2f s; %d jobs: %d placed, %d waiting, %d failed\n", r.nodes,
                r.register_s, r.index_s, r.jobs, r.placed, r.waiting, r.failed);
    std::printf("placement: %.0f placements/s, p50 %.3f ms, p99 %.3f ms, max %.3f ms; peak resident memory %.0f MiB\n",
                r.placements_per_s, r.p50_ms, r.p99_ms, r.max_ms, r.peak_rss_mib);
    std::printf("placement CPU: %.0f placements per CPU second (this process's, %.2f s)\n", r.placements_per_cpu_s,
                r.place_cpu_s);
    std::printf("store: %s\n", sim->store.c_str());
  });

  auto so = std::make_shared<CoordinatorOpts>();
  auto* srv = net->add_subcommand("serve", "Run the coordinator: places jobs on nodes, streams their output, pays them");
  srv->add_option("--data", so->c.data_dir, "Folder of the coordinator's SQLite files (created when absent)")
      ->type_name("DIR");
  srv->add_option("--db,--database", so->c.database,
                  "A PostgreSQL database for all the stores instead of the SQLite files, e.g. "
                  "postgresql://orchard@dbhost/orchard; several coordinators (replicas) may share it")
      ->type_name("URL");
  srv->add_option("--key", so->c.signing_key,
                  "The coordinator's Ed25519 key that signs ledger heads (made when absent; default "
                  "DIR/coordinator.key; required with --db and no --data)")
      ->type_name("FILE");
  srv->add_option("--host", so->c.host, "Address to listen on")->capture_default_str();
  srv->add_option("--port", so->c.port, "Port to listen on")->capture_default_str();
  srv->add_option("--tls-cert", so->c.tls.cert, "Serve HTTPS with this certificate (PEM; nodes pin it with --ca-cert)")
      ->type_name("FILE");
  srv->add_option("--tls-key", so->c.tls.key, "The certificate's private key (PEM)")->type_name("FILE");
  srv->add_flag("--require-credit", so->c.require_credit,
                "Clients spend credits: a request from an account without a positive balance gets 402 "
                "(`orchard network credit grant` gives some)");
  srv->add_option("--key-rate", so->c.requests_per_minute_per_key,
                  "Client requests a minute per API key (bursts up to it; then 429 with Retry-After); 0: unlimited")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  srv->add_option("--heartbeat-timeout", so->heartbeat_timeout_s,
                  "Seconds without a heartbeat after which a node is gone and its jobs move on")
      ->capture_default_str();
  srv->add_option("--lease", so->lease_s, "Seconds a job's lease lasts without a heartbeat or output renewing it")
      ->capture_default_str();
  srv->add_option("--queue-timeout", so->queue_timeout_s, "Seconds a job waits for a free node before it fails")
      ->capture_default_str();
  srv->add_option("--sign-every", so->sign_every_s,
                  "Seconds between signings of the ledger head (when it moved; also at shutdown)")
      ->capture_default_str();
  srv->add_option("--audit-rate", so->c.audit_rate,
                  "Share of completed jobs another owner's node re-checks (docs/verification.md; 0: none)")
      ->capture_default_str();
  srv->add_option("--probation-jobs", so->c.probation_jobs,
                  "A new node is on probation until this many of its client jobs passed an audit (0: no probation)")
      ->capture_default_str();
  srv->add_option("--probation-audit-rate", so->c.probation_audit_rate,
                  "Share of a node's jobs audited while it is on probation (when above --audit-rate; "
                  "--audit-rate 0 turns audits off, probation included)")
      ->capture_default_str();
  srv->add_option("--memory-proof", so->c.memory_proof_share,
                  "A registering node proves it holds this share of the memory it claims (docs/verification.md; "
                  "0: no check; 0.5: half its largest machine's memory)")
      ->capture_default_str();
  srv->add_option("--memory-proof-min-gbs", so->c.memory_proof_min_gbs,
                  "The slowest fill the memory check accepts, GB/s (plus 10 s): slower means the claim is not in RAM")
      ->capture_default_str();
  srv->add_flag("!--no-disk-wait", so->c.store.wait_for_disk,
                "The job store commits without waiting for the disk's flush: many more placements a second "
                "where a flush takes milliseconds; a power cut may lose the last moments' placements and "
                "completions (never the ledger, which always waits)");
  srv->add_option("--audit-window", so->audit_window_s,
                  "Seconds a completed job's payment waits for an audit before it is paid (0: at once when not audited)")
      ->capture_default_str();
  srv->add_option("--canary-rate", so->c.canary_rate,
                  "Share of completed jobs after which the node gets a canary (`orchard network canary add`; "
                  "every node gets one when it registers)")
      ->capture_default_str();
  srv->add_option("--audit-max-gap", so->c.audit_rules.max_gap,
                  "Greedy audits: how far below the best logit a returned token may be (CPUs' rounding)")
      ->capture_default_str();
  srv->add_option("--max-tokens", so->c.default_max_tokens, "max_tokens when a client does not say")->capture_default_str();
  srv->add_option("--http-threads", so->c.http_threads, "Threads running request handlers (an open connection or a waiting long-poll holds none)")
      ->capture_default_str();
  srv->add_flag("--log", so->c.log, "Print a line per request");
  srv->footer(
      "Files in DIR: jobs.sqlite, ledger.sqlite, nonces.sqlite, api_keys.sqlite, coordinator.key (signs\n"
      "ledger heads; GET /v1/ledger/key). With --db the stores are in that database and the key in\n"
      "--key FILE (or DIR/coordinator.key): every replica needs a copy of the same key file.\n"
      "Clients need a key:\n"
      "  orchard network api-key create alice --data DIR        (or --db URL)\n"
      "docs/network-protocol.md describes every endpoint.");
  srv->callback([so] { serve(*so); });

  auto* keys = net->add_subcommand("api-key", "Client API keys");
  keys->require_subcommand(1);
  auto key_dir = std::make_shared<std::string>();
  auto key_db = std::make_shared<std::string>();
  auto account = std::make_shared<std::string>();
  auto* create = keys->add_subcommand("create", "Make a key for ACCOUNT (printed once; only its hash is kept)");
  create->add_option("account", *account, "The account that pays for the key's jobs")->required();
  auto* list = keys->add_subcommand("list", "List the keys (their ids, accounts, when made and revoked; never the keys)");
  list->add_option("--account", *account, "Only this account's keys");
  auto key_id = std::make_shared<std::string>();
  auto* revoke = keys->add_subcommand("revoke", "Revoke a key by its id (from create or list): refused at once");
  revoke->add_option("id", *key_id, "The key's id, key- and 16 hex digits")->required();
  for (CLI::App* c : {create, list, revoke}) {
    c->add_option("--data", *key_dir, "The coordinator's data folder")->type_name("DIR");
    c->add_option("--db,--database", *key_db, "The coordinator's PostgreSQL database instead")->type_name("URL");
  }
  keys->footer(
      "Examples:\n"
      "  orchard network api-key create alice --data DIR     # the key on stdout, its id on stderr\n"
      "  orchard network api-key list --data DIR\n"
      "  orchard network api-key revoke key-0123456789abcdef --data DIR");
  auto open_keys = [key_dir, key_db] { return network::ApiKeys::open(offline_stores(*key_dir, *key_db).api_keys); };
  create->callback([open_keys, account] {
    auto k = open_keys();
    const std::string key = k.create(*account);
    std::printf("%s\n", key.c_str());
    std::fprintf(stderr, "key id %s (for api-key list / revoke)\n", network::api_key_id(*network::api_key_hash(key)).c_str());
  });
  list->callback([open_keys, account] {
    auto k = open_keys();
    std::printf("%-20s  %-20s  %-24s  %s\n", "id", "account", "created (UTC)", "revoked (UTC)");
    for (const auto& e : k.list(*account))
      std::printf("%-20s  %-20s  %-24s  %s\n", e.id.c_str(), e.account.c_str(), utc_time(e.created_at).c_str(),
                  e.revoked_at ? utc_time(*e.revoked_at).c_str() : "-");
  });
  revoke->callback([open_keys, key_id] {
    auto k = open_keys();
    const auto account = k.revoke_id(*key_id);
    if (!account) throw Error("no live key has the id " + *key_id + " (see `orchard network api-key list`)");
    std::printf("revoked %s (account %s)\n", key_id->c_str(), account->c_str());
  });

  auto* credit = net->add_subcommand("credit", "Client credits (what --require-credit makes clients spend)");
  credit->require_subcommand(1);
  auto grant_account = std::make_shared<std::string>(), grant_note = std::make_shared<std::string>();
  auto grant_amount = std::make_shared<double>(0);
  auto* grant = credit->add_subcommand("grant", "Give ACCOUNT credits to spend (a ledger entry from the issuing account)");
  grant->add_option("account", *grant_account, "The client account")->required();
  grant->add_option("credits", *grant_amount, "How many credits (1 credit = 1,000,000 micro-credits)")->required();
  grant->add_option("--note", *grant_note, "Why (kept in the entry's details)");
  grant->add_option("--data", *key_dir, "The coordinator's data folder")->type_name("DIR");
  grant->add_option("--db,--database", *key_db, "The coordinator's PostgreSQL database instead")->type_name("URL");
  grant->footer("Example:\n  orchard network credit grant alice 10 --note 'first purchase' --data DIR");
  grant->callback([key_dir, key_db, grant_account, grant_amount, grant_note] {
    const double micro = std::round(*grant_amount * static_cast<double>(network::kMicroPerCredit));
    if (!(micro >= 1 && micro < 9.0e18)) throw Error("credits: give an amount of at least one micro-credit (0.000001)");
    auto ledger = network::Ledger::open(offline_stores(*key_dir, *key_db).ledger);
    const auto paid = network::grant_credits(ledger, *grant_account, static_cast<int64_t>(micro), *grant_note);
    std::printf("granted %s credits to %s (ledger entry %lld); balance %.6f credits\n",
                std::to_string(static_cast<int64_t>(micro) / static_cast<double>(network::kMicroPerCredit)).c_str(),
                grant_account->c_str(), static_cast<long long>(paid.entry.seq),
                static_cast<double>(ledger.balance(*grant_account)) / static_cast<double>(network::kMicroPerCredit));
  });

  auto* models = net->add_subcommand("model", "Pin model names to files' contents (nodes offering other bytes are refused)");
  models->require_subcommand(1);
  auto pin_name = std::make_shared<std::string>(), pin_file = std::make_shared<std::string>();
  auto* pin = models->add_subcommand("pin", "Pin NAME to the SHA-256 of FILE (the GGUF nodes must hold under that name)");
  pin->add_option("name", *pin_name, "The model name jobs ask for")->required();
  pin->add_option("file", *pin_file, "The GGUF file it means (hashed here; or give --sha256)");
  auto pin_sha = std::make_shared<std::string>();
  pin->add_option("--sha256", *pin_sha, "The file's SHA-256 instead of the file (64 hex digits)");
  auto* unpin = models->add_subcommand("unpin", "Forget NAME's pin (nodes are taken at their word again)");
  unpin->add_option("name", *pin_name, "The model name")->required();
  auto* pins = models->add_subcommand("list", "List the pinned names");
  for (CLI::App* c : {pin, unpin, pins}) {
    c->add_option("--data", *key_dir, "The coordinator's data folder")->type_name("DIR");
    c->add_option("--db,--database", *key_db, "The coordinator's PostgreSQL database instead")->type_name("URL");
  }
  models->footer(
      "Examples:\n"
      "  orchard network model pin llama-3.1-8b-q4 Llama-3.1-8B-Q4_K_M.gguf --data DIR\n"
      "  orchard network model list --data DIR");
  auto open_pins = [key_dir, key_db] { return network::ModelPins::open(offline_stores(*key_dir, *key_db).model_pins); };
  pin->callback([open_pins, pin_name, pin_file, pin_sha] {
    if (pin_file->empty() == pin_sha->empty()) throw Error("give the model's FILE or its --sha256 (one of them)");
    network::ModelPin p{*pin_name, *pin_sha, 0, 0, std::nullopt};
    if (!pin_file->empty()) {
      p.sha256 = protocol::file_sha256(*pin_file, [&](uint64_t done, uint64_t total) {
        std::fprintf(stderr, "hashing %s: %.0f of %.0f GB\n", pin_file->c_str(), done / 1e9, total / 1e9);
      });
      p.file_bytes = std::filesystem::file_size(*pin_file);
      // Its shape and format from its header: what registration will describe the name by.
      p.description = node::describe_model(*pin_file, *pin_name);
    }
    open_pins().pin(p);
    std::printf("pinned %s to sha256 %s\n", p.name.c_str(), p.sha256.c_str());
  });
  unpin->callback([open_pins, pin_name] {
    if (!open_pins().unpin(*pin_name)) throw Error("'" + *pin_name + "' is not pinned");
    std::printf("unpinned %s\n", pin_name->c_str());
  });
  pins->callback([open_pins] {
    for (const auto& p : open_pins().list()) {
      // What registration describes the name by: the size class jobs are priced at.
      std::string what = "(no description: pinned by hash)";
      if (p.description) {
        const double params = static_cast<double>(network::cost_of(*p.description).params);
        char count[32];
        std::snprintf(count, sizeof count, params >= 1e9 ? "%.1f B" : "%.2f M", params >= 1e9 ? params / 1e9 : params / 1e6);
        what = std::string(network::to_string(network::size_class(static_cast<uint64_t>(params)))) + ", " + count +
               " parameters";
      }
      std::printf("%-32s  %s  %s  %s\n", p.name.c_str(), p.sha256.c_str(), utc_time(p.pinned_at).c_str(), what.c_str());
    }
  });

  auto o = std::make_shared<LedgerOpts>();
  auto* cmd = net->add_subcommand("ledger", "Check a credit ledger, show balances");
  cmd->add_option("--db", o->db, "The ledger: its SQLite file, or the coordinator's postgresql:// URL")->required();
  cmd->add_flag("--verify", o->verify,
                "Check every invariant: hash chain, hashes, positive amounts, each job paid once, "
                "balances summing to zero, signed heads; exit 1 naming each violation");
  cmd->add_option("--balance", o->balance, "Print the balance of ACCOUNT")->type_name("ACCOUNT");
  cmd->add_option("--trusted-key", o->trusted_key,
                  "With --verify: the coordinator's Ed25519 public key (64 hex digits); heads signed by "
                  "any other key are violations")
      ->type_name("HEX");
  cmd->footer(
      "Examples:\n"
      "  orchard network ledger --db ledger.sqlite                 # head and number of accounts\n"
      "  orchard network ledger --db ledger.sqlite --verify\n"
      "  orchard network ledger --db ledger.sqlite --balance alice\n"
      "  orchard network ledger --db ledger.sqlite --verify --trusted-key 3b6a27bc…\n"
      "Amounts are credits with six decimals (integer micro-credits inside); docs/network.md has\n"
      "the rate table. Exit status: 0 when the ledger verifies, 1 otherwise.");
  cmd->callback([o] {
    if (const int rc = ledger(*o)) {
      std::fflush(stdout);
      std::exit(rc);
    }
  });
}

}  // namespace orchard::cli
