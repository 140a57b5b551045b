#include "serve/request_params.h"

#include <cmath>
#include <limits>

#include "serve/tool_request.h"

namespace orchard::serve {

using nlohmann::json;

json parse_body(const std::string& body) {
  // Nesting is bounded before anything walks the document: copies, dumps and destructors of a
  // 100,000-deep "[[[…" recurse once a level (and so does the schema compiler).
  constexpr int kMaxNesting = 128;
  bool too_deep = false;
  const json::parser_callback_t depth_check = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxNesting) too_deep = true;
    return !too_deep;
  };
  json j;
  try {
    j = json::parse(body, depth_check);
  } catch (const json::exception& e) {  // parse errors, and numbers too large for any type
    throw ApiError::bad_request(std::string("the request body is not valid JSON: ") + e.what());
  }
  if (too_deep) throw ApiError::bad_request("the request body nests deeper than " + std::to_string(kMaxNesting) + " levels");
  if (!j.is_object()) throw ApiError::bad_request("the request body must be a JSON object");
  return j;
}

namespace {

double number(const json& j, const std::string& field, double lo, double hi) {
  const json& v = j.at(field);
  if (!v.is_number()) throw ApiError::bad_request("'" + field + "' must be a number", field);
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    throw ApiError::bad_request("'" + field + "' must be between " + json(lo).dump() + " and " + json(hi).dump() +
                                    " (got " + v.dump() + ")",
                                field);
  return d;
}

int64_t integer(const json& j, const std::string& field, int64_t lo, int64_t hi) {
  const json& v = j.at(field);
  if (!v.is_number_integer()) throw ApiError::bad_request("'" + field + "' must be an integer", field);
  const int64_t i = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi) ? hi + 1 : v.get<int64_t>();
  if (i < lo || i > hi)
    throw ApiError::bad_request("'" + field + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                                    " (got " + v.dump() + ")",
                                field);
  return i;
}

bool present(const json& j, const std::string& field) { return j.contains(field) && !j.at(field).is_null(); }

}  // namespace

void read_generation_params(const json& j, GenerateOptions& o, const ParamNames& n) {
  SamplerOptions& s = o.sampling;
  if (present(j, n.max_tokens)) o.max_tokens = static_cast<int32_t>(integer(j, n.max_tokens, 1, 1 << 30));
  if (present(j, "max_completion_tokens"))
    o.max_tokens = static_cast<int32_t>(integer(j, "max_completion_tokens", 1, 1 << 30));
  if (present(j, "temperature")) s.temperature = static_cast<float>(number(j, "temperature", 0, 100));
  if (present(j, "top_p")) s.top_p = static_cast<float>(number(j, "top_p", 0, 1));
  if (present(j, n.top_k)) s.top_k = static_cast<int32_t>(integer(j, n.top_k, 0, 1 << 30));
  if (present(j, "min_p")) s.min_p = static_cast<float>(number(j, "min_p", 0, 1));
  if (present(j, n.repeat_penalty)) s.repeat_penalty = static_cast<float>(number(j, n.repeat_penalty, 0, 100));
  if (present(j, "frequency_penalty")) s.frequency_penalty = static_cast<float>(number(j, "frequency_penalty", -2, 2));
  if (present(j, "presence_penalty")) s.presence_penalty = static_cast<float>(number(j, "presence_penalty", -2, 2));
  if (present(j, "logit_bias")) {
    // {"token id": bias}, as OpenAI's; ids are checked against the vocabulary when the request
    // is tokenized (check_logit_bias).
    const json& v = j.at("logit_bias");
    if (!v.is_object()) throw ApiError::bad_request("'logit_bias' must be an object of token ids to numbers", "logit_bias");
    if (v.size() > 1024) throw ApiError::bad_request("'logit_bias' may name at most 1024 tokens", "logit_bias");
    s.logit_bias.clear();
    for (const auto& [key, bias] : v.items()) {
      int64_t id = -1;
      size_t used = 0;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != key.size() || id < 0 || id > std::numeric_limits<int32_t>::max())
        throw ApiError::bad_request("'logit_bias' keys must be token ids (got \"" + key + "\")", "logit_bias");
      if (!bias.is_number() || !std::isfinite(bias.get<double>()) || bias.get<double>() < -100 || bias.get<double>() > 100)
        throw ApiError::bad_request("'logit_bias' values must be numbers from -100 to 100 (token " + key + ")", "logit_bias");
      s.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias.get<double>()));
    }
  }
  if (present(j, "seed")) {
    const json& v = j.at("seed");
    if (!v.is_number_integer()) throw ApiError::bad_request("'seed' must be an integer", "seed");
    s.seed = v.is_number_unsigned() ? v.get<uint64_t>() : static_cast<uint64_t>(v.get<int64_t>());
  }
  // llama.cpp's extension, for benchmarks: generate the full length even past end-of-text.
  if (present(j, "ignore_eos")) {
    if (!j.at("ignore_eos").is_boolean()) throw ApiError::bad_request("'ignore_eos' must be true or false", "ignore_eos");
    o.stop_at_eog = !j.at("ignore_eos").get<bool>();
  }
  if (present(j, n.stop)) {
    const json& v = j.at(n.stop);
    o.stop.clear();
    if (v.is_string()) {
      o.stop.push_back(v.get<std::string>());
    } else if (v.is_array()) {
      if (v.size() > 16) throw ApiError::bad_request("'" + n.stop + "' holds at most 16 strings", n.stop);
      for (const json& e : v) {
        if (!e.is_string()) throw ApiError::bad_request("'" + n.stop + "' must be a string or a list of strings", n.stop);
        o.stop.push_back(e.get<std::string>());
      }
    } else {
      throw ApiError::bad_request("'" + n.stop + "' must be a string or a list of strings", n.stop);
    }
    for (const auto& st : o.stop)
      if (st.empty()) throw ApiError::bad_request("'" + n.stop + "' may not contain an empty string", n.stop);
  }
}

