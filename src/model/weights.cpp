#include "model/weights.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "model/gguf.h"
#include "tensor/error.h"
#include "tensor/quant.h"

namespace orchard {
namespace {

std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

class Binder {
 public:
  Binder(const GGUFFile& f, ModelWeights& w) : f_(f), w_(w) {}

  const GGUFTensorInfo* find(const std::string& name, bool required) {
    const GGUFTensorInfo* t = f_.find_tensor(name);
    if (!t && required) throw Error(f_.path() + ": tensor '" + name + "' is missing");
    return t;
  }

  void check_computable(const GGUFTensorInfo& t) {
    const TypeInfo* info = type_info(static_cast<uint32_t>(t.type));
    if (!info || !info->computable)
      throw Error(f_.path() + ": tensor '" + t.name + "' has type " +
                  std::to_string(static_cast<uint32_t>(t.type)) + " (" +
                  (info ? info->name : "unknown") + "), which Orchard cannot compute with");
  }

  MatrixView matrix(const std::string& name, int64_t rows, int64_t cols, bool required = true) {
    const GGUFTensorInfo* t = find(name, required);
    if (!t) return {};
    // A one-row matrix may be stored as a vector (qwen2moe's shared-expert gate).
    const bool vector_row = rows == 1 && t->ne.size() == 1 && t->ne[0] == cols;
    if (!vector_row && (t->ne.size() != 2 || t->ne[0] != cols || t->ne[1] != rows))
      throw Error(f_.path() + ": tensor '" + name + "' has shape " + shape_str(t->ne) +
                  ", expected " + shape_str({cols, rows}));
    check_computable(*t);
    return MatrixView{t->type, rows, cols, f_.tensor_data(*t)};
  }

  // A 3-D tensor of `n` stacked rows × cols matrices (GGUF's ffn_*_exps): one view per expert.
  // Only experts [e0, e1) are bound (expert parallel: this rank's share).
  std::vector<MatrixView> experts(const std::string& name, int64_t rows, int64_t cols, int64_t n, int64_t e0,
                                  int64_t e1) {
    const GGUFTensorInfo* t = find(name, true);
    if (t->ne.size() != 3 || t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != n)
      throw Error(f_.path() + ": tensor '" + name + "' has shape " + shape_str(t->ne) + ", expected " +
                  shape_str({cols, rows, n}) + " (expert_count " + std::to_string(n) + ")");
    check_computable(*t);
    const size_t bytes = row_bytes(t->type, cols) * static_cast<size_t>(rows);
    std::vector<MatrixView> out;
    for (int64_t e = e0; e < e1; ++e)
      out.push_back(MatrixView{t->type, rows, cols, f_.tensor_data(*t) + bytes * static_cast<size_t>(e)});
    return out;
  }

  // Floats owned by the weights (n of them, zeroed).
  std::vector<float>& owned_floats(size_t n) {
    w_.owned.push_back(std::make_unique<std::vector<float>>(n));
    return *w_.owned.back();
  }
  void own(std::unique_ptr<LevelStore> levels) { w_.owned_levels.push_back(std::move(levels)); }
  const GGUFFile& file() const { return f_; }

  // Rows [r0, r1) of a rows × cols matrix: a view into the file.
  MatrixView rows_of(const std::string& name, int64_t rows, int64_t cols, int64_t r0, int64_t r1) {
    MatrixView m = matrix(name, rows, cols);
    m.data = static_cast<const uint8_t*>(m.data) + static_cast<size_t>(r0) * row_bytes(m.type, cols);
    m.rows = r1 - r0;
    return m;
  }

  // Columns [c0, c1), widened to whole quantization blocks and copied; *offset is where c0
  // falls inside the copy.
  MatrixView cols_of(const std::string& name, int64_t rows, int64_t cols, int64_t c0, int64_t c1, int64_t* offset) {
    return cols_of(matrix(name, rows, cols), c0, c1, offset);
  }

