// `orchard serve`: the OpenAI-, Ollama- and Anthropic-compatible HTTP server and the chat page.
// On one machine it batches requests into shared forward passes; as a rank of a job (under
// `orchard run --serve` or `orchard launch`) rank 0 serves and every rank follows its steps.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "cli/args.h"
#include "cli/cluster_rank.h"
#include "cli/commands.h"
#include "dist/make_group.h"
#include "model/synthetic/synthetic.h"
#include "parallel/model_cost.h"
#include "parallel/session.h"
#include "serve/cluster_executor.h"
#include "serve/model_store.h"
#include "serve/server.h"
#include "tensor/error.h"

namespace orchard::cli {
namespace {

struct ServeOpts {
  std::string model, name, host = "127.0.0.1", api_key, parallel, mem, tls_cert, tls_key;
  int port = 8080, slots = 4, threads = 0, max_queue = 64, http_threads = 64, tp = 0;
  int64_t ctx = 0, step_tokens = 256, chunk = 64;
  double step_ms = 400;
  double stream_interval_ms = 0;
  bool mmap = false, no_repack = false, insecure = false, no_prompt_cache = false;
  KVType kv_type = KVType::F16;  // as llama.cpp's server: half the memory per slot, faster batches
  SamplerOptions s;
  int32_t max_tokens = 512;
};

serve::Server* g_server = nullptr;

void stop_server(int) {
  // httplib's stop() only flags and shuts the listening socket: safe enough from a handler.
  if (g_server) g_server->stop();
}

serve::ModelInfo model_info(const std::string& path, const ServeOpts& o, const Engine& engine) {
  serve::ModelInfo m;
  m.path = path;
  m.id = !o.name.empty() ? o.name : o.model.empty() ? "orchard-tiny" : std::filesystem::path(o.model).stem().string();
  auto header = GGUFFile::open(path, GGUFLoad::Map);
  const auto cost = parallel::ModelCost::from_gguf(*header);
  m.architecture = cost.arch;
  m.parameters = static_cast<int64_t>(cost.params);
  m.bytes = static_cast<uint64_t>(cost.bytes);
  // The format most of the weight bytes are in.
  std::map<std::string, double> by_type;
  for (const auto& t : header->tensors()) by_type[type_name(t.type)] += static_cast<double>(t.nbytes);
  double most = -1;
  for (const auto& [name, bytes] : by_type)
    if (bytes > most) most = bytes, m.type = name;
  m.n_ctx = engine.n_ctx();
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) m.created = static_cast<int64_t>(st.st_mtime);
  return m;
}

GenerateOptions defaults(const ServeOpts& o) {
  GenerateOptions g;
  g.sampling = o.s;
  g.max_tokens = o.max_tokens;
  return g;
}

void serve_http(serve::Executor& exec, Engine& engine, const ServeOpts& o, const std::string& path,
                serve::ClusterView cluster) {
  serve::Metrics metrics;
  serve::SchedulerOptions so;
  so.max_queue = o.max_queue;
  so.max_step_tokens = o.step_tokens;
  so.step_ms = o.step_ms;
  so.prompt_cache = !o.no_prompt_cache;
  so.stream_interval = std::chrono::microseconds(static_cast<int64_t>(o.stream_interval_ms * 1000));
  serve::Scheduler scheduler(exec, engine.tokenizer(), metrics, so);
  serve::Service service(scheduler, engine.tokenizer(), serve::ChatTemplate::from_gguf(engine.file(), engine.tokenizer()),
                         metrics, model_info(path, o, engine), std::move(cluster), defaults(o));
  serve::ServerOptions sopt;
  sopt.host = o.host;
  sopt.port = o.port;
  sopt.api_key = o.api_key;
  // (`orchard cluster up` hands its rank 0 the key this way, off the command line.)
  if (const char* key = std::getenv("ORCHARD_API_KEY"); sopt.api_key.empty() && key && *key) sopt.api_key = key;
  sopt.insecure = o.insecure;
  sopt.tls = {o.tls_cert, o.tls_key};
  sopt.http_threads = std::max(o.http_threads, o.slots + o.max_queue + 8);
  // Set by `orchard cluster up` for the rank 0 it starts: the page shows what the agent knows.
  if (const char* agent = std::getenv("ORCHARD_CLUSTER_AGENT")) sopt.cluster_agent = agent;
  serve::Server server(service, sopt);
  const int port = server.bind();
  g_server = &server;
  signal(SIGINT, stop_server);
  signal(SIGTERM, stop_server);
  std::fprintf(stderr,
               "orchard serve: %s (%s) on %s://%s:%d  — %d slots × %lld positions (%s KV cache), chat template: %s\n"
               "  OpenAI: /v1/chat/completions /v1/completions /v1/models · Ollama: /api/chat /api/generate "
               "· Anthropic: /v1/messages · /health /metrics · chat page: /\n",
               service.model().id.c_str(), path.c_str(), o.tls_cert.empty() ? "http" : "https", o.host.c_str(), port,
               exec.slots(),
               static_cast<long long>(exec.slot_capacity()), kv_type_name(engine.kv_type()),
               service.chat_template().family().c_str());
  std::fflush(stderr);
  server.run();
  g_server = nullptr;
  scheduler.stop();
  std::fprintf(stderr, "orchard serve: stopped\n");
}

void run_single(const ServeOpts& o) {
  EngineOptions eo;
  eo.model_path = o.model.empty() ? default_model_path() : serve::resolve_model(o.model);
  eo.threads = o.threads;
  eo.n_ctx = o.ctx;
  eo.mmap = o.mmap;
  eo.repack = !o.no_repack;
  eo.kv_type = o.kv_type;
  auto engine = Engine::load(eo);
  serve::LocalExecutor exec(*engine, o.slots);
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  serve::ClusterView view;
  serve::RankView r;
  r.host = host;
  r.role = "whole model";
  r.layer_end = engine->hparams().n_layers;
  auto header = GGUFFile::open(eo.model_path, GGUFLoad::Map);
  const auto cost = parallel::ModelCost::from_gguf(*header);
  r.memory_bytes = static_cast<uint64_t>(cost.bytes + cost.kv_bytes(0, r.layer_end, 1, engine->n_ctx()) * o.slots);
  view.ranks.push_back(r);
  serve_http(exec, *engine, o, eo.model_path, std::move(view));
}

void run_cluster(const ServeOpts& o) {
  auto world = dist::make_group_from_env();
  ClusterRankOptions ro;
  ro.model_path = o.model.empty() ? default_model_path() : serve::resolve_model(o.model);
  ro.parallel = o.parallel;
  ro.threads = o.threads;
  ro.tp = o.tp;
  ro.ctx = o.ctx;
  ro.chunk = o.chunk;
  ro.mmap = o.mmap;
  ro.kv_type = o.kv_type;
  auto session = parallel::Session::start(*world, session_options(ro));
  serve::ClusterExecutor exec(*session, *world, o.slots, o.chunk);
  serve::ClusterView view = exec.describe(ro.model_path);
  if (world->rank() != 0) return follow_rank0(exec);
  print_plan(*session);
  StopFollowers stop_followers(exec);  // however serving ends
  serve_http(exec, session->engine(), o, ro.model_path, std::move(view));
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOpts>();
  auto* cmd = app.add_subcommand("serve", "Serve a model over HTTP: OpenAI, Ollama and Anthropic APIs and a chat page");
  // `orchard run --serve` puts its defaults (-t, --parallel) first; the user's own come later and win.
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("-m,--model", o->model,
                  "GGUF model file, or a name from `orchard models` (default: the built-in synthetic tiny model)");
  cmd->add_option("--name", o->name, "Model id clients see (default: the file name without .gguf)");
  cmd->add_option("--host", o->host, "Address to listen on (0.0.0.0: every interface)")->capture_default_str();
  cmd->add_option("--port", o->port, "Port (0: any free port, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--slots", o->slots, "Requests generated at once (each has its own KV cache)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("-c,--ctx", o->ctx, "Positions per slot, prompt and reply together (0: min(model's, 4096))");
  cmd->add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str();
  cmd->add_option("--max-queue", o->max_queue, "Requests waiting for a slot before new ones get 429")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--step-tokens", o->step_tokens, "Prompt tokens fed per step (shared by new requests)")->capture_default_str();
  cmd->add_option("--step-ms", o->step_ms,
                  "While requests generate, size steps that also feed prompts to take about this long (ms; 0: --step-tokens alone)")
      ->check(CLI::Range(0.0, 60000.0))
      ->capture_default_str();
  cmd->add_flag("--no-prompt-cache", o->no_prompt_cache,
                "Compute every prompt whole (by default a request starts from the longest prefix of its "
                "prompt a slot still holds: earlier turns, a shared system prompt)");
  cmd->add_option("--stream-interval", o->stream_interval_ms,
                  "Least milliseconds between two writes to a stream (0: every token at once; a few "
                  "ms batch tokens that come faster than anyone reads, for more throughput)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  cmd->add_option("--api-key", o->api_key, "Require this key (Authorization: Bearer KEY; or set ORCHARD_API_KEY)");
  cmd->add_option("--tls-cert", o->tls_cert, "Serve HTTPS with this certificate (PEM)")->type_name("FILE");
  cmd->add_option("--tls-key", o->tls_key, "The certificate's private key (PEM)")->type_name("FILE");
  cmd->add_flag("--insecure", o->insecure,
                "Allow a --host beyond loopback without --api-key (anyone reaching the port may use it)");
  cmd->add_option("-n,--max-tokens", o->max_tokens, "Default reply length when a request gives none")->capture_default_str();
  cmd->add_option("--temp", o->s.temperature, "Default temperature (requests may set their own)")->capture_default_str();
  cmd->add_option("--top-k", o->s.top_k, "Default top-k (0: off)")->capture_default_str();
  cmd->add_option("--top-p", o->s.top_p, "Default top-p (1: off)")->capture_default_str();
  cmd->add_option("--min-p", o->s.min_p, "Default min-p (0: off)")->capture_default_str();
  cmd->add_option("--mmap", o->mmap, "Run from the page cache instead of a private copy");
  cmd->add_flag("--no-repack", o->no_repack, "Keep one weight layout only (less memory; slower prompts and batches)");
  add_kv_type_option(cmd, o->kv_type);
  cmd->add_option("--parallel", o->parallel,
                  "As a rank of a job: auto, pipeline, tensor, hybrid or expert (start with `orchard run --serve`)");
  cmd->add_option("--tp", o->tp, "hybrid: tensor-parallel ranks per stage; expert: expert-parallel ranks per stage");
  cmd->add_option("--chunk", o->chunk, "Prompt tokens per pipeline step")->capture_default_str();
  cmd->footer(
      "Examples:\n"
      "  orchard serve                                  # the built-in model on http://127.0.0.1:8080\n"
      "  orchard serve -m stories260K.gguf --port 9000 --slots 8\n"
      "  curl http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \\\n"
      "       -d '{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"stream\":true}'\n"
      "  orchard run --nodes 2 --serve --parallel tensor -m model.gguf   # a local 2-rank cluster serving");
  cmd->callback([o] {
    signal(SIGPIPE, SIG_IGN);  // a client that disconnects must not kill the server
    if (runs_as_rank(o->parallel, "serve"))
      run_cluster(*o);
    else
      run_single(*o);
  });
}

}  // namespace orchard::cli