std::vector<ChatMessage> read_messages(const json& messages, const std::string& field) {
  if (!messages.is_array()) throw ApiError::bad_request("'" + field + "' must be a list of messages", field);
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = field + "[" + std::to_string(i) + "]";
    if (!m.is_object()) throw ApiError::bad_request("'" + where + "' must be an object", where);
    if (!m.contains("role") || !m["role"].is_string())
      throw ApiError::bad_request("'" + where + ".role' must be a string", where + ".role");
    ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name for it
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      throw ApiError::bad_request("'" + where + ".role' must be system, user, assistant or tool (got '" + msg.role + "')",
                                  where + ".role");
    const json content = m.contains("content") ? m["content"] : json();
    if (content.is_string()) {
      msg.content = content.get<std::string>();
    } else if (content.is_array()) {
      // Content parts: text only; this server runs no vision models.
      for (const json& part : content) {
        // Compared as JSON: value("type", "") throws when "type" is not a string (request_fuzz).
        if (part.is_object() && part.contains("type") && part["type"] == "text" && part.contains("text") &&
            part["text"].is_string())
          msg.content += part["text"].get<std::string>();
        else
          throw ApiError::bad_request("'" + where + ".content' parts must be {\"type\": \"text\", \"text\": …}; "
                                      "images and other parts are not supported",
                                      where + ".content");
      }
    } else if (!content.is_null()) {
      throw ApiError::bad_request("'" + where + ".content' must be a string or a list of text parts", where + ".content");
    }
    // Tool use: the calls an assistant made, and which call a tool message answers (OpenAI's
    // tool_call_id; Ollama's tool_name, or name).
    if (msg.role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null())
      msg.tool_calls = read_tool_calls(m["tool_calls"], where + ".tool_calls");
    for (const char* key : {"tool_call_id", "tool_name", "name"}) {
      if (!m.contains(key) || m[key].is_null()) continue;
      if (!m[key].is_string()) throw ApiError::bad_request("'" + where + "." + key + "' must be a string", where + "." + key);
      (std::string(key) == "tool_call_id" ? msg.tool_call_id : msg.name) = m[key].get<std::string>();
    }
    out.push_back(std::move(msg));
  }
  if (out.empty()) throw ApiError::bad_request("'" + field + "' must hold at least one message", field);
  return out;
}

std::string read_string(const json& j, const std::string& field) {
  if (!j.contains(field)) throw ApiError::bad_request("'" + field + "' is required", field);
  if (!j[field].is_string()) throw ApiError::bad_request("'" + field + "' must be a string", field);
  return j[field].get<std::string>();
}

bool read_bool(const json& j, const std::string& field, bool fallback) {
  if (!present(j, field)) return fallback;
  if (!j[field].is_boolean()) throw ApiError::bad_request("'" + field + "' must be true or false", field);
  return j[field].get<bool>();
}

}  // namespace orchard::serve
