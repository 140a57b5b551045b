#include "model/synthetic/file_type.h"

#include <cstdio>

#include "tensor/error.h"

namespace orchard {
namespace {

struct Known {
  const char* name;
  DType base;
  uint32_t ftype;
  char mix;
};

constexpr Known kKnown[] = {
    {"F32", DType::F32, 0, 0},       {"F16", DType::F16, 1, 0},       {"BF16", DType::BF16, 32, 0},
    {"Q8_0", DType::Q8_0, 7, 0},     {"Q4_0", DType::Q4_0, 2, 0},     {"Q4_1", DType::Q4_1, 3, 0},
    {"Q5_0", DType::Q5_0, 8, 0},     {"Q5_1", DType::Q5_1, 9, 0},     {"Q4_K", DType::Q4_K, 14, 0},
    {"Q5_K", DType::Q5_K, 16, 0},    {"Q6_K", DType::Q6_K, 18, 0},    {"Q4_K_S", DType::Q4_K, 14, 'S'},
    {"Q4_K_M", DType::Q4_K, 15, 'M'}, {"Q5_K_S", DType::Q5_K, 16, 'S'}, {"Q5_K_M", DType::Q5_K, 17, 'M'},
};

// llama-quantize's use_more_bits: the first and last eighth of the layers and every third one
// between.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

bool is_k_quant(DType t) { return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K; }

DType fall_back(DType t, int64_t cols) {
  if (!is_k_quant(t) || cols % 256 == 0) return t;
  const DType f = t == DType::Q4_K ? DType::Q5_0 : t == DType::Q5_K ? DType::Q5_1 : DType::Q8_0;
  return cols % 32 == 0 ? f : DType::F16;
}

}  // namespace

std::string file_type_names() {
  std::string s;
  for (const Known& k : kKnown) s += (s.empty() ? "" : ", ") + std::string(k.name);
  return s;
}

FileType parse_file_type(const std::string& name) {
  for (const Known& k : kKnown)
    if (name == k.name) return {name, k.base, k.ftype, k.mix};
  throw Error("make-model cannot write type '" + name + "' (supported: " + file_type_names() + ")");
}

DType tensor_type(const FileType& ft, const std::string& tensor, int64_t n_layers, int64_t cols) {
  DType t = ft.base;
  int layer = -1;
  std::sscanf(tensor.c_str(), "blk.%d.", &layer);
  auto has = [&](const char* part) { return tensor.find(part) != std::string::npos; };
  if (ft.mix) {
    if (tensor == "output.weight") {
      t = DType::Q6_K;
    } else if (has("attn_v.weight") || has("attn_qkv.weight") || has("attn_kv_b.weight")) {
      if (ft.mix == 'M' && use_more_bits(layer, n_layers)) t = DType::Q6_K;
      else if (ft.name == "Q4_K_S" && layer < 4) t = DType::Q5_K;
    } else if (has("ffn_down")) {
      if (ft.mix == 'M' && use_more_bits(layer, n_layers)) t = DType::Q6_K;
      else if (ft.name == "Q4_K_S" && layer < n_layers / 8) t = DType::Q5_K;
    }
  }
  return fall_back(t, cols);
}

}  // namespace orchard
