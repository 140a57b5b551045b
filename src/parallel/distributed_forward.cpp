#include "parallel/distributed_forward.h"

#include <algorithm>

#include "tensor/error.h"

namespace orchard::parallel {

DistributedForward::DistributedForward(Model& model, KVCache& kv, dist::Group& world, dist::Group* tp_group,
                                       const Plan& plan, int64_t chunk)
    : model_(model), kv_(kv), world_(world), tp_(tp_group), plan_(plan), chunk_(std::max<int64_t>(1, chunk)) {
  if (world.size() != plan.size())
    throw Error("the plan is for " + std::to_string(plan.size()) + " ranks but the job has " +
                std::to_string(world.size()));
  role_ = plan.ranks[static_cast<size_t>(world.rank())];
  if (plan.tp > 1 && (!tp_ || tp_->size() != plan.tp))
    throw Error("tensor parallel: this rank needs its stage's group of " + std::to_string(plan.tp) + " ranks");
}

void DistributedForward::feed(std::span<const TokenId> tokens, std::vector<float>& logits) {
  const int64_t n = static_cast<int64_t>(tokens.size()), dim = model_.hparams().dim;
  if (n == 0) throw Error("forward: no tokens to process");
  const bool first = role_.stage == 0, last = role_.stage == plan_.stages - 1;
  const int prev = first ? -1 : plan_.world_rank(role_.stage - 1, role_.tp_rank);
  const int next = last ? -1 : plan_.world_rank(role_.stage + 1, role_.tp_rank);
  for (int64_t off = 0; off < n; off += chunk_) {
    const int64_t m = std::min(chunk_, n - off);
    x_.resize(static_cast<size_t>(m * dim));
    const size_t bytes = x_.size() * sizeof(float);
    // x = embed(tokens) on the first stage, else the previous stage's output
    if (first)
      model_.embed(tokens.subspan(static_cast<size_t>(off), static_cast<size_t>(m)), x_.data());
    else
      world_.recv(x_.data(), bytes, prev);
    model_.run_layers(x_.data(), m, kv_);
    if (!last) {
      world_.send(x_.data(), bytes, next);
    } else if (off + m == n) {
      // Only the last token's logits are needed to pick the next token.
      model_.project(x_.data(), m, false, local_);
      gather_logits(logits);
    }
  }
}

void DistributedForward::gather_logits(std::vector<float>& logits, int64_t rows) {
  if (plan_.tp == 1) {
    logits.swap(local_);
    return;
  }
  // Vocabulary slices differ in length by at most one row: gather padded to the longest.
  int64_t longest = 0;
  for (int t = 0; t < plan_.tp; ++t) longest = std::max(longest, plan_.ranks[static_cast<size_t>(plan_.world_rank(role_.stage, t))].shard.n_vocab());
  const int64_t mine = role_.shard.n_vocab(), nv = model_.hparams().n_vocab;
  padded_.assign(static_cast<size_t>(rows * longest), 0.0f);
  for (int64_t r = 0; r < rows; ++r) std::copy_n(local_.begin() + r * mine, mine, padded_.begin() + r * longest);
  all_.resize(static_cast<size_t>(rows * longest * plan_.tp));
  tp_->all_gather(padded_.data(), all_.data(), static_cast<size_t>(rows * longest) * sizeof(float));
  logits.resize(static_cast<size_t>(rows * nv));
  for (int t = 0; t < plan_.tp; ++t) {
    const Shard& s = plan_.ranks[static_cast<size_t>(plan_.world_rank(role_.stage, t))].shard;
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(all_.begin() + (t * rows + r) * longest, s.n_vocab(), logits.begin() + r * nv + s.vocab_begin);
  }
}

void DistributedForward::feed_batch(std::span<const BatchSeq> seqs, std::vector<float>& logits) {
  const BatchRows b(seqs);
  const int64_t dim = model_.hparams().dim;
  const bool first = role_.stage == 0, last = role_.stage == plan_.stages - 1;
  const int64_t n = static_cast<int64_t>(b.tokens.size()), rows = static_cast<int64_t>(seqs.size());
  x_.resize(static_cast<size_t>(n * dim));
  const size_t bytes = x_.size() * sizeof(float);
  // x = embed(tokens) on the first stage, else the previous stage's output; then this stage's layers
  if (first)
    model_.embed(b.tokens, x_.data());
  else
    world_.recv(x_.data(), bytes, plan_.world_rank(role_.stage - 1, role_.tp_rank));
  model_.run_layers(x_.data(), b.kvs, b.lengths);
  if (!last) {
    world_.send(x_.data(), bytes, plan_.world_rank(role_.stage + 1, role_.tp_rank));
    return;
  }
  // Each sequence's last row → its logits.
  std::vector<float> ends;
  b.last_rows(x_.data(), dim, ends);
  model_.project(ends.data(), rows, true, local_);
  gather_logits(logits, rows);
}

TokenId DistributedForward::agree(TokenId decision) {
  world_.broadcast(&decision, sizeof decision, plan_.sampler());
  return decision;
}

}  // namespace orchard::parallel
