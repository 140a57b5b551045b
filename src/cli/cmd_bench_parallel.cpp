// `orchard bench parallel`: time to first token and generation tokens/s of one model split over
// local ranks, per split, rank count and emulated link latency; 1-rank rows are the baseline.
// Outside a job it starts the ranks itself; inside one (--worker) the sampler prints a row.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "dist/config.h"
#include "dist/launcher.h"
#include "dist/make_group.h"
#include "model/engine.h"
#include "model/synthetic/synthetic.h"
#include "parallel/calibrate.h"
#include "parallel/cluster.h"
#include "parallel/distributed_forward.h"
#include "parallel/model_cost.h"
#include "parallel/predict.h"
#include "parallel/session.h"
#include "platform/platform.h"
#include "serve/model_store.h"
#include "tensor/error.h"
#include "tensor/threadpool.h"

namespace orchard::cli {
namespace {

struct BenchOpts {
  std::string model, ranks = "1,2,4", splits = "pipeline,tensor,hybrid", latencies = "0,50,300";
  std::string backend = "shm", threads = "1";
  int pp = 512, tg = 64, reps = 3;
  int64_t chunk = 64;
  bool worker = false;
  std::string split = "pipeline";
  double latency = 0;
  std::string predict;  // node file: print the planner's prediction beside each row
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<TokenId> prompt_tokens(int n, int64_t vocab) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> d(3, static_cast<int32_t>(vocab - 1));
  std::vector<TokenId> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

// Resident memory of this process (VmRSS), in MiB.
double rss_mib() { return platform::resident_mib(); }

// The planner's figures for this row's setup: (TTFT ms, tg tokens/s).
std::pair<double, double> predicted(const BenchOpts& o, const std::string& path, int ranks, const std::string& split,
                                    const std::string& backend, int threads) {
  auto file = GGUFFile::open(path, GGUFLoad::Map);
  const auto cost = parallel::ModelCost::from_gguf(*file);
  parallel::ClusterSpec cl;
  parallel::NodeSpec node = parallel::measured_node(o.predict);
  node.ranks = ranks;
  node.threads = threads;
  cl.nodes.push_back(node);
  cl.local_backend = backend == "-" ? "shm" : backend;
  cl.local_extra_latency_us = o.latency;
  parallel::Candidate c;
  const bool expert = split.rfind("expert", 0) == 0;
  c.tp = split == "tensor" || expert ? ranks : split == "hybrid" ? 2 : 1;
  c.stages = ranks / c.tp;
  if (expert) c.kind = parallel::Kind::kExpert;  // (expert-whole predicted as expert)
  else if (c.tp > 1) c.kind = c.stages == 1 ? parallel::Kind::kTensor : parallel::Kind::kHybrid;
  parallel::PredictOptions po;
  po.n_ctx = o.pp + o.tg + 1;
  po.prompt = o.pp;
  po.gen = o.tg;
  po.chunk = o.chunk;
  const auto p = parallel::predict(cost, cl, c, po);
  return {p.ttft_s * 1e3, p.tg_tps};
}

// The node file the predictions use: `--predict` with its compute figures re-measured now, for
// the formats that make up most of the model (this machine's speed drifts between minutes).
std::string refreshed_node(const BenchOpts& o, const std::string& model) {
  parallel::NodeSpec node = parallel::measured_node(o.predict);
  auto file = GGUFFile::open(model, GGUFLoad::Map);
  const auto cost = parallel::ModelCost::from_gguf(*file);
  std::map<DType, double> by_type;
  for (const auto& layer : cost.layer_active)
    for (const auto& [t, b] : layer) by_type[t] += b;
  std::vector<DType> types;
  for (const auto& [t, b] : by_type)
    if (b > 0.01 * cost.bytes) types.push_back(t);
  parallel::refresh_compute(node.machine, types, 0.2);
  const std::string out = o.predict + ".now.json";
  std::ofstream(out) << parallel::machine_to_json(node.machine).dump(2) << "\n";
  return out;
}

void print_row(const BenchOpts& o, const std::string& path, int ranks, const std::string& split,
               const std::string& backend, int threads, double ttft_ms, double tg, double rss) {
  std::printf("| %5d | %-8s | %-7s | %6.0f | %7d | %6lld | %9.1f | %9.1f | %7.2f | %8.0f |", ranks, split.c_str(),
              backend.c_str(), o.latency, threads, static_cast<long long>(o.chunk), ttft_ms, o.pp * 1000.0 / ttft_ms,
              tg, rss);
  if (!o.predict.empty()) {
    const auto [p_ttft, p_tg] = predicted(o, path, ranks, split, backend, threads);
    std::printf(" %9.1f | %7.2f | %+6.0f%% |", p_ttft, p_tg, (p_tg / tg - 1) * 100);
  }
  std::printf("\n");
  std::fflush(stdout);
}

// Runs pp then tg `reps` times through `f` (made fresh by `make`), returns medians.
template <class Make>
std::pair<double, double> measure(const BenchOpts& o, int64_t vocab, Make make) {
  const auto prompt = prompt_tokens(o.pp, vocab);
  std::vector<double> ttft, tg;
  std::vector<float> logits;
  for (int r = 0; r < o.reps; ++r) {
    auto [fwd, keep] = make();
    const auto t0 = std::chrono::steady_clock::now();
    fwd->feed(prompt, logits);
    TokenId next = fwd->agree(fwd->is_sampler() ? static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin()) : 0);
    const auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.tg; ++i) {
      fwd->feed(std::span<const TokenId>(&next, 1), logits);
      next = fwd->agree(fwd->is_sampler() ? static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin()) : 0);
    }
    const auto t2 = std::chrono::steady_clock::now();
    ttft.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    tg.push_back(o.tg / std::chrono::duration<double>(t2 - t1).count());
  }
  return {median(ttft), median(tg)};
}

