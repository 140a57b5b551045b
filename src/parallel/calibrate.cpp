#include "parallel/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "dist/make_group.h"
#include "dist/net/socket.h"
#include "model/engine.h"
#include "model/gguf.h"
#include "model/synthetic/synthetic.h"
#include "parallel/model_cost.h"
#include "platform/energy_meter.h"
#include "platform/platform.h"
#include "tensor/error.h"
#include "tensor/matmul.h"
#include "tensor/quant.h"
#include "tensor/threadpool.h"

namespace orchard::parallel {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Runs `fn` until `seconds` have passed (at least twice, after one warm-up) and returns
// the mean seconds per call.
template <class Fn>
double time_per_call(double seconds, Fn fn) {
  fn();
  int calls = 0;
  const auto t0 = Clock::now();
  do {
    fn();
    ++calls;
  } while (calls < 2 || since(t0) < seconds);
  return since(t0) / calls;
}

// A weight matrix of `type` with about `bytes` of data: real quantized values where Orchard
// can quantize the format; otherwise bytes that decode to ordinary (not denormal) numbers.
struct TestMatrix {
  std::vector<uint8_t> data;
  MatrixView view;
  TestMatrix(DType type, size_t bytes, int64_t cols) {
    const size_t row = row_bytes(type, cols);
    const int64_t rows = std::max<int64_t>(64, static_cast<int64_t>(bytes / row));
    data.resize(row * static_cast<size_t>(rows));
    std::mt19937 rng(7);
    try {
      std::normal_distribution<float> d(0, 0.02f);
      std::vector<float> f(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : f) v = d(rng);
        quantize_row(type, f.data(), data.data() + row * static_cast<size_t>(r), cols);
      }
    } catch (const Error&) {
      std::uniform_int_distribution<int> b(0x20, 0x3b);
      for (auto& x : data) x = static_cast<uint8_t>(b(rng));
    }
    view = MatrixView{type, rows, cols, data.data(), nullptr};
  }
};

double measure_membw(double seconds) {
  // Larger than any cache; touched by the pool's threads so pages spread like the kernels'.
  const size_t n = (size_t{512} << 20) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n, 1);
  std::atomic<uint64_t> sink{0};
  const double per = time_per_call(seconds, [&] {
    global_pool().parallel_for(static_cast<int64_t>(n), 4096, [&](int64_t b, int64_t e) {
      uint64_t s = 0;
      for (int64_t i = b; i < e; ++i) s += buf[static_cast<size_t>(i)];
      sink += s;
    });
  });
  return static_cast<double>(n * sizeof(uint64_t)) / per / 1e9;
}

double measure_sync_us(double seconds) {
  return time_per_call(seconds / 4, [] {
           for (int i = 0; i < 100; ++i) global_pool().run([](int, int) {});
         }) /
         100 * 1e6;
}

