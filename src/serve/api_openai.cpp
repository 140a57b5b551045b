// OpenAI's API: chat completions and completions, streamed as server-sent events ending in
// "data: [DONE]", usage counted in tokens, errors as {"error": {message, type, param, code}}.
#include "serve/api.h"
#include "serve/http_util.h"
#include "serve/openai.h"
#include "serve/request_params.h"

namespace orchard::serve {
namespace {

using nlohmann::json;

json usage(const Completion& c) {
  return {{"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", c.completion_tokens},
          {"total_tokens", c.prompt_tokens + c.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", c.cached_tokens}}}};
}

// OpenAI knows "stop" and "length"; a generation that failed is reported as an error instead.
json finish_reason(const Completion& c) {
  if (c.finish_reason == "error") throw ApiError(500, "server_error", "generation failed: " + c.error);
  return c.finish_reason == "length" ? "length" : "stop";
}

void chat(Service& service, const httplib::Request& req, httplib::Response& res) {
  OpenAIRequest r = read_openai_request(parse_body(req.body), true, service.defaults());
  auto prompt = service.chat_prompt(r.messages, r.options);
  respond_openai(res, r, service.start(std::move(prompt), r.options), service.model().id);
}

void completions(Service& service, const httplib::Request& req, httplib::Response& res) {
  const OpenAIRequest r = read_openai_request(parse_body(req.body), false, service.defaults());
  respond_openai(res, r, service.start(service.text_prompt(r.prompt), r.options), service.model().id);
}

void respond_chat(httplib::Response& res, const OpenAIRequest& r, std::shared_ptr<Stream> stream,
                  const std::string& model) {
  const std::string id = new_id("chatcmpl-");
  const int64_t created = unix_now();
  if (!r.stream) {
    const Completion& done = stream->wait_done();
    send_json(res, {{"id", id},
                    {"object", "chat.completion"},
                    {"created", created},
                    {"model", model},
                    {"choices", json::array({{{"index", 0},
                                              {"message", {{"role", "assistant"}, {"content", done.text}}},
                                              {"logprobs", nullptr},
                                              {"finish_reason", finish_reason(done)}}})},
                    {"usage", usage(done)}});
    return;
  }
  auto chunk = [=](json delta, json reason) {
    return json{{"id", id},
                {"object", "chat.completion.chunk"},
                {"created", created},
                {"model", model},
                {"choices", json::array({{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr},
                                          {"finish_reason", std::move(reason)}}})}};
  };
  const std::string first = sse(chunk({{"role", "assistant"}, {"content", ""}}, nullptr));
  auto sent_first = std::make_shared<bool>(false);
  auto lead = [=] {
    if (*sent_first) return std::string();
    *sent_first = true;
    return first;
  };
  const bool include_usage = r.include_usage;
  stream_to(
      res, stream, "text/event-stream",
      [=](const std::string& text) { return lead() + sse(chunk({{"content", text}}, nullptr)); },
      [=](const Completion& done) {
        std::string out = lead();
        if (done.finish_reason == "error") {
          out += sse(openai_error(ApiError(500, "server_error", "generation failed: " + done.error)));
        } else {
          out += sse(chunk(json::object(), finish_reason(done)));
          if (include_usage)
            out += sse({{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
                        {"choices", json::array()}, {"usage", usage(done)}});
        }
        return out + "data: [DONE]\n\n";
      },
      ": ping\n\n");
}

void respond_completion(httplib::Response& res, const OpenAIRequest& r, std::shared_ptr<Stream> stream,
                        const std::string& model) {
  const std::string id = new_id("cmpl-");
  const int64_t created = unix_now();
  auto choice = [=](const std::string& t, json reason) {
    return json{{"id", id},
                {"object", "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", json::array({{{"text", t}, {"index", 0}, {"logprobs", nullptr},
                                          {"finish_reason", std::move(reason)}}})}};
  };
  if (!r.stream) {
    const Completion& done = stream->wait_done();
    json out = choice(done.text, finish_reason(done));
    out["usage"] = usage(done);
    send_json(res, out);
    return;
  }
  const bool include_usage = r.include_usage;
  stream_to(
      res, stream, "text/event-stream", [=](const std::string& t) { return sse(choice(t, nullptr)); },
      [=](const Completion& done) {
        if (done.finish_reason == "error")
          return sse(openai_error(ApiError(500, "server_error", "generation failed: " + done.error))) +
                 "data: [DONE]\n\n";
        json last = choice("", finish_reason(done));
        if (include_usage) last["usage"] = usage(done);
        return sse(last) + "data: [DONE]\n\n";
      },
      ": ping\n\n");
}

json model_object(const Service& service) {
  return {{"id", service.model().id}, {"object", "model"}, {"created", service.model().created}, {"owned_by", "orchard"}};
}

}  // namespace

OpenAIRequest read_openai_request(const json& body, bool chat, const GenerateOptions& defaults) {
  OpenAIRequest r;
  r.chat = chat;
  if (chat && !body.contains("messages")) throw ApiError::bad_request("'messages' is required", "messages");
  r.options = defaults;
  read_generation_params(body, r.options);
  r.stream = read_bool(body, "stream", false);
  if (body.contains("n") && !body["n"].is_null() && body["n"] != 1)
    throw ApiError::bad_request("only n = 1 is supported (one choice per request)", "n");
  if (body.contains("stream_options") && body["stream_options"].is_object())
    r.include_usage = read_bool(body["stream_options"], "include_usage", false);
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) throw ApiError::bad_request("'model' must be a string", "model");
    r.model = body["model"].get<std::string>();
  }
  if (chat) {
    r.messages = read_messages(body["messages"]);
    return r;
  }
  if (!body.contains("prompt")) throw ApiError::bad_request("'prompt' is required", "prompt");
  if (body["prompt"].is_string())
    r.prompt = body["prompt"].get<std::string>();
  else if (body["prompt"].is_array() && body["prompt"].size() == 1 && body["prompt"][0].is_string())
    r.prompt = body["prompt"][0].get<std::string>();
  else
    throw ApiError::bad_request("'prompt' must be a string (one prompt per request)", "prompt");
  if (body.contains("echo") && read_bool(body, "echo", false))
    throw ApiError::bad_request("'echo' is not supported", "echo");
  return r;
}

void respond_openai(httplib::Response& res, const OpenAIRequest& r, std::shared_ptr<Stream> stream,
                    const std::string& model) {
  if (r.chat)
    respond_chat(res, r, std::move(stream), model);
  else
    respond_completion(res, r, std::move(stream), model);
}

void add_openai_routes(httplib::Server& http, Service& service) {
  http.Post("/v1/chat/completions",
            guarded(openai_error, [&](const auto& req, auto& res) { chat(service, req, res); }));
  http.Post("/v1/completions",
            guarded(openai_error, [&](const auto& req, auto& res) { completions(service, req, res); }));
  http.Get("/v1/models", guarded(openai_error, [&](const auto&, auto& res) {
             send_json(res, {{"object", "list"}, {"data", json::array({model_object(service)})}});
           }));
  http.Get(R"(/v1/models/(.+))", guarded(openai_error, [&](const httplib::Request& req, httplib::Response& res) {
             if (req.matches[1] != service.model().id)
               throw ApiError(404, "invalid_request_error", "the model '" + std::string(req.matches[1]) +
                                                                "' does not exist; this server has '" +
                                                                service.model().id + "'",
                              "model", "model_not_found");
             send_json(res, model_object(service));
           }));
}

}  // namespace orchard::serve
