// `orchard generate`: streams a completion of a prompt, then a stats line.
#include <cstdio>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "model/engine.h"
#include "model/synthetic/synthetic.h"

namespace orchard::cli {

void register_generate(CLI::App& app) {
  struct Opts {
    std::string model, prompt = "Once upon a time";
    int32_t n = 64;
    int threads = 0;
    int64_t ctx = 0;
    SamplerOptions s;
    bool no_bos = false, special = false, mmap = false, no_repack = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("generate", "Generate text from a prompt with a GGUF model");
  cmd->add_option("-m,--model", o->model,
                  "GGUF model file (default: the built-in synthetic tiny model, created on first use)");
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text")->capture_default_str();
  cmd->add_option("-n,--n-predict", o->n, "Tokens to generate")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str();
  cmd->add_option("-c,--ctx", o->ctx, "Context size in tokens (0: min(model's, 4096))");
  cmd->add_option("--temp", o->s.temperature, "Temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--top-k", o->s.top_k, "Top-k (0: off)")->capture_default_str();
  cmd->add_option("--top-p", o->s.top_p, "Top-p (1: off)")->capture_default_str();
  cmd->add_option("--min-p", o->s.min_p, "Min-p (0: off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", o->s.repeat_penalty, "Repetition penalty (1: off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", o->s.repeat_last_n, "Tokens the penalty looks back over")
      ->capture_default_str();
  cmd->add_option("--seed", o->s.seed, "Sampling seed")->capture_default_str();
  cmd->add_flag("--mmap", o->mmap, "Run from the page cache (less memory; slower generation)");
  cmd->add_flag("--no-repack", o->no_repack, "Skip the repacked weight copy (less memory, slower prompts)");
  cmd->add_flag("--no-bos", o->no_bos, "Do not add BOS to the prompt");
  cmd->add_flag("--special", o->special, "Parse special-token text such as <|eot_id|> in the prompt");
  cmd->callback([o] {
    EngineOptions eo;
    eo.model_path = o->model.empty() ? default_model_path() : o->model;
    if (o->model.empty())
      std::fprintf(stderr, "using the built-in synthetic model %s (random weights: meaningless text)\n",
                   eo.model_path.c_str());
    eo.threads = o->threads;
    eo.n_ctx = o->ctx;
    eo.mmap = o->mmap;
    eo.repack = !o->no_repack;
    auto engine = Engine::load(eo);
    GenerateOptions go;
    go.max_tokens = o->n;
    go.sampling = o->s;
    go.add_special = !o->no_bos;
    go.parse_special = o->special;
    std::fputs(o->prompt.c_str(), stdout);
    std::fflush(stdout);
    auto r = engine->generate(o->prompt, go, [](const std::string& piece) {
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::fputc('\n', stdout);
    const int threads = o->threads > 0 ? o->threads : static_cast<int>(std::thread::hardware_concurrency());
    std::fprintf(stderr,
                 "\nstats: load %.1f ms | prompt %zu tokens, %.1f ms, %.2f tokens/s | "
                 "generation %zu tokens, %.1f ms, %.2f tokens/s | threads %d | finish: %s\n",
                 engine->load_ms(), r.prompt_tokens.size(), r.prompt_ms,
                 r.prompt_ms > 0 ? 1000.0 * r.prompt_tokens.size() / r.prompt_ms : 0.0,
                 r.tokens.size(), r.gen_ms, r.gen_ms > 0 ? 1000.0 * r.tokens.size() / r.gen_ms : 0.0,
                 threads, r.finish_reason.c_str());
  });
}

}  // namespace orchard::cli
