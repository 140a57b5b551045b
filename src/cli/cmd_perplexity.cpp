// `orchard perplexity`: perplexity of a model over a text file (llama.cpp's method).
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "model/engine.h"
#include "model/perplexity.h"
#include "serve/model_store.h"
#include "tensor/error.h"

namespace orchard::cli {

void register_perplexity(CLI::App& app) {
  struct Opts {
    std::string model, file;
    int64_t ctx = 512;
    int threads = 0;
    KVType kv_type = KVType::F32;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "perplexity",
      "Perplexity over a text file: chunks of --ctx tokens, each scored on its second half "
      "(the method of llama.cpp's perplexity tool, so figures compare)");
  cmd->add_option("-m,--model", o->model, "GGUF model file")->required();
  cmd->add_option("-f,--file", o->file, "Text file")->required();
  cmd->add_option("-c,--ctx", o->ctx, "Chunk size in tokens")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (0: all cores)");
  add_kv_type_option(cmd, o->kv_type);
  cmd->callback([o] {
    std::ifstream in(o->file, std::ios::binary);
    if (!in) throw Error("cannot read text file '" + o->file + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    EngineOptions eo;
    eo.model_path = serve::resolve_model(o->model);
    eo.threads = o->threads;
    eo.n_ctx = o->ctx;
    eo.kv_type = o->kv_type;
    auto engine = Engine::load(eo);
    ProgressBar bar("perplexity");
    std::string per_chunk;
    auto r = perplexity(*engine, ss.str(), o->ctx, [&](int64_t i, int64_t n, double ppl) {
      bar.update(i, n);
      char buf[48];
      std::snprintf(buf, sizeof buf, "[%lld]%.4f,", static_cast<long long>(i), ppl);
      per_chunk += buf;
    });
    if (!per_chunk.empty()) per_chunk.pop_back();
    std::printf("%s\n", per_chunk.c_str());
    std::printf("tokens %lld, chunks %lld of %lld, scored %lld\n",
                static_cast<long long>(r.n_tokens), static_cast<long long>(r.n_chunks),
                static_cast<long long>(o->ctx), static_cast<long long>(r.n_scored));
    std::printf("PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_stderr);
  });
}

}  // namespace orchard::cli