  // The same for a matrix already bound (one expert of a 3-D tensor).
  MatrixView cols_of(MatrixView m, int64_t c0, int64_t c1, int64_t* offset) {
    const int64_t rows = m.rows, cols = m.cols;
    *offset = 0;
    if (c0 == 0 && c1 == cols) return m;
    const int64_t block = type_info(m.type).block_elems;
    const int64_t b0 = c0 / block * block, b1 = std::min(cols, (c1 + block - 1) / block * block);
    const size_t src_row = row_bytes(m.type, cols), skip = row_bytes(m.type, b0), keep = row_bytes(m.type, b1 - b0);
    auto copy = std::make_unique<HugeBuffer>(keep * static_cast<size_t>(rows));
    const auto* src = static_cast<const uint8_t*>(m.data);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(copy->data() + keep * static_cast<size_t>(r), src + src_row * static_cast<size_t>(r) + skip, keep);
    w_.sliced.push_back(std::move(copy));
    f_.release(m.data, src_row * static_cast<size_t>(rows));  // the copy is all we read from now on
    m.data = w_.sliced.back()->data();
    m.cols = b1 - b0;
    *offset = c0 - b0;
    return m;
  }

  const float* vector(const std::string& name, int64_t n, bool required = true) {
    const GGUFTensorInfo* t = find(name, required);
    if (!t) return nullptr;
    if (t->n_elements() != n)
      throw Error(f_.path() + ": tensor '" + name + "' has shape " + shape_str(t->ne) +
                  ", expected [" + std::to_string(n) + "]");
    check_computable(*t);
    // Copied even when F32 (a few KiB): the file's pages around them can then be given back
    // once the matrices are repacked (pack_for_cpu).
    auto buf = std::make_unique<std::vector<float>>(n);
    dequantize_row(t->type, f_.tensor_data(*t), buf->data(), n);
    w_.owned.push_back(std::move(buf));
    return w_.owned.back()->data();
  }

