// Anthropic's Messages API: a required max_tokens, the system prompt beside the messages,
// content as text blocks, and a stream of named events (message_start, content_block_delta,
// message_delta, message_stop).
#include <algorithm>

#include "serve/api.h"
#include "serve/http_util.h"
#include "serve/request_params.h"

namespace orchard::serve {
namespace {

using nlohmann::json;

json anthropic_error(const ApiError& e) {
  std::string type = "api_error";
  switch (e.status()) {
    case 400: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: type = "overloaded_error"; break;
  }
  return {{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
}

std::string text_of(const json& v, const std::string& field) {
  if (v.is_string()) return v.get<std::string>();
  std::string out;
  if (v.is_array()) {
    for (const json& b : v) {
      if (!b.is_object() || !b.contains("type") || b["type"] != "text" || !b.contains("text") || !b["text"].is_string())
        throw ApiError::bad_request("'" + field + "' blocks must be {\"type\": \"text\", \"text\": …}", field);
      out += b["text"].get<std::string>();
    }
    return out;
  }
  throw ApiError::bad_request("'" + field + "' must be a string or a list of text blocks", field);
}

void messages(Service& service, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  if (!body.contains("max_tokens")) throw ApiError::bad_request("'max_tokens' is required", "max_tokens");
  if (!body.contains("messages") || !body["messages"].is_array())
    throw ApiError::bad_request("'messages' must be a list of messages", "messages");
  GenerateOptions o = service.defaults();
  ParamNames names;
  names.stop = "stop_sequences";
  read_generation_params(body, o, names);
  const std::vector<std::string> user_stops = o.stop;

  std::vector<ChatMessage> chat;
  if (body.contains("system") && !body["system"].is_null()) chat.push_back({"system", text_of(body["system"], "system")});
  for (size_t i = 0; i < body["messages"].size(); ++i) {
    const json& m = body["messages"][i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw ApiError::bad_request("'" + where + ".role' must be a string", where + ".role");
    const std::string role = m["role"];
    if (role != "user" && role != "assistant")
      throw ApiError::bad_request("'" + where + ".role' must be user or assistant", where + ".role");
    chat.push_back({role, text_of(m.contains("content") ? m["content"] : json(), where + ".content")});
  }
  if (chat.empty() || chat.back().role == "system")
    throw ApiError::bad_request("'messages' must hold at least one message", "messages");

  auto prompt = service.chat_prompt(chat, o);
  const int64_t input_tokens = static_cast<int64_t>(prompt.size());
  auto stream = service.start(std::move(prompt), o);
  const std::string id = new_id("msg_"), model = service.model().id;

  auto stop_fields = [user_stops](const Completion& c) {
    if (c.finish_reason == "error") throw ApiError(500, "api_error", "generation failed: " + c.error);
    const bool by_user = !c.stopped_by.empty() &&
                         std::find(user_stops.begin(), user_stops.end(), c.stopped_by) != user_stops.end();
    json j = {{"stop_reason", c.finish_reason == "length" ? "max_tokens" : by_user ? "stop_sequence" : "end_turn"}};
    j["stop_sequence"] = by_user ? json(c.stopped_by) : json();
    return j;
  };
  if (!read_bool(body, "stream", false)) {
    const Completion& done = stream->wait_done();
    json out = {{"id", id},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model},
                {"content", json::array({{{"type", "text"}, {"text", done.text}}})},
                {"usage", {{"input_tokens", done.prompt_tokens - done.cached_tokens},
                           {"cache_read_input_tokens", done.cached_tokens},
                           {"output_tokens", done.completion_tokens}}}};
    out.update(stop_fields(done));
    send_json(res, out);
    return;
  }
  const std::string start =
      sse_event("message_start", {{"type", "message_start"},
                                  {"message", {{"id", id},
                                               {"type", "message"},
                                               {"role", "assistant"},
                                               {"model", model},
                                               {"content", json::array()},
                                               {"stop_reason", nullptr},
                                               {"stop_sequence", nullptr},
                                               {"usage", {{"input_tokens", input_tokens}, {"output_tokens", 0}}}}}}) +
      sse_event("content_block_start",
                {{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}});
  auto started = std::make_shared<bool>(false);
  auto lead = [=] {
    if (*started) return std::string();
    *started = true;
    return start;
  };
  stream_to(
      res, stream, "text/event-stream",
      [=](const std::string& t) {
        return lead() + sse_event("content_block_delta", {{"type", "content_block_delta"},
                                                          {"index", 0},
                                                          {"delta", {{"type", "text_delta"}, {"text", t}}}});
      },
      [=](const Completion& done) {
        std::string out = lead();
        if (done.finish_reason == "error")
          return out + sse_event("error", anthropic_error(ApiError(500, "api_error", "generation failed: " + done.error)));
        out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
        out += sse_event("message_delta", {{"type", "message_delta"},
                                           {"delta", stop_fields(done)},
                                           {"usage", {{"output_tokens", done.completion_tokens}}}});
        return out + sse_event("message_stop", {{"type", "message_stop"}});
      },
      "event: ping\ndata: {\"type\": \"ping\"}\n\n");
}

}  // namespace

void add_anthropic_routes(httplib::Server& http, Service& service) {
  http.Post("/v1/messages", guarded(anthropic_error, [&](const auto& req, auto& res) { messages(service, req, res); }));
}

}  // namespace orchard::serve
