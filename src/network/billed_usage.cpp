#include "network/billed_usage.h"

namespace orchard::network {
namespace {

int64_t string_bytes(const nlohmann::json& j) {
  if (j.is_string()) return static_cast<int64_t>(j.get_ref<const std::string&>().size());
  int64_t n = 0;
  if (j.is_array() || j.is_object())
    for (const auto& v : j) n += string_bytes(v);
  return n;
}

}  // namespace

int64_t prompt_token_bound(const nlohmann::json& request) {
  int64_t bound = kTemplateTokens;
  if (!request.is_object()) return bound;
  if (const auto m = request.find("messages"); m != request.end()) {
    bound += string_bytes(*m);
    if (m->is_array()) bound += kTemplateTokens * static_cast<int64_t>(m->size());
  }
  if (const auto p = request.find("prompt"); p != request.end()) bound += string_bytes(*p);
  return bound;
}

}  // namespace orchard::network
