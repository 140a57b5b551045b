// `orchard node`: lends this machine to a coordinator (the node agent, src/node/agent.h); as the
// ranks of a job (`--parallel`), lends them as one cabled group (src/node/group.h).
// `orchard node status`: what this node has served and earned, as the coordinator records it,
// and a local check that the owner's ledger entries are under the coordinator's signed head.
#include <signal.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "cli/args.h"
#include "cli/cluster_rank.h"
#include "cli/commands.h"
#include "protocol/regions.h"
#include "dist/make_group.h"
#include "model/json_number.h"
#include "model/synthetic/synthetic.h"
#include "network/protocol_names.h"
#include "node/agent.h"
#include "node/group.h"
#include "node/key_lock.h"
#include "node/ledger_check.h"
#include "parallel/memory.h"
#include "serve/model_store.h"
#include "tensor/error.h"

namespace orchard::cli {
namespace {

struct NodeOpts {
  std::string coordinator, key, owner, hardware = "laptop", window, chip = "cpu", idle_after, memory, parallel, region;
  std::string trusted_key, pin_file;  // status: the coordinator's ledger key, where it is pinned
  std::vector<std::string> models, names;
  bool dedicated = false, when_idle = false;
  double idle_load = 0.5, bandwidth = 0;
  int threads = 0, poll_wait = 10, tp = 0;
  int64_t ctx = 0, chunk = 64;
  KVType kv_type = KVType::F32;  // a job resumed on another node continues the same text
  std::string cheat;             // tests of the coordinator's checks (node::AgentOptions::cheat)
  std::string ca_cert;           // an https coordinator's certificate or CA
};

std::string default_key_path() { return (std::filesystem::path(orchard_home()) / "node" / "node.key").string(); }

// Where `node status` pins a coordinator's ledger key: one file per coordinator address.
std::string default_pin_file(const std::string& coordinator) {
  std::string name;
  for (char c : coordinator.substr(coordinator.find("://") == std::string::npos ? 0 : coordinator.find("://") + 3))
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_';
  return (std::filesystem::path(orchard_home()) / "node" / "trusted" / (name + ".json")).string();
}

node::Agent* g_agent = nullptr;

void stop_agent(int) {
  if (g_agent) g_agent->drain();  // only sets a flag
}

void check(const NodeOpts& o) {
  if (o.coordinator.empty()) throw Error("--coordinator URL is required (the coordinator's http://HOST:PORT)");
  if (o.models.empty()) throw Error("give the model(s) this node serves with -m");
  if (o.dedicated && o.when_idle) throw Error("--dedicated and --when-idle exclude each other");
  if (!o.names.empty() && o.names.size() != o.models.size())
    throw Error("--name is given " + std::to_string(o.names.size()) + " times for " + std::to_string(o.models.size()) +
                " models: name every model or none");
}

node::AgentOptions agent_options(const NodeOpts& o) {
  node::AgentOptions ao;
  ao.coordinator = o.coordinator;
  ao.ca_cert = o.ca_cert;
  ao.owner = o.owner;
  if (ao.owner.empty())
    if (const char* user = std::getenv("USER"); user && *user) ao.owner = user;
  if (ao.owner.empty()) throw Error("--owner is required (the account credited for this node's work)");
  ao.hardware = network::parse_hardware_class(o.hardware);
  if (!o.region.empty()) ao.region = protocol::parse_region(o.region);
  ao.lending.mode = o.dedicated ? network::Lending::Dedicated : network::Lending::WhenIdle;
  ao.lending.max_load = o.idle_load;
  if (!o.window.empty()) ao.lending.set_window(o.window);
  if (!o.idle_after.empty()) {
    if (o.dedicated) throw Error("--idle-after is for --when-idle: a dedicated node lends whatever its user does");
    ao.lending.set_idle_after(o.idle_after);
  }
  ao.chip = o.chip;
  ao.bandwidth_gbs = o.bandwidth;
  ao.memory_bytes = o.memory.empty() ? 0 : parallel::parse_bytes(o.memory);
  if (!o.memory.empty() && ao.memory_bytes == 0) throw Error("--memory " + o.memory + ": lend more than nothing");
  ao.poll_wait_s = o.poll_wait;
  ao.cheat = o.cheat;
  return ao;
}

// Works until SIGTERM or SIGINT drains it.
std::string key_path(const NodeOpts& o) { return o.key.empty() ? default_key_path() : o.key; }

// `lock`: this process holds the key (taken before the models load, so a second agent on the
// same key stops at once).
void serve_agent(node::AgentOptions ao, std::vector<node::ServedModel> models, const NodeOpts& o,
                 const node::KeyLock& lock) {
  (void)lock;
  auto identity = network::NodeIdentity::load_or_create(key_path(o));
  node::Agent agent(std::move(ao), std::move(identity), std::move(models));
  g_agent = &agent;
  signal(SIGINT, stop_agent);
  signal(SIGTERM, stop_agent);
  std::string served;
  for (const auto& m : agent.describe().models) served += (served.empty() ? "" : ", ") + m.name;
  std::fprintf(stderr, "orchard node %s: serving %s to %s as %s (%s)\n", agent.id().c_str(), served.c_str(),
               o.coordinator.c_str(), agent.describe().owner.c_str(),
               network::to_string(agent.describe().lending));
  agent.run();
  g_agent = nullptr;
  std::fprintf(stderr, "orchard node: stopped after %lld jobs\n", static_cast<long long>(agent.jobs_completed()));
}

void run_node(const NodeOpts& o) {
  check(o);
  node::AgentOptions ao = agent_options(o);
  const node::KeyLock lock = node::KeyLock::acquire(key_path(o));
  std::vector<node::ServedModel> models;
  for (size_t i = 0; i < o.models.size(); ++i)
    models.push_back(node::load_served_model(serve::resolve_model(o.models[i]), o.names.empty() ? "" : o.names[i],
                                             o.threads, o.ctx, o.kv_type));
  // --cheat swap-model:FILE: registers the -m file (its hash, its shape) but runs FILE, as a
  // node would that passes a smaller quantization off as the pinned model.
  const std::string swap = "swap-model:";
  if (o.cheat.rfind(swap, 0) == 0) {
    node::ServedModel& m = models.front();
    node::ServedModel runs = node::load_served_model(o.cheat.substr(swap.size()), m.name, o.threads, o.ctx, o.kv_type);
    runs.info = m.info;
    runs.path = m.path;
    m = std::move(runs);
  }
  serve_agent(std::move(ao), std::move(models), o, lock);
}

// A rank of a cabled group: every rank loads its shard and measures its machine; rank 0
// registers the group as one node and runs its jobs, the others follow its steps (as
// `orchard serve --parallel` does).
void run_group(const NodeOpts& o) {
  check(o);
  if (o.models.size() != 1) throw Error("a group node serves one model (give one -m with --parallel)");
  node::AgentOptions ao = agent_options(o);
  auto world = dist::make_group_from_env();
  ClusterRankOptions ro;
  ro.model_path = serve::resolve_model(o.models[0]);
  ro.parallel = o.parallel;
  ro.threads = o.threads;
  ro.tp = o.tp;
  ro.ctx = o.ctx;
  ro.kv_type = o.kv_type;
  ro.chunk = o.chunk;
  auto session = parallel::Session::start(*world, session_options(ro));
  // One slot: the agent runs one job at a time.
  serve::ClusterExecutor exec(*session, *world, 1, o.chunk);
  // Measured one rank at a time: ranks sharing a machine would halve each other's bandwidth.
  network::MachineInfo mine;
  for (int r = 0; r < world->size(); ++r) {
    if (r == world->rank()) mine = node::this_machine(o.chip, ao.memory_bytes, o.bandwidth);
    world->barrier();
  }
  node::GroupDescription group = node::describe_group(*world, mine);
  if (world->rank() != 0) return follow_rank0(exec);
  print_plan(*session);
  std::fprintf(stderr, "orchard node: a group of %d machines over %s (%.1f µs, %.2f GB/s measured)\n", world->size(),
               group.group.link.c_str(), group.group.latency_us, group.group.gbs);
  StopFollowers stop_followers(exec);  // however the agent ends
  ao.machines = std::move(group.machines);
  ao.group = std::move(group.group);
  std::vector<node::ServedModel> models;
  models.push_back(node::group_served_model(ro.model_path, o.names.empty() ? "" : o.names[0], session->engine(), exec));
  const node::KeyLock lock = node::KeyLock::acquire(key_path(o));
  serve_agent(std::move(ao), std::move(models), o, lock);
}

std::string credits(int64_t micro) {
  char b[48];
  std::snprintf(b, sizeof b, "%.6f", static_cast<double>(micro) / static_cast<double>(network::kMicroPerCredit));
  return b;
}

void node_status(const NodeOpts& o) {
  if (o.coordinator.empty()) throw Error("--coordinator URL is required");
  const std::string path = o.key.empty() ? default_key_path() : o.key;
  if (!std::filesystem::exists(path)) throw Error(path + ": no node key here (this machine has not run `orchard node`)");
  const auto identity = network::NodeIdentity::load_or_create(path);
  const auto s = node::CoordinatorClient(o.coordinator, identity, o.ca_cert).status();
  // The coordinator's figures, checked: a float where a count belongs is a type error, not a wild cast.
  const auto count = [&s](const char* key) -> long long {
    return s.contains(key) ? exact_get<long long>(s[key]) : 0LL;
  };
  std::printf("node %s (owner %s)\n", s.value("node_id", "").c_str(), s.value("owner", "").c_str());
  std::printf("  jobs served      %lld (%lld tokens generated), %lld handed back, %lld abandoned, %lld running\n",
              count("jobs_served"), count("tokens_generated"), count("handed_back"),
              count("abandoned"), count("active_jobs"));
  std::printf("  reliability      %.3f%s\n", s.value("reliability", 0.0), s.value("draining", false) ? " (draining)" : "");
  std::printf("  audits           %lld passed, %lld failed; %lld job(s) waiting for their audit window to be paid\n",
              count("audits_passed"), count("audits_failed"), count("pending_jobs"));
  if (s.value("memory_check_pending", false))
    std::printf("  memory check     pending: no work until this node passes it (docs/verification.md)\n");
  else if (count("memory_proven_bytes") > 0)
    std::printf("  memory check     %lld MiB proved\n", count("memory_proven_bytes") >> 20);
  if (const std::string why = s.value("banned", ""); !why.empty())
    std::printf("  BANNED           %s (docs/verification.md)\n", why.c_str());
  std::printf("  credits earned   %s by this node, %s by the owner's nodes; owner's balance %s\n",
              credits(count("credits_earned")).c_str(), credits(count("owner_earned")).c_str(),
              credits(count("owner_balance")).c_str());

  // The ledger, checked here rather than taken on the coordinator's word.
  node::LedgerCheckOptions lo;
  lo.coordinator = o.coordinator;
  lo.ca_cert = o.ca_cert;
  lo.account = s.value("owner", "");
  lo.trusted_key = o.trusted_key;
  lo.pin_file = o.pin_file.empty() ? default_pin_file(o.coordinator) : o.pin_file;
  const node::LedgerCheckResult r = node::check_owner_ledger(lo);
  if (r.pinned_now)
    std::printf("  ledger key       %s (pinned on first use in %s)\n", r.key.c_str(), lo.pin_file.string().c_str());
  if (!r.head) {
    std::printf("  ledger           no signed head yet\n");
    return;
  }
  if (!r.check.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "ledger check FAILED against the head signed at seq %lld (%zu problem%s):\n",
                 static_cast<long long>(r.head->seq), r.check.violations.size(), r.check.violations.size() == 1 ? "" : "s");
    for (const auto& v : r.check.violations) std::fprintf(stderr, "  %s\n", v.c_str());
    std::exit(1);
  }
  std::printf("  ledger           verified: %lld entr%s of %s under the head signed at seq %lld",
              static_cast<long long>(r.check.verified), r.check.verified == 1 ? "y" : "ies", lo.account.c_str(),
              static_cast<long long>(r.head->seq));
  if (r.check.earlier) std::printf(", %lld verified before", static_cast<long long>(r.check.earlier));
  if (r.check.pending) std::printf(", %lld newer not signed yet", static_cast<long long>(r.check.pending));
  std::printf("\n");
}

}  // namespace