 private:
  const GGUFFile& f_;
  ModelWeights& w_;
};

// The shard's rows of Wq ([q0, q1)) and of Wk/Wv ([k0, k1)): its KV heads and the query heads
// that share them.
struct HeadRows {
  int64_t q0, q1, k0, k1;
};

HeadRows head_rows(const HParams& hp, const Shard& s) {
  const int64_t hd = hp.head_dim, group = hp.n_heads / hp.n_kv_heads;
  return {s.kv_head_begin * group * hd, s.kv_head_end * group * hd, s.kv_head_begin * hd, s.kv_head_end * hd};
}

// Whether attn_kv_b's heads can be kept as integer levels: a format that has them, and shapes
// the level kernels take (ORCHARD_LATENT_FLOATS=1 keeps the float copies, for comparisons).
bool levels_fit(DType t, int64_t nope, int64_t vd, int64_t lora) {
  if (const char* env = std::getenv("ORCHARD_LATENT_FLOATS"); env && std::string(env) == "1") return false;
  return type_info(t).block_elems > 1 && level_matrix_fits(nope, lora, LevelGroups::kAlongRows) &&
         level_matrix_fits(lora, vd, LevelGroups::kAlongColumns);
}

// Latent attention (deepseek2). attn_kv_b is taken apart into absorbed per-head matrices
// (integer levels where its format has them, else floats): the cache then holds the latent, and no step expands it into per-head keys and values. A
// tensor-parallel shard keeps its query heads' rows of attn_q_b and attn_kv_b and their columns
// of attn_output; the latent (attn_kv_a_mqa) and q_a stay whole, since every head reads them.
void bind_latent_attention(Binder& b, const HParams& hp, const Shard& s, const std::string& p, LayerWeights& L) {
  LatentAttentionWeights& m = L.mla;
  const int64_t lora = hp.kv_lora_rank, nope = hp.head_dim_nope(), vd = hp.v_head_dim;
  const int64_t group = hp.n_heads / hp.n_kv_heads, h0 = s.kv_head_begin * group, h1 = s.kv_head_end * group,
                heads = h1 - h0, hd = hp.head_dim;
  if (hp.q_lora_rank > 0) {
    m.wq_a = b.matrix(p + "attn_q_a.weight", hp.q_lora_rank, hp.dim);
    m.q_a_norm = b.vector(p + "attn_q_a_norm.weight", hp.q_lora_rank);
    m.wq_b = b.rows_of(p + "attn_q_b.weight", hp.q_dim(), hp.q_lora_rank, h0 * hd, h1 * hd);
  } else {
    L.wq = b.rows_of(p + "attn_q.weight", hp.q_dim(), hp.dim, h0 * hd, h1 * hd);
  }
  m.wkv_a = b.matrix(p + "attn_kv_a_mqa.weight", lora + hp.n_rot, hp.dim);
  m.kv_a_norm = b.vector(p + "attn_kv_a_norm.weight", lora);
  const MatrixView kvb = b.rows_of(p + "attn_kv_b.weight", hp.n_heads * (nope + vd), lora, h0 * (nope + vd),
                                   h1 * (nope + vd));
  m.kv_b_type = kvb.type;
  const size_t rb = row_bytes(kvb.type, lora);
  if (levels_fit(kvb.type, nope, vd, lora)) {
    for (int64_t h = 0; h < heads; ++h) {
      const uint8_t* head = static_cast<const uint8_t*>(kvb.data) + rb * static_cast<size_t>(h * (nope + vd));
      auto k = std::make_unique<LevelStore>(), v = std::make_unique<LevelStore>();
      if (!levels_from_rows(kvb.type, head, rb, nope, lora, /*transposed=*/false, *k) ||
          !levels_from_rows(kvb.type, head + rb * static_cast<size_t>(nope), rb, vd, lora, /*transposed=*/true, *v)) {
        m.k_levels.clear();
        m.v_levels.clear();
        break;
      }
      m.k_levels.push_back(k->view);
      m.v_levels.push_back(v->view);
      b.own(std::move(k));
      b.own(std::move(v));
    }
  }
  if (m.k_levels.empty()) {
    std::vector<float> row(static_cast<size_t>(lora));
    std::vector<float>& kt = b.owned_floats(static_cast<size_t>(heads * lora * nope));
    std::vector<float>& v = b.owned_floats(static_cast<size_t>(heads * vd * lora));
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < nope + vd; ++j) {
        const int64_t r = h * (nope + vd) + j;
        dequantize_row(kvb.type, static_cast<const uint8_t*>(kvb.data) + rb * static_cast<size_t>(r), row.data(), lora);
        for (int64_t i = 0; i < lora; ++i) {
          if (j < nope) kt[static_cast<size_t>((h * lora + i) * nope + j)] = row[static_cast<size_t>(i)];
          else v[static_cast<size_t>((h * vd + j - nope) * lora + i)] = row[static_cast<size_t>(i)];
        }
      }
    m.wk_t = MatrixView{DType::F32, lora, nope, kt.data()};
    m.wv = MatrixView{DType::F32, vd, lora, v.data()};
  }
  b.file().release(kvb.data, rb * static_cast<size_t>(kvb.rows));
  L.wo = b.cols_of(p + "attn_output.weight", hp.dim, hp.n_heads * vd, h0 * vd, h1 * vd, &L.wo_offset);
}

// A MoE layer: the router whole (every rank routes every token), the shard's experts, and its
// columns of the shared expert (expert parallel splits the shared expert like a dense FFN, so
// no rank waits on it alone).
void bind_moe(Binder& b, const HParams& hp, const Shard& s, const std::string& p, LayerWeights& L) {
  MoeWeights& m = L.moe;
  const int64_t e0 = s.expert_begin, e1 = s.expert_end;
  // The experts first: a count that does not match the file is named by their shape check.
  m.first_expert = e0;
  m.gate = b.experts(p + "ffn_gate_exps.weight", hp.expert_ffn_dim, hp.dim, hp.n_expert, e0, e1);
  m.up = b.experts(p + "ffn_up_exps.weight", hp.expert_ffn_dim, hp.dim, hp.n_expert, e0, e1);
  m.down = b.experts(p + "ffn_down_exps.weight", hp.dim, hp.expert_ffn_dim, hp.n_expert, e0, e1);
  // Tensor parallel: each expert's FFN columns [f0, f1): gate and up rows (views), down columns
  // (copied, in whole quantization blocks).
  if (const int64_t f0 = s.expert_ffn_begin, f1 = s.expert_ffn_end; f1 - f0 != hp.expert_ffn_dim) {
    for (size_t e = 0; e < m.gate.size(); ++e) {
      for (MatrixView* v : {&m.gate[e], &m.up[e]}) {
        v->data = static_cast<const uint8_t*>(v->data) + static_cast<size_t>(f0) * row_bytes(v->type, v->cols);
        v->rows = f1 - f0;
      }
      m.down[e] = b.cols_of(m.down[e], f0, f1, &m.down_offset);
    }
  }
  m.router = b.matrix(p + "ffn_gate_inp.weight", hp.n_expert, hp.dim);
  m.selection_bias = b.vector(p + "exp_probs_b.bias", hp.n_expert, /*required=*/false);
  if (s.n_shexp() > 0) {
    const int64_t c0 = s.shexp_begin, c1 = s.shexp_end, width = hp.shared_ffn_dim;
    m.shared.gate = b.rows_of(p + "ffn_gate_shexp.weight", width, hp.dim, c0, c1);
    m.shared.up = b.rows_of(p + "ffn_up_shexp.weight", width, hp.dim, c0, c1);
    m.shared.down = b.cols_of(p + "ffn_down_shexp.weight", hp.dim, width, c0, c1, &m.shared.down_offset);
  }
  if (hp.shared_gate) m.shared_gate = b.matrix(p + "ffn_gate_inp_shexp.weight", 1, hp.dim);
}

}  // namespace

