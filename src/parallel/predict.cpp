#include "parallel/predict.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>

#include "parallel/memory.h"
#include "tensor/error.h"

namespace orchard::parallel {
namespace {

constexpr double kGB = 1e9;
constexpr size_t kRingBytes = 256 * 1024;  // the tcp backend's switch from direct to ring
constexpr double kOpsPerLayer = 12;        // parallel regions per layer in one token's forward pass

std::string fmt(const char* f, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c, d);
  return buf;
}

// Where each world rank runs: ranks fill the first machines in order.
std::vector<int> rank_nodes(const ClusterSpec& cl, int n_nodes) {
  std::vector<int> out;
  for (int n = 0; n < n_nodes; ++n)
    for (int r = 0; r < cl.nodes[static_cast<size_t>(n)].ranks; ++r) out.push_back(n);
  return out;
}

class TimingModel {
 public:
  TimingModel(const ClusterSpec& cl, const Candidate& c, double dim) : cl_(cl), c_(c), dim_(dim) {
    node_of_ = rank_nodes(cl, c.n_nodes);
  }
  int node(int rank) const { return node_of_[static_cast<size_t>(rank)]; }
  const NodeSpec& spec(int rank) const { return cl_.nodes[static_cast<size_t>(node(rank))]; }

  // Ranks of stage s placed on the same machine as `rank` (they run at the same time).
  int stage_neighbours(int s, int rank) const {
    int n = 0;
    for (int t = 0; t < c_.tp; ++t) n += node(s * c_.tp + t) == node(rank);
    return n;
  }
  int node_ranks(int rank) const {
    int n = 0;
    for (int r = 0; r < c_.ranks(); ++r) n += node(r) == node(rank);
    return n;
  }

  // Bytes/s one rank streams weights of `type` at while `sharing` ranks use its machine.
  double gen_rate(int rank, DType type, int sharing) const {
    const NodeSpec& n = spec(rank);
    const MachineSpec& mc = n.machine;
    if (!mc.measured) return mc.mem_bw_gbs * mc.gen_efficiency * kGB / sharing;
    const int threads = std::min(n.threads_per_rank() * sharing, std::max(1, mc.cores));
    double agg = 0;
    if (auto it = mc.matvec_gbs.find(type); it != mc.matvec_gbs.end()) agg = it->second.at(threads);
    else if (!mc.membw_gbs.empty()) agg = 0.8 * mc.membw_gbs.at(threads);
    else agg = mc.mem_bw_gbs * mc.gen_efficiency;
    return agg * kGB / sharing;
  }
  double membw(int rank, int sharing) const {
    const MachineSpec& mc = spec(rank).machine;
    const double bw = mc.measured && !mc.membw_gbs.empty()
                          ? mc.membw_gbs.at(std::min(spec(rank).threads_per_rank() * sharing, std::max(1, mc.cores)))
                          : mc.mem_bw_gbs * mc.gen_efficiency;
    return bw * kGB / sharing;
  }
  // FLOP/s of many-token products for one rank.
  double flop_rate(int rank, DType type, int sharing) const {
    const NodeSpec& n = spec(rank);
    const MachineSpec& mc = n.machine;
    if (!mc.measured) return mc.gpu_tflops * mc.prefill_efficiency * 1e12 / sharing;
    const int threads = std::min(n.threads_per_rank() * sharing, std::max(1, mc.cores));
    auto it = mc.matmul_gflops.find(type);
    if (it == mc.matmul_gflops.end()) it = mc.matmul_gflops.begin();
    const double g = it != mc.matmul_gflops.end() ? it->second.at(threads) : 10.0 * threads;
    return g * 1e9 / sharing;
  }
  // Fixed cost of one layer's work for one token, beyond streaming its weights.
  double layer_s(int rank, int sharing) const {
    const NodeSpec& n = spec(rank);
    if (!n.machine.measured) return n.machine.layer_overhead_us * 1e-6;
    if (n.machine.layer_us.empty()) return kOpsPerLayer * sync_s(rank, sharing);
    // Each rank does its own per-layer work; ranks beyond the cores take turns.
    const double turns = std::max(1.0, static_cast<double>(sharing * n.threads_per_rank()) / std::max(1, n.machine.cores));
    return n.machine.layer_us.at(n.threads_per_rank()) * (dim_ / n.machine.layer_us_dim) * 1e-6 * turns;
  }
  // Fixed extra cost of one mixture-of-experts layer for one token (catalog figure; 0 unless given).
  double moe_layer_s(int rank) const { return spec(rank).machine.moe_layer_overhead_us * 1e-6; }
  double sync_s(int rank, int sharing) const {
    const NodeSpec& n = spec(rank);
    if (!n.machine.measured) return 0;
    return n.machine.sync_us.at(n.threads_per_rank()) * 1e-6 * std::max(1.0, static_cast<double>(sharing * n.threads_per_rank()) / std::max(1, n.machine.cores));
  }