void run_single(const BenchOpts& o, const std::string& path, int threads) {
  EngineOptions eo;
  eo.model_path = path;
  eo.threads = threads;
  eo.n_ctx = o.pp + o.tg + 1;
  auto engine = Engine::load(eo);
  auto [ttft, tg] = measure(o, engine->hparams().n_vocab, [&] {
    auto kv = std::shared_ptr<KVCache>(engine->new_cache());
    return std::make_pair(std::make_unique<LocalForward>(engine->model(), *kv), kv);
  });
  BenchOpts row = o;
  row.latency = 0;
  row.chunk = o.pp;
  print_row(row, path, 1, "-", "-", threads, ttft, tg, rss_mib());
}

void run_worker(const BenchOpts& o, const std::string& path) {
  auto world = dist::make_group_from_env();
  parallel::SessionOptions so;
  so.engine.model_path = path;
  so.engine.threads = std::stoi(o.threads);
  so.engine.n_ctx = o.pp + o.tg + 1;
  so.kind = parallel::parse_kind(o.split == "expert-whole" ? "expert" : o.split);
  so.whole_attention = o.split == "expert-whole";
  so.chunk = o.chunk;
  auto session = parallel::Session::start(*world, so);
  Engine& engine = session->engine();
  auto [ttft, tg] = measure(o, engine.hparams().n_vocab, [&] {
    auto kv = std::shared_ptr<KVCache>(engine.new_cache());
    return std::make_pair(session->make_forward(*kv), kv);
  });
  // The largest rank's resident memory: what the biggest machine must hold.
  const double mine = rss_mib();
  std::vector<double> all(static_cast<size_t>(world->size()));
  world->all_gather(&mine, all.data(), sizeof mine);
  const double most = *std::max_element(all.begin(), all.end());
  if (session->is_sampler()) print_row(o, path, world->size(), o.split, world->backend(), so.engine.threads, ttft, tg, most);
}

}  // namespace