ModelWeights ModelWeights::bind(const GGUFFile& f, const HParams& hp, const Shard& requested) {
  ModelWeights w;
  const Shard s = requested.resolved(hp);
  w.shard = s;
  Binder b(f, w);
  const auto [q0, q1, k0, k1] = head_rows(hp, s);
  if (s.embed) w.tok_embd = b.matrix("token_embd.weight", hp.n_vocab, hp.dim);
  if (s.head) {
    w.output_norm = b.vector("output_norm.weight", hp.dim);
    const bool tied = f.find_tensor("output.weight") == nullptr;
    w.output = b.rows_of(tied ? "token_embd.weight" : "output.weight", hp.n_vocab, hp.dim, s.vocab_begin,
                         s.vocab_end);
  }
  w.rope_freqs = b.vector("rope_freqs.weight", hp.n_rot / 2, /*required=*/false);

  for (int64_t l = s.layer_begin; l < s.layer_end; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights L;
    L.attn_norm = b.vector(p + "attn_norm.weight", hp.dim);
    L.ffn_norm = b.vector(p + "ffn_norm.weight", hp.dim);
    if (hp.moe_layer(l)) bind_moe(b, hp, s, p, L);
    if (hp.mla()) bind_latent_attention(b, hp, s, p, L);
    if (!hp.moe_layer(l)) {
      L.w_gate = b.rows_of(p + "ffn_gate.weight", hp.ffn_dim, hp.dim, s.ffn_begin, s.ffn_end);
      L.w_up = b.rows_of(p + "ffn_up.weight", hp.ffn_dim, hp.dim, s.ffn_begin, s.ffn_end);
      L.w_down = b.cols_of(p + "ffn_down.weight", hp.dim, hp.ffn_dim, s.ffn_begin, s.ffn_end, &L.down_offset);
    }
    if (hp.mla()) {
      w.layers.push_back(L);
      continue;
    }
    L.wq = b.rows_of(p + "attn_q.weight", hp.q_dim(), hp.dim, q0, q1);
    L.wk = b.rows_of(p + "attn_k.weight", hp.kv_dim(), hp.dim, k0, k1);
    L.wv = b.rows_of(p + "attn_v.weight", hp.kv_dim(), hp.dim, k0, k1);
    L.wo = b.cols_of(p + "attn_output.weight", hp.dim, hp.q_dim(), q0, q1, &L.wo_offset);
    if (hp.attn_bias) {
      L.bq = b.vector(p + "attn_q.bias", hp.q_dim()) + q0;
      L.bk = b.vector(p + "attn_k.bias", hp.kv_dim()) + k0;
      L.bv = b.vector(p + "attn_v.bias", hp.kv_dim()) + k0;
    }
    if (hp.qk_norm) {
      L.q_norm = b.vector(p + "attn_q_norm.weight", hp.head_dim);
      L.k_norm = b.vector(p + "attn_k_norm.weight", hp.head_dim);
    }
    w.layers.push_back(L);
  }
  return w;
}

