// Anthropic's Messages API: a required max_tokens, the system prompt beside the messages,
// content as blocks (text; tool_use and tool_result for tools), and a stream of named events
// (message_start, content_block_start/delta/stop, message_delta, message_stop).
#include <algorithm>
#include <map>

#include "serve/api.h"
#include "serve/http_util.h"
#include "serve/request_params.h"
#include "serve/tool_request.h"

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

// One Anthropic message as chat messages: text blocks join into one; an assistant's tool_use
// blocks become its calls; a user's tool_result blocks become tool messages (before the user's
// own text), named after the call they answer.
void add_message(const json& m, const std::string& where, std::vector<ChatMessage>& chat,
                 std::map<std::string, std::string>& call_names) {
  const std::string role = m["role"];
  const json content = m.contains("content") ? m["content"] : json();
  if (!content.is_array()) {
    chat.emplace_back(role, text_of(content, where + ".content"));
    return;
  }
  ChatMessage msg(role, "");
  for (size_t k = 0; k < content.size(); ++k) {
    const json& b = content[k];
    const std::string at = where + ".content[" + std::to_string(k) + "]";
    const json type = b.is_object() && b.contains("type") ? b["type"] : json();
    if (type == "text" && b.contains("text") && b["text"].is_string()) {
      msg.content += b["text"].get<std::string>();
    } else if (type == "tool_use" && role == "assistant") {
      if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") || !b["name"].is_string() ||
          !b.contains("input") || !b["input"].is_object())
        throw ApiError::bad_request("'" + at + "' must be {\"type\": \"tool_use\", \"id\", \"name\", \"input\": {…}}", at);
      msg.tool_calls.push_back({b["id"].get<std::string>(), b["name"].get<std::string>(), b["input"]});
      call_names[b["id"].get<std::string>()] = b["name"].get<std::string>();
    } else if (type == "tool_result" && role == "user") {
      if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string())
        throw ApiError::bad_request("'" + at + ".tool_use_id' must be a string", at + ".tool_use_id");
      ChatMessage result("tool", b.contains("content") && !b["content"].is_null() ? text_of(b["content"], at + ".content") : "");
      if (b.value("is_error", false) == true) result.content = "Error: " + result.content;
      result.tool_call_id = b["tool_use_id"].get<std::string>();
      auto it = call_names.find(result.tool_call_id);
      if (it != call_names.end()) result.name = it->second;
      chat.push_back(std::move(result));
    } else {
      throw ApiError::bad_request("'" + at + "' must be a text block" +
                                      std::string(role == "assistant" ? " or a tool_use block" : " or a tool_result block"),
                                  at);
    }
  }
  if (!msg.content.empty() || !msg.tool_calls.empty() || role == "assistant") chat.push_back(std::move(msg));
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
  if (body.contains("system") && !body["system"].is_null()) chat.emplace_back("system", text_of(body["system"], "system"));
  std::map<std::string, std::string> call_names;  // tool_use id → tool name
  for (size_t i = 0; i < body["messages"].size(); ++i) {
    const json& m = body["messages"][i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw ApiError::bad_request("'" + where + ".role' must be a string", where + ".role");
    const std::string role = m["role"];
    if (role != "user" && role != "assistant")
      throw ApiError::bad_request("'" + where + ".role' must be user or assistant", where + ".role");
    add_message(m, where, chat, call_names);
  }
  if (chat.empty() || chat.back().role == "system")
    throw ApiError::bad_request("'messages' must hold at least one message", "messages");
  const ToolRequest tools = read_anthropic_tools(body);
  const ToolFormat format = service.tool_format();

  auto prompt = service.chat_prompt(chat, o, tools);
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
  auto tool_use = [](const ToolCall& c) {
    return json{{"type", "tool_use"}, {"id", new_id("toolu_")}, {"name", c.name}, {"input", c.arguments}};
  };
  if (!read_bool(body, "stream", false)) {
    const Completion& done = stream->wait_done();
    json content = json::array({{{"type", "text"}, {"text", done.text}}});
    json stop = stop_fields(done);
    if (tools.active()) {
      const ToolReply reply = parse_tool_calls(format, done.text, tools.tools);
      if (!reply.calls.empty()) {
        content = json::array();
        if (!reply.content.empty()) content.push_back({{"type", "text"}, {"text", reply.content}});
        for (const ToolCall& c : reply.calls) content.push_back(tool_use(c));
        stop = {{"stop_reason", "tool_use"}, {"stop_sequence", nullptr}};
      }
    }
    json out = {{"id", id},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model},
                {"content", std::move(content)},
                {"usage", {{"input_tokens", done.prompt_tokens - done.cached_tokens},
                           {"cache_read_input_tokens", done.cached_tokens},
                           {"output_tokens", done.completion_tokens}}}};
    out.update(stop);
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
  // With tools, text that may be a call is held back; the calls follow the text block, each a
  // tool_use block whose input arrives as one input_json_delta.
  auto tool_stream = tools.active() ? std::make_shared<ToolStream>(format, tools.tools) : nullptr;
  auto text_delta = [](const std::string& t) {
    return sse_event("content_block_delta",
                     {{"type", "content_block_delta"}, {"index", 0}, {"delta", {{"type", "text_delta"}, {"text", t}}}});
  };
  stream_to(
      res, stream, "text/event-stream",
      [=](const std::string& t) {
        const std::string out = tool_stream ? tool_stream->push(t) : t;
        return out.empty() ? std::string() : lead() + text_delta(out);
      },
      [=](const Completion& done) {
        std::string out = lead();
        if (done.finish_reason == "error")
          return out + sse_event("error", anthropic_error(ApiError(500, "api_error", "generation failed: " + done.error)));
        ToolReply reply;
        if (tool_stream) reply = tool_stream->finish();
        if (!reply.content.empty()) out += text_delta(reply.content);
        out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
        for (size_t k = 0; k < reply.calls.size(); ++k) {
          json block = tool_use(reply.calls[k]);
          const int index = static_cast<int>(k) + 1;
          block["input"] = json::object();
          out += sse_event("content_block_start", {{"type", "content_block_start"}, {"index", index}, {"content_block", block}});
          out += sse_event("content_block_delta",
                           {{"type", "content_block_delta"},
                            {"index", index},
                            {"delta", {{"type", "input_json_delta"},
                                       {"partial_json", reply.calls[k].arguments.dump(-1, ' ', false, json::error_handler_t::replace)}}}});
          out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
        }
        json stop = stop_fields(done);
        if (!reply.calls.empty()) stop = {{"stop_reason", "tool_use"}, {"stop_sequence", nullptr}};
        out += sse_event("message_delta", {{"type", "message_delta"},
                                           {"delta", std::move(stop)},
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
