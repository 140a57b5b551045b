// `orchard generate`: streams a completion of a prompt, then a stats line. With --parallel it
// is one rank of a split model (under `orchard launch` or `orchard run`).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/args.h"
#include "cli/commands.h"
#include "dist/config.h"
#include "dist/make_group.h"
#include "model/engine.h"
#include "model/grammar/json_schema.h"
#include "model/synthetic/synthetic.h"
#include "parallel/memory.h"
#include "parallel/session.h"
#include "serve/model_store.h"
#include "tensor/error.h"

namespace orchard::cli {
namespace {

struct GenerateOpts {
  std::string model, prompt = "Once upon a time";
  int32_t n = 64;
  int threads = 0;
  int64_t ctx = 0;
  SamplerOptions s;
  bool no_bos = false, special = false, mmap = false, no_repack = false;
  KVType kv_type = KVType::F32;
  std::string parallel, mem, expert_attention = "split";
  int tp = 0;
  int64_t chunk = 64;
  std::string json_schema;  // a schema's JSON text, or @FILE
  bool json = false;
};

std::vector<uint64_t> parse_budgets(const std::string& text) {
  std::vector<uint64_t> out;
  for (const std::string& item : split_commas(text)) out.push_back(parallel::parse_bytes(item));
  return out;
}

EngineOptions engine_options(const GenerateOpts& o) {
  EngineOptions eo;
  eo.model_path = o.model.empty() ? default_model_path() : serve::resolve_model(o.model);
  eo.threads = o.threads;
  eo.n_ctx = o.ctx;
  eo.mmap = o.mmap;
  eo.repack = !o.no_repack;
  eo.kv_type = o.kv_type;
  return eo;
}

GenerateOptions generate_options(const GenerateOpts& o) {
  GenerateOptions go;
  go.max_tokens = o.n;
  go.sampling = o.s;
  go.add_special = !o.no_bos;
  go.parse_special = o.special;
  // Structured output: the reply follows the schema (or is any one JSON object).
  if (!o.json_schema.empty()) {
    std::string text = o.json_schema;
    if (text[0] == '@') {
      std::ifstream in(text.substr(1));
      if (!in) throw Error("--json-schema: cannot read " + text.substr(1));
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    const nlohmann::json schema = nlohmann::json::parse(text, nullptr, false);
    if (schema.is_discarded()) throw Error("--json-schema: not valid JSON");
    go.grammar = std::make_shared<const Grammar>(json_schema_grammar(schema));
  } else if (o.json) {
    go.grammar = json_object_grammar();
  }
  return go;
}

bool print_piece(const std::string& piece) {
  std::fputs(piece.c_str(), stdout);
  std::fflush(stdout);
  return true;
}

void print_stats(double load_ms, const GenerateResult& r, int threads, const std::string& extra) {
  std::fprintf(stderr,
               "\nstats: load %.1f ms | prompt %zu tokens, %.1f ms, %.2f tokens/s | "
               "generation %zu tokens, %.1f ms, %.2f tokens/s | threads %d%s | finish: %s\n",
               load_ms, r.prompt_tokens.size(), r.prompt_ms,
               r.prompt_ms > 0 ? 1000.0 * r.prompt_tokens.size() / r.prompt_ms : 0.0, r.tokens.size(), r.gen_ms,
               r.gen_ms > 0 ? 1000.0 * r.tokens.size() / r.gen_ms : 0.0, threads, extra.c_str(),
               r.finish_reason.c_str());
}

void run_parallel(const GenerateOpts& o) {
  if (!dist::Config::in_job())
    throw Error("--parallel runs as one rank of a job: start it with `orchard run --nodes N --parallel " +
                o.parallel + " …` or `orchard launch -n N -- orchard generate --parallel " + o.parallel + " …`");
  auto t0 = std::chrono::steady_clock::now();
  auto world = dist::make_group_from_env();
  parallel::SessionOptions so;
  so.engine = engine_options(o);
  so.choose = o.parallel == "auto";
  if (!so.choose) so.kind = parallel::parse_kind(o.parallel);
  so.tp = o.tp;
  so.whole_attention = o.expert_attention == "whole";
  so.mem = parse_budgets(o.mem);
  so.chunk = o.chunk;
  auto session = parallel::Session::start(*world, so);
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!session->plan_note().empty()) std::fprintf(stderr, "%s", session->plan_note().c_str());
  if (session->is_sampler()) {
    std::fprintf(stderr, "%s", session->plan().describe().c_str());
    std::fputs(o.prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  GenerateResult r = session->generate(o.prompt, generate_options(o), print_piece);
  if (session->is_sampler()) {
    std::fputc('\n', stdout);
    const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
    print_stats(load_ms, r, threads,
                " per rank | " + std::to_string(world->size()) + " ranks, " + world->backend() + ", " + o.parallel);
  }
}

}  // namespace

void register_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateOpts>();
  auto* cmd = app.add_subcommand("generate", "Generate text from a prompt with a GGUF model");
  // A repeated option takes its last value, so wrappers (orchard run, scripts/demo.sh) can set
  // defaults that the user's own arguments override.
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("-m,--model", o->model,
                  "GGUF model file, or a name from `orchard models` (default: the built-in synthetic tiny "
                  "model, created on first use)");
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
  add_kv_type_option(cmd, o->kv_type);
  cmd->add_flag("--no-bos", o->no_bos, "Do not add BOS to the prompt");
  cmd->add_flag("--special", o->special, "Parse special-token text such as <|eot_id|> in the prompt");
  cmd->add_option("--json-schema", o->json_schema,
                  "Make the reply JSON following this schema (its JSON text, or @FILE; docs/serving.md lists what is kept)");
  cmd->add_flag("--json", o->json, "Make the reply one JSON object");
  cmd->add_option("--parallel", o->parallel,
                  "Split the model over the ranks of this job (under orchard run or orchard launch): "
                  "auto (the planner picks from predicted speed and memory), pipeline, tensor, hybrid or expert "
                  "(a mixture's experts spread over the ranks)");
  cmd->add_option("--tp", o->tp,
                  "hybrid: tensor-parallel ranks per pipeline stage (default 2); expert: expert-parallel ranks per "
                  "pipeline stage (default all ranks, one stage)");
  cmd->add_option("--expert-attention", o->expert_attention,
                  "expert: split attention heads and dense FFNs over the group like tensor parallel (split), or "
                  "repeat them on every rank (whole: fewer all_sums, tokens closer to one rank's)")
      ->check(CLI::IsMember({"split", "whole"}))
      ->capture_default_str();
  cmd->add_option("--mem", o->mem,
                  "Memory budget per rank, e.g. 4G or 2G,6G: pipeline stages are sized to it, and a model "
                  "that does not fit is refused");
  cmd->add_option("--chunk", o->chunk, "Prompt tokens per pipeline step (pipelined prefill)")->capture_default_str();
  cmd->footer(
      "Across ranks:\n"
      "  orchard run --nodes 2 --parallel tensor -m model.gguf -p Hello          # local ranks\n"
      "  orchard launch --hostfile hosts.json -- orchard generate --parallel pipeline -m model.gguf");
  cmd->callback([o] {
    if (!o->parallel.empty()) {
      run_parallel(*o);
      return;
    }
    EngineOptions eo = engine_options(*o);
    if (o->model.empty())
      std::fprintf(stderr, "using the built-in synthetic model %s (random weights: meaningless text)\n",
                   eo.model_path.c_str());
    if (!o->mem.empty()) {
      // One rank: the whole model must fit the budget.
      auto header = GGUFFile::open(eo.model_path, GGUFLoad::Map);
      const HParams hp = HParams::from_gguf(*header);
      const int64_t n_ctx = eo.n_ctx > 0 ? eo.n_ctx : std::min<int64_t>(hp.n_ctx_train, 4096);
      parallel::check_budgets(*header, hp, parallel::make_plan(hp, parallel::Kind::kPipeline, 1),
                              parse_budgets(o->mem), n_ctx, o->chunk, eo.kv_type);
    }
    auto engine = Engine::load(eo);
    std::fputs(o->prompt.c_str(), stdout);
    std::fflush(stdout);
    auto r = engine->generate(o->prompt, generate_options(*o), print_piece);
    std::fputc('\n', stdout);
    const int threads = o->threads > 0 ? o->threads : static_cast<int>(std::thread::hardware_concurrency());
    print_stats(engine->load_ms(), r, threads, "");
  });
}

}  // namespace orchard::cli