std::vector<std::pair<uint64_t, uint64_t>> ModelWeights::byte_ranges(const GGUFFile& f, const HParams& hp,
                                                                     const Shard& requested) {
  const Shard s = requested.resolved(hp);
  std::vector<std::pair<uint64_t, uint64_t>> out;
  // Rows [r0·per, r1·per) of a tensor (r1 < 0: the whole tensor); `per` > 1 counts whole
  // matrices of a 3-D tensor (experts).
  auto add = [&](const std::string& name, int64_t r0 = 0, int64_t r1 = -1, int64_t per = 1) {
    const GGUFTensorInfo* t = f.find_tensor(name);
    if (!t) return;
    const uint64_t start = f.data_offset() + t->offset;
    if (r1 < 0) {
      out.emplace_back(start, start + t->nbytes);
      return;
    }
    const uint64_t row = row_bytes(t->type, t->ne[0]);
    const uint64_t step = row * static_cast<uint64_t>(per);
    out.emplace_back(start + step * static_cast<uint64_t>(r0), start + step * static_cast<uint64_t>(r1));
  };
  const auto [q0, q1, k0, k1] = head_rows(hp, s);
  if (s.embed) add("token_embd.weight");
  if (s.head) {
    add("output_norm.weight");
    add(f.find_tensor("output.weight") ? "output.weight" : "token_embd.weight", s.vocab_begin, s.vocab_end);
  }
  add("rope_freqs.weight");
  // A layer's tensors whole, except those whose rows a tensor-parallel shard splits (column
  // slices are copied out of whole tensors; vectors are small).
  const int64_t kvb_head = hp.head_dim_nope() + hp.v_head_dim, group = hp.n_heads / hp.n_kv_heads;
  const std::pair<const char*, std::pair<int64_t, int64_t>> split_rows[] = {
      {"attn_q.weight", {q0, q1}}, {"attn_k.weight", {k0, k1}}, {"attn_v.weight", {k0, k1}},
      {"attn_q_b.weight", {q0, q1}},
      {"attn_kv_b.weight", {s.kv_head_begin * group * kvb_head, s.kv_head_end * group * kvb_head}},
      {"ffn_gate.weight", {s.ffn_begin, s.ffn_end}}, {"ffn_up.weight", {s.ffn_begin, s.ffn_end}},
      {"ffn_gate_shexp.weight", {s.shexp_begin, s.shexp_end}}, {"ffn_up_shexp.weight", {s.shexp_begin, s.shexp_end}}};
  for (int64_t l = s.layer_begin; l < s.layer_end; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const GGUFTensorInfo& t : f.tensors()) {
      if (t.name.compare(0, p.size(), p) != 0) continue;
      const std::string_view rest = std::string_view(t.name).substr(p.size());
      auto it = std::find_if(std::begin(split_rows), std::end(split_rows), [&](const auto& e) { return rest == e.first; });
      if (it != std::end(split_rows)) add(t.name, it->second.first, it->second.second);
      else if (rest.find("_exps.") != std::string_view::npos) {
        const int64_t per = t.ne.size() == 3 ? t.ne[1] : 1;
        // gate and up split by rows within each expert (tensor parallel): one range per expert
        if (s.n_expert_ffn() != hp.expert_ffn_dim && rest.find("down") == std::string_view::npos)
          for (int64_t e = s.expert_begin; e < s.expert_end; ++e)
            add(t.name, e * per + s.expert_ffn_begin, e * per + s.expert_ffn_end);
        else
          add(t.name, s.expert_begin, s.expert_end, per);
      }
      else if (rest.find("_shexp.") != std::string_view::npos && rest != "ffn_gate_inp_shexp.weight" && s.n_shexp() == 0)
        continue;
      else add(t.name);
    }
  }
  return out;
}

namespace {

using ByteSpan = std::pair<const uint8_t*, const uint8_t*>;

// A layer's matrices (const or not, as L is).
template <class Layer>
auto layer_matrices(Layer& L) {
  using View = std::conditional_t<std::is_const_v<Layer>, const MatrixView, MatrixView>;
  std::vector<View*> ms = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down,
                           &L.mla.wq_a, &L.mla.wq_b, &L.mla.wkv_a, &L.moe.router,
                           &L.moe.shared.gate, &L.moe.shared.up, &L.moe.shared.down};
  for (auto* experts : {&L.moe.gate, &L.moe.up, &L.moe.down})
    for (auto& m : *experts) ms.push_back(&m);
  return ms;
}