void register_node(CLI::App& app) {
  auto o = std::make_shared<NodeOpts>();
  auto* cmd = app.add_subcommand("node", "Lend this machine to an Orchard network: run its jobs, earn credits");
  cmd->add_option("--coordinator", o->coordinator, "The coordinator, http://HOST:PORT or https://HOST:PORT")->type_name("URL");
  cmd->add_option("--ca-cert", o->ca_cert,
                  "https: trust only this certificate (the coordinator's, or its CA's; PEM), not the system's CAs")
      ->type_name("FILE");
  cmd->add_option("-m,--model", o->models, "A model to serve (GGUF path or a name from `orchard models`); repeatable");
  cmd->add_option("--name", o->names, "The name clients ask for, per -m (default: the file's stem)");
  cmd->add_option("--key", o->key, "This node's identity key (made on first start; default under ~/.cache/orchard/node/)")
      ->type_name("PATH");
  cmd->add_option("--owner", o->owner, "The account credited for this node's work (default: $USER)");
  cmd->add_option("--hardware", o->hardware,
                  "What the world page shows: laptop (or cpu), desktop, workstation (the price class is measured)")
      ->capture_default_str();
  cmd->add_option("--region", o->region,
                  "Where the world map shows this node: a country (Germany) or LAT,LON rounded to whole degrees; "
                  "never looked up from an address");
  cmd->add_flag("--dedicated", o->dedicated, "Lend all the time (a dedicated slot earns 150 %)");
  cmd->add_flag("--when-idle", o->when_idle, "Lend only while the machine is idle (the default)");
  cmd->add_option("--idle-load", o->idle_load, "With --when-idle: the highest 1-minute load per core that counts as idle")
      ->capture_default_str();
  cmd->add_option("--window", o->window, "With --when-idle: lend only between these local times, e.g. 22:00-07:00")
      ->type_name("HH:MM-HH:MM");
  cmd->add_option("--idle-after", o->idle_after,
                  "With --when-idle: lend only once the user has given no input for this long (e.g. 5m); "
                  "a running job is handed back as soon as they return")
      ->type_name("DURATION");
  cmd->add_option("--bandwidth", o->bandwidth, "Memory bandwidth in GB/s (default: measured at start)");
  cmd->add_option("--memory", o->memory,
                  "Memory this node lends, e.g. 16G (default: the machine's; placement fits models into it)")
      ->type_name("SIZE");
  cmd->add_option("--parallel", o->parallel,
                  "As the ranks of a job, one cabled group: auto, pipeline, tensor, hybrid or expert "
                  "(start with `orchard run --nodes N --node …`)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("--tp", o->tp, "hybrid: tensor-parallel ranks per stage");
  cmd->add_option("--chunk", o->chunk, "Prompt tokens per pipeline step")->capture_default_str();
  cmd->add_option("--chip", o->chip, "The chip, as the planner's catalog names it (default: a plain CPU)");
  cmd->add_option("-t,--threads", o->threads, "Threads (0: all cores)")
      ->capture_default_str()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // `orchard run` puts its default first
  cmd->add_option("-c,--ctx", o->ctx, "Context size in tokens (0: min(model's, 4096))");
  add_kv_type_option(cmd, o->kv_type);
  cmd->add_option("--poll-wait", o->poll_wait, "Seconds each long-poll for work waits")->capture_default_str();
  // Hidden: a node that misbehaves on purpose, for the tests that the coordinator catches it.
  cmd->add_option("--cheat", o->cheat,
                  "Misbehave on purpose (tests): inflate-tokens, random-tokens, late-report, skimp-memory, swap-model:FILE")
      ->check([](const std::string& v) {
        return v == "inflate-tokens" || v == "random-tokens" || v == "late-report" || v == "skimp-memory" || v.rfind("swap-model:", 0) == 0
                   ? std::string()
                   : "--cheat takes inflate-tokens, random-tokens, late-report, skimp-memory or swap-model:FILE";
      })
      ->group("");
  cmd->footer(
      "Examples:\n"
      "  orchard node --coordinator http://coord.example:8090 -m llama-3.1-8b-q4 --dedicated\n"
      "  orchard node --coordinator http://coord.example:8090 -m model.gguf --when-idle --window 22:00-07:00\n"
      "  orchard node --coordinator http://coord.example:8090 -m model.gguf --when-idle --idle-after 5m\n"
      "  orchard node status --coordinator http://coord.example:8090\n"
      "  orchard run --nodes 2 --node --parallel tensor --coordinator http://coord.example:8090 -m big.gguf\n"
      "                                    # two ranks lent as one cabled group running tensor parallel\n"
      "SIGTERM or Ctrl-C drains: a running job is handed back (its output kept for the next node).\n"
      "--idle-after reads the user's input from logind's idle hint (desktop sessions) and terminal\n"
      "input times (/dev/pts, /dev/tty*), as `w` does; docs/network.md has the details.");
  auto* status = cmd->add_subcommand("status", "Jobs this node served and credits it earned");
  status->add_option("--coordinator", o->coordinator, "The coordinator, http://HOST:PORT or https://HOST:PORT")
      ->required()
      ->type_name("URL");
  status->add_option("--ca-cert", o->ca_cert, "https: trust only this certificate (PEM)")->type_name("FILE");
  status->add_option("--key", o->key, "This node's identity key")->type_name("PATH");
  status->add_option("--trusted-key", o->trusted_key,
                     "The coordinator's ledger key (64 hex digits) to check signed heads against "
                     "(default: the key pinned on first use)")
      ->type_name("HEX");
  status->add_option("--pin-file", o->pin_file,
                     "Where the coordinator's key and the last verified head are kept "
                     "(default: ~/.cache/orchard/node/trusted/HOST_PORT.json)")
      ->type_name("PATH");
  cmd->require_subcommand(0, 1);
  status->callback([o] { node_status(*o); });
  cmd->callback([o, status] {
    if (status->parsed()) return;
    if (runs_as_rank(o->parallel, "node"))
      run_group(*o);
    else
      run_node(*o);
  });
}

}  // namespace orchard::cli
