#include "parallel/model_cost.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "model/gguf.h"
#include "parallel/memory.h"
#include "tensor/error.h"

namespace orchard::parallel {

double total(const BytesByType& b) {
  double s = 0;
  for (const auto& [t, n] : b) s += n;
  return s;
}

namespace {

void add(BytesByType& into, const BytesByType& from, double scale = 1.0) {
  for (const auto& [t, n] : from) into[t] += n * scale;
}

double bytes_of(DType t, double elems) {
  const TypeInfo& ti = type_info(t);
  return elems / static_cast<double>(ti.block_elems) * static_cast<double>(ti.block_bytes);
}

// "blk.12.attn_q.weight" → 12; -1 for tensors outside the blocks.
int64_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  char* end = nullptr;
  const long v = std::strtol(name.c_str() + 4, &end, 10);
  return (end && *end == '.') ? v : -1;
}

}  // namespace

ModelCost ModelCost::from_gguf(const GGUFFile& f) {
  ModelCost c;
  c.arch = f.get_string("general.architecture").value_or("");
  if (c.arch.empty()) throw Error(f.path() + ": missing metadata key 'general.architecture'");
  c.name = f.get_string("general.name").value_or(c.arch);
  const std::string p = c.arch + ".";
  auto get = [&](const std::string& key, int64_t fallback) { return f.get_int(p + key).value_or(fallback); };
  c.dim = get("embedding_length", 0);
  c.n_heads = get("attention.head_count", 0);
  c.n_kv_heads = get("attention.head_count_kv", c.n_heads);
  c.head_dim = get("attention.key_length", c.n_heads > 0 ? c.dim / c.n_heads : 0);
  c.ffn_dim = get("feed_forward_length", 0);
  c.n_ctx_train = get("context_length", 2048);
  c.n_experts = get("expert_count", 0);
  c.n_experts_used = get("expert_used_count", 0);
  int64_t n_layers = get("block_count", 0);
  for (const GGUFTensorInfo& t : f.tensors()) n_layers = std::max(n_layers, layer_of(t.name) + 1);
  if (n_layers <= 0 || c.dim <= 0) throw Error(f.path() + ": no transformer blocks (block_count / embedding_length)");
  c.n_layers = n_layers;
  const auto h = static_cast<double>(c.n_heads);
  if (const int64_t lora = get("attention.kv_lora_rank", 0); lora > 0) {
    // Latent attention as the engine (and llama.cpp) runs it, absorbed: scores over the
    // compressed KV and the rope part, values over the compressed KV, every head.
    const int64_t rope = get("rope.dimension_count", 64);
    c.mla = true;
    c.kv_elems_per_layer = lora + rope;
    c.attn_flops_per_pos = 2.0 * h * static_cast<double>(2 * lora + rope);
  } else {
    const int64_t v = get("attention.value_length", c.head_dim);
    c.kv_elems_per_layer = c.n_kv_heads * (c.head_dim + v);
    c.attn_flops_per_pos = 2.0 * h * static_cast<double>(c.head_dim + v);
  }

  const auto nl = static_cast<size_t>(n_layers);
  c.layer_bytes.resize(nl);
  c.layer_active.resize(nl);
  c.layer_experts.resize(nl);
  c.layer_shared.resize(nl);
  c.layer_params.assign(nl, 0);
  c.layer_active_params.assign(nl, 0);
  c.layer_expert_params.assign(nl, 0);
  c.layer_shared_params.assign(nl, 0);
  for (const GGUFTensorInfo& t : f.tensors()) {
    const auto elems = static_cast<uint64_t>(t.n_elements());
    const double nbytes = static_cast<double>(t.nbytes);
    c.params += elems;
    c.bytes += nbytes;
    const int64_t l = layer_of(t.name);
    if (l >= 0) {
      // Expert tensors ("ffn_up_exps") hold every expert; a token reads n_used of them.
      const bool experts = t.name.find("_exps") != std::string::npos && c.n_experts > 0;
      const double used = experts ? static_cast<double>(c.n_experts_used) / static_cast<double>(c.n_experts) : 1.0;
      const auto li = static_cast<size_t>(l);
      c.layer_bytes[li][t.type] += nbytes;
      c.layer_active[li][t.type] += nbytes * used;
      c.layer_params[li] += elems;
      if (experts) {
        c.layer_experts[li][t.type] += nbytes;
        c.layer_expert_params[li] += elems;
      } else if (t.name.find("_shexp") != std::string::npos) {
        c.layer_shared[li][t.type] += nbytes;
        c.layer_shared_params[li] += elems;
      }
      const auto active = static_cast<uint64_t>(std::llround(static_cast<double>(elems) * used));
      c.layer_active_params[li] += active;
      c.active_params += active;
    } else if (t.name == "output.weight" || t.name == "output_norm.weight") {
      c.head_bytes[t.type] += nbytes;
      c.head_params += elems;
      c.active_params += elems;
    } else {
      // token_embd (and small extras such as rope_freqs): held, one row read per token, but
      // counted among the active parameters as the convention for dense and MoE models is.
      c.embed_bytes[t.type] += nbytes;
      c.active_params += elems;
      if (t.name == "token_embd.weight" && !t.ne.empty()) c.n_vocab = t.ne.size() > 1 ? t.ne[1] : 0;
    }
  }
  c.tied = f.find_tensor("output.weight") == nullptr;
  if (c.tied) {
    // The head multiplies by the embedding matrix: every token reads it whole.
    if (const GGUFTensorInfo* e = f.find_tensor("token_embd.weight")) c.head_params += static_cast<uint64_t>(e->n_elements());
  }
  return c;
}