// Safe to call while packing is under way: the matrices not yet packed still have their data,
// so they are kept, and a page they share with freed bytes stays.
void release_file_ranges(const ModelWeights& w, const GGUFFile& file, std::vector<ByteSpan> freed) {
  // The file's copy is given back in whole 2 MiB pages only (see GGUFFile::release), so freeing
  // matrix by matrix kept every small one and the edges of the rest: 221 MB of a 1b Q4_0 file
  // stayed resident beside its 584 MB packed copy. Neighbouring freed ranges are joined first,
  // across the gaps between them (vectors, copied at bind; padding) unless bytes still read lie
  // there: the embedding table and matrices not repacked.
  std::vector<ByteSpan> kept;
  auto keep = [&](const MatrixView& m) {
    if (!m.data) return;
    const auto* p = static_cast<const uint8_t*>(m.data);
    kept.emplace_back(p, p + row_bytes(m.type, m.cols) * static_cast<size_t>(m.rows));
  };
  keep(w.tok_embd);
  keep(w.output);
  for (const auto& L : w.layers)
    for (const MatrixView* m : layer_matrices(L)) keep(*m);
  std::sort(freed.begin(), freed.end());
  auto gap_is_free = [&](const uint8_t* a, const uint8_t* b) {
    for (const auto& [k0, k1] : kept)
      if (k0 < b && a < k1) return false;
    return true;
  };
  for (size_t i = 0; i < freed.size();) {
    auto [begin, end] = freed[i];
    size_t j = i + 1;
    for (; j < freed.size() && gap_is_free(end, freed[j].first); ++j) end = std::max(end, freed[j].second);
    file.release(begin, static_cast<size_t>(end - begin));
    i = j;
  }
}

}  // namespace

void ModelWeights::pack_for_cpu(const GGUFFile* file, size_t release_every) {
  const auto* embd = static_cast<const uint8_t*>(tok_embd.data);
  const size_t embd_bytes = embd ? row_bytes(tok_embd.type, tok_embd.cols) * static_cast<size_t>(tok_embd.rows) : 0;
  // One buffer for every packed matrix, each at a page boundary: whole huge pages throughout.
  std::vector<std::pair<MatrixView*, size_t>> todo;  // matrix, offset in the buffer
  size_t total = 0;
  auto plan = [&](MatrixView& m) {
    if (m.packed || !m.data) return;
    const size_t bytes = orchard::packed_bytes(m);
    if (bytes == 0) return;
    todo.emplace_back(&m, total);
    total += (bytes + 4095) / 4096 * 4096;
  };
  for (auto& L : layers)
    for (MatrixView* m : layer_matrices(L)) plan(*m);
  if (output.data) plan(output);
  if (todo.empty()) return;
  auto buf = std::make_unique<HugeBuffer>(total);
  std::vector<ByteSpan> freed;  // ranges of the file's copy
  // Given back as packing goes rather than at the end: otherwise the file's copy and the packed
  // one are both resident at the end (1b F16: peak RSS 4.2 GB for a 2.2 GB model). Every call
  // walks all ranges freed so far, so that pages shared with the next matrix go once it is done.
  size_t unreleased = 0;
  for (auto [m, offset] : todo) {
    if (file && unreleased >= release_every) {
      release_file_ranges(*this, *file, freed);
      unreleased = 0;
    }
    orchard::pack_into(*m, buf->data() + offset);
    if (!pack_replaces_original(m->type)) continue;
    // matmul reads only the packed copy from now on: give the original back, unless it is
    // also the embedding table (tied output), whose rows get_row still reads.
    const auto* data = static_cast<const uint8_t*>(m->data);
    if (embd && data >= embd && data < embd + embd_bytes) continue;
    const auto slice = std::find_if(sliced.begin(), sliced.end(), [&](const auto& b) { return b && b->data() == data; });
    if (slice != sliced.end())
      slice->reset();
    else if (file) {
      const size_t bytes = row_bytes(m->type, m->cols) * static_cast<size_t>(m->rows);
      freed.emplace_back(data, data + bytes);
      unreleased += bytes;
    }
    m->data = nullptr;
  }
  packed.push_back(std::move(buf));
  if (file) release_file_ranges(*this, *file, std::move(freed));
}

}  // namespace orchard
