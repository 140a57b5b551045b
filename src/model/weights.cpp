#include "model/weights.h"

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
    if (t->ne.size() != 2 || t->ne[0] != cols || t->ne[1] != rows)
      throw Error(f_.path() + ": tensor '" + name + "' has shape " + shape_str(t->ne) +
                  ", expected " + shape_str({cols, rows}));
    check_computable(*t);
    return MatrixView{t->type, rows, cols, f_.tensor_data(*t)};
  }

  const float* vector(const std::string& name, int64_t n, bool required = true) {
    const GGUFTensorInfo* t = find(name, required);
    if (!t) return nullptr;
    if (t->n_elements() != n)
      throw Error(f_.path() + ": tensor '" + name + "' has shape " + shape_str(t->ne) +
                  ", expected [" + std::to_string(n) + "]");
    check_computable(*t);
    if (t->type == DType::F32) return reinterpret_cast<const float*>(f_.tensor_data(*t));
    auto buf = std::make_unique<std::vector<float>>(n);
    dequantize_row(t->type, f_.tensor_data(*t), buf->data(), n);
    w_.owned.push_back(std::move(buf));
    return w_.owned.back()->data();
  }

 private:
  const GGUFFile& f_;
  ModelWeights& w_;
};

}  // namespace

ModelWeights ModelWeights::bind(const GGUFFile& f, const HParams& hp) {
  ModelWeights w;
  Binder b(f, w);
  w.tok_embd = b.matrix("token_embd.weight", hp.n_vocab, hp.dim);
  w.output_norm = b.vector("output_norm.weight", hp.dim);
  w.output = b.matrix("output.weight", hp.n_vocab, hp.dim, /*required=*/false);
  if (!w.output.data) w.output = w.tok_embd;  // tied embeddings
  w.rope_freqs = b.vector("rope_freqs.weight", hp.n_rot / 2, /*required=*/false);

  for (int64_t l = 0; l < hp.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights L;
    L.attn_norm = b.vector(p + "attn_norm.weight", hp.dim);
    L.wq = b.matrix(p + "attn_q.weight", hp.q_dim(), hp.dim);
    L.wk = b.matrix(p + "attn_k.weight", hp.kv_dim(), hp.dim);
    L.wv = b.matrix(p + "attn_v.weight", hp.kv_dim(), hp.dim);
    L.wo = b.matrix(p + "attn_output.weight", hp.dim, hp.q_dim());
    if (hp.attn_bias) {
      L.bq = b.vector(p + "attn_q.bias", hp.q_dim());
      L.bk = b.vector(p + "attn_k.bias", hp.kv_dim());
      L.bv = b.vector(p + "attn_v.bias", hp.kv_dim());
    }
    if (hp.qk_norm) {
      L.q_norm = b.vector(p + "attn_q_norm.weight", hp.head_dim);
      L.k_norm = b.vector(p + "attn_k_norm.weight", hp.head_dim);
    }
    L.ffn_norm = b.vector(p + "ffn_norm.weight", hp.dim);
    L.w_gate = b.matrix(p + "ffn_gate.weight", hp.ffn_dim, hp.dim);
    L.w_up = b.matrix(p + "ffn_up.weight", hp.ffn_dim, hp.dim);
    L.w_down = b.matrix(p + "ffn_down.weight", hp.dim, hp.ffn_dim);
    w.layers.push_back(L);
  }
  return w;
}

void ModelWeights::pack_for_cpu() {
  auto pack = [&](MatrixView& m) {
    if (m.packed) return;
    auto bytes = orchard::pack_for_cpu(m);
    if (!bytes.empty()) packed.push_back(std::move(bytes));
  };
  for (auto& L : layers)
    for (MatrixView* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) pack(*m);
  pack(output);
}

}  // namespace orchard