ModelCost ModelCost::from_shape(const ModelSpec& s) {
  if (s.n_layers <= 0 || s.dim <= 0 || s.n_heads <= 0 || s.n_vocab <= 0)
    throw Error("model shape '" + s.name + "' needs layers, dim, heads and vocabulary");
  ModelCost c;
  c.name = s.name;
  c.arch = s.n_experts > 0 ? "moe" : "llama";
  c.n_layers = s.n_layers;
  c.dim = s.dim;
  c.n_heads = s.n_heads;
  c.n_kv_heads = s.n_kv_heads > 0 ? s.n_kv_heads : s.n_heads;
  c.head_dim = s.head_dim > 0 ? s.head_dim : s.dim / s.n_heads;
  c.ffn_dim = s.ffn_dim;
  c.n_vocab = s.n_vocab;
  c.n_experts = s.n_experts;
  c.n_experts_used = s.n_experts_used;
  c.n_ctx_train = 131072;
  const bool mla = s.kv_lora_rank > 0;
  c.mla = mla;
  c.kv_elems_per_layer = mla ? s.kv_lora_rank + s.rope_dim : 2 * c.n_kv_heads * c.head_dim;
  c.attn_flops_per_pos = mla ? 2.0 * static_cast<double>(s.n_heads * (2 * s.kv_lora_rank + s.rope_dim))
                             : 4.0 * static_cast<double>(c.n_heads * c.head_dim);
  const DType e = s.type, w = s.non_expert_type.value_or(s.type);
  const auto d = static_cast<double>(s.dim);
  double attn = 0, norms = 2 * d;
  if (mla) {
    const double h = static_cast<double>(s.n_heads);
    attn = d * s.q_lora_rank + s.q_lora_rank * h * (s.nope_dim + s.rope_dim) + d * (s.kv_lora_rank + s.rope_dim) +
           s.kv_lora_rank * h * (s.nope_dim + s.v_head_dim) + h * s.v_head_dim * d;
    norms += static_cast<double>(s.q_lora_rank + s.kv_lora_rank);
  } else {
    attn = 2 * d * static_cast<double>(c.n_heads * c.head_dim) + 2 * d * static_cast<double>(c.n_kv_heads * c.head_dim);
  }
  for (int64_t l = 0; l < s.n_layers; ++l) {
    // Parameters in the non-expert format, and the routed experts (all, and a token's share).
    double rest = attn, experts = 0, used = 0, shared = 0, router = 0;
    if (s.n_experts > 0 && l >= s.n_dense_layers) {
      const double expert = 3 * d * static_cast<double>(s.expert_ffn_dim);
      experts = expert * static_cast<double>(s.n_experts);
      used = expert * static_cast<double>(s.n_experts_used);
      shared = expert * static_cast<double>(s.n_shared_experts);
      router = d * static_cast<double>(s.n_experts);
    } else {
      rest += 3 * d * static_cast<double>(s.ffn_dim);
    }
    BytesByType hb{{w, bytes_of(w, rest + shared)}, {DType::F32, 4 * (norms + router)}};
    BytesByType ab{{w, bytes_of(w, rest + shared)}, {DType::F32, 4 * (norms + router)}};
    BytesByType xb, sb;
    if (experts > 0) {
      hb[e] += bytes_of(e, experts);
      ab[e] += bytes_of(e, used);
      xb[e] = bytes_of(e, experts);
    }
    if (shared > 0) sb[w] = bytes_of(w, shared);
    c.layer_bytes.push_back(hb);
    c.layer_active.push_back(ab);
    c.layer_experts.push_back(xb);
    c.layer_shared.push_back(sb);
    c.layer_expert_params.push_back(saturating_u64(experts));
    c.layer_shared_params.push_back(saturating_u64(shared));
    c.layer_params.push_back(saturating_u64(rest + shared + experts + norms + router));
    c.layer_active_params.push_back(saturating_u64(rest + shared + used + norms + router));
    c.params += c.layer_params.back();
    c.active_params += c.layer_active_params.back();
    c.bytes += total(hb);
  }
  const double emb = d * static_cast<double>(s.n_vocab);
  c.embed_bytes[w] = bytes_of(w, emb);
  c.tied = s.tied_embeddings;
  c.head_bytes[DType::F32] = 4 * d;
  if (!c.tied) c.head_bytes[w] += bytes_of(w, emb);
  c.head_params = saturating_u64(emb + d);
  c.params += saturating_u64(emb + d + (c.tied ? 0 : emb));
  c.active_params += saturating_u64(emb + d + (c.tied ? 0 : emb));
  c.bytes += total(c.embed_bytes) + total(c.head_bytes);
  return c;
}

