#include "serve/cluster_executor.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "parallel/model_cost.h"
#include "tensor/error.h"

namespace orchard::serve {
namespace {

// A step on the wire: [n_feeds] then per feed [slot, keep, copy_from, n_tokens, tokens…], all
// int32.
std::vector<int32_t> encode(std::span<const SlotFeed> feeds) {
  std::vector<int32_t> w = {static_cast<int32_t>(feeds.size())};
  for (const SlotFeed& f : feeds) {
    w.push_back(f.slot);
    w.push_back(static_cast<int32_t>(f.keep));
    w.push_back(f.copy_from);
    w.push_back(static_cast<int32_t>(f.tokens.size()));
    w.insert(w.end(), f.tokens.begin(), f.tokens.end());
  }
  return w;
}

std::vector<SlotFeed> decode(const std::vector<int32_t>& w, int slots) {
  std::vector<SlotFeed> feeds;
  size_t i = 1;
  auto take = [&] {
    if (i >= w.size()) throw Error("a malformed step message from rank 0");
    return w[i++];
  };
  const int32_t n = w.empty() ? -1 : w[0];
  if (n < 0) throw Error("a malformed step message from rank 0");
  for (int32_t k = 0; k < n; ++k) {
    SlotFeed f;
    f.slot = take();
    f.keep = take();
    f.copy_from = take();
    const int32_t len = take();
    if (f.slot < 0 || f.slot >= slots || len <= 0 || f.keep < -1 || f.copy_from < -1 || f.copy_from >= slots)
      throw Error("a malformed step message from rank 0");
    for (int32_t t = 0; t < len; ++t) f.tokens.push_back(take());
    feeds.push_back(std::move(f));
  }
  return feeds;
}

constexpr int64_t kStop = -1;

}  // namespace

ClusterExecutor::ClusterExecutor(parallel::Session& session, dist::Group& world, int slots, int64_t chunk)
    : session_(session), world_(world), chunk_(std::max<int64_t>(1, chunk)) {
  if (slots < 1) throw Error("the server needs at least one slot (got " + std::to_string(slots) + ")");
  // As on one machine: an answer must not depend on who else is being served.
  session_.engine().model().set_batch_invariant(true);
  for (int i = 0; i < slots; ++i) {
    caches_.push_back(session_.engine().new_cache());
    forwards_.push_back(session_.make_forward(*caches_.back()));
  }
}

void ClusterExecutor::run(std::span<const SlotFeed> feeds, std::vector<float>& logits) {
  const int64_t nv = n_vocab();
  const bool sampler = session_.is_sampler();
  logits.resize(feeds.size() * static_cast<size_t>(nv));
  prepare_slots(feeds, caches_);
  size_t rows = 0;
  for (const SlotFeed& f : feeds) rows += f.tokens.size();
  if (feeds.size() > 1 && rows <= static_cast<size_t>(chunk_)) {
    // One pass for all of them (the usual step: one new token per request): the weights are
    // read and the links crossed once per step, not once per request.
    std::vector<BatchSeq> batch;
    for (const SlotFeed& f : feeds) batch.push_back({f.tokens, caches_[static_cast<size_t>(f.slot)].get()});
    forwards_[0]->feed_batch(batch, row_);
    if (sampler) std::copy(row_.begin(), row_.end(), logits.begin());
  } else {
    // Long prompt pieces: slot by slot, each in pipelined chunks.
    for (size_t i = 0; i < feeds.size(); ++i) {
      const SlotFeed& f = feeds[i];
      forwards_[static_cast<size_t>(f.slot)]->feed(f.tokens, row_);
      if (sampler) std::copy_n(row_.begin(), nv, logits.begin() + static_cast<std::ptrdiff_t>(i * nv));
    }
  }
  const int s = session_.plan().sampler();
  if (s == 0) return;
  const size_t bytes = logits.size() * sizeof(float);
  if (world_.rank() == s) world_.send(logits.data(), bytes, 0);
  if (world_.rank() == 0) world_.recv(logits.data(), bytes, s);
}

void ClusterExecutor::step(std::span<const SlotFeed> feeds, std::vector<float>& logits) {
  if (world_.rank() != 0) throw Error("only rank 0 decides the steps");
  if (stopped_) throw Error("the cluster has stopped");
  std::vector<int32_t> msg = encode(feeds);
  int64_t len = static_cast<int64_t>(msg.size());
  world_.broadcast(&len, sizeof len, 0);
  world_.broadcast(msg.data(), msg.size() * sizeof(int32_t), 0);
  run(feeds, logits);
}

void ClusterExecutor::follow() {
  std::vector<float> logits;
  for (;;) {
    int64_t len = 0;
    world_.broadcast(&len, sizeof len, 0);
    if (len == kStop) return;
    if (len < 1 || len > (int64_t{1} << 28)) throw Error("a malformed step header from rank 0");
    std::vector<int32_t> msg(static_cast<size_t>(len));
    world_.broadcast(msg.data(), msg.size() * sizeof(int32_t), 0);
    run(decode(msg, slots()), logits);
  }
}

void ClusterExecutor::stop() {
  if (world_.rank() != 0 || stopped_) return;
  stopped_ = true;
  int64_t len = kStop;
  world_.broadcast(&len, sizeof len, 0);
}

ClusterView ClusterExecutor::describe(const std::string& model_path) {
  const parallel::Plan& plan = session_.plan();
  ClusterView v;
  v.kind = world_.size() == 1 ? "single" : parallel::kind_name(plan.kind);
  v.backend = world_.backend();
  // Host names, fixed width so one all_gather carries them.
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  std::vector<char> hosts(sizeof host * static_cast<size_t>(world_.size()));
  world_.all_gather(host, hosts.data(), sizeof host);
  // Round trips from rank 0 to each rank, one rank at a time: the median of 15.
  std::vector<double> rtt(static_cast<size_t>(world_.size()), -1);
  for (int r = 1; r < world_.size(); ++r) {
    std::vector<double> samples;
    for (int k = 0; k < 15; ++k) {
      uint64_t ping = static_cast<uint64_t>(k);
      if (world_.rank() == 0) {
        const auto t0 = std::chrono::steady_clock::now();
        world_.send(&ping, sizeof ping, r);
        world_.recv(&ping, sizeof ping, r);
        samples.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      } else if (world_.rank() == r) {
        world_.recv(&ping, sizeof ping, 0);
        world_.send(&ping, sizeof ping, 0);
      }
    }
    if (!samples.empty()) {
      std::nth_element(samples.begin(), samples.begin() + 7, samples.end());
      rtt[static_cast<size_t>(r)] = samples[7] / 2;  // one way
    }
  }
  auto header = GGUFFile::open(model_path, GGUFLoad::Map);
  const auto cost = parallel::ModelCost::from_gguf(*header);
  for (int r = 0; r < world_.size(); ++r) {
    const parallel::RankRole& role = plan.ranks[static_cast<size_t>(r)];
    const Shard& s = role.shard;
    RankView rv;
    rv.rank = r;
    rv.host = std::string(&hosts[static_cast<size_t>(r) * sizeof host]);
    rv.layer_begin = s.layer_begin;
    rv.layer_end = s.layer_end;
    if (plan.size() == 1) rv.role = "whole model";
    else if (plan.stages == 1) rv.role = "slice " + std::to_string(role.tp_rank + 1) + " of " + std::to_string(plan.tp);
    else if (plan.tp == 1) rv.role = "stage " + std::to_string(role.stage + 1) + " of " + std::to_string(plan.stages);
    else
      rv.role = "stage " + std::to_string(role.stage + 1) + " of " + std::to_string(plan.stages) + ", slice " +
                std::to_string(role.tp_rank + 1) + " of " + std::to_string(plan.tp);
    if (plan.tp > 1) rv.slice = s.describe();
    const double kv = cost.kv_bytes(s.layer_begin, s.layer_end, plan.tp, slot_capacity(),
                                    static_cast<int>(kv_type_bytes(session_.engine().kv_type()))) *
                      slots();
    rv.memory_bytes = static_cast<uint64_t>(cost.held_bytes(s.layer_begin, s.layer_end, plan.tp, s.embed, s.head) + kv);
    rv.link_latency_us = rtt[static_cast<size_t>(r)];
    v.ranks.push_back(std::move(rv));
  }
  return v;
}

}  // namespace orchard::serve
