// `orchard bench comm`: all_sum and all_to_all latency and bus bandwidth against
// message size, per backend and rank count, in the layout of nccl-tests. Outside a
// job it starts the ranks itself (orchard launch, or mpirun for mpi); inside
// one (ORCHARD_RANK set, or under mpirun) it measures and rank 0 prints.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "dist/config.h"
#include "dist/launcher.h"
#include "dist/make_group.h"
#include "dist/transport_group.h"
#include "parallel/memory.h"
#include "tensor/error.h"

namespace orchard::cli {
namespace {

struct CommOpts {
  std::string backends = "tcp,shm,mpi";
  std::string ranks = "2,3,4";
  std::string min_bytes = "4", max_bytes = "64M";
  std::string dtype = "f32", algo = "auto", ops = "all_sum,all_to_all";
  int iters = 0;
  bool worker = false;
};

dist::DType parse_dtype(const std::string& s) {
  if (s == "f32") return dist::DType::F32;
  if (s == "f16") return dist::DType::F16;
  if (s == "bf16") return dist::DType::BF16;
  throw Error("--dtype must be f32, f16 or bf16, not '" + s + "'");
}

bool under_mpirun() { return std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("PMI_RANK"); }

// Times `one` at each size from lo to hi bytes (doubling) and prints a row per size; `elems`
// turns bytes into the element count shown, `bus` algbw into nccl-tests' bus bandwidth.
template <class One>
void time_sizes(dist::Group& g, size_t lo, size_t hi, size_t step_unit, int fixed_iters, const One& one, size_t es,
                double bus) {
  for (size_t bytes = lo; bytes <= hi; bytes *= 2) {
    const size_t used = bytes / step_unit * step_unit;
    if (used == 0) continue;
    int iters = fixed_iters;
    if (iters <= 0) iters = bytes <= (64 << 10) ? 2000 : bytes <= (1 << 20) ? 200 : bytes <= (16 << 20) ? 20 : 5;
    for (int i = 0; i < std::max(2, iters / 10); ++i) one(used);
    g.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) one(used);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    // The slowest rank's time is the collective's time.
    std::vector<double> all(static_cast<size_t>(g.size()));
    g.all_gather(&us, all.data(), sizeof us);
    const double t = *std::max_element(all.begin(), all.end());
    const double algbw = static_cast<double>(used) / (t * 1e3);
    if (g.rank() == 0) {
      std::printf("  %10zu %12zu %11.2f %12.3f %12.3f\n", used, used / es, t, algbw, algbw * bus);
      std::fflush(stdout);
    }
  }
}

void run_worker(const CommOpts& o) {
  dist::Config cfg = dist::Config::from_env();
  if (under_mpirun()) cfg.backend = "mpi";
  auto group = dist::make_group(cfg);
  dist::Group& g = *group;
  const dist::DType type = parse_dtype(o.dtype);
  const size_t es = dist::dtype_size(type);
  auto* tcp = dynamic_cast<dist::TransportGroup*>(&g);
  dist::TransportGroup::Algo algo = dist::TransportGroup::Algo::kAuto;
  if (o.algo == "direct") algo = dist::TransportGroup::Algo::kDirect;
  else if (o.algo == "ring") algo = dist::TransportGroup::Algo::kRing;
  else if (o.algo != "auto") throw Error("--algo must be auto, direct or ring");
  const size_t lo = std::max(es, parallel::parse_bytes(o.min_bytes)), hi = parallel::parse_bytes(o.max_bytes);
  std::vector<uint8_t> buf(std::max(hi, es), 0), out(std::max(hi, es), 0);
  const std::string label = std::string(g.backend()) + (std::getenv("ORCHARD_BENCH_LABEL") ? std::string(" ") + std::getenv("ORCHARD_BENCH_LABEL") : "");
  const int n = g.size();
  for (const std::string& op : split_commas(o.ops)) {
    if (op != "all_sum" && op != "all_to_all") throw Error("--op must list all_sum and/or all_to_all, not '" + op + "'");
    if (g.rank() == 0) {
      std::printf("# %s %s | backend %s | %d ranks | algorithm %s", op.c_str(), o.dtype.c_str(), label.c_str(), n,
                  tcp && op == "all_sum" ? o.algo.c_str() : tcp ? "direct" : "built-in");
      if (tcp && op == "all_sum") std::printf(" (ring from %zu bytes)", tcp->ring_bytes());
      if (op == "all_to_all") std::printf(" | bytes: each rank's whole send buffer, %d blocks", n);
      std::printf("\n# %10s %12s %11s %12s %12s\n", "bytes", "elements", "time(us)", "algbw(GB/s)", "busbw(GB/s)");
    }
    if (op == "all_sum") {
      time_sizes(g, lo, hi, es, o.iters, [&](size_t bytes) {
        if (tcp) tcp->all_sum_with(buf.data(), bytes / es, type, algo);
        else g.all_sum(buf.data(), bytes / es, type);
      }, es, 2.0 * (n - 1) / n);
    } else {
      // As nccl-tests: every rank sends (n-1)/n of its buffer away.
      time_sizes(g, lo, hi, es * static_cast<size_t>(n), o.iters,
                 [&](size_t bytes) { g.all_to_all(buf.data(), out.data(), bytes / static_cast<size_t>(n)); }, es,
                 static_cast<double>(n - 1) / n);
    }
    if (g.rank() == 0) std::printf("\n");
  }
}

std::vector<std::string> worker_args(const CommOpts& o) {
  std::vector<std::string> a = {self_executable(), "bench", "comm", "--worker", "--min-bytes", o.min_bytes,
                                "--max-bytes", o.max_bytes, "--dtype", o.dtype, "--algo", o.algo,
                                "--iters", std::to_string(o.iters), "--op", o.ops};
  return a;
}

int run_mpi(const CommOpts& o, int n, bool tcp_only) {
  std::string cmd = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ORCHARD_BENCH_LABEL=";
  // Debian's OpenMPI prefers the UCX messaging layer where it loads, and UCX ignores the btl
  // list: `--mca btl tcp,self` alone still moved local ranks' bytes through shared memory
  // (2 ranks, 1 MiB all_to_all in 183 us, 5.7 GB/s, beyond loopback TCP). ob1 is the layer that
  // honours the btl list.
  cmd += tcp_only ? "'(pml ob1, btl tcp,self)'" : "'(default transports: shared memory)'";
  cmd += " mpirun --oversubscribe -n " + std::to_string(n) + (tcp_only ? " --mca pml ob1 --mca btl tcp,self" : "");
  for (const auto& a : worker_args(o)) cmd += " '" + a + "'";
  std::fflush(stdout);
  return std::system(cmd.c_str());
}

}  // namespace