// Runs body(group) on `n` ranks, each a thread of this process with its own group over real
// sockets or shared memory (as separate processes would have), and rethrows the first failure.
void run_local_ranks(const std::string& backend, int n, double latency_us, const std::function<void(dist::Group&)>& body) {
  int port = 0;
  {
    dist::net::Fd fd = dist::net::listen_on(dist::net::Endpoint{"127.0.0.1", 0});
    port = dist::net::local_port(fd.get());
  }
  static std::atomic<int> job_no{0};
  const std::string job = "calibrate-" + std::to_string(::getpid()) + "-" + std::to_string(job_no++);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        dist::Config c;
        c.backend = backend;
        c.rank = r;
        c.size = n;
        c.coordinator = "127.0.0.1:" + std::to_string(port);
        c.job = job;
        c.link_latency_us = latency_us;
        auto g = dist::make_group(c);
        body(*g);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Mean seconds of one all_sum of `bytes` among `n` local ranks.
double allsum_seconds(const std::string& backend, int n, size_t bytes, double latency_us, double seconds) {
  std::vector<double> result(static_cast<size_t>(n), 0);
  run_local_ranks(backend, n, latency_us, [&](dist::Group& g) {
    std::vector<float> x(bytes / sizeof(float), 1.0f);
    // Every rank must make the same number of calls: rank 0 decides and tells the others.
    for (int i = 0; i < 5; ++i) g.all_sum(x.data(), x.size());
    auto t0 = Clock::now();
    for (int i = 0; i < 20; ++i) g.all_sum(x.data(), x.size());
    int n_calls = std::clamp(static_cast<int>(seconds / (since(t0) / 20)), 20, 100000);
    g.broadcast(&n_calls, sizeof n_calls, 0);
    g.barrier();
    t0 = Clock::now();
    for (int i = 0; i < n_calls; ++i) g.all_sum(x.data(), x.size());
    g.barrier();
    result[static_cast<size_t>(g.rank())] = since(t0) / n_calls;
  });
  return *std::max_element(result.begin(), result.end());
}

// Arithmetic without memory traffic standing in for a rank's compute between messages.
double work(int64_t iters) {
  double x = 1.0;
  for (int64_t i = 0; i < iters; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

// Iterations of work() that take `us` microseconds on one idle core.
int64_t work_iters(double us) {
  int64_t n = 1 << 16;
  volatile double sink = 0;
  for (;;) {
    const auto t0 = Clock::now();
    sink = sink + work(n);
    const double took = since(t0) * 1e6;
    if (took > 2000) return static_cast<int64_t>(static_cast<double>(n) * us / took);
    n *= 2;
  }
}

struct Loaded {
  double sync_us = 0, hop_us = 0;
};

// What syncs and hops cost among `n` ranks that compute between messages: every rank computes
// a segment and joins an all_sum of one token's activations (tensor parallel), and a token
// passes rank to rank with a segment of compute at each (a pipeline). Each cost is the time
// beyond the same compute without the messages, per message.
Loaded loaded_costs(const std::string& backend, int n, double latency_us, double seconds) {
  constexpr double kSegmentUs = 250;
  const int64_t iters = work_iters(kSegmentUs);
  const int rounds = std::max(20, static_cast<int>(seconds * 1e6 / kSegmentUs / n));
  std::vector<double> alone(static_cast<size_t>(n)), synced(static_cast<size_t>(n)), ring(static_cast<size_t>(n));
  std::atomic<double> sink{0};
  run_local_ranks(backend, n, latency_us, [&](dist::Group& g) {
    const int r = g.rank();
    std::vector<float> x(2048, 1.0f);
    double acc = 0;
    g.barrier();
    auto t0 = Clock::now();
    for (int i = 0; i < rounds; ++i) acc += work(iters);
    alone[static_cast<size_t>(r)] = since(t0);
    g.barrier();
    t0 = Clock::now();
    for (int i = 0; i < rounds; ++i) {
      acc += work(iters);
      g.all_sum(x.data(), x.size());
    }
    synced[static_cast<size_t>(r)] = since(t0);
    g.barrier();
    t0 = Clock::now();
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    for (int i = 0; i < rounds; ++i) {
      if (r > 0 || i > 0) g.recv(x.data(), x.size() * sizeof(float), prev);
      acc += work(iters);
      g.send(x.data(), x.size() * sizeof(float), next);
    }
    if (r == 0) g.recv(x.data(), x.size() * sizeof(float), prev);
    ring[static_cast<size_t>(r)] = since(t0);
    g.barrier();
    sink = sink + acc;
  });
  Loaded l;
  const double concurrent = *std::max_element(alone.begin(), alone.end());
  const double one_segment = concurrent / rounds * std::min(1.0, static_cast<double>(std::thread::hardware_concurrency()) / n);
  l.sync_us = std::max(0.0, (*std::max_element(synced.begin(), synced.end()) - concurrent) / rounds * 1e6);
  // The ring runs one segment at a time: n per round, each as fast as on an idle core.
  l.hop_us = std::max(0.0, (ring[0] - one_segment * rounds * n) / (static_cast<double>(rounds) * n) * 1e6);
  return l;
}

double total_memory_gib() { return static_cast<double>(platform::physical_memory_bytes()) / 1073741824.0; }

std::string cpu_name() {
  const std::string model = platform::cpu_model();
  return model.empty() ? "CPU" : model;
}

// Memory bandwidth, fork/join cost and kernel rates for `types` at each thread count.
void measure_compute(MachineSpec& m, const std::vector<DType>& types, const std::vector<int>& threads, double seconds,
                     const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& what) {
    if (progress) progress(what);
  };
  const int64_t cols = 4096;
  std::vector<float> x(static_cast<size_t>(11008 * 64)), y;
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) * 0.01f;
  std::vector<uint8_t> scratch;
  for (int t : threads) {
    set_threads(t);
    say("memory bandwidth, " + std::to_string(t) + " thread(s)");
    m.membw_gbs.at_count[t] = measure_membw(seconds);
    m.sync_us.at_count[t] = measure_sync_us(seconds);
  }
  m.mem_bw_gbs = m.membw_gbs.at(m.cores);
  for (DType type : types) {
    // One-token products: the seven matrices of one layer of a 7B Llama (dim 4096, FFN 11008),
    // in the order a token meets them, so each call's set-up and tail count as they do in a
    // forward pass; ~100 MB in Q4_0, beyond the caches like a model's weights.
    // 64-token products reuse each row 64 times and are bound by arithmetic: 8 MiB suffices.
    std::vector<TestMatrix> layer;
    for (auto [rows, bytes_cols] : {std::pair<int64_t, int64_t>{4096, 4096}, {1024, 4096}, {1024, 4096}, {4096, 4096},
                                    {11008, 4096}, {11008, 4096}, {4096, 11008}})
      layer.emplace_back(type, row_bytes(type, bytes_cols) * static_cast<size_t>(rows), bytes_cols);
    size_t layer_bytes = 0;
    for (const TestMatrix& w : layer) layer_bytes += w.data.size();
    TestMatrix small(type, size_t{8} << 20, cols);
    // The engine repacks weights at load where the CPU has a faster layout.
    std::vector<std::unique_ptr<HugeBuffer>> packed;
    for (TestMatrix* w : {&small}) packed.push_back(pack_for_cpu(w->view));
    for (TestMatrix& w : layer) packed.push_back(pack_for_cpu(w.view));
    for (int t : threads) {
      set_threads(t);
      say(std::string("kernels, ") + type_name(type) + ", " + std::to_string(t) + " thread(s)");
      y.resize(static_cast<size_t>(std::max<int64_t>(small.view.rows * 64, 11008 * 64)));
      const double mv = time_per_call(seconds, [&] {
        for (const TestMatrix& w : layer) matvec(w.view, x.data(), y.data(), scratch);
      });
      m.matvec_gbs[type].at_count[t] = static_cast<double>(layer_bytes) / mv / 1e9;
      const double mm = time_per_call(seconds, [&] { matmul(small.view, x.data(), 64, y.data(), scratch); });
      m.matmul_gflops[type].at_count[t] = 2.0 * static_cast<double>(small.view.rows * cols * 64) / mm / 1e9;
    }
  }
}

// A forward pass's cost per layer beyond its matrix products, from the engine itself: a
// synthetic `small` model (dim 768, 12 layers, Q4_0, written once to the cache folder) decodes
// tokens; the time its weights take at the rates just measured is subtracted.
void measure_layer_overhead(MachineSpec& m, const std::vector<int>& threads,
                            const std::function<void(const std::string&)>& say) {
  namespace fs = std::filesystem;
  const fs::path path = fs::path(orchard_home()) / "models" / "orchard-calibrate-small-Q4_0.gguf";
  if (!fs::exists(path)) {
    if (say) say("writing the calibration model " + path.string());
    fs::create_directories(path.parent_path());
    write_synthetic_model(orchard::model_shape("small"), DType::Q4_0, 7, path.string());
  }
  ModelCost cost;
  {
    auto header = GGUFFile::open(path.string());
    cost = ModelCost::from_gguf(*header);
  }
  for (int t : threads) {
    if (say) say("engine overhead per layer, " + std::to_string(t) + " thread(s)");
    EngineOptions eo;
    eo.model_path = path.string();
    eo.threads = t;
    eo.n_ctx = 128;
    auto engine = Engine::load(eo);
    std::vector<double> per_token;
    std::vector<float> logits;
    for (int rep = 0; rep < 3; ++rep) {
      auto kv = engine->new_cache();
      std::vector<int32_t> prompt(16, 100);
      engine->model().forward(prompt, *kv, logits);
      const auto t0 = Clock::now();
      for (int i = 0; i < 48; ++i) {
        const int32_t tok = 200 + i;
        engine->model().forward(std::span<const int32_t>(&tok, 1), *kv, logits);
      }
      per_token.push_back(since(t0) / 48);
    }
    double streamed = 0;
    for (const auto& [type, bytes] : cost.read_per_token(0, cost.n_layers, 1, true)) {
      auto it = m.matvec_gbs.find(type);
      const double rate = it != m.matvec_gbs.end() ? it->second.at(t) : m.membw_gbs.at(t);
      streamed += bytes / (rate * 1e9);
    }
    m.layer_us.at_count[t] = std::max(0.0, (median(per_token) - streamed) / static_cast<double>(cost.n_layers) * 1e6);
    m.layer_us_dim = static_cast<double>(cost.dim);
  }
  set_threads(0);
}

}  // namespace