void register_bench_parallel(CLI::App& bench) {
  auto o = std::make_shared<BenchOpts>();
  auto* cmd = bench.add_subcommand(
      "parallel", "Time to first token and generation tokens/s of a model split over local ranks");
  cmd->footer(
      "Examples:\n"
      "  orchard bench parallel -m 1b-Q4_0.gguf --ranks 1,2 --split tensor --latency 0 -t 1\n"
      "  orchard bench parallel -m 1b-Q4_0.gguf --ranks 2 --split pipeline --chunk 128,2048 -p 2048\n"
      "  orchard bench parallel -m moe-small-Q4_0.gguf --ranks 1,2 --split expert,expert-whole --latency 0 -t 1\n"
      "Rows with 1 rank run in one process (threads from -t, e.g. -t 1,2); links with latency > 0\n"
      "use the tcp backend with ORCHARD_LINK_LATENCY_US.");
  cmd->add_option("-m,--model", o->model, "GGUF model (default: the built-in model)");
  cmd->add_option("--ranks", o->ranks, "Comma-separated rank counts")->capture_default_str();
  cmd->add_option("--split", o->splits,
                  "Comma-separated: pipeline, tensor, hybrid, expert (attention split too), expert-whole (attention "
                  "whole on every rank)")
      ->capture_default_str();
  cmd->add_option("--latency", o->latencies, "Comma-separated emulated link latencies (µs)")->capture_default_str();
  cmd->add_option("--backend", o->backend, "Backend when latency is 0 (shm or tcp)")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads per rank; 1-rank rows accept a list")->capture_default_str();
  cmd->add_option("-p,--n-prompt", o->pp, "Prompt tokens (TTFT)")->capture_default_str();
  cmd->add_option("-n,--n-gen", o->tg, "Generated tokens")->capture_default_str();
  cmd->add_option("-r,--repetitions", o->reps, "Repetitions (median)")->capture_default_str();
  cmd->add_option("--chunk", o->chunk, "Prompt tokens per pipeline step")->capture_default_str();
  cmd->add_option("--predict", o->predict,
                  "Node file from `orchard plan --calibrate`: add the planner's predictions (its compute figures "
                  "re-measured before each row, its link figures as calibrated)");
  cmd->add_flag("--worker", o->worker, "Internal: one rank of a running benchmark");
  cmd->add_option("--worker-split", o->split, "Internal");
  cmd->add_option("--worker-latency", o->latency, "Internal");
  cmd->callback([o] {
    const std::string path = o->model.empty() ? default_model_path() : serve::resolve_model(o->model);
    if (o->worker) {
      run_worker(*o, path);
      return;
    }
    std::printf("model: %s | prompt %d tokens, generation %d tokens, median of %d\n\n", path.c_str(), o->pp, o->tg,
                o->reps);
    const bool pr = !o->predict.empty();
    std::printf("| ranks | split    | backend | lat µs | thr/rank | chunk | TTFT ms | pp t/s | tg t/s | max RSS MiB |%s\n",
                pr ? " predicted TTFT ms | predicted tg t/s | tg error |" : "");
    std::printf("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|%s\n", pr ? "---:|---:|---:|" : "");
    std::fflush(stdout);
    BenchOpts row = *o;
    for (const std::string& rs : split_commas(o->ranks)) {
      const int n = std::stoi(rs);
      if (n == 1) {
        for (const std::string& t : split_commas(o->threads)) {
          if (!o->predict.empty()) row.predict = refreshed_node(*o, path);
          run_single(row, path, std::stoi(t));
        }
        continue;
      }
      for (const std::string& split : split_commas(o->splits))
        for (const std::string& lat : split_commas(o->latencies)) {
          if (split == "hybrid" && n % 2 != 0) continue;
          if (split == "hybrid" && n < 4) continue;
          const double latency = std::stod(lat);
          dist::LaunchOptions lo;
          lo.ranks = n;
          lo.backend = latency > 0 ? "tcp" : o->backend;
          lo.prefix = false;
          lo.command = {self_executable(), "bench", "parallel", "--worker", "-m", path, "--worker-split", split,
                        "--worker-latency", lat, "-t", split_commas(o->threads).front(), "-p", std::to_string(o->pp),
                        "-n", std::to_string(o->tg), "-r", std::to_string(o->reps), "--chunk",
                        std::to_string(o->chunk)};
          if (!o->predict.empty()) lo.command.insert(lo.command.end(), {"--predict", refreshed_node(*o, path)});
          if (latency > 0) lo.extra_env.push_back("ORCHARD_LINK_LATENCY_US=" + lat);
          std::fflush(stdout);
          const int rc = dist::launch(lo);
          if (rc != 0) std::fprintf(stderr, "bench parallel: %d ranks, %s failed (status %d)\n", n, split.c_str(), rc);
        }
    }
  });
}

}  // namespace orchard::cli
