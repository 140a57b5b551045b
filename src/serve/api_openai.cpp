// OpenAI's API: chat completions and completions, streamed as server-sent events ending in
// "data: [DONE]", usage counted in tokens, errors as {"error": {message, type, param, code}}.
#include "serve/api.h"
#include "serve/http_util.h"
#include "serve/openai.h"
#include "serve/request_params.h"
#include "serve/structured_output.h"
#include "serve/tool_request.h"

namespace orchard::serve {
namespace {

using nlohmann::json;

json usage(const Completion& c) {
  return {{"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", c.completion_tokens},
          {"total_tokens", c.prompt_tokens + c.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", c.cached_tokens}}}};
}

// n choices share one prompt: it counts once, the first choice's cache report with it.
json usage(const std::vector<std::shared_ptr<Stream>>& streams) {
  Completion sum = streams.front()->completion();
  for (size_t i = 1; i < streams.size(); ++i) sum.completion_tokens += streams[i]->completion().completion_tokens;
  return usage(sum);
}

json bytes_of(const std::string& piece) {
  json a = json::array();
  for (unsigned char c : piece) a.push_back(c);
  return a;
}

// Chat's logprobs: {"content": [{token, logprob, bytes, top_logprobs: [...]}]}.
json chat_logprobs(const std::vector<TokenLogprob>& v) {
  json content = json::array();
  for (const TokenLogprob& t : v) {
    json top = json::array();
    for (const auto& [piece, lp] : t.top) top.push_back({{"token", piece}, {"logprob", lp}, {"bytes", bytes_of(piece)}});
    content.push_back({{"token", t.piece}, {"logprob", t.logprob}, {"bytes", bytes_of(t.piece)}, {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

// Completions' (legacy) logprobs: parallel arrays, offsets into the choice's text from `offset`.
json completion_logprobs(const std::vector<TokenLogprob>& v, size_t offset) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& t : v) {
    tokens.push_back(t.piece);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const auto& [piece, lp] : t.top)
      if (!top.contains(piece)) top[piece] = lp;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += t.piece.size();
  }
  return {{"tokens", std::move(tokens)}, {"token_logprobs", std::move(lps)}, {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

// A call as OpenAI writes it: arguments as JSON text.
json openai_call(const ToolCall& c) {
  return {{"id", new_id("call_")},
          {"type", "function"},
          {"function", {{"name", c.name}, {"arguments", c.arguments.dump(-1, ' ', false, json::error_handler_t::replace)}}}};
}

// OpenAI knows "stop" and "length"; a generation that failed is reported as an error instead.
json finish_reason(const Completion& c) {
  if (c.finish_reason == "error") throw ApiError(500, "server_error", "generation failed: " + c.error);
  return c.finish_reason == "length" ? "length" : "stop";
}

// Starts r.n generations of one prompt, choice i with seed + i (greedy ones come out the same).
// The prompt cache computes a long prompt once: the later choices wait for the first's and copy it.
// If one cannot start (a full queue), those started are cancelled and the error goes back.
std::vector<std::shared_ptr<Stream>> start_choices(Service& service, const OpenAIRequest& r, const std::vector<TokenId>& prompt) {
  std::vector<std::shared_ptr<Stream>> streams;
  try {
    for (int i = 0; i < r.n; ++i) {
      GenerateOptions o = r.options;
      o.sampling.seed += static_cast<uint64_t>(i);
      streams.push_back(service.start(prompt, o));
    }
  } catch (...) {
    for (const auto& st : streams) st->cancel();
    throw;
  }
  return streams;
}

void openai_chat(Service& service, const httplib::Request& req, httplib::Response& res) {
  OpenAIRequest r = read_openai_request(parse_body(req.body), true, service.defaults());
  r.tool_format = service.tool_format();
  const auto prompt = service.chat_prompt(r.messages, r.options, r.tools);
  respond_openai(res, r, start_choices(service, r, prompt), service.model().id);
}

void completions(Service& service, const httplib::Request& req, httplib::Response& res) {
  const OpenAIRequest r = read_openai_request(parse_body(req.body), false, service.defaults());
  respond_openai(res, r, start_choices(service, r, service.text_prompt(r.prompt)), service.model().id);
}

void respond_chat(httplib::Response& res, const OpenAIRequest& r, std::vector<std::shared_ptr<Stream>> streams,
                  const std::string& model) {
  const bool asked = r.options.logprobs >= 0;
  const std::string id = new_id("chatcmpl-");
  const int64_t created = unix_now();
  if (!r.stream) {
    json choices = json::array();
    for (size_t i = 0; i < streams.size(); ++i) {
      const Completion& done = streams[i]->wait_done();
      json message = {{"role", "assistant"}, {"content", done.text}};
      json reason = finish_reason(done);
      if (r.tools.active()) {
        const ToolReply reply = parse_tool_calls(r.tool_format, done.text, r.tools.tools);
        if (!reply.calls.empty()) {
          message["content"] = reply.content.empty() ? json(nullptr) : json(reply.content);
          json calls = json::array();
          for (const ToolCall& c : reply.calls) calls.push_back(openai_call(c));
          message["tool_calls"] = std::move(calls);
          reason = "tool_calls";
        }
      }
      choices.push_back({{"index", i},
                         {"message", std::move(message)},
                         {"logprobs", asked ? chat_logprobs(done.logprobs) : json(nullptr)},
                         {"finish_reason", std::move(reason)}});
    }
    send_json(res, {{"id", id},
                    {"object", "chat.completion"},
                    {"created", created},
                    {"model", model},
                    {"choices", std::move(choices)},
                    {"usage", usage(streams)}});
    return;
  }
  // A chunk carries the log-probabilities of the tokens sampled since the previous one.
  auto chunk = [=](size_t i, json delta, json reason) {
    json lp = asked ? chat_logprobs(streams[i]->take_logprobs()) : json(nullptr);
    return json{{"id", id},
                {"object", "chat.completion.chunk"},
                {"created", created},
                {"model", model},
                {"choices", json::array({{{"index", i}, {"delta", std::move(delta)}, {"logprobs", std::move(lp)},
                                          {"finish_reason", std::move(reason)}}})}};
  };
  // Each choice opens with its role (once, before its first text or its end).
  auto opened = std::make_shared<std::vector<bool>>(streams.size(), false);
  auto lead = [=](size_t i) {
    if ((*opened)[i]) return std::string();
    (*opened)[i] = true;
    return sse(chunk(i, {{"role", "assistant"}, {"content", ""}}, nullptr));
  };
  const bool include_usage = r.include_usage;
  auto failed = std::make_shared<bool>(false);
  // With tools: text that may be a call is held back, and the calls go out at the end, each as
  // a delta with its id and name, then one with its arguments.
  auto tool_streams = std::make_shared<std::vector<std::unique_ptr<ToolStream>>>();
  if (r.tools.active())
    for (size_t i = 0; i < streams.size(); ++i)
      tool_streams->push_back(std::make_unique<ToolStream>(r.tool_format, r.tools.tools));
  stream_each(
      res, streams, "text/event-stream",
      [=](size_t i, const std::string& text) {
        const std::string out = tool_streams->empty() ? text : (*tool_streams)[i]->push(text);
        return out.empty() ? std::string() : lead(i) + sse(chunk(i, {{"content", out}}, nullptr));
      },
      [=](size_t i, const Completion& done) {
        std::string out = lead(i);
        if (done.finish_reason == "error") {
          *failed = true;
          return out + sse(openai_error(ApiError(500, "server_error", "generation failed: " + done.error)));
        }
        json reason = finish_reason(done);
        if (!tool_streams->empty()) {
          const ToolReply reply = (*tool_streams)[i]->finish();
          if (!reply.content.empty()) out += sse(chunk(i, {{"content", reply.content}}, nullptr));
          for (size_t k = 0; k < reply.calls.size(); ++k) {
            const json call = openai_call(reply.calls[k]);
            out += sse(chunk(i, {{"tool_calls", json::array({{{"index", k}, {"id", call["id"]}, {"type", "function"},
                                                              {"function", {{"name", call["function"]["name"]}, {"arguments", ""}}}}})}},
                             nullptr));
            out += sse(chunk(i, {{"tool_calls", json::array({{{"index", k}, {"function", {{"arguments", call["function"]["arguments"]}}}}})}},
                             nullptr));
          }
          if (!reply.calls.empty()) reason = "tool_calls";
        }
        return out + sse(chunk(i, json::object(), std::move(reason)));
      },
      [=] {
        std::string out;
        if (include_usage && !*failed)
          out += sse({{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
                      {"choices", json::array()}, {"usage", usage(streams)}});
        return out + "data: [DONE]\n\n";
      },
      ": ping\n\n");
}

void respond_completion(httplib::Response& res, const OpenAIRequest& r, std::vector<std::shared_ptr<Stream>> streams,
                        const std::string& model) {
  const bool asked = r.options.logprobs >= 0;
  const std::string id = new_id("cmpl-");
  const int64_t created = unix_now();
  auto choice = [=](size_t i, const std::string& t, json reason, json lp = nullptr) {
    return json{{"text", t}, {"index", i}, {"logprobs", std::move(lp)}, {"finish_reason", std::move(reason)}};
  };
  // Streamed: each chunk's tokens, offsets counted from the choice's start.
  auto sent = std::make_shared<std::vector<size_t>>(streams.size(), 0);
  auto next_logprobs = [=](size_t i) -> json {
    if (!asked) return nullptr;
    const auto v = streams[i]->take_logprobs();
    json lp = completion_logprobs(v, (*sent)[i]);
    for (const auto& t : v) (*sent)[i] += t.piece.size();
    return lp;
  };
  auto object = [=](json choices) {
    return json{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model}, {"choices", std::move(choices)}};
  };
  if (!r.stream) {
    json choices = json::array();
    for (size_t i = 0; i < streams.size(); ++i) {
      const Completion& done = streams[i]->wait_done();
      choices.push_back(choice(i, done.text, finish_reason(done), asked ? completion_logprobs(done.logprobs, 0) : json(nullptr)));
    }
    json out = object(std::move(choices));
    out["usage"] = usage(streams);
    send_json(res, out);
    return;
  }
  const bool include_usage = r.include_usage;
  auto failed = std::make_shared<bool>(false);
  stream_each(
      res, streams, "text/event-stream",
      [=](size_t i, const std::string& t) { return sse(object(json::array({choice(i, t, nullptr, next_logprobs(i))}))); },
      [=](size_t i, const Completion& done) {
        if (done.finish_reason == "error") {
          *failed = true;
          return sse(openai_error(ApiError(500, "server_error", "generation failed: " + done.error)));
        }
        json last = object(json::array({choice(i, "", finish_reason(done), next_logprobs(i))}));
        // (one choice: its usage rides on its last chunk, as before n existed)
        if (include_usage && streams.size() == 1) last["usage"] = usage(done);
        return sse(last);
      },
      [=] {
        std::string out;
        if (include_usage && streams.size() > 1 && !*failed) {
          json last = object(json::array());
          last["usage"] = usage(streams);
          out += sse(last);
        }
        return out + "data: [DONE]\n\n";
      },
      ": ping\n\n");
}

json model_object(const Service& service) {
  return {{"id", service.model().id}, {"object", "model"}, {"created", service.model().created}, {"owned_by", "orchard"}};
}

// Chat: "logprobs": true with "top_logprobs": 0..20; completions: "logprobs": 0..5 (the number
// of alternatives).
void read_logprobs(const json& body, bool chat, GenerateOptions& o) {
  const bool has = body.contains("logprobs") && !body["logprobs"].is_null();
  const bool has_top = body.contains("top_logprobs") && !body["top_logprobs"].is_null();
  if (chat) {
    const bool on = has && read_bool(body, "logprobs", false);
    if (has_top) {
      const json& k = body["top_logprobs"];
      if (!k.is_number_integer() || k.get<int64_t>() < 0 || k.get<int64_t>() > 20)
        throw ApiError::bad_request("'top_logprobs' must be an integer from 0 to 20 (got " + k.dump() + ")", "top_logprobs");
      if (!on) throw ApiError::bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
      o.logprobs = k.get<int32_t>();
    } else if (on) {
      o.logprobs = 0;
    }
    return;
  }
  if (!has) return;
  const json& k = body["logprobs"];
  if (!k.is_number_integer() || k.get<int64_t>() < 0 || k.get<int64_t>() > 5)
    throw ApiError::bad_request("'logprobs' must be an integer from 0 to 5 (got " + k.dump() + ")", "logprobs");
  o.logprobs = k.get<int32_t>();
}

}  // namespace

OpenAIRequest read_openai_request(const json& body, bool chat, const GenerateOptions& defaults) {
  OpenAIRequest r;
  r.chat = chat;
  if (chat && !body.contains("messages")) throw ApiError::bad_request("'messages' is required", "messages");
  r.options = defaults;
  read_generation_params(body, r.options);
  r.stream = read_bool(body, "stream", false);
  if (body.contains("n") && !body["n"].is_null()) {
    const json& n = body["n"];
    if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > kMaxChoices)
      throw ApiError::bad_request("'n' must be an integer from 1 to " + std::to_string(kMaxChoices) + " (got " + n.dump() + ")", "n");
    r.n = n.get<int>();
  }
  read_logprobs(body, chat, r.options);
  if (body.contains("response_format") && !body["response_format"].is_null())
    r.options.grammar = read_response_format(body["response_format"]);
  if (body.contains("stream_options") && body["stream_options"].is_object())
    r.include_usage = read_bool(body["stream_options"], "include_usage", false);
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) throw ApiError::bad_request("'model' must be a string", "model");
    r.model = body["model"].get<std::string>();
  }
  if (chat) {
    r.messages = read_messages(body["messages"]);
    r.tools = read_function_tools(body);
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

void respond_openai(httplib::Response& res, const OpenAIRequest& r, std::vector<std::shared_ptr<Stream>> streams,
                    const std::string& model) {
  if (streams.empty()) throw ApiError(500, "server_error", "no generation started");
  if (r.chat)
    respond_chat(res, r, std::move(streams), model);
  else
    respond_completion(res, r, std::move(streams), model);
}

void respond_openai(httplib::Response& res, const OpenAIRequest& r, std::shared_ptr<Stream> stream,
                    const std::string& model) {
  respond_openai(res, r, std::vector<std::shared_ptr<Stream>>{std::move(stream)}, model);
}

void add_openai_routes(httplib::Server& http, Service& service) {
  http.Post("/v1/chat/completions",
            guarded(openai_error, [&](const auto& req, auto& res) { openai_chat(service, req, res); }));
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