  // One all_sum of `bytes` among `ranks`.
  double all_sum(const std::vector<int>& ranks, double bytes) const {
    if (ranks.size() < 2) return 0;
    const int first = node(ranks[0]);
    const bool local = std::all_of(ranks.begin(), ranks.end(), [&](int r) { return node(r) == first; });
    const auto t = static_cast<double>(ranks.size());
    if (local) return local_fit(first, static_cast<int>(ranks.size())).sync_seconds(bytes);
    double stall = 0;
    for (int r : ranks) stall = std::max(stall, spec(r).machine.collective_us * 1e-6);
    const double lat = cl_.link.latency_us() * 1e-6 + stall, bw = cl_.link.gbs() * kGB;
    if (bytes < kRingBytes) return lat + (t - 1) * bytes / bw;
    return 2 * (t - 1) * (lat + bytes / t / bw);
  }
  double hop(int from, int to, double bytes) const {
    if (node(from) == node(to)) return local_fit(node(from), node_ranks(from)).hop_seconds(bytes);
    const double stall = std::max(spec(from).machine.collective_us, spec(to).machine.collective_us) * 1e-6;
    return cl_.link.latency_us() * 1e-6 + stall + bytes / (cl_.link.gbs() * kGB);
  }
  // The sampler's decision reaching every rank: one message to the first stage, which is
  // what the next token waits for.
  double broadcast() const { return hop(c_.ranks() - 1, 0, 4); }

  // A measured all_sum between ranks on one machine (or a default for catalog machines).
  LinkFit local_fit(int node_index, int ranks) const {
    const NodeSpec& n = cl_.nodes[static_cast<size_t>(node_index)];
    const auto& table = n.machine.local_allsum;
    const double extra = cl_.local_extra_latency_us;
    const std::string emulated = cl_.local_backend + "+" + std::to_string(static_cast<int>(extra));
    auto it = extra > 0 ? table.find(emulated) : table.end();
    const bool measured_extra = it != table.end();
    if (!measured_extra) it = table.find(cl_.local_backend);
    LinkFit f{5, 20};  // shared memory between GPU processes on one Mac: not measured, small
    if (it != table.end() && !it->second.empty()) {
      auto at = it->second.upper_bound(ranks);
      f = at == it->second.begin() ? at->second : std::prev(at)->second;
    }
    if (!measured_extra) {
      f.latency_us += extra;
      if (f.sync_us > 0) f.sync_us += extra;
      if (f.hop_us > 0) f.hop_us += extra;
    }
    return f;
  }

 private:
  const ClusterSpec& cl_;
  const Candidate& c_;
  double dim_;  // model width: per-layer vector work grows with it
  std::vector<int> node_of_;
};

}  // namespace

std::string Candidate::label() const {
  if (kind == Kind::kExpert)
    return "expert " + (stages == 1 ? std::to_string(tp) : std::to_string(stages) + "×" + std::to_string(tp));
  if (stages == 1 && tp == 1) return "single";
  if (tp == 1) return "pipeline " + std::to_string(stages);
  if (stages == 1) return "tensor " + std::to_string(tp);
  return "hybrid " + std::to_string(stages) + "×" + std::to_string(tp);
}