double ModelCost::held_bytes(int64_t begin, int64_t end, int tp, bool embed, bool head) const {
  double b = 0;
  for (int64_t l = begin; l < end; ++l) b += total(layer_bytes[static_cast<size_t>(l)]);
  b /= tp;
  if (embed) b += total(embed_bytes);
  if (head) b += (tied && !embed ? total(embed_bytes) / tp : 0) + total(head_bytes) / tp;
  return b;
}

BytesByType ModelCost::read_per_token(int64_t begin, int64_t end, int tp, bool head) const {
  BytesByType r;
  for (int64_t l = begin; l < end; ++l) add(r, layer_active[static_cast<size_t>(l)], 1.0 / tp);
  if (head) {
    add(r, head_bytes, 1.0 / tp);
    if (tied) add(r, embed_bytes, 1.0 / tp);
  }
  return r;
}

double ModelCost::expert_held_bytes(int64_t begin, int64_t end, int64_t e0, int64_t e1, int group, int split,
                                    bool embed, bool head) const {
  const double share = n_experts > 0 ? static_cast<double>(e1 - e0) / static_cast<double>(n_experts) : 0;
  double b = 0;
  for (int64_t l = begin; l < end; ++l) {
    const auto li = static_cast<size_t>(l);
    const double experts = total(layer_experts[li]), shared = total(layer_shared[li]);
    b += (total(layer_bytes[li]) - experts - shared) / split + experts * share + shared / group;
  }
  if (embed) b += total(embed_bytes);
  if (head) b += (tied && !embed ? total(embed_bytes) / group : 0) + total(head_bytes) / group;
  return b;
}

BytesByType ModelCost::replicated_read(int64_t l) const {
  const auto li = static_cast<size_t>(l);
  BytesByType r = layer_active[li];
  if (n_experts > 0) add(r, layer_experts[li], -static_cast<double>(n_experts_used) / static_cast<double>(n_experts));
  add(r, layer_shared[li], -1.0);
  return r;
}

int64_t ModelCost::moe_layers(int64_t begin, int64_t end) const {
  int64_t n = 0;
  for (int64_t l = begin; l < end; ++l) n += moe_layer(l);
  return n;
}

BytesByType ModelCost::read_per_chunk(int64_t begin, int64_t end, int tp, int64_t tokens) const {
  BytesByType r = read_per_token(begin, end, tp, false);
  if (n_experts <= 0 || tokens <= 1) return r;
  const double per_token = static_cast<double>(n_experts_used) / static_cast<double>(n_experts);
  const double touched = 1.0 - std::pow(1.0 - per_token, static_cast<double>(tokens));
  for (int64_t l = begin; l < end; ++l) add(r, layer_experts[static_cast<size_t>(l)], (touched - per_token) / tp);
  return r;
}

double ModelCost::kv_bytes(int64_t begin, int64_t end, int tp, int64_t n_ctx, int elem_bytes) const {
  return static_cast<double>(end - begin) * static_cast<double>(n_ctx) * static_cast<double>(kv_elems_per_layer) *
         elem_bytes / (mla ? 1 : tp);
}

