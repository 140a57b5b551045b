// Ollama's API, for the tools that speak it: streamed by default as JSON lines, parameters
// under "options" (num_predict for max tokens), durations in nanoseconds, errors as
// {"error": "…"}.
#include <ctime>

#include "serve/api.h"
#include "serve/http_util.h"
#include "serve/request_params.h"
#include "serve/structured_output.h"
#include "serve/tool_request.h"

namespace orchard::serve {
namespace {

using nlohmann::json;

json ollama_error(const ApiError& e) { return {{"error", e.what()}}; }

std::string iso_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

std::string line(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"; }

GenerateOptions read_options(const json& body, const Service& service) {
  GenerateOptions o = service.defaults();
  if (body.contains("options") && !body["options"].is_null()) {
    if (!body["options"].is_object()) throw ApiError::bad_request("'options' must be an object", "options");
    ParamNames names;
    names.max_tokens = "num_predict";
    read_generation_params(body["options"], o, names);
  }
  // "format": "json" asks for one JSON object, a schema object for JSON that follows it.
  if (body.contains("format")) o.grammar = read_ollama_format(body["format"]);
  return o;
}

// The closing line's counters, as Ollama reports them.
json final_fields(const Completion& c) {
  if (c.finish_reason == "error") throw ApiError(500, "server_error", "generation failed: " + c.error);
  const auto ns = [](double ms) { return static_cast<int64_t>(ms * 1e6); };
  return {{"done", true},
          {"done_reason", c.finish_reason == "length" ? "length" : "stop"},
          {"total_duration", ns(c.ttft_ms + c.gen_ms)},
          {"load_duration", 0},
          {"prompt_eval_count", c.prompt_tokens},
          {"prompt_eval_duration", ns(c.ttft_ms - c.queue_ms)},
          {"eval_count", c.completion_tokens},
          {"eval_duration", ns(c.gen_ms)}};
}

void respond(Service& service, httplib::Response& res, std::shared_ptr<Stream> stream, bool streaming,
             std::function<json(const std::string&)> piece) {
  const std::string model = service.model().id;
  if (!streaming) {
    const Completion& done = stream->wait_done();
    json out = piece(done.text);
    out.update(final_fields(done));
    send_json(res, out);
    return;
  }
  stream_to(
      res, stream, "application/x-ndjson", [=](const std::string& t) { return line(piece(t)); },
      [=](const Completion& done) {
        if (done.finish_reason == "error") return line({{"error", "generation failed: " + done.error}});
        json out = piece("");
        out.update(final_fields(done));
        return line(out);
      });
}

json ollama_calls(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& c : calls) out.push_back({{"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}

void ollama_chat(Service& service, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  if (!body.contains("messages")) throw ApiError::bad_request("'messages' is required", "messages");
  GenerateOptions o = read_options(body, service);
  const ToolRequest tools = read_function_tools(body);
  auto prompt = service.chat_prompt(read_messages(body["messages"]), o, tools);
  auto stream = service.start(std::move(prompt), o);
  const std::string model = service.model().id;
  auto message = [=](const std::string& t) {
    return json{{"model", model}, {"created_at", iso_now()}, {"message", {{"role", "assistant"}, {"content", t}}},
                {"done", false}};
  };
  const bool streaming = read_bool(body, "stream", true);
  if (!tools.active()) return respond(service, res, stream, streaming, message);
  // Tools: calls go in the message's tool_calls; streamed, text that may be a call is held
  // back and the calls come in one line before the last.
  const ToolFormat format = service.tool_format();
  if (!streaming) {
    const Completion& done = stream->wait_done();
    const ToolReply reply = parse_tool_calls(format, done.text, tools.tools);
    json out = message(reply.calls.empty() ? done.text : reply.content);
    if (!reply.calls.empty()) out["message"]["tool_calls"] = ollama_calls(reply.calls);
    out.update(final_fields(done));
    send_json(res, out);
    return;
  }
  auto tool_stream = std::make_shared<ToolStream>(format, tools.tools);
  stream_to(
      res, stream, "application/x-ndjson",
      [=](const std::string& t) {
        const std::string out = tool_stream->push(t);
        return out.empty() ? std::string() : line(message(out));
      },
      [=](const Completion& done) {
        if (done.finish_reason == "error") return line({{"error", "generation failed: " + done.error}});
        const ToolReply reply = tool_stream->finish();
        std::string out;
        if (!reply.content.empty() || !reply.calls.empty()) {
          json m = message(reply.content);
          if (!reply.calls.empty()) m["message"]["tool_calls"] = ollama_calls(reply.calls);
          out += line(m);
        }
        json last = message("");
        last.update(final_fields(done));
        return out + line(last);
      });
}

void generate(Service& service, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  const std::string text = read_string(body, "prompt");
  GenerateOptions o = read_options(body, service);
  std::vector<TokenId> prompt;
  if (read_bool(body, "raw", false)) {
    prompt = service.text_prompt(text);
  } else {
    std::vector<ChatMessage> messages;
    if (body.contains("system") && body["system"].is_string()) messages.push_back({"system", body["system"]});
    messages.push_back({"user", text});
    prompt = service.chat_prompt(messages, o);
  }
  auto stream = service.start(std::move(prompt), o);
  const std::string model = service.model().id;
  respond(service, res, stream, read_bool(body, "stream", true), [=](const std::string& t) {
    return json{{"model", model}, {"created_at", iso_now()}, {"response", t}, {"done", false}};
  });
}

json details(const ModelInfo& m) {
  char size[32];
  std::snprintf(size, sizeof size, "%.1fM", static_cast<double>(m.parameters) / 1e6);
  if (m.parameters >= 1'000'000'000) std::snprintf(size, sizeof size, "%.1fB", static_cast<double>(m.parameters) / 1e9);
  return {{"format", "gguf"}, {"family", m.architecture}, {"families", json::array({m.architecture})},
          {"parameter_size", size}, {"quantization_level", m.type}};
}

}  // namespace

void add_ollama_routes(httplib::Server& http, Service& service) {
  http.Post("/api/chat", guarded(ollama_error, [&](const auto& req, auto& res) { ollama_chat(service, req, res); }));
  http.Post("/api/generate", guarded(ollama_error, [&](const auto& req, auto& res) { generate(service, req, res); }));
  http.Get("/api/tags", guarded(ollama_error, [&](const auto&, auto& res) {
             const ModelInfo& m = service.model();
             send_json(res, {{"models", json::array({{{"name", m.id},
                                                      {"model", m.id},
                                                      {"modified_at", iso_now()},
                                                      {"size", m.bytes},
                                                      {"details", details(m)}}})}});
           }));
  http.Post("/api/show", guarded(ollama_error, [&](const auto&, auto& res) {
              const ModelInfo& m = service.model();
              send_json(res, {{"details", details(m)},
                              {"model_info", {{"general.architecture", m.architecture},
                                              {"general.parameter_count", m.parameters},
                                              {m.architecture + ".context_length", m.n_ctx}}},
                              {"template", service.chat_template().family()}});
            }));
  http.Get("/api/version", [](const auto&, auto& res) { send_json(res, {{"version", "0.1.0"}}); });
}

}  // namespace orchard::serve
