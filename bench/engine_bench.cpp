// Prompt (pp) and generation (tg) tokens/s of a GGUF with the engine alone, for builds that have
// no `orchard` command: the static aarch64 build that runs under qemu-user (scripts/test-arm.sh),
// where it counts instructions more than time (docs/benchmarks.md: NEON under qemu). Elsewhere
// use `orchard bench`, which reports the same two tests with medians, energy and the roofline.
//   qemu-aarch64 build-arm-dotprod/bench/engine_bench MODEL.gguf [-p 128] [-n 32] [-r 1] [-t 1] [--no-repack]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "model/engine.h"
#include "tensor/kernels/kernels.h"

namespace {

int usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: engine_bench MODEL.gguf [-p PROMPT_TOKENS] [-n GENERATED_TOKENS] [-r REPETITIONS] [-t THREADS]\n"
               "                    [--no-repack]\n"
               "Prints pp and tg tokens/s (the best of the repetitions), one random prompt from an empty cache\n"
               "and tokens decoded one at a time. Defaults: -p 128 -n 32 -r 1 -t 1. --no-repack: the weights'\n"
               "row-major kernels only (no layout repacked at load), for side-by-side runs.\n");
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  int pp = 128, tg = 32, reps = 1, threads = 1;
  bool repack = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") return usage(0);
    if (a == "--no-repack") {
      repack = false;
      continue;
    }
    int* target = a == "-p" ? &pp : a == "-n" ? &tg : a == "-r" ? &reps : a == "-t" ? &threads : nullptr;
    if (target) {
      char* end = nullptr;
      if (i + 1 >= argc || (*target = static_cast<int>(std::strtol(argv[++i], &end, 10)), *end != '\0') || *target < 0)
        return std::fprintf(stderr, "engine_bench: %s takes a number, 0 or more\n", a.c_str()), usage(2);
    } else if (path.empty() && a.rfind('-', 0) != 0) {
      path = a;
    } else {
      return std::fprintf(stderr, "engine_bench: unknown argument '%s'\n", a.c_str()), usage(2);
    }
  }
  if (path.empty()) return usage(2);
  try {
    orchard::EngineOptions eo;
    eo.model_path = path;
    eo.threads = threads;
    eo.n_ctx = std::max(pp, tg) + 1;
    eo.repack = repack;
    auto engine = orchard::Engine::load(eo);
    std::printf("model: %s, kernels: %s%s, threads: %d\n", path.c_str(),
                orchard::kernels::isa_name(orchard::kernels::detect_isa()), repack ? "" : " (no repacking)", threads);
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(engine->hparams().n_vocab - 1));
    auto kv = engine->new_cache();
    std::vector<float> logits;
    const auto best_rate = [&](int n, auto&& body) {
      double best = 0;
      for (int r = 0; r < std::max(reps, 1); ++r) {
        kv->clear();
        const auto t0 = std::chrono::steady_clock::now();
        body();
        best = std::max(best, n / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      return best;
    };
    if (pp > 0) {
      std::vector<int32_t> ids(static_cast<size_t>(pp));
      const double r = best_rate(pp, [&] {
        for (auto& t : ids) t = tok(rng);
        engine->model().forward(ids, *kv, logits);
      });
      std::printf("pp%d: %.3f t/s\n", pp, r);
    }
    if (tg > 0) {
      const double r = best_rate(tg, [&] {
        for (int i = 0; i < tg; ++i) {
          const int32_t t = tok(rng);
          engine->model().forward(std::span<const int32_t>(&t, 1), *kv, logits);
        }
      });
      std::printf("tg%d: %.3f t/s\n", tg, r);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_bench: %s\n", e.what());
    return 1;
  }
}
