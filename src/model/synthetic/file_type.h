#pragma once
// The file types `make-model` writes, and which format each tensor gets in them. A plain type
// (F32 … Q6_K) puts every matrix in that format, as `llama-quantize --pure` does; the _M and _S
// K-quant mixtures assign formats as llama-quantize does (the 2026-08 llama.cpp, whose rules for
// these types match c392e50's apart from treating deepseek2's attn_kv_b as attn_v):
//   Q4_K_M / Q5_K_M: output Q6_K; attn_v, attn_qkv and attn_kv_b of layers that "use more bits"
//     (the first and last eighth and every third layer between) Q6_K, likewise every ffn_down*
//     (dense, routed experts, shared experts) of such layers; the rest Q4_K / Q5_K.
//   Q4_K_S: output Q6_K; attn_v of the first 4 layers and ffn_down* of the first eighth Q5_K.
//   Q5_K_S: output Q6_K; the rest Q5_K.
// Rows whose width is not a multiple of 256 cannot hold a K-quant and fall back as
// llama-quantize's do: Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0 (F16 if that does not fit either).
// Not applied: llama.cpp's bumps for 8-expert (Mixtral) and 70B models and for tied embeddings;
// no built-in shape is one.
#include <cstdint>
#include <string>

#include "tensor/types.h"

namespace orchard {

struct FileType {
  std::string name;   // as given: "Q4_K_M", "Q8_0", …
  DType base;         // the format of matrices no rule changes
  uint32_t ftype;     // GGUF general.file_type (llama.cpp's LLAMA_FTYPE numbering)
  char mix = 0;       // 'M' or 'S' for the K-quant mixtures, 0 for a plain type
};

// Throws orchard::Error listing the names for one make-model cannot write.
FileType parse_file_type(const std::string& name);
std::string file_type_names();

// The format of matrix `tensor` (a GGUF name such as "blk.3.ffn_down_exps.weight") of a model
// with n_layers blocks, whose rows are `cols` wide.
DType tensor_type(const FileType& ft, const std::string& tensor, int64_t n_layers, int64_t cols);

}  // namespace orchard