void register_bench_comm(CLI::App& bench) {
  auto o = std::make_shared<CommOpts>();
  auto* cmd = bench.add_subcommand("comm", "all_sum and all_to_all latency and bus bandwidth per backend, nccl-tests style");
  cmd->footer(
      "Examples:\n"
      "  orchard bench comm                          # tcp, shm, mpi with 2, 3, 4 local ranks\n"
      "  orchard bench comm --backend tcp,shm,mpi,mpi-tcp -n 2 --min-bytes 8K --max-bytes 8K\n"
      "  orchard bench comm --op all_to_all -n 4     # expert parallel's token exchange\n"
      "  orchard launch --hostfile hosts.json -- orchard bench comm   # across machines\n"
      "mpi runs under mpirun with its default transports; mpi-tcp forces --mca pml ob1 --mca btl tcp,self.\n"
      "Link emulation: ORCHARD_LINK_LATENCY_US=50 ORCHARD_LINK_GBPS=40 orchard bench comm --backend tcp");
  cmd->add_option("--backend", o->backends, "Comma-separated: tcp, shm, mpi, mpi-tcp")->capture_default_str();
  cmd->add_option("-n,--ranks", o->ranks, "Comma-separated rank counts")->capture_default_str();
  cmd->add_option("--min-bytes", o->min_bytes, "Smallest message (e.g. 4, 8K)")->capture_default_str();
  cmd->add_option("--max-bytes", o->max_bytes, "Largest message (doubling in between)")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "f32, f16 or bf16")->capture_default_str();
  cmd->add_option("--algo", o->algo, "tcp all_sum algorithm: auto, direct or ring")->capture_default_str();
  cmd->add_option("--iters", o->iters, "Timed iterations per size (0: by size)");
  cmd->add_option("--op", o->ops, "Comma-separated collectives: all_sum, all_to_all")->capture_default_str();
  cmd->add_flag("--worker", o->worker, "Internal: measure as one rank of a running job");
  cmd->callback([o] {
    if (o->worker || dist::Config::in_job() || under_mpirun()) {
      run_worker(*o);
      return;
    }
    int failures = 0;
    for (const std::string& b : split_commas(o->backends))
      for (const std::string& ns : split_commas(o->ranks)) {
        const int n = std::stoi(ns);
        if (n < 2) throw Error("bench comm: need at least 2 ranks");
        std::fflush(stdout);  // the ranks write to the same file
        int rc = 0;
        if (b == "mpi" || b == "mpi-tcp") {
          if (!dist::mpi_available()) {
            std::printf("# mpi: not built into this orchard (install libopenmpi-dev and rebuild)\n");
            continue;
          }
          rc = run_mpi(*o, n, b == "mpi-tcp");
        } else {
          dist::LaunchOptions lo;
          lo.ranks = n;
          lo.backend = b;
          lo.command = worker_args(*o);
          lo.prefix = false;
          rc = dist::launch(lo);
        }
        if (rc != 0) {
          std::fprintf(stderr, "orchard bench comm: %s with %d ranks failed (status %d)\n", b.c_str(), n, rc);
          ++failures;
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    if (failures) std::exit(1);
  });
}

}  // namespace orchard::cli