namespace {

// Seconds rank r of `md` takes to stream `bytes` (by format) while `share` ranks use its machine.
double stream_s(const TimingModel& md, int r, const BytesByType& bytes, int share, double scale = 1.0) {
  double secs = 0;
  for (const auto& [type, n] : bytes) secs += n * scale / md.gen_rate(r, type, share);
  return secs;
}

// One stage of an expert plan, one generated token: every layer ends in the group's all_sum, so
// each layer lasts as long as its slowest rank — attention and dense layers (split `split` ways,
// or whole on each rank), its columns of the shared experts, and however many of the token's
// routed experts land on it.
double expert_stage_s(const ModelCost& m, const TimingModel& md, int s, int T, int split, int64_t b, int64_t e, bool last,
                      const std::vector<int64_t>& held, double kv_per_layer, double* busiest) {
  std::vector<double> fixed(static_cast<size_t>(T)), per_expert(static_cast<size_t>(T));
  std::map<std::array<double, 3>, double> seen;  // layers of one shape cost the same
  double total_s = 0;
  for (int64_t l = b; l < e; ++l) {
    const BytesByType rep = m.replicated_read(l);
    const auto li = static_cast<size_t>(l);
    const std::array<double, 3> key{total(rep), total(m.layer_shared[li]), total(m.layer_experts[li])};
    if (auto it = seen.find(key); it != seen.end()) {
      total_s += it->second;
      continue;
    }
    const bool moe = m.moe_layer(l);
    for (int t = 0; t < T; ++t) {
      const int r = s * T + t, share = md.stage_neighbours(s, r);
      const auto ti = static_cast<size_t>(t);
      fixed[ti] = stream_s(md, r, rep, share, 1.0 / split) + kv_per_layer / md.membw(r, share) +
                  md.layer_s(r, share) + (moe ? md.moe_layer_s(r) : 0) +
                  stream_s(md, r, m.layer_shared[li], share, 1.0 / T);
      per_expert[ti] = moe ? stream_s(md, r, m.layer_experts[li], share, 1.0 / static_cast<double>(m.n_experts)) : 0;
    }
    const double layer_s = moe ? expected_slowest(held, m.n_experts_used, fixed, per_expert)
                               : *std::max_element(fixed.begin(), fixed.end());
    seen[key] = layer_s;
    total_s += layer_s;
  }
  if (last) {
    double slowest_head = 0;
    for (int t = 0; t < T; ++t) {
      const int r = s * T + t, share = md.stage_neighbours(s, r);
      const double secs = stream_s(md, r, m.head_bytes, share, 1.0 / T) +
                          (m.tied ? stream_s(md, r, m.embed_bytes, share, 1.0 / T) : 0);
      slowest_head = std::max(slowest_head, secs);
    }
    total_s += slowest_head;
  }
  *busiest = expected_slowest(held, m.n_experts_used, std::vector<double>(held.size(), 0.0),
                              std::vector<double>(held.size(), 1.0));
  return total_s;
}

}  // namespace