void refresh_compute(MachineSpec& m, const std::vector<DType>& types, double seconds) {
  std::vector<int> threads;
  for (const auto& [t, v] : m.membw_gbs.at_count) threads.push_back(t);
  if (threads.empty()) threads.push_back(std::max(1, m.cores));
  measure_compute(m, types, threads, seconds, {});
  if (!m.layer_us.empty()) measure_layer_overhead(m, threads, {});
  set_threads(0);
}

MachineSpec calibrate(const CalibrateOptions& o) {
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  MachineSpec m;
  m.measured = true;
  m.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  m.id = "this-machine";
  m.name = cpu_name() + " (" + std::to_string(m.cores) + " cores)";
  m.memory_gib = {total_memory_gib()};
  m.usable_memory = 0.9;
  m.source = "orchard plan --calibrate";
  std::vector<int> threads = o.threads;
  if (threads.empty())
    for (int t = 1; t <= m.cores; ++t) threads.push_back(t);

  platform::EnergyMeter energy;
  const auto load_t0 = Clock::now();
  measure_compute(m, o.types, threads, o.seconds, say);
  if (std::find(o.types.begin(), o.types.end(), DType::Q4_0) != o.types.end()) measure_layer_overhead(m, threads, say);
  const std::optional<double> load_j = energy.joules();
  const double load_s = since(load_t0);
  set_threads(0);
  if (load_j && *load_j > 0) {
    say("idle power");
    energy.restart();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    m.idle_w = energy.joules().value_or(0);
    m.load_w = *load_j / load_s;
    m.power_of = "package energy counter (" + platform::energy_source() + ") during calibration: the CPU package only, not the wall";
  } else {
    m.power_of = "not measured: energy counter " + platform::energy_source() + "; set idle_w and load_w by hand";
  }
  for (const std::string& backend : o.backends)
    for (int n : o.ranks) {
      std::vector<double> lats = {0};
      if (backend == "tcp") lats.insert(lats.end(), o.emulate_us.begin(), o.emulate_us.end());
      for (double lat : lats) {
        const std::string key = lat > 0 ? backend + "+" + std::to_string(static_cast<int>(lat)) : backend;
        say("all_sum over " + key + ", " + std::to_string(n) + " ranks");
        // Two sizes give latency and bandwidth: a token's activations and a prompt chunk's.
        const size_t small = 8192, large = size_t{1} << 20;
        // Medians of three: one measurement on a shared machine can be off by 2× or more.
        std::vector<double> small_s, large_s, syncs, hops;
        for (int rep = 0; rep < 3; ++rep) {
          small_s.push_back(allsum_seconds(backend, n, small, lat, o.seconds / 3));
          large_s.push_back(allsum_seconds(backend, n, large, lat, o.seconds / 3));
          const Loaded l = loaded_costs(backend, n, lat, o.seconds / 3);
          syncs.push_back(l.sync_us);
          hops.push_back(l.hop_us);
        }
        const double ts = median(small_s), tl = median(large_s);
        LinkFit f;
        f.gbs = tl > ts ? static_cast<double>(large - small) / (tl - ts) / 1e9 : 100;
        f.latency_us = std::max(0.0, (ts - static_cast<double>(small) / (f.gbs * 1e9)) * 1e6);
        f.sync_us = std::max(median(syncs), 0.1);
        f.hop_us = std::max(median(hops), 0.1);
        m.local_allsum[key][n] = f;
      }
    }
  return m;
}

}  // namespace orchard::parallel
