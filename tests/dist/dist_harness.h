#pragma once
// Runs one function per rank on threads of this process, each rank with its
// own group (real sockets or shared memory, as in separate processes), and
// rethrows the first rank's failure.
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dist/config.h"
#include "dist/group.h"
#include "dist/make_group.h"
#include "dist/process_harness.h"
#include "dist/net/socket.h"
#include "dist/rdma/fake_verbs.h"
#include "dist/rdma/rdma_group.h"

namespace orchard::dist::testing {


inline Config local_config(const std::string& backend, int rank, int size, int port, const std::string& job) {
  Config c;
  c.backend = backend;
  c.rank = rank;
  c.size = size;
  c.coordinator = "127.0.0.1:" + std::to_string(port);
  c.host = "127.0.0.1";
  c.job = job;
  c.connect_timeout_s = 20;
  c.timeout_s = 10;
  return c;
}

inline void run_ranks(const std::string& backend, int n, const std::function<void(Group&)>& body,
                      const std::function<void(Config&)>& tweak = {}) {
  static std::atomic<int> job_no{0};
  const int port = free_port();
  const std::string job = "test-" + std::to_string(::getpid()) + "-" + std::to_string(job_no++);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        Config c = local_config(backend, r, n, port, job);
        if (tweak) tweak(c);
        // "rdma-fake": the rdma backend over the in-process fake verbs.
        std::unique_ptr<Group> g;
        if (backend == "rdma-fake") {
          c.backend = "tcp";
          g = std::make_unique<RdmaGroup>(std::shared_ptr<TcpGroup>(TcpGroup::create(c)), rdma::make_fake_verbs());
        } else {
          g = make_group(c);
        }
        body(*g);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace orchard::dist::testing