Prediction predict(const ModelCost& m, const ClusterSpec& cl, const Candidate& c, const PredictOptions& o) {
  if (c.n_nodes < 1 || c.n_nodes > static_cast<int>(cl.nodes.size()))
    throw Error("plan uses " + std::to_string(c.n_nodes) + " machines; the cluster has " + std::to_string(cl.nodes.size()));
  if (static_cast<int>(rank_nodes(cl, c.n_nodes).size()) != c.ranks())
    throw Error(c.label() + " needs " + std::to_string(c.ranks()) + " ranks; the first " + std::to_string(c.n_nodes) +
                " machines run " + std::to_string(rank_nodes(cl, c.n_nodes).size()));
  if (c.stages > m.n_layers)
    throw Error(c.label() + ": more stages than the model's " + std::to_string(m.n_layers) + " layers");
  const bool expert = c.kind == Kind::kExpert;
  if (expert && m.n_experts == 0) throw Error(c.label() + ": expert parallel needs a model with experts; " + m.name + " has none");
  if (expert && c.tp > m.n_experts)
    throw Error(c.label() + ": more expert-parallel ranks than the model's " + std::to_string(m.n_experts) + " experts");
  if (!expert && c.tp > m.n_kv_heads)
    throw Error(c.label() + ": more tensor ranks than the model's " + std::to_string(m.n_kv_heads) + " KV heads");
  TimingModel md(cl, c, static_cast<double>(m.dim));
  Prediction p;
  p.candidate = c;
  const int P = c.stages, T = c.tp;
  // An expert group splits attention and the dense layers as a tensor group does, where the
  // model has a KV head per rank (make_plan); otherwise every rank holds them whole.
  const int split = !expert || m.n_kv_heads >= T ? T : 1;
  // (A tensor split of a mixture splits every routed expert's columns, as make_plan does.)

  // Pipeline stages hold layers in proportion to the memory of their smallest rank.
  std::vector<double> weights, group_weights;
  for (int s = 0; s < P; ++s) {
    double least = 1e300;
    for (int t = 0; t < T; ++t) {
      const int r = s * T + t;
      least = std::min(least, md.spec(r).capacity_bytes() / md.node_ranks(r));
      if (s == 0) group_weights.push_back(md.spec(r).capacity_bytes() / md.node_ranks(r));
    }
    weights.push_back(least);
  }
  p.stage_layers = split_range(m.n_layers, P, 1, weights);
  // Memory: weights held + KV cache for n_ctx + one chunk's activations, summed per machine.
  const double scratch_per_token = activation_bytes_per_token(m.dim, m.n_heads * m.head_dim, m.kv_elems_per_layer,
                                                              std::max(m.ffn_dim, int64_t{1}), m.n_vocab / T);
  std::vector<std::pair<int64_t, int64_t>> experts;
  auto needs = [&] {
    std::vector<double> need(cl.nodes.size(), 0.0);
    for (int r = 0; r < c.ranks(); ++r) {
      const int s = r / T;
      const auto [b, e] = p.stage_layers[static_cast<size_t>(s)];
      const auto [e0, e1] = expert ? experts[static_cast<size_t>(r % T)] : std::pair<int64_t, int64_t>{0, 0};
      const double weights_held = expert ? m.expert_held_bytes(b, e, e0, e1, T, split, s == 0, s == P - 1)
                                         : m.held_bytes(b, e, T, s == 0, s == P - 1);
      need[static_cast<size_t>(md.node(r))] += weights_held + m.kv_bytes(b, e, split, o.n_ctx, o.kv_elem_bytes()) +
                                               scratch_per_token * static_cast<double>(o.chunk);
    }
    return need;
  };
  // An expert group's ranks share the routed experts evenly, which keeps the busiest rank's
  // load least; where that overfills a machine, in proportion to memory (as make_plan splits
  // them given the ranks' budgets).
  if (expert) experts = split_range(m.n_experts, T);
  std::vector<double> need = needs();
  if (expert) {
    bool over = false;
    for (int n = 0; n < c.n_nodes; ++n) over = over || need[static_cast<size_t>(n)] > cl.nodes[static_cast<size_t>(n)].capacity_bytes();
    if (over) {
      experts = split_range(m.n_experts, T, 1, group_weights);
      need = needs();
    }
  }
  std::vector<int64_t> held;
  for (const auto& [e0, e1] : experts) held.push_back(e1 - e0);
  for (int n = 0; n < c.n_nodes; ++n) {
    const NodeSpec& ns = cl.nodes[static_cast<size_t>(n)];
    p.memory.push_back({ns.name, need[static_cast<size_t>(n)], ns.capacity_bytes()});
    if (need[static_cast<size_t>(n)] > ns.capacity_bytes()) {
      p.fits = false;
      if (!p.shortfall.empty()) p.shortfall += "; ";
      p.shortfall += ns.name + " needs " + format_size(need[static_cast<size_t>(n)]) + " but offers " + format_size(ns.capacity_bytes()) +
                     " (" + fmt("%.0f%%", ns.machine.usable_memory * 100) + " of " + fmt("%.0f GiB", ns.memory_gib) + ")";
    }
  }

  // Generation: one token at the mean position of the generated run.
  const int64_t pos = o.prompt + o.gen / 2;
  const double act = 4.0 * static_cast<double>(m.dim);  // one token's activations, f32
  std::vector<double> busy(cl.nodes.size(), 0.0);
  for (int s = 0; s < P; ++s) {
    const auto [b, e] = p.stage_layers[static_cast<size_t>(s)];
    const bool last = s == P - 1;
    const int64_t moe = m.moe_layers(b, e);
    double slowest = 0, read = 0, busiest = 0;
    if (expert) {
      slowest = expert_stage_s(m, md, s, T, split, b, e, last, held, m.kv_bytes(0, 1, split, pos, o.kv_elem_bytes()),
                               &busiest);
      for (int64_t l = b; l < e; ++l) read += (total(m.replicated_read(l)) / split + total(m.layer_shared[static_cast<size_t>(l)]) / T);
    } else {
      for (int t = 0; t < T; ++t) {
        const int r = s * T + t, share = md.stage_neighbours(s, r);
        const BytesByType bytes = m.read_per_token(b, e, T, last);
        double secs = stream_s(md, r, bytes, share);
        read = total(bytes);
        secs += m.kv_bytes(b, e, T, pos, o.kv_elem_bytes()) / md.membw(r, share);
        secs += static_cast<double>(e - b) * md.layer_s(r, share) + static_cast<double>(moe) * md.moe_layer_s(r);
        slowest = std::max(slowest, secs);
      }
    }
    for (int t = 0; t < T; ++t) busy[static_cast<size_t>(md.node(s * T + t))] += slowest;
    // Tensor groups sum partial results twice a layer (attention, FFN); expert groups too when
    // they split attention, else once per MoE layer (the experts' outputs). Both gather the
    // vocabulary slices at the end.
    const double syncs_per_token = split == 1 ? static_cast<double>(moe) : 2.0 * static_cast<double>(e - b);
    double sync = 0;
    if (T > 1) {
      std::vector<int> group;
      for (int t = 0; t < T; ++t) group.push_back(s * T + t);
      sync = syncs_per_token * md.all_sum(group, act);
      if (last) sync += md.all_sum(group, 4.0 * static_cast<double>(m.n_vocab / T) * (T - 1));
    }
    const double hop = last ? 0 : md.hop(s * T, (s + 1) * T, act);
    // What leaves each rank: its partial sums and vocabulary slice, the hop.
    if (T > 1) p.exchanged_bytes += T * (syncs_per_token * act + (last ? 4.0 * static_cast<double>(m.n_vocab / T) : 0));
    if (!last) p.exchanged_bytes += T * act;
    p.compute_s += slowest;
    p.comm_s += sync + hop;
    if (o.explain) {
      std::string what = fmt("stage %.0f: layers %.0f-%.0f, each rank reads ", s, static_cast<double>(b),
                             static_cast<double>(e - 1)) + format_size(read);
      if (expert)
        what += std::string(split > 1 ? " of attention, dense layers and shared experts" : " of whole attention and dense layers") +
                fmt(" + its routed experts (the busiest of %.0f ranks gets %.2f of a token's %.0f)", T, busiest,
                    static_cast<double>(m.n_experts_used));
      p.terms.push_back(what + fmt(" per token: %.2f ms; syncs %.3f ms; hop %.3f ms", slowest * 1e3, sync * 1e3, hop * 1e3));
    }
  }
  if (c.ranks() > 1) p.comm_s += md.broadcast();
  p.token_s = p.compute_s + p.comm_s;
  if (o.explain && c.ranks() > 1) p.terms.push_back(fmt("activations exchanged per token: %.1f KiB in all", p.exchanged_bytes / 1024));
  p.tg_tps = 1.0 / p.token_s;
  if (o.explain)
    p.terms.push_back(fmt("generation: compute %.2f ms + communication %.3f ms = %.2f ms per token → %.1f tokens/s",
                        p.compute_s * 1e3, p.comm_s * 1e3, p.token_s * 1e3, p.tg_tps));

  // Prompt: chunks through the stages (one chunk of the whole prompt without a pipeline).
  const int64_t chunk = P > 1 ? std::min(o.chunk, o.prompt) : o.prompt;
  const int64_t n_chunks = (o.prompt + chunk - 1) / chunk;
  const double used = m.n_experts > 0 ? static_cast<double>(m.n_experts_used) / static_cast<double>(m.n_experts) : 0;
  double first_pass = 0, slowest_stage = 0;
  for (int s = 0; s < P; ++s) {
    const auto [b, e] = p.stage_layers[static_cast<size_t>(s)];
    const double per_token = m.flops_per_token(b, e, o.prompt / 2, false);
    double expert_flops = 0, shared_flops = 0;
    for (int64_t l = b; l < e; ++l) {
      expert_flops += 2.0 * static_cast<double>(m.layer_expert_params[static_cast<size_t>(l)]) * used;
      shared_flops += 2.0 * static_cast<double>(m.layer_shared_params[static_cast<size_t>(l)]);
    }
    double worst = 0;
    for (int t = 0; t < T; ++t) {
      const int r = s * T + t;
      // Pipelined chunks keep every stage busy, so every rank on a machine shares it.
      const int share = n_chunks > 1 ? md.node_ranks(r) : md.stage_neighbours(s, r);
      double flops = per_token / T, stream = 0, dominant_bytes = 0;
      BytesByType bytes = m.read_per_chunk(b, e, split, chunk);
      if (expert) {
        // Attention and dense layers (split or whole), this rank's share of the routed experts'
        // work and of the experts a chunk touches, its columns of the shared experts.
        const double mine = static_cast<double>(held[static_cast<size_t>(t)]) / static_cast<double>(m.n_experts);
        flops = (per_token - expert_flops - shared_flops) / split + expert_flops * mine + shared_flops / T;
        const double touched = 1.0 - std::pow(1.0 - used, static_cast<double>(chunk));
        bytes.clear();
        for (int64_t l = b; l < e; ++l) {
          const auto li = static_cast<size_t>(l);
          for (const auto& [type, n] : m.replicated_read(l)) bytes[type] += n / split;
          for (const auto& [type, n] : m.layer_experts[li]) bytes[type] += n * touched * mine;
          for (const auto& [type, n] : m.layer_shared[li]) bytes[type] += n / T;
        }
      }
      flops *= static_cast<double>(chunk);
      DType dominant = DType::F32;
      for (const auto& [type, n] : bytes) {
        stream += n / md.gen_rate(r, type, share);
        if (n > dominant_bytes) dominant_bytes = n, dominant = type;
      }
      worst = std::max(worst, std::max(flops / md.flop_rate(r, dominant, share), stream));
    }
    double sync = 0;
    if (T > 1) {
      std::vector<int> group;
      for (int t = 0; t < T; ++t) group.push_back(s * T + t);
      const double syncs = split == 1 ? static_cast<double>(m.moe_layers(b, e)) : 2.0 * static_cast<double>(e - b);
      sync = syncs * md.all_sum(group, act * static_cast<double>(chunk));
    }
    const double hop = s == P - 1 ? 0 : md.hop(s * T, (s + 1) * T, act * static_cast<double>(chunk));
    first_pass += worst + sync + hop;
    slowest_stage = std::max(slowest_stage, worst + sync + hop);
    p.ttft_compute_s += worst;
    p.ttft_comm_s += sync + hop;
  }
  // The head runs once, on the last token.
  const double head = 2.0 * static_cast<double>(m.head_params) / T / md.flop_rate(c.ranks() - 1, DType::F32, 1);
  p.ttft_s = first_pass + static_cast<double>(n_chunks - 1) * slowest_stage + head;
  p.ttft_compute_s = p.ttft_compute_s * static_cast<double>(n_chunks) + head;
  p.ttft_comm_s = p.ttft_s - p.ttft_compute_s;
  if (o.explain)
    p.terms.push_back(fmt("prompt of %.0f tokens in %.0f chunk(s): first pass %.1f ms, then %.1f ms per chunk", static_cast<double>(o.prompt),
                        static_cast<double>(n_chunks), first_pass * 1e3, slowest_stage * 1e3) +
                    fmt(" → TTFT %.0f ms", p.ttft_s * 1e3));

  // Energy: every machine idles through the token and draws its extra load while it computes.
  bool known = true;
  double joules = 0;
  for (int n = 0; n < c.n_nodes; ++n) {
    const MachineSpec& mc = cl.nodes[static_cast<size_t>(n)].machine;
    if (!mc.has_power()) known = false;
    joules += mc.idle_w * p.token_s + (mc.load_w - mc.idle_w) * std::min(busy[static_cast<size_t>(n)], p.token_s);
  }
  if (known) {
    p.joules_per_token = joules;
    p.usd_per_mtok = joules * 1e6 / 3.6e6 * cl.price_kwh;
    if (o.explain)
      p.terms.push_back(fmt("energy: %.2f J per token → %.3f per million tokens at %.2f per kWh", joules, p.usd_per_mtok,
                          cl.price_kwh));
  }
  return p;
}

}  // namespace orchard::parallel