double ModelCost::flops_per_token(int64_t begin, int64_t end, int64_t pos, bool head) const {
  double f = 0;
  for (int64_t l = begin; l < end; ++l) f += 2.0 * static_cast<double>(layer_active_params[static_cast<size_t>(l)]);
  // Scores q·k and the weighted sum of v over `pos` cached positions, every query head.
  f += static_cast<double>(end - begin) * attn_flops_per_pos * static_cast<double>(pos);
  if (head) f += 2.0 * static_cast<double>(head_params);
  return f;
}

double expected_slowest(const std::vector<int64_t>& held, int64_t used, const std::vector<double>& fixed,
                        const std::vector<double>& per_expert) {
  const size_t ranks = held.size();
  int64_t n = 0;
  for (int64_t h : held) n += h;
  used = std::min(used, n);
  // choose[m][c]: ways to pick c of m experts.
  auto choose = [](int64_t m, int64_t c) {
    if (c < 0 || c > m) return 0.0;
    double r = 1;
    for (int64_t i = 0; i < c; ++i) r = r * static_cast<double>(m - i) / static_cast<double>(i + 1);
    return r;
  };
  const double all = choose(n, used);
  // P(every rank t gets at most cap[t] of the token's experts): a product of polynomials in
  // the number picked so far, read at `used`.
  auto within = [&](const std::vector<int64_t>& cap) {
    std::vector<double> ways(static_cast<size_t>(used) + 1, 0.0);
    ways[0] = 1;
    for (size_t t = 0; t < ranks; ++t) {
      if (cap[t] < 0) return 0.0;
      std::vector<double> next(ways.size(), 0.0);
      for (int64_t j = 0; j <= used; ++j)
        if (ways[static_cast<size_t>(j)] != 0)
          for (int64_t c = 0; c <= std::min(cap[t], used - j); ++c)
            next[static_cast<size_t>(j + c)] += ways[static_cast<size_t>(j)] * choose(held[t], c);
      ways.swap(next);
    }
    return ways[static_cast<size_t>(used)] / all;
  };
  // The slowest rank's time takes one of the values fixed[t] + c × per_expert[t].
  std::vector<double> values;
  for (size_t t = 0; t < ranks; ++t)
    for (int64_t c = 0; c <= std::min(used, held[t]); ++c) values.push_back(fixed[t] + static_cast<double>(c) * per_expert[t]);
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  double expected = 0, below = 0;
  std::vector<int64_t> cap(ranks);
  for (double v : values) {
    for (size_t t = 0; t < ranks; ++t) {
      const double room = v - fixed[t];
      if (room < -1e-15 * std::abs(v)) cap[t] = -1;
      else if (per_expert[t] <= 0) cap[t] = used;
      else cap[t] = static_cast<int64_t>(std::floor(room / per_expert[t] + 1e-9));
    }
    const double at_most = within(cap);
    expected += v * (at_most - below);
    below = at_most;
  }
  return expected;
}

namespace {

// 292800 → "292.8 K", 8.03e9 → "8.03 B", 1.03e12 → "1.03 T".
std::string count(uint64_t n) {
  const auto v = static_cast<double>(n);
  char buf[32];
  if (v >= 1e12) std::snprintf(buf, sizeof buf, "%.2f T", v / 1e12);
  else if (v >= 1e9) std::snprintf(buf, sizeof buf, "%.2f B", v / 1e9);
  else if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.1f M", v / 1e6);
  else std::snprintf(buf, sizeof buf, "%.1f K", v / 1e3);
  return buf;
}

}  // namespace

std::string ModelCost::summary() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s (%s): %s parameters (%s active), %s of weights, %lld layers, dim %lld, %lld heads "
                "(%lld KV), vocabulary %lld%s",
                name.c_str(), arch.c_str(), count(params).c_str(), count(active_params).c_str(),
                format_size(bytes).c_str(), static_cast<long long>(n_layers),
                static_cast<long long>(dim), static_cast<long long>(n_heads), static_cast<long long>(n_kv_heads),
                static_cast<long long>(n_vocab),
                n_experts > 0 ? (", " + std::to_string(n_experts_used) + " of " + std::to_string(n_experts) + " experts")
                                    .c_str()
                              : "");
  return buf;
}

}  // namespace orchard::parallel
