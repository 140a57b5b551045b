// `orchard bench`: prompt-processing and generation speed in the style of llama-bench
// (pp = one batch of P tokens from an empty cache, tg = N tokens one at a time), median of
// repetitions, one row per thread count, with joules per token from the CPU package's energy
// counter where the platform has one. With --roofline, every generation repetition is also set
// against the memory read bandwidth measured just before and after it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>

#include "cli/args.h"
#include "cli/commands.h"
#include "model/engine.h"
#include "model/synthetic/synthetic.h"
#include "parallel/model_cost.h"
#include "platform/energy_meter.h"
#include "platform/platform.h"
#include "serve/model_store.h"
#include "tensor/kernels/kernels.h"
#include "tensor/read_bandwidth.h"
#include "tensor/threadpool.h"

namespace orchard::cli {
namespace {

struct Stat {
  double median, stddev;
};

Stat stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) var += (x - mean) * (x - mean);
  const double sd = v.size() > 1 ? std::sqrt(var / static_cast<double>(v.size() - 1)) : 0;
  return {v[v.size() / 2], sd};
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  for (const std::string& item : split_commas(s)) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

void register_bench(CLI::App& app) {
  struct Opts {
    std::string model, threads = "0";
    int pp = 512, tg = 128, reps = 5;
    bool mmap = false, no_repack = false, roofline = false;
    KVType kv_type = KVType::F32;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "bench", "Measure prompt processing (pp) and generation (tg) tokens/s, llama-bench style");
  cmd->add_option("-m,--model", o->model, "GGUF model file (default: the built-in model)");
  cmd->add_option("-p,--n-prompt", o->pp, "Prompt tokens for pp (0: skip)")->capture_default_str();
  cmd->add_option("-n,--n-gen", o->tg, "Generated tokens for tg (0: skip)")->capture_default_str();
  cmd->add_option("-r,--repetitions", o->reps, "Repetitions (median reported)")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Comma-separated thread counts, e.g. 1,2 (0: all)")
      ->capture_default_str();
  cmd->add_flag("--mmap", o->mmap, "Run from the page cache instead of a huge-page copy");
  cmd->add_flag("--no-repack", o->no_repack, "Skip the repacked weight copy (less memory, slower prompts)");
  cmd->add_flag("--roofline", o->roofline,
                "Read a 1 GiB buffer with the same threads before and after every generation "
                "repetition and report the weights streamed per second as a share of that bandwidth");
  add_kv_type_option(cmd, o->kv_type);
  register_bench_comm(*cmd);
  register_bench_parallel(*cmd);
  register_bench_serve(*cmd);
  cmd->callback([o, cmd] {
    if (cmd->got_subcommand("comm") || cmd->got_subcommand("parallel") || cmd->got_subcommand("serve")) return;
    if (o->reps < 1) throw CLI::ValidationError("--repetitions", "must be at least 1");
    EngineOptions eo;
    eo.model_path = o->model.empty() ? default_model_path() : serve::resolve_model(o->model);
    eo.n_ctx = std::max(o->pp, o->tg) + 1;
    eo.mmap = o->mmap;
    eo.repack = !o->no_repack;
    eo.kv_type = o->kv_type;
    auto engine = Engine::load(eo);
    const HParams& hp = engine->hparams();
    std::printf("model: %s (%s, %lld layers, dim %lld), kernels: %s, KV cache: %s\n", eo.model_path.c_str(),
                hp.arch.c_str(), static_cast<long long>(hp.n_layers), static_cast<long long>(hp.dim),
                kernels::isa_name(kernels::detect_isa()), kv_type_name(eo.kv_type));
    // Energy: the CPU package's counter around each repetition (the whole package, so other
    // work on the machine counts too), or "unavailable" with the reason below the table.
    const bool energy = platform::read_energy().has_value();
    std::printf("| threads | test | t/s (median of %d) | stddev | J/token |\n|---:|---|---:|---:|---:|\n", o->reps);
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(hp.n_vocab - 1));
    auto kv = engine->new_cache();
    std::vector<float> logits;
    // Every weight is read once per generated token: the matrices whole, one embedding row.
    const double token_bytes =
        o->roofline ? parallel::total(parallel::ModelCost::from_gguf(engine->file()).read_per_token(0, hp.n_layers, 1, true))
                    : 0.0;
    std::unique_ptr<BandwidthProbe> probe;
    if (o->roofline && o->tg > 0) probe = std::make_unique<BandwidthProbe>(size_t{1} << 30);
    std::vector<std::string> roof_rows;
    for (int threads : parse_list(o->threads)) {
      set_threads(threads);
      const int shown = global_pool().size();
      auto run = [&](const char* name, int n, auto&& body, BandwidthProbe* roof) {
        if (n <= 0) return;
        body();  // warm-up: maps pages and fills caches
        std::vector<double> tps, read_gbs, shares;
        // Joules summed over every repetition, over every repetition's tokens: a package
        // counter updates about once a millisecond, so a short repetition alone may see none of
        // its steps (a median of such readings can be 0).
        double joules = 0;
        bool metered = false;
        double before = roof ? roof->roofline(global_pool()) : 0.0;
        for (int r = 0; r < o->reps; ++r) {
          platform::EnergyMeter meter;
          auto t0 = std::chrono::steady_clock::now();
          body();
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          tps.push_back(n / s);
          if (const std::optional<double> j = meter.joules()) joules += *j, metered = true;
          if (!roof) continue;
          // A shared host's bandwidth moves within seconds: each repetition against the mean of
          // the readings on either side of it.
          const double after = roof->roofline(global_pool()), around = (before + after) / 2;
          read_gbs.push_back(around);
          shares.push_back(token_bytes * n / s / 1e9 / around);
          before = after;
        }
        const Stat st = stats(tps);
        char j[32] = "unavailable";
        if (metered) std::snprintf(j, sizeof j, "%.4g", joules / (static_cast<double>(n) * o->reps));
        std::printf("| %d | %s%d | %.2f | %.2f | %s |\n", shown, name, n, st.median, st.stddev, j);
        std::fflush(stdout);
        if (!roof) return;
        const auto [lo, hi] = std::minmax_element(shares.begin(), shares.end());
        char row[256];
        std::snprintf(row, sizeof row, "| %d | %s%d | %.2f | %.1f | %.1f | %.0f %% (%.0f–%.0f %%) |", shown, name, n,
                      st.median, token_bytes * st.median / 1e9, stats(read_gbs).median, 100 * stats(shares).median,
                      100 * *lo, 100 * *hi);
        roof_rows.push_back(row);
      };
      run("pp", o->pp, [&] {
        std::vector<int32_t> ids(static_cast<size_t>(o->pp));
        for (auto& t : ids) t = tok(rng);
        kv->clear();
        engine->model().forward(ids, *kv, logits);
      }, nullptr);
      run("tg", o->tg, [&] {
        kv->clear();
        for (int i = 0; i < o->tg; ++i) {
          const int32_t t = tok(rng);
          engine->model().forward(std::span<const int32_t>(&t, 1), *kv, logits);
        }
      }, probe.get());
    }
    std::printf("\nenergy: %s\n", energy ? ("CPU package counter " + platform::energy_source() +
                                            " (the whole package: anything else running counts too)").c_str()
                                         : platform::energy_source().c_str());
    if (roof_rows.empty()) return;
    std::printf("\nroofline: %.2f MB of weights read per generated token; read GB/s = the faster of a plain and a\n"
                "prefetching read of 1 GiB (median of 3 passes each), the mean of the readings before and\n"
                "after each repetition\n"
                "| threads | test | t/s | weights GB/s | read GB/s | share of roofline (median, range) |\n"
                "|---:|---|---:|---:|---:|---:|\n", token_bytes / 1e6);
    for (const std::string& r : roof_rows) std::printf("%s\n", r.c_str());
  });
}

}  // namespace orchard::cli
