// `orchard plan`: predicts every way of splitting a model over a described cluster, ranks
// them and names the best; `--calibrate` measures this machine into a node description.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "model/gguf.h"
#include "parallel/auto_plan.h"
#include "parallel/calibrate.h"
#include "parallel/cluster.h"
#include "parallel/memory.h"
#include "parallel/plan.h"
#include "parallel/predict.h"
#include "tensor/error.h"

namespace orchard::cli {
namespace {

struct PlanOpts {
  std::string model, params, type = "Q4_0", cluster, machine, node, link = "tb5-rdma", local = "shm";
  int nodes = 1, ranks = 1, threads = 0, cables = 1;
  double extra_latency_us = 0, price_kwh = -1;
  parallel::PredictOptions predict;
  bool explain = false, calibrate = false, list = false, json = false;
  std::string out, cal_ranks = "2,4", emulate, cal_types;
  double seconds = 0.25;
};

parallel::ModelCost load_cost(const PlanOpts& o) {
  if (!o.model.empty()) {
    // Map, not read: the header and tensor table are all the planner looks at.
    auto f = GGUFFile::open(o.model, GGUFLoad::Map);
    return parallel::ModelCost::from_gguf(*f);
  }
  if (!o.params.empty()) return parallel::ModelCost::from_shape(parallel::model_spec(o.params, parse_type(o.type)));
  throw Error("give the model: --model FILE.gguf, or --params NAME|SIZE (e.g. --params llama-3.3-70b, --params 70B)");
}

parallel::ClusterSpec make_cluster(const PlanOpts& o) {
  const auto& catalog = parallel::Catalog::builtin();
  parallel::ClusterSpec c;
  if (!o.cluster.empty()) {
    c = parallel::ClusterSpec::load(o.cluster, catalog);
  } else {
    parallel::NodeSpec n;
    if (!o.machine.empty()) {
      n = parallel::catalog_node(catalog, o.machine);
    } else {
      const std::string path = o.node.empty() ? parallel::default_node_file() : o.node;
      if (!std::filesystem::exists(path))
        throw Error("describe the cluster: --cluster FILE, --machine ID (see --list), or --node FILE; " + path +
                    " does not exist yet (make it with `orchard plan --calibrate`)");
      n = parallel::measured_node(path);
    }
    n.ranks = o.ranks;
    n.threads = o.threads;
    for (int i = 0; i < o.nodes; ++i) {
      c.nodes.push_back(n);
      if (o.nodes > 1) c.nodes.back().name = n.name + "-" + std::to_string(i + 1);
    }
    if (o.nodes > 1) {
      c.link.spec = catalog.link(o.link);
      c.link.cables = o.cables;
    }
    c.local_backend = o.local;
    c.local_extra_latency_us = o.extra_latency_us;
  }
  if (o.price_kwh >= 0) c.price_kwh = o.price_kwh;
  return c;
}

std::string num(double v, const char* f) {
  if (!std::isfinite(v)) return "–";
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void print_plans(const PlanOpts& o) {
  const parallel::ModelCost cost = load_cost(o);
  const parallel::ClusterSpec cluster = make_cluster(o);
  const auto plans = parallel::rank_plans(cost, cluster, o.predict);
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& p : plans) {
      nlohmann::json mem = nlohmann::json::array();
      for (const auto& m : p.memory) mem.push_back({{"node", m.node}, {"need_bytes", m.need}, {"capacity_bytes", m.capacity}});
      j.push_back({{"plan", p.candidate.label()}, {"kind", parallel::kind_name(p.candidate.kind)},
                   {"stages", p.candidate.stages}, {"group", p.candidate.tp},
                   {"runs_in_orchard", p.unsupported.empty()},
                   {"unsupported", p.unsupported.empty() ? nlohmann::json() : nlohmann::json(p.unsupported)},
                   {"machines", p.candidate.n_nodes}, {"fits", p.fits},
                   {"memory", mem}, {"ttft_s", p.ttft_s}, {"tg_tokens_per_s", p.tg_tps}, {"compute_s", p.compute_s},
                   {"comm_s", p.comm_s}, {"exchanged_bytes_per_token", p.exchanged_bytes}, {"joules_per_token", std::isfinite(p.joules_per_token) ? nlohmann::json(p.joules_per_token) : nlohmann::json()},
                   {"cost_per_mtok", std::isfinite(p.usd_per_mtok) ? nlohmann::json(p.usd_per_mtok) : nlohmann::json()}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("model:   %s\n", cost.summary().c_str());
  std::printf("cluster: %s\n", cluster.describe().c_str());
  std::printf("context %lld tokens (%s KV cache), prompt %lld, generation %lld\n\n",
              static_cast<long long>(o.predict.n_ctx), kv_type_name(o.predict.kv_type),
              static_cast<long long>(o.predict.prompt), static_cast<long long>(o.predict.gen));
  std::printf("| # | plan | machines | fits | fullest machine: need of usable | TTFT ms | tg t/s | comm ms/token | J/token | cost/Mtok |\n");
  std::printf("|---:|---|---:|---|---|---:|---:|---:|---:|---:|\n");
  int i = 0;
  bool marked = false;
  for (const auto& p : plans) {
    // The machine closest to (or furthest past) its limit.
    const parallel::NodeMemory* most = &p.memory.front();
    for (const auto& m : p.memory)
      if (m.need / m.capacity > most->need / most->capacity) most = &m;
    // Splits another engine can run but Orchard cannot yet are listed for comparison, marked.
    marked = marked || !p.unsupported.empty();
    std::printf("| %d%s | %s | %d | %s | %s of %s | %s | %s | %s | %s | %s |\n", ++i, p.unsupported.empty() ? "" : " †",
                p.candidate.label().c_str(),
                p.candidate.n_nodes, p.fits ? "yes" : "no", parallel::format_bytes(static_cast<uint64_t>(most->need)).c_str(),
                parallel::format_bytes(static_cast<uint64_t>(most->capacity)).c_str(), num(p.ttft_s * 1e3, "%.0f").c_str(),
                num(p.tg_tps, "%.1f").c_str(), num(p.comm_s * 1e3, "%.2f").c_str(), num(p.joules_per_token, "%.2f").c_str(),
                num(p.usd_per_mtok, "%.3f").c_str());
  }
  std::printf("\n");
  for (const auto& p : plans)
    if (marked && !p.unsupported.empty()) {
      std::printf("† not chosen: %s\n\n", p.unsupported.c_str());
      break;
    }
  const parallel::Prediction best = parallel::choose_plan(cost, cluster, o.predict);  // throws when nothing fits
  std::printf("chosen: %s over %d machine(s): %.1f tokens/s, TTFT %.0f ms\n", best.candidate.label().c_str(),
              best.candidate.n_nodes, best.tg_tps, best.ttft_s * 1e3);
  if (o.explain) {
    for (const std::string& t : best.terms) std::printf("  %s\n", t.c_str());
    for (const auto& m : best.memory)
      std::printf("  memory on %s: %s of %s usable\n", m.node.c_str(), parallel::format_bytes(static_cast<uint64_t>(m.need)).c_str(),
                  parallel::format_bytes(static_cast<uint64_t>(m.capacity)).c_str());
  }
}

void list_catalog() {
  const auto& c = parallel::Catalog::builtin();
  std::printf("| machine | name | memory GiB | bandwidth GB/s | GPU TFLOPS | Thunderbolt | RDMA | idle/load W |\n");
  std::printf("|---|---|---|---:|---:|---:|---|---|\n");
  for (const auto& m : c.machines()) {
    std::string mem;
    for (double g : m.memory_gib) mem += (mem.empty() ? "" : "/") + num(g, "%.0f");
    std::printf("| %s | %s | %s | %.0f | %.1f | %d | %s | %s/%s |\n", m.id.c_str(), m.name.c_str(), mem.c_str(), m.mem_bw_gbs,
                m.gpu_tflops, m.thunderbolt, m.rdma ? "yes" : "no", num(m.idle_w, "%.0f").c_str(), num(m.load_w, "%.0f").c_str());
  }
  std::printf("\n| link | name | latency µs | GB/s per cable | cables |\n|---|---|---:|---:|---:|\n");
  for (const auto& l : c.links())
    std::printf("| %s | %s | %.0f | %.2f | %d |\n", l.id.c_str(), l.name.c_str(), l.latency_us, l.gbs, l.max_cables);
  std::printf("\nmodel shapes for --params:");
  for (const auto& s : parallel::known_model_specs()) std::printf(" %s", s.c_str());
  std::printf(" (or a size such as 70B)\n");
}

void run_calibrate(const PlanOpts& o) {
  parallel::CalibrateOptions co;
  co.seconds = o.seconds;
  co.ranks.clear();
  for (const auto& r : split_commas(o.cal_ranks)) co.ranks.push_back(std::stoi(r));
  for (const auto& e : split_commas(o.emulate)) co.emulate_us.push_back(std::stod(e));
  if (!o.cal_types.empty()) {
    co.types.clear();
    for (const auto& t : split_commas(o.cal_types)) co.types.push_back(parse_type(t));
  }
  co.progress = [](const std::string& s) { std::fprintf(stderr, "calibrating: %s\n", s.c_str()); };
  const parallel::MachineSpec m = parallel::calibrate(co);
  const std::string path = o.out.empty() ? parallel::default_node_file() : o.out;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << parallel::machine_to_json(m).dump(2) << "\n";
    if (!out) throw Error(tmp + ": cannot write");
  }
  std::filesystem::rename(tmp, path);
  std::printf("wrote %s: %s, %.1f GB/s read with %d threads\n", path.c_str(), m.name.c_str(), m.mem_bw_gbs, m.cores);
}

}  // namespace

void register_plan(CLI::App& app) {
  auto o = std::make_shared<PlanOpts>();
  auto* cmd = app.add_subcommand("plan", "Predict TTFT, tokens/s and memory of every split of a model over a cluster; pick the best");
  cmd->footer(
      "Examples:\n"
      "  orchard plan --calibrate                                # measure this machine once\n"
      "  orchard plan -m model.gguf --ranks 2 -t 1               # this machine, 2 local ranks\n"
      "  orchard plan --params kimi-k2 --type Q4_0 --machine m3-ultra:512 --nodes 4 --link tb5-rdma --explain\n"
      "  orchard plan -m model.gguf --cluster cluster.json --ctx 8192\n"
      "  orchard plan --list                                     # machines, links and model shapes known\n"
      "Cluster files and the model behind the predictions: docs/planner.md.");
  cmd->add_option("-m,--model", o->model, "GGUF model (only its header is read)");
  cmd->add_option("--params", o->params, "A model not on disk: a known shape (see --list) or a size such as 70B");
  cmd->add_option("--type", o->type, "Weight format for --params")->capture_default_str();
  cmd->add_option("--cluster", o->cluster, "Cluster file (JSON; see docs/planner.md)");
  cmd->add_option("--machine", o->machine, "A catalog machine, e.g. m4-pro or m3-ultra:256 (GiB)");
  cmd->add_option("--node", o->node, "A node file from --calibrate (default: " + parallel::default_node_file() + ")");
  cmd->add_option("--nodes", o->nodes, "Machines of that kind")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--link", o->link, "Link between machines (see --list)")->capture_default_str();
  cmd->add_option("--cables", o->cables, "Parallel cables per pair")->capture_default_str()->check(CLI::Range(1, 8));
  cmd->add_option("--ranks", o->ranks, "Ranks per machine")->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("-t,--threads", o->threads, "Threads per rank (default: cores / ranks)");
  cmd->add_option("--local", o->local, "Backend between ranks on one machine (shm, tcp)")->capture_default_str();
  cmd->add_option("--extra-latency-us", o->extra_latency_us, "Emulated latency added to local messages");
  cmd->add_option("-c,--ctx", o->predict.n_ctx, "Context the KV cache holds")->capture_default_str();
  add_kv_type_option(cmd, o->predict.kv_type);
  cmd->add_option("-p,--n-prompt", o->predict.prompt, "Prompt tokens for TTFT")->capture_default_str();
  cmd->add_option("-n,--n-gen", o->predict.gen, "Generated tokens")->capture_default_str();
  cmd->add_option("--chunk", o->predict.chunk, "Prompt tokens per pipeline step")->capture_default_str();
  cmd->add_option("--price-kwh", o->price_kwh, "Electricity price per kWh (default 0.30)");
  cmd->add_flag("--explain", o->explain, "Show the terms behind the chosen plan's figures");
  cmd->add_flag("--json", o->json, "Print every plan as JSON");
  cmd->add_flag("--list", o->list, "List the catalog's machines and links, and known model shapes");
  cmd->add_flag("--calibrate", o->calibrate, "Measure this machine and write its node file");
  cmd->add_option("-o,--output", o->out, "--calibrate: where to write the node file");
  cmd->add_option("--calibrate-ranks", o->cal_ranks, "--calibrate: local all_sum rank counts")->capture_default_str();
  cmd->add_option("--emulate", o->emulate, "--calibrate: also measure tcp with these emulated latencies (µs), e.g. 50,300");
  cmd->add_option("--calibrate-types", o->cal_types, "--calibrate: weight formats to measure (default: F32,F16,BF16,Q8_0,Q4_0,Q4_K,Q6_K)");
  cmd->add_option("--seconds", o->seconds, "--calibrate: seconds per measured point")->capture_default_str();
  cmd->callback([o] {
    if (o->list) return list_catalog();
    if (o->calibrate) return run_calibrate(*o);
    print_plans(*o);
  });
}

}  // namespace orchard::cli
