#include "parallel/memory.h"

#include <cmath>
#include <cstdio>

#include "tensor/error.h"

namespace orchard::parallel {
namespace {

uint64_t tensor_bytes(const GGUFFile& f, const std::string& name) {
  const GGUFTensorInfo* t = f.find_tensor(name);
  return t ? t->nbytes : 0;
}

// Share of a tensor's bytes for `part` of `whole` rows or columns.
uint64_t share(uint64_t bytes, int64_t part, int64_t whole) {
  return whole > 0 ? bytes * static_cast<uint64_t>(part) / static_cast<uint64_t>(whole) : bytes;
}

}  // namespace

ShardBytes shard_bytes(const GGUFFile& f, const HParams& hp, const Shard& requested, int64_t n_ctx, int64_t chunk,
                       size_t kv_elem_bytes) {
  const Shard s = requested.resolved(hp);
  ShardBytes b;
  const int64_t kvh = s.n_kv_heads();
  for (int64_t l = s.layer_begin; l < s.layer_end; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    // Attention follows the shard's heads (latent attention: its per-head q_b, kv_b and output
    // columns; the latent's own projections whole), the dense FFN its columns, the routed
    // experts the shard's range (and their columns, tensor parallel), the shared expert its columns;
    // norms and routers whole.
    for (const GGUFTensorInfo& t : f.tensors()) {
      if (t.name.compare(0, p.size(), p) != 0) continue;
      const std::string m = t.name.substr(p.size());
      if (m == "attn_q.weight" || m == "attn_k.weight" || m == "attn_v.weight" || m == "attn_output.weight" ||
          m == "attn_q.bias" || m == "attn_k.bias" || m == "attn_v.bias" || m == "attn_q_b.weight" ||
          m == "attn_kv_b.weight")
        b.weights += share(t.nbytes, kvh, hp.n_kv_heads);
      else if (m == "ffn_gate.weight" || m == "ffn_up.weight" || m == "ffn_down.weight")
        b.weights += share(t.nbytes, s.n_ffn(), hp.ffn_dim);
      else if (m.find("_exps.") != std::string::npos)
        b.weights += share(share(t.nbytes, s.n_experts(), hp.n_expert), s.n_expert_ffn(), hp.expert_ffn_dim);
      else if (m.find("_shexp.") != std::string::npos && m != "ffn_gate_inp_shexp.weight")
        b.weights += share(t.nbytes, s.n_shexp(), hp.shared_ffn_dim);
      else
        b.weights += t.nbytes;
    }
  }
  if (s.embed) b.weights += tensor_bytes(f, "token_embd.weight");
  if (s.head) {
    const bool tied = f.find_tensor("output.weight") == nullptr;
    const uint64_t out = tensor_bytes(f, tied ? "token_embd.weight" : "output.weight");
    if (!(tied && s.embed && s.n_vocab() == hp.n_vocab)) b.weights += share(out, s.n_vocab(), hp.n_vocab);
    b.weights += tensor_bytes(f, "output_norm.weight");
  }
  // K and V for every position of every local layer and KV head; latent attention keeps one
  // row of kv_lora_rank + n_rot per position instead.
  b.kv = hp.mla() ? static_cast<uint64_t>(s.n_layers() * n_ctx * (hp.kv_lora_rank + hp.n_rot)) * kv_elem_bytes
                  : 2ull * static_cast<uint64_t>(s.n_layers() * n_ctx * kvh * hp.head_dim) * kv_elem_bytes;
  b.scratch = static_cast<uint64_t>(static_cast<double>(chunk) *
                                    activation_bytes_per_token(hp.dim, hp.q_dim(), 2 * hp.kv_dim(), hp.ffn_dim, s.n_vocab()));
  return b;
}

double activation_bytes_per_token(int64_t dim, int64_t q_dim, int64_t kv_elems, int64_t ffn_dim, int64_t vocab) {
  return static_cast<double>(3 * dim + 2 * q_dim + kv_elems + 2 * ffn_dim + vocab) * sizeof(float);
}

uint64_t parse_bytes(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::logic_error&) {
    throw Error("'" + text + "' is not a size (use e.g. 512M, 8G)");
  }
  std::string unit = text.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();
  double mult = 1;
  if (unit == "K" || unit == "k") mult = 1024.0;
  else if (unit == "M" || unit == "m") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "g") mult = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "t") mult = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty()) throw Error("'" + text + "' has an unknown unit (use K, M, G or T)");
  if (v <= 0 || !std::isfinite(v)) throw Error("'" + text + "' must be a positive size");
  return static_cast<uint64_t>(v * mult);
}

uint64_t saturating_u64(double x) {
  if (!(x > 0)) return 0;
  return x >= 18446744073709551616.0 ? UINT64_MAX : static_cast<uint64_t>(x);
}

std::string format_size(double bytes) { return format_bytes(saturating_u64(bytes)); }

std::string format_bytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / 1073741824.0);
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  return buf;
}

}  // namespace orchard::parallel
