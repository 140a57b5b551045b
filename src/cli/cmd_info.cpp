// `orchard info MODEL`: what a GGUF file holds (header, every metadata key, the tensor table),
// without loading any weights.
#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <iterator>
#include <string>

#include "cli/commands.h"
#include "model/gguf.h"
#include "model/hparams.h"
#include "serve/model_store.h"
#include "tensor/types.h"

namespace orchard::cli {
namespace {

// Long values are shortened so a 150k-token vocabulary or a chat template stays one line.
constexpr size_t kMaxStringBytes = 72;
constexpr size_t kMaxArrayStrings = 5;
constexpr size_t kMaxArrayNumbers = 8;
constexpr size_t kMaxNestedArrays = 3;

std::string quoted(const std::string& s) {
  size_t keep = s.size();
  if (keep > kMaxStringBytes) {
    keep = kMaxStringBytes;
    // Cut on a UTF-8 character boundary, not inside a multi-byte sequence.
    while (keep > 0 && (static_cast<unsigned char>(s[keep]) & 0xC0) == 0x80) --keep;
  }
  std::string out = "\"";
  for (size_t i = 0; i < keep; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  if (keep < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

// Shortest text that reads back as the same float (1e-05, not 9.99999974738e-06).
template <typename T>
std::string shortest(T x) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

std::string number_text(GGUFType type, double x) {
  switch (type) {
    case GGUFType::F32: return shortest(static_cast<float>(x));
    case GGUFType::F64: return shortest(x);
    case GGUFType::BOOL: return x != 0 ? "true" : "false";
    default:
      // Integers are exact in a double up to 2^53, and the file's own ints never exceed 2^64.
      if (x >= -9.2e18 && x <= 9.2e18) return std::to_string(static_cast<int64_t>(x));
      return shortest(x);
  }
}

std::string type_text(const GGUFValue& v) {
  if (v.type != GGUFType::ARRAY) return gguf_type_name(v.type);
  return std::string("[") + gguf_type_name(v.elem_type) + "; " + std::to_string(v.array_size()) + "]";
}

std::string value_text(const GGUFValue& v) {
  switch (v.type) {
    case GGUFType::U64: return std::to_string(v.u64);
    case GGUFType::F32: return shortest(static_cast<float>(v.f));
    case GGUFType::F64: return shortest(v.f);
    case GGUFType::BOOL: return v.b ? "true" : "false";
    case GGUFType::STRING: return quoted(v.s);
    case GGUFType::ARRAY: break;
    default: return std::to_string(v.i);
  }
  const size_t n = v.array_size();
  const size_t shown_max = v.elem_type == GGUFType::STRING  ? kMaxArrayStrings
                           : v.elem_type == GGUFType::ARRAY ? kMaxNestedArrays
                                                            : kMaxArrayNumbers;
  const size_t shown = std::min(n, shown_max);
  std::string out = "[";
  for (size_t i = 0; i < shown; ++i) {
    if (i) out += ", ";
    if (v.elem_type == GGUFType::STRING) out += quoted(v.strings[i]);
    else if (v.elem_type == GGUFType::ARRAY) out += value_text(v.arrays[i]);
    else out += number_text(v.elem_type, v.numbers[i]);
  }
  if (shown < n) out += ", ... " + std::to_string(n - shown) + " more";
  return out + "]";
}

std::string shape_text(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = static_cast<double>(n);
  size_t u = 0;
  while (x >= 1024 && u + 1 < std::size(units)) {
    x /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", x, units[u]);
  return buf;
}

void print_architecture(const GGUFFile& f);

void print_info(const GGUFFile& f) {
  std::printf("%s: GGUF version %" PRIu32 ", %zu bytes (%s)\n", f.path().c_str(), f.version(), f.file_size(),
              human_bytes(f.file_size()).c_str());
  std::printf("alignment:   %" PRIu64 "%s\n", f.alignment(), f.has("general.alignment") ? "" : " (default)");
  std::printf("data offset: %" PRIu64 "\n", f.data_offset());
  print_architecture(f);

  size_t key_width = 0, type_width = 0;
  for (const auto& [key, value] : f.metadata()) {
    key_width = std::max(key_width, key.size());
    type_width = std::max(type_width, type_text(value).size());
  }
  std::printf("\nmetadata: %zu keys\n", f.metadata().size());
  for (const auto& [key, value] : f.metadata())
    std::printf("  %-*s  %-*s  %s\n", static_cast<int>(key_width), key.c_str(), static_cast<int>(type_width),
                type_text(value).c_str(), value_text(value).c_str());

  size_t name_width = 4, shape_width = 5;
  for (const auto& t : f.tensors()) {
    name_width = std::max(name_width, t.name.size());
    shape_width = std::max(shape_width, shape_text(t.ne).size());
  }
  struct Totals {
    size_t tensors = 0;
    uint64_t params = 0, bytes = 0;
  };
  std::map<std::string, Totals> by_type;
  Totals all;
  std::printf("\ntensors: %zu\n", f.tensors().size());
  std::printf("  %-*s  %-8s  %-*s  %12s  %12s\n", static_cast<int>(name_width), "name", "type",
              static_cast<int>(shape_width), "shape", "params", "bytes");
  for (const auto& t : f.tensors()) {
    const auto params = static_cast<uint64_t>(t.n_elements());
    std::printf("  %-*s  %-8s  %-*s  %12" PRIu64 "  %12" PRIu64 "\n", static_cast<int>(name_width), t.name.c_str(),
                type_name(t.type), static_cast<int>(shape_width), shape_text(t.ne).c_str(), params, t.nbytes);
    for (Totals* tot : {&by_type[type_name(t.type)], &all}) {
      ++tot->tensors;
      tot->params += params;
      tot->bytes += t.nbytes;
    }
  }

  std::printf("\nby type:\n");
  for (const auto& [name, tot] : by_type) {
    const TypeInfo& info = type_info(parse_type(name));
    std::printf("  %-8s  %5zu tensors  %12" PRIu64 " params  %12" PRIu64 " bytes (%s)%s\n", name.c_str(),
                tot.tensors, tot.params, tot.bytes, human_bytes(tot.bytes).c_str(),
                info.computable ? "" : "  [not computable by Orchard]");
  }
  std::printf("total: %zu tensors, %" PRIu64 " params, %" PRIu64 " bytes (%s)\n", all.tensors, all.params, all.bytes,
              human_bytes(all.bytes).c_str());
}

// What the forward pass will make of the file: its family, attention and experts, the
// parameters one token reads, and the KV cache a position costs.
void print_architecture(const GGUFFile& f) {
  HParams hp;
  try {
    hp = HParams::from_gguf(f);
  } catch (const std::exception& e) {
    std::printf("\narchitecture: cannot run: %s\n", e.what());
    return;
  }
  std::printf("\narchitecture: %s, %" PRId64 " layers, dim %" PRId64 ", %" PRId64 " heads (%" PRId64 " KV) of %" PRId64,
              hp.arch.c_str(), hp.n_layers, hp.dim, hp.n_heads, hp.n_kv_heads, hp.head_dim);
  if (hp.mla())
    std::printf(", latent attention (kv rank %" PRId64 ", q rank %" PRId64 ", value %" PRId64 ", rope %" PRId64 ")",
                hp.kv_lora_rank, hp.q_lora_rank, hp.v_head_dim, hp.n_rot);
  std::printf("\n");
  uint64_t total = 0, experts = 0;
  for (const auto& t : f.tensors()) {
    total += static_cast<uint64_t>(t.n_elements());
    if (t.name.find("_exps.") != std::string::npos) experts += static_cast<uint64_t>(t.n_elements());
  }
  if (hp.moe()) {
    std::printf("experts:      %" PRId64 " routed per MoE layer, %" PRId64 " used per token, %s shared; FFN %" PRId64
                " per expert; %" PRId64 " of %" PRId64 " layers dense first; %s scores%s%s\n",
                hp.n_expert, hp.n_expert_used, hp.shared_ffn_dim > 0 ? (hp.shared_gate ? "1 gated" : "1") : "none",
                hp.expert_ffn_dim, hp.n_dense_lead, hp.n_layers, hp.gating == ExpertGating::Sigmoid ? "sigmoid" : "softmax",
                hp.expert_weights_norm ? ", weights normalised" : "",
                hp.n_expert_groups > 1 ? (", " + std::to_string(hp.n_group_used) + " of " +
                                          std::to_string(hp.n_expert_groups) + " expert groups").c_str()
                                       : "");
  }
  const double unused = hp.moe() ? static_cast<double>(experts) * (1.0 - static_cast<double>(hp.n_expert_used) /
                                                                             static_cast<double>(hp.n_expert))
                                 : 0.0;
  const auto active = static_cast<uint64_t>(static_cast<double>(total) - unused);
  std::printf("parameters:   %" PRIu64 " total, %" PRIu64 " active per token (%.1f %%)\n", total, active,
              total ? 100.0 * static_cast<double>(active) / static_cast<double>(total) : 0.0);
  const int64_t per_layer = hp.mla() ? hp.kv_lora_rank + hp.n_rot : 2 * hp.kv_dim();
  const auto kv_f32 = static_cast<uint64_t>(per_layer * hp.n_layers) * 4;
  std::printf("KV cache:     %" PRIu64 " bytes per token in f32, %" PRIu64 " in f16%s\n", kv_f32, kv_f32 / 2,
              hp.mla() ? " (the compressed latent and the RoPE key)" : "");
}

}  // namespace

void register_info(CLI::App& app) {
  auto model = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("info", "Show a GGUF file's header, metadata and tensor table");
  cmd->add_option("model", *model, "GGUF model file, or a name from `orchard models`")->required();
  cmd->callback([model] { print_info(*GGUFFile::open(serve::resolve_model(*model))); });
}

}  // namespace orchard::cli
