// A rank for the multi-process tests: joins the job in its environment and
// runs one scenario. Exit 0: all checks held; 1: a wrong result; 3: a
// CommError (printed to stderr, which the tests read).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collective_checks.h"
#include "dist/config.h"
#include "dist/make_group.h"

using namespace orchard::dist;

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "check failed: %s\n", what.c_str());
  return 1;
}

int check(Group& g, size_t big) {
  const int n = g.size(), me = g.rank();
  std::vector<size_t> sizes = {1, 3, 17, 1000, 65537, size_t{1} << 20};
  if (big) sizes.push_back(big);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (size_t count : sizes) {
      auto buf = testing::filled(t, me, count);
      g.all_sum(buf.data(), count, t);
      const std::string err = testing::check_sum(buf, t, n, count);
      if (!err.empty()) return fail("all_sum: " + err);
    }
  for (size_t bytes : {size_t{1}, size_t{5000}, size_t{3} << 20}) {
    std::vector<uint8_t> mine(bytes, static_cast<uint8_t>(me + 1)), all(bytes * static_cast<size_t>(n));
    g.all_gather(mine.data(), all.data(), bytes);
    for (int r = 0; r < n; ++r)
      if (all[static_cast<size_t>(r) * bytes] != r + 1 || all[static_cast<size_t>(r + 1) * bytes - 1] != r + 1)
        return fail("all_gather block " + std::to_string(r));
    std::vector<uint8_t> b(bytes, me == n - 1 ? 42 : 0);
    g.broadcast(b.data(), bytes, n - 1);
    if (b[0] != 42 || b[bytes - 1] != 42) return fail("broadcast");
  }
  {
    // all_to_all: block r to rank r, tagged with (sender, receiver)
    const size_t bytes = 5000;
    std::vector<uint8_t> send(bytes * static_cast<size_t>(n)), recv(send.size(), 0);
    for (int r = 0; r < n; ++r) std::memset(&send[static_cast<size_t>(r) * bytes], me * 16 + r, bytes);
    g.all_to_all(send.data(), recv.data(), bytes);
    for (int r = 0; r < n; ++r)
      if (recv[static_cast<size_t>(r) * bytes] != r * 16 + me || recv[static_cast<size_t>(r + 1) * bytes - 1] != r * 16 + me)
        return fail("all_to_all block from rank " + std::to_string(r));
  }
  std::vector<int32_t> out(4096, me), in(4096, -1);
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  if (me % 2 == 0) {
    g.send(out.data(), out.size() * 4, next);
    g.recv(in.data(), in.size() * 4, prev);
  } else {
    g.recv(in.data(), in.size() * 4, prev);
    g.send(out.data(), out.size() * 4, next);
  }
  if (in[0] != prev || in[4095] != prev) return fail("send/recv ring");
  auto sub = g.split(me % 2, me);
  float x = 1.0f;
  sub->all_sum(&x, 1);
  if (x != static_cast<float>(sub->size())) return fail("split all_sum");
  g.barrier();
  std::printf("rank %d of %d (%s): all checks passed\n", me, n, g.backend());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  try {
    auto group = make_group_from_env();
    Group& g = *group;
    if (mode == "check") return check(g, argc > 2 ? std::stoull(argv[2]) : 0);
    if (mode == "loop") {
      std::vector<float> buf(2048, 1.0f);
      std::printf("ready\n");
      std::fflush(stdout);
      for (;;) {
        g.all_sum(buf.data(), buf.size());
        std::fill(buf.begin(), buf.end(), 1.0f);
      }
    }
    if (mode == "mismatch-size") {
      std::vector<float> buf(1000, 1.0f);
      g.all_sum(buf.data(), g.rank() == 0 ? 1000 : 999);
      return 0;
    }
    if (mode == "mismatch-op") {
      std::vector<uint8_t> buf(64, 0);
      if (g.rank() == 0)
        g.barrier();
      else
        g.broadcast(buf.data(), buf.size(), 0);
      return 0;
    }
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  } catch (const CommError& e) {
    std::fprintf(stderr, "rank error: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 4;
  }
}
