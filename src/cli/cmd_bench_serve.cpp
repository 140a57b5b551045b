// `orchard bench serve`: aggregate generation speed of the HTTP server with one client at a
// time versus many at once (continuous batching), and a check that every concurrent client
// got exactly what it got alone. The client counts take turns, one repetition each, so a slow
// spell of a shared host falls on all of them alike and their ratios stay comparable.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <memory>
#include <thread>

#include "cli/args.h"
#include "cli/commands.h"
#include "model/synthetic/synthetic.h"
#include "serve/model_store.h"
#include "serve/server.h"
#include "tensor/error.h"

namespace orchard::cli {
namespace {

using nlohmann::json;

struct Opts {
  std::string model, clients = "1,16";
  int n = 64, reps = 3, threads = 0;
  int64_t ctx = 512;
  bool no_repack = false, no_prompt_cache = false;
  KVType kv_type = KVType::F16;  // orchard serve's default
  double stream_interval_ms = 0;
};

struct Reply {
  std::string text;
  int64_t tokens = 0;
  bool ok = false;
};

// A client's connection, kept open across requests as SDKs keep theirs.
std::unique_ptr<httplib::Client> connect(int port) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
  c->set_read_timeout(600, 0);
  c->set_tcp_nodelay(true);
  c->set_keep_alive(true);
  return c;
}

// One streaming completion, read piece by piece as a client would. Clients run in this process
// only to measure the server: they yield the engine's core as the server's own I/O threads do.
Reply stream_one(httplib::Client& c, const std::string& prompt, int n) {
  serve::lower_this_thread();
  json body = {{"prompt", prompt}, {"max_tokens", n}, {"temperature", 0}, {"ignore_eos", true}, {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  Reply r;
  std::string buf;
  bool done = false;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
                      buf.append(data, len);
                      size_t end;
                      while ((end = buf.find("\n\n")) != std::string::npos) {
                        std::string event = buf.substr(0, end);
                        buf.erase(0, end + 2);
                        if (event.rfind("data: ", 0) != 0) continue;
                        event.erase(0, 6);
                        if (event == "[DONE]") {
                          done = true;
                          continue;
                        }
                        json j = json::parse(event, nullptr, false);
                        if (j.is_discarded()) continue;
                        if (!j["choices"].empty()) r.text += j["choices"][0]["text"].get<std::string>();
                        if (j.contains("usage")) r.tokens = j["usage"]["completion_tokens"];
                      }
                      return true;
                    };
  auto res = c.send(req);
  r.ok = res && res->status == 200 && done && r.tokens == n;
  return r;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// `count` clients, each on its own connection (opened once, as SDKs keep theirs), that start
// every repetition together and wait for the next.
class ClientGroup {
 public:
  ClientGroup(int count, int reps, int port, const std::vector<std::string>& prompts, int n)
      : count_(count), start_(count + 1), end_(count + 1),
        replies_(static_cast<size_t>(reps), std::vector<Reply>(static_cast<size_t>(count))) {
    for (int i = 0; i < count; ++i)
      threads_.emplace_back([this, i, reps, port, &prompts, n] {
        auto conn = connect(port);
        for (int rep = 0; rep < reps; ++rep) {
          start_.arrive_and_wait();
          replies_[static_cast<size_t>(rep)][static_cast<size_t>(i)] = stream_one(*conn, prompts[static_cast<size_t>(i)], n);
          end_.arrive_and_wait();
        }
      });
  }
  ~ClientGroup() {
    for (auto& t : threads_) t.join();
  }
  int count() const { return count_; }
  // Runs the next repetition; returns its wall time in seconds.
  double run() {
    start_.arrive_and_wait();
    const auto t0 = std::chrono::steady_clock::now();
    end_.arrive_and_wait();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const std::vector<Reply>& replies(int rep) const { return replies_[static_cast<size_t>(rep)]; }

 private:
  int count_;
  std::barrier<> start_, end_;
  std::vector<std::vector<Reply>> replies_;
  std::vector<std::thread> threads_;
};

}  // namespace

void register_bench_serve(CLI::App& bench) {
  auto o = std::make_shared<Opts>();
  auto* cmd = bench.add_subcommand("serve", "Aggregate tokens/s of the HTTP server: one client vs many concurrent");
  cmd->add_option("-m,--model", o->model, "GGUF model (default: the built-in tiny model)");
  cmd->add_option("--clients", o->clients, "Comma-separated concurrent client counts")->capture_default_str();
  cmd->add_option("-n", o->n, "Tokens each client generates")->capture_default_str();
  cmd->add_option("-r,--reps", o->reps, "Repetitions (the median_of is reported)")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str();
  cmd->add_option("-c,--ctx", o->ctx, "Positions per slot")->capture_default_str();
  cmd->add_flag("--no-repack", o->no_repack, "One weight layout only (less memory, slower batches)");
  add_kv_type_option(cmd, o->kv_type);
  cmd->add_flag("--no-prompt-cache", o->no_prompt_cache, "As orchard serve's (compute every prompt whole)");
  cmd->add_option("--stream-interval", o->stream_interval_ms, "As orchard serve's (ms between writes to a stream)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  cmd->footer("Example:\n  orchard bench serve --clients 1,4,16 -n 64 -r 3");
  cmd->callback([o] {
    std::vector<int> counts;
    for (const auto& c : split_commas(o->clients)) counts.push_back(std::stoi(c));
    const int most = *std::max_element(counts.begin(), counts.end());
    EngineOptions eo;
    eo.model_path = o->model.empty() ? default_model_path() : serve::resolve_model(o->model);
    eo.threads = o->threads;
    eo.n_ctx = o->ctx;
    eo.repack = !o->no_repack;
    eo.kv_type = o->kv_type;
    auto engine = Engine::load(eo);
    serve::LocalExecutor exec(*engine, most);
    serve::Metrics metrics;
    serve::SchedulerOptions so;
    so.max_queue = most;
    so.prompt_cache = !o->no_prompt_cache;
    so.stream_interval = std::chrono::microseconds(static_cast<int64_t>(o->stream_interval_ms * 1000));
    serve::Scheduler sched(exec, engine->tokenizer(), metrics, so);
    serve::ModelInfo mi;
    mi.id = "bench";
    serve::Service service(sched, engine->tokenizer(), serve::ChatTemplate::from_gguf(engine->file(), engine->tokenizer()),
                           metrics, mi, serve::ClusterView{});
    serve::ServerOptions sopt;
    sopt.port = 0;
    int connections = 0;
    for (int c : counts) connections += c;
    sopt.http_threads = connections + 8;  // every group's connections stay open together
    serve::Server server(service, sopt);
    const int port = server.bind();
    std::thread http([&] { server.run(); });

    // Every client its own prompt; what each gets alone is the reference for the others.
    std::vector<std::string> prompts;
    for (int i = 0; i < most; ++i) prompts.push_back("story number " + std::to_string(i + 1) + " begins");
    std::vector<std::string> alone(static_cast<size_t>(most));
    {
      auto c = connect(port);
      for (int i = 0; i < most; ++i) alone[static_cast<size_t>(i)] = stream_one(*c, prompts[static_cast<size_t>(i)], o->n).text;
    }

    std::printf("| model | clients | tokens each | aggregate tok/s | per client tok/s | vs 1 client | all correct |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---|\n");
    // Each count's clients connect once and start each repetition together, so a repetition
    // times the server's work, not thread start-up and TCP handshakes.
    std::vector<std::unique_ptr<ClientGroup>> groups;
    for (int c : counts) groups.push_back(std::make_unique<ClientGroup>(c, o->reps, port, prompts, o->n));
    std::vector<std::vector<double>> rates(groups.size());
    std::vector<bool> ok(groups.size(), true);
    for (int rep = 0; rep < o->reps; ++rep)
      for (size_t g = 0; g < groups.size(); ++g) {
        const double secs = groups[g]->run();
        int64_t tokens = 0;
        for (int i = 0; i < groups[g]->count(); ++i) {
          const Reply& r = groups[g]->replies(rep)[static_cast<size_t>(i)];
          tokens += r.tokens;
          ok[g] = ok[g] && r.ok && r.text == alone[static_cast<size_t>(i)];
        }
        rates[g].push_back(static_cast<double>(tokens) / secs);
      }
    groups.clear();
    double base = 0;
    bool all_ok = true;
    for (size_t g = 0; g < counts.size(); ++g) {
      const int c = counts[g];
      const double rate = median_of(rates[g]);
      if (g == 0) base = rate;
      all_ok = all_ok && ok[g];
      std::printf("| %s | %d | %d | %.1f | %.1f | %.2f× | %s |\n", std::filesystem::path(eo.model_path).filename().c_str(),
                  c, o->n, rate, rate / c, base > 0 ? rate / base : 0.0, ok[g] ? "yes" : "NO");
    }
    std::fflush(stdout);
    server.stop();
    http.join();
    sched.stop();
    if (!all_ok) throw Error("some concurrent clients did not get what they got alone (see the table)");
  });
}

}  // namespace orchard::cli
