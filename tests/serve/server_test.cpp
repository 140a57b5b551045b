// The HTTP server end to end, in process: every API's shape, streaming, errors with the right
// status codes, a full queue, and a client that hangs up mid-stream freeing its slot.
#include <gtest/gtest.h>

#include <cmath>
#include <sys/resource.h>
#include <unistd.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "model/synthetic/synthetic.h"
#include "serve/server.h"
#include "sse.h"

namespace orchard::serve {
namespace {

using nlohmann::json;

std::string tiny_model() {
  const auto path = std::filesystem::path(::testing::TempDir()) / "server-tiny.gguf";
  if (!std::filesystem::exists(path)) write_synthetic_model(model_shape("tiny"), DType::Q8_0, 3, path.string());
  return path.string();
}

// A whole server on a free port, torn down with the test.
struct Running {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<LocalExecutor> exec;
  Metrics metrics;
  std::unique_ptr<Scheduler> sched;
  std::unique_ptr<Service> service;
  std::unique_ptr<Server> server;
  std::thread thread;
  int port = 0;

  explicit Running(int slots = 2, int max_queue = 4, int64_t ctx = 256, size_t max_body = 1 << 20) {
    EngineOptions eo;
    eo.model_path = tiny_model();
    eo.threads = 2;
    eo.n_ctx = ctx;
    engine = Engine::load(eo);
    exec = std::make_unique<LocalExecutor>(*engine, slots);
    SchedulerOptions so;
    so.max_queue = max_queue;
    sched = std::make_unique<Scheduler>(*exec, engine->tokenizer(), metrics, so);
    ModelInfo m;
    m.id = "tiny";
    m.n_ctx = ctx;
    GenerateOptions defaults;
    defaults.max_tokens = 16;
    service = std::make_unique<Service>(*sched, engine->tokenizer(),
                                        ChatTemplate::from_gguf(engine->file(), engine->tokenizer()), metrics, m,
                                        ClusterView{}, defaults);
    ServerOptions o;
    o.port = 0;
    o.max_body_bytes = max_body;
    server = std::make_unique<Server>(*service, o);
    port = server->bind();
    thread = std::thread([this] { server->run(); });
  }
  ~Running() {
    server->stop();
    thread.join();
    sched->stop();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    return c;
  }
  json post(const std::string& path, const std::string& body, int expect) const {
    auto res = client().Post(path, body, "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return {};
    EXPECT_EQ(res->status, expect) << path << " " << body << " → " << res->body;
    return json::parse(res->body, nullptr, false);
  }
  json get(const std::string& path) const {
    auto res = client().Get(path);
    EXPECT_TRUE(res && res->status == 200) << path;
    return res ? json::parse(res->body, nullptr, false) : json();
  }
};

json chat_body(const std::string& content, int max_tokens, bool stream = false) {
  return {{"model", "tiny"},
          {"messages", json::array({{{"role", "user"}, {"content", content}}})},
          {"temperature", 0},
          {"max_tokens", max_tokens},
          {"stream", stream}};
}

using test::sse_data;

// Beyond loopback a server needs a key, unless told that none is meant (--insecure).
TEST(Server, ListensBeyondLoopbackOnlyWithAKeyOrWhenToldInsecure) {
  Running r;  // for its service
  ASSERT_TRUE(r.client().Get("/health"));  // running: stopping a server before it listens would hang ~Running
  for (const char* host : {"127.0.0.1", "127.0.0.2", "localhost", "::1"}) EXPECT_TRUE(is_loopback_host(host)) << host;
  for (const char* host : {"0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "example.org"}) EXPECT_FALSE(is_loopback_host(host)) << host;
  ServerOptions open;
  open.host = "0.0.0.0";
  open.port = 0;
  try {
    Server(*r.service, open).bind();
    FAIL() << "listened on every interface without a key";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--api-key"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--insecure"), std::string::npos) << e.what();
  }
  ServerOptions keyed = open;
  keyed.api_key = "sekret";
  {
    // Its key, as Bearer or x-api-key, and nothing else opens the routes (/health stays open).
    Server server(*r.service, keyed);
    const int port = server.bind();
    ASSERT_GT(port, 0);
    std::thread running([&] { server.run(); });
    httplib::Client c("127.0.0.1", port);
    for (int i = 0; i < 500 && !c.Get("/health"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto status = [&](httplib::Headers h) {
      auto res = c.Get("/v1/models", h);
      return res ? res->status : 0;
    };
    EXPECT_EQ(status({{"Authorization", "Bearer sekret"}}), 200);
    EXPECT_EQ(status({{"x-api-key", "sekret"}}), 200);
    EXPECT_EQ(status({{"Authorization", "Bearer sekre"}}), 401);
    EXPECT_EQ(status({{"Authorization", "Bearer sekret2"}}), 401);
    EXPECT_EQ(status({{"Authorization", "sekret"}}), 401);
    EXPECT_EQ(status({}), 401);
    server.stop();
    running.join();
  }
  ServerOptions insecure = open;
  insecure.insecure = true;
  EXPECT_GT(Server(*r.service, insecure).bind(), 0);
}

TEST(Server, CompletionsEqualTheEngineAndStreamTheSameText) {
  Running s;
  GenerateOptions g;
  g.max_tokens = 12;
  g.sampling = SamplerOptions::greedy();
  const auto ref = s.engine->generate("once upon a time", g);
  json r = s.post("/v1/completions", json{{"prompt", "once upon a time"}, {"temperature", 0}, {"max_tokens", 12}}.dump(), 200);
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], ref.text);
  EXPECT_EQ(r["choices"][0]["finish_reason"], ref.finish_reason == "length" ? "length" : "stop");
  EXPECT_EQ(r["usage"]["prompt_tokens"], ref.prompt_tokens.size());
  EXPECT_EQ(r["usage"]["completion_tokens"], ref.tokens.size());

  auto res = s.client().Post("/v1/completions",
                             json{{"prompt", "once upon a time"}, {"temperature", 0}, {"max_tokens", 12}, {"stream", true}}.dump(),
                             "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  auto lines = sse_data(res->body);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < lines.size(); ++i) text += json::parse(lines[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, ref.text);
}

TEST(Server, ChatStreamsWhatItAnswersWhole) {
  Running s;
  json whole = s.post("/v1/chat/completions", chat_body("tell me a story", 14).dump(), 200);
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["model"], "tiny");
  EXPECT_EQ(whole["choices"][0]["message"]["role"], "assistant");
  const std::string content = whole["choices"][0]["message"]["content"];
  EXPECT_EQ(whole["usage"]["total_tokens"].get<int>(),
            whole["usage"]["prompt_tokens"].get<int>() + whole["usage"]["completion_tokens"].get<int>());

  json body = chat_body("tell me a story", 14, true);
  body["stream_options"] = {{"include_usage", true}};
  auto res = s.client().Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  auto lines = sse_data(res->body);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines.back(), "[DONE]");
  json first = json::parse(lines[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string streamed;
  json finish, usage;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    json c = json::parse(lines[i]);
    if (c.contains("usage")) usage = c["usage"];
    if (c["choices"].empty()) continue;
    if (c["choices"][0]["delta"].contains("content")) streamed += c["choices"][0]["delta"]["content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(streamed, content);
  EXPECT_EQ(finish, whole["choices"][0]["finish_reason"]);
  // The same request again: all of its prompt but the last token comes from the prompt cache.
  EXPECT_EQ(whole["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], usage["prompt_tokens"].get<int>() - 1);
  usage.erase("prompt_tokens_details");
  whole["usage"].erase("prompt_tokens_details");
  EXPECT_EQ(usage, whole["usage"]);
}

// logit_bias over the API: +100 forces a token, −100 on every token spelling the greedy answer's
// first piece makes it start otherwise; the penalties are taken (the same answer each time).
TEST(Server, LogitBiasAndPenaltiesReachTheSampler) {
  Running s(1, 4, 64, 4096);
  const Tokenizer& tok = s.engine->tokenizer();
  const TokenId forced = tok.encode("zebra", false, false).front();
  json one = json{{"prompt", "once upon a time"}, {"max_tokens", 1}, {"temperature", 0}, {"ignore_eos", true}};
  one["logit_bias"] = {{std::to_string(forced), 100}};
  EXPECT_EQ(s.post("/v1/completions", one.dump(), 200)["choices"][0]["text"], tok.token_to_piece(forced));

  one.erase("logit_bias");
  const std::string first = s.post("/v1/completions", one.dump(), 200)["choices"][0]["text"];
  ASSERT_FALSE(first.empty());
  json bans = json::object();
  for (TokenId id = 0; id < tok.vocab_size() && bans.size() < 1024; ++id)
    if (tok.token_to_piece(id) == first) bans[std::to_string(id)] = -100;
  ASSERT_FALSE(bans.empty());
  one["logit_bias"] = bans;
  EXPECT_NE(s.post("/v1/completions", one.dump(), 200)["choices"][0]["text"], first);

  json b = chat_body("tell me a story", 8);
  b["frequency_penalty"] = 1.5;
  b["presence_penalty"] = 1.0;
  const json penalised = s.post("/v1/chat/completions", b.dump(), 200);
  EXPECT_EQ(s.post("/v1/chat/completions", b.dump(), 200)["choices"][0]["message"]["content"],
            penalised["choices"][0]["message"]["content"]);
}

// n choices are n generations of one prompt, choice i with seed + i: each equals the request
// with that seed alone, whole or streamed, and the prompt counts once in the usage.
TEST(Server, NChoicesAreTheGenerationsOfSeedsSeedPlusI) {
  Running s(4, 8, 64, 4096);
  json b = chat_body("tell me a story", 10);
  b["temperature"] = 1.0;
  b["top_k"] = 0;
  b["min_p"] = 0;
  b["seed"] = 1234;
  std::vector<std::string> alone;
  int64_t completion = 0;
  for (int i = 0; i < 3; ++i) {
    json one = b;
    one["seed"] = 1234 + i;
    const json r = s.post("/v1/chat/completions", one.dump(), 200);
    alone.push_back(r["choices"][0]["message"]["content"]);
    completion += r["usage"]["completion_tokens"].get<int64_t>();
  }
  EXPECT_TRUE(alone[0] != alone[1] || alone[1] != alone[2]) << "three seeds gave one text";
  b["n"] = 3;
  const json whole = s.post("/v1/chat/completions", b.dump(), 200);
  ASSERT_EQ(whole["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(whole["choices"][i]["index"], i);
    EXPECT_EQ(whole["choices"][i]["message"]["content"], alone[static_cast<size_t>(i)]) << "choice " << i;
  }
  EXPECT_EQ(whole["usage"]["completion_tokens"], completion);
  b["stream"] = true;
  b["stream_options"] = {{"include_usage", true}};
  auto res = s.client().Post("/v1/chat/completions", b.dump(), "application/json");
  ASSERT_TRUE(res);
  std::vector<std::string> streamed(3);
  json usage;
  for (const auto& line : sse_data(res->body)) {
    if (line == "[DONE]") continue;
    const json c = json::parse(line);
    if (c.contains("usage")) usage = c["usage"];
    for (const auto& ch : c["choices"])
      if (ch["delta"].contains("content")) streamed[ch["index"].get<size_t>()] += ch["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(streamed, alone);
  EXPECT_EQ(usage["prompt_tokens"], whole["usage"]["prompt_tokens"]);
  EXPECT_EQ(usage["completion_tokens"], completion);
  // Completions too.
  json c = {{"prompt", "once upon a time"}, {"max_tokens", 6}, {"temperature", 1.0}, {"seed", 7}, {"n", 2}};
  const json two = s.post("/v1/completions", c.dump(), 200);
  ASSERT_EQ(two["choices"].size(), 2u);
  c["n"] = 1;
  c["seed"] = 8;
  EXPECT_EQ(two["choices"][1]["text"], s.post("/v1/completions", c.dump(), 200)["choices"][0]["text"]);
}

// logprobs: one entry per generated token, the greedy choice first among its alternatives with
// the same log-probability, alternatives in order, the same figures whole and streamed; the
// completions dialect's parallel arrays spell out the text.
TEST(Server, LogprobsDescribeEveryGeneratedToken) {
  Running s(2, 4, 64, 4096);
  json b = chat_body("tell me a story", 8);
  b["logprobs"] = true;
  b["top_logprobs"] = 3;
  b["ignore_eos"] = true;
  const json whole = s.post("/v1/chat/completions", b.dump(), 200);
  const json& content = whole["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), whole["usage"]["completion_tokens"].get<size_t>());
  std::string joined;
  for (const auto& t : content) {
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    ASSERT_EQ(t["top_logprobs"].size(), 3u);
    EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]) << "greedy picks the most likely token";
    EXPECT_DOUBLE_EQ(t["top_logprobs"][0]["logprob"].get<double>(), t["logprob"].get<double>());
    double total = 0;
    for (size_t k = 0; k < 3; ++k) {
      total += std::exp(t["top_logprobs"][k]["logprob"].get<double>());
      if (k > 0) {
        EXPECT_LE(t["top_logprobs"][k]["logprob"].get<double>(), t["top_logprobs"][k - 1]["logprob"].get<double>());
      }
    }
    EXPECT_LE(total, 1.0 + 1e-5);
    for (const auto& byte : t["bytes"]) joined += static_cast<char>(byte.get<int>());
  }
  EXPECT_EQ(joined, whole["choices"][0]["message"]["content"].get<std::string>());
  // The first token's figure against the engine's own logits for the same prompt, computed here.
  {
    GenerateOptions o;
    const auto prompt = s.service->chat_prompt({{"user", "tell me a story"}}, o);
    auto kv = s.engine->new_cache();
    std::vector<float> logits;
    s.engine->model().forward(prompt, *kv, logits, false);
    const int64_t nv = static_cast<int64_t>(logits.size());
    const float mx = *std::max_element(logits.begin(), logits.end());
    double z = 0;
    for (float l : logits) z += std::exp(static_cast<double>(l - mx));
    const auto best = std::max_element(logits.begin(), logits.begin() + nv) - logits.begin();
    EXPECT_NEAR(content[0]["logprob"].get<double>(), logits[static_cast<size_t>(best)] - mx - std::log(z), 1e-4);
    EXPECT_EQ(content[0]["token"], s.engine->tokenizer().token_to_piece(static_cast<TokenId>(best)));
  }

  b["stream"] = true;
  auto res = s.client().Post("/v1/chat/completions", b.dump(), "application/json");
  ASSERT_TRUE(res);
  json streamed = json::array();
  for (const auto& line : sse_data(res->body)) {
    if (line == "[DONE]") continue;
    const json c = json::parse(line);
    for (const auto& ch : c["choices"])
      if (ch["logprobs"].is_object())
        for (const auto& t : ch["logprobs"]["content"]) streamed.push_back(t);
  }
  EXPECT_EQ(streamed, content);

  json c = {{"prompt", "once upon a time"}, {"max_tokens", 6}, {"temperature", 0}, {"logprobs", 2}, {"ignore_eos", true}};
  const json legacy = s.post("/v1/completions", c.dump(), 200);
  const json& lp = legacy["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 6u);
  std::string text;
  for (size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(lp["text_offset"][k].get<size_t>(), text.size());
    text += lp["tokens"][k].get<std::string>();
    EXPECT_LE(lp["top_logprobs"][k].size(), 2u);
  }
  EXPECT_EQ(text, legacy["choices"][0]["text"].get<std::string>());
  // Not asked: null, as OpenAI sends.
  EXPECT_TRUE(s.post("/v1/completions", json{{"prompt", "a"}, {"max_tokens", 2}}.dump(), 200)["choices"][0]["logprobs"].is_null());
}

// JSON mode: whatever the (random-weight) model would say, every reply is one JSON object that
// a parser accepts, closed in time when the token budget is short.
TEST(Server, JsonModeRepliesAreAlwaysOneJsonObject) {
  Running s(2, 8, 64, 4096);
  int whole = 0;
  for (int i = 0; i < 24; ++i) {
    json b = chat_body("give me some json", 6 + 3 * i);
    b["temperature"] = i % 3 == 0 ? 0.0 : 1.0;
    b["seed"] = 100 + i;
    b["response_format"] = {{"type", "json_object"}};
    const json r = s.post("/v1/chat/completions", b.dump(), 200);
    const std::string text = r["choices"][0]["message"]["content"];
    const json parsed = json::parse(text, nullptr, false);
    EXPECT_TRUE(!parsed.is_discarded() && parsed.is_object()) << "reply " << i << ": " << text;
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << text;
    whole += !parsed.is_discarded();
  }
  EXPECT_EQ(whole, 24);
  // Ollama's format "json", streamed.
  json o = {{"model", "tiny"}, {"prompt", "json please"}, {"format", "json"}, {"stream", false},
            {"options", {{"num_predict", 20}, {"temperature", 0.8}, {"seed", 3}}}};
  const json g = s.post("/api/generate", o.dump(), 200);
  const json parsed = json::parse(g["response"].get<std::string>(), nullptr, false);
  EXPECT_TRUE(!parsed.is_discarded() && parsed.is_object()) << g["response"];
}

// JSON schema: every reply parses and keeps the schema's types, ranges, lengths and required
// properties, on both APIs, closed in time when the budget is short.
TEST(Server, JsonSchemaRepliesFollowTheSchema) {
  Running s(2, 8, 128, 4096);
  const json schema = {
      {"type", "object"},
      {"properties",
       {{"city", {{"type", "string"}, {"minLength", 1}, {"maxLength", 12}}},
        {"temp", {{"type", "integer"}, {"minimum", -40}, {"maximum", 50}}},
        {"sky", {{"enum", {"clear", "cloudy", "rain"}}}},
        {"hours", {{"type", "array"}, {"items", {{"type", "number"}}}, {"maxItems", 3}}}}},
      {"required", {"city", "temp", "sky"}},
      {"additionalProperties", false},
  };
  auto check_reply = [&](const std::string& text, const std::string& what) {
    const json v = json::parse(text, nullptr, false);
    ASSERT_TRUE(!v.is_discarded() && v.is_object()) << what << ": " << text;
    for (const auto& [key, _] : v.items()) EXPECT_TRUE(schema["properties"].contains(key)) << text;
    ASSERT_TRUE(v.contains("city") && v["city"].is_string()) << text;
    EXPECT_FALSE(v["city"].get<std::string>().empty()) << text;
    ASSERT_TRUE(v.contains("temp") && v["temp"].is_number_integer()) << text;
    EXPECT_TRUE(v["temp"].get<int>() >= -40 && v["temp"].get<int>() <= 50) << text;
    ASSERT_TRUE(v.contains("sky")) << text;
    EXPECT_TRUE(v["sky"] == "clear" || v["sky"] == "cloudy" || v["sky"] == "rain") << text;
    if (v.contains("hours")) {
      EXPECT_TRUE(v["hours"].is_array() && v["hours"].size() <= 3) << text;
    }
  };
  for (int i = 0; i < 12; ++i) {
    json b = chat_body("weather as json", 40 + 10 * i);
    b["temperature"] = i % 3 == 0 ? 0.0 : 1.0;
    b["seed"] = 200 + i;
    b["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "weather"}, {"strict", true}, {"schema", schema}}}};
    const json r = s.post("/v1/chat/completions", b.dump(), 200);
    check_reply(r["choices"][0]["message"]["content"], "reply " + std::to_string(i));
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  }
  json o = {{"model", "tiny"}, {"prompt", "weather"}, {"format", schema}, {"stream", false},
            {"options", {{"num_predict", 60}, {"temperature", 0.9}, {"seed", 4}}}};
  check_reply(s.post("/api/generate", o.dump(), 200)["response"], "ollama");
}

TEST(Server, BadRequestsGetTheRightErrors) {
  Running s(1, 4, 64, 4096);
  auto check = [&](const std::string& path, const std::string& body, int status, const std::string& needle,
                   const std::string& param = {}) {
    json e = s.post(path, body, status);
    ASSERT_TRUE(e.contains("error")) << body;
    const std::string msg = e["error"]["message"];
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    if (!param.empty()) {
      EXPECT_EQ(e["error"]["param"], param);
    }
  };
  check("/v1/chat/completions", "{\"messages\": [", 400, "not valid JSON");
  check("/v1/chat/completions", "[1,2]", 400, "JSON object");
  check("/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 77777785656e7777}", 400, "not valid JSON");  // found by request_fuzz
  check("/v1/chat/completions", "{}", 400, "'messages' is required", "messages");
  check("/v1/chat/completions", "{\"messages\": " + std::string(300, '[') + std::string(300, ']') + "}", 400,
        "nests deeper than 128 levels");
  json b = chat_body("hi", 4);
  b["temperature"] = "hot";
  check("/v1/chat/completions", b.dump(), 400, "'temperature' must be a number", "temperature");
  b = chat_body("hi", 0);
  check("/v1/chat/completions", b.dump(), 400, "'max_tokens' must be between", "max_tokens");
  b = chat_body("hi", 4);
  b["top_p"] = 3;
  check("/v1/chat/completions", b.dump(), 400, "'top_p'", "top_p");
  b = chat_body("hi", 4);
  b["messages"][0]["role"] = "wizard";
  check("/v1/chat/completions", b.dump(), 400, "role", "messages[0].role");
  b = chat_body("hi", 4);
  b["top_logprobs"] = 2;
  check("/v1/chat/completions", b.dump(), 400, "needs 'logprobs': true", "top_logprobs");
  b["logprobs"] = true;
  b["top_logprobs"] = 21;
  check("/v1/chat/completions", b.dump(), 400, "from 0 to 20", "top_logprobs");
  check("/v1/completions", json{{"prompt", "x"}, {"logprobs", 6}}.dump(), 400, "from 0 to 5", "logprobs");
  b = chat_body("hi", 4);
  b["response_format"] = {{"type", "yaml"}};
  check("/v1/chat/completions", b.dump(), 400, "'response_format' must be", "response_format");
  b["response_format"] = {{"type", "json_schema"}};
  check("/v1/chat/completions", b.dump(), 400, "must be an object with a 'schema'", "response_format.json_schema");
  b["response_format"]["json_schema"] = {{"name", "x"}, {"schema", {{"type", "string"}, {"pattern", "^a+$"}}}};
  check("/v1/chat/completions", b.dump(), 400, "'pattern' is not supported", "response_format.json_schema.schema");
  b["response_format"]["json_schema"]["schema"] = {{"type", "object"}, {"properties", {{"n", {{"type", "lots"}}}}}};
  check("/v1/chat/completions", b.dump(), 400, "at /properties/n/type: unknown type 'lots'", "response_format.json_schema.schema");
  b["response_format"]["json_schema"]["schema"] = {{"type", "string"}, {"maxLength", 5000000}};
  check("/v1/chat/completions", b.dump(), 400, "too large", "response_format.json_schema.schema");
  // Ollama's errors are {"error": "…"}.
  auto check_ollama = [&](const json& body, const std::string& needle) {
    const json e = s.post("/api/generate", body.dump(), 400);
    EXPECT_NE(e.value("error", "").find(needle), std::string::npos) << e.dump();
  };
  check_ollama({{"model", "tiny"}, {"prompt", "x"}, {"format", 7}}, "'format' must be");
  check_ollama({{"model", "tiny"}, {"prompt", "x"}, {"format", {{"type", "integer"}, {"minimum", 3}, {"maximum", 1}}}},
               "no integer lies between 3 and 1");
  b = chat_body("hi", 4);
  b["n"] = 0;
  check("/v1/chat/completions", b.dump(), 400, "'n' must be an integer from 1 to 16", "n");
  b["n"] = 17;
  check("/v1/chat/completions", b.dump(), 400, "'n' must be an integer from 1 to 16", "n");
  check("/v1/completions", json{{"prompt", 5}}.dump(), 400, "'prompt' must be a string", "prompt");
  b = chat_body("hi", 4);
  b["frequency_penalty"] = 3;
  check("/v1/chat/completions", b.dump(), 400, "'frequency_penalty' must be between -2.0 and 2.0", "frequency_penalty");
  b = chat_body("hi", 4);
  b["logit_bias"] = {{"abc", 1}};
  check("/v1/chat/completions", b.dump(), 400, "keys must be token ids", "logit_bias");
  b = chat_body("hi", 4);
  b["logit_bias"] = {{"5", 200}};
  check("/v1/chat/completions", b.dump(), 400, "from -100 to 100", "logit_bias");
  b = chat_body("hi", 4);
  b["logit_bias"] = {{"99999999", 1}};
  check("/v1/chat/completions", b.dump(), 400, "beyond the model's vocabulary", "logit_bias");
  // A prompt longer than a slot: 400 with OpenAI's code for it.
  std::string long_prompt;
  for (int i = 0; i < 80; ++i) long_prompt += "word ";
  json e = s.post("/v1/completions", json{{"prompt", long_prompt}}.dump(), 400);
  EXPECT_EQ(e["error"]["code"], "context_length_exceeded");
  // A body over the server's limit.
  auto res = s.client().Post("/v1/completions", json{{"prompt", std::string(8000, 'a')}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  // Unknown routes and models.
  res = s.client().Get("/v1/nothing");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_TRUE(json::parse(res->body, nullptr, false).contains("error"));
  res = s.client().Get("/v1/models/other");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  // Still serving after all that, with nothing left running.
  json h = s.get("/health");
  EXPECT_EQ(h["status"], "ok");
  EXPECT_EQ(h["active"], 0);
  EXPECT_EQ(h["waiting"], 0);
  s.post("/v1/chat/completions", chat_body("hi", 4).dump(), 200);
}

// Waits until /health shows nothing running or waiting (or gives up after ~10 s).
bool drains(const Running& s) {
  for (int i = 0; i < 200; ++i) {
    json h = s.get("/health");
    if (h["active"] == 0 && h["waiting"] == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(Server, FullQueueGets429AndHangingUpFreesTheSlot) {
  // The model's whole context (2048), so the endless stream outlasts the test on a fast host: at
  // 256 it ran out of context in a fraction of a second once, freeing the slot before the
  // request meant to wait for it arrived (that one then ran at once, and the next got 200).
  Running s(1, 1, 2048);
  json endless = {{"prompt", "hello"}, {"max_tokens", 1000000}, {"ignore_eos", true}, {"stream", true}};
  // A client that reads a few pieces of an endless stream, then hangs up.
  std::atomic<int> pieces{0};
  std::atomic<bool> hang_up{false};
  std::thread reader([&] {
    httplib::Client c("127.0.0.1", s.port);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = endless.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      ++pieces;
      return !hang_up.load();
    };
    c.send(req);
  });
  while (pieces < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // The slot is busy: one more request waits in the queue, the next is refused.
  std::thread waiter([&] { s.post("/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 3}}.dump(), 200); });
  bool queued = false;
  for (int i = 0; i < 200 && !(queued = s.get("/health")["waiting"] == 1); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(queued) << "the second request never waited for the busy slot";
  auto res = s.client().Post("/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 3}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429);
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(res->body)["error"]["code"], "queue_full");
  hang_up = true;
  reader.join();
  waiter.join();  // it got the slot the hung-up stream gave back
  EXPECT_TRUE(drains(s)) << "a slot leaked";
  const std::string metrics = s.client().Get("/metrics")->body;
  EXPECT_NE(metrics.find("orchard_rejected_total{reason=\"queue_full\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("orchard_requests_total{endpoint=\"/v1/completions\",code=\"429\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("orchard_time_to_first_token_seconds_count"), std::string::npos);
}

// /metrics reports the CPU package's energy since the server started and per generated token,
// from the platform's counter: here a file in RAPL's layout the test sets; without a counter,
// a comment saying why.
TEST(Server, MetricsReportJoulesPerGeneratedTokenOrWhyNot) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "server-powercap";
  std::filesystem::create_directories(dir);
  const auto counter = dir / "energy_uj";
  std::ofstream(counter) << 1000000 << "\n";
  setenv("ORCHARD_ENERGY_FILE", counter.c_str(), 1);
  {
    Running s;
    s.post("/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 8}, {"ignore_eos", true}}.dump(), 200);
    std::ofstream(counter) << 3000000 << "\n";  // 2 J since the server started
    const std::string m = s.client().Get("/metrics")->body;
    auto value = [&](const std::string& name) {
      const size_t at = m.find("\n" + name + " ");
      return at == std::string::npos ? -1.0 : std::stod(m.substr(at + name.size() + 2));
    };
    EXPECT_DOUBLE_EQ(value("orchard_generated_tokens_total"), 8.0) << m;
    EXPECT_DOUBLE_EQ(value("orchard_energy_joules_total"), 2.0) << m;
    EXPECT_DOUBLE_EQ(value("orchard_energy_joules_per_generated_token"), 0.25) << m;
  }
  setenv("ORCHARD_ENERGY_FILE", "/nonexistent/energy_uj", 1);
  {
    Running s;
    const std::string m = s.client().Get("/metrics")->body;
    EXPECT_EQ(m.find("orchard_energy_joules"), std::string::npos) << m;
    EXPECT_NE(m.find("# orchard_energy: unavailable: /nonexistent/energy_uj cannot be read"), std::string::npos) << m;
  }
  unsetenv("ORCHARD_ENERGY_FILE");
  std::filesystem::remove_all(dir);
}

// The load the benchmark measures (`orchard bench serve`), checked for correctness only: 16
// streaming clients at once on 16 slots each get exactly what they get alone.
TEST(Server, SixteenConcurrentStreamsEachGetTheirOwnAnswer) {
  Running s(16, 16);
  auto body = [](int i, bool stream) {
    return json{{"prompt", "story " + std::to_string(i)}, {"max_tokens", 20}, {"temperature", 0},
                {"ignore_eos", true}, {"stream", stream}};
  };
  std::vector<std::string> alone(16), together(16);
  for (int i = 0; i < 16; ++i) alone[i] = s.post("/v1/completions", body(i, false).dump(), 200)["choices"][0]["text"];
  std::vector<std::thread> clients;
  for (int i = 0; i < 16; ++i)
    clients.emplace_back([&, i] {
      auto res = s.client().Post("/v1/completions", body(i, true).dump(), "application/json");
      if (!res || res->status != 200) return;
      auto lines = sse_data(res->body);
      for (size_t k = 0; k + 1 < lines.size(); ++k)
        together[i] += json::parse(lines[k])["choices"][0]["text"].get<std::string>();
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(together[i], alone[i]) << "client " << i;
  EXPECT_TRUE(drains(s));
}

TEST(Server, OllamaAndAnthropicAdaptersShapeTheSameAnswer) {
  Running s;
  json openai = s.post("/v1/chat/completions", chat_body("a dog", 10).dump(), 200);
  const std::string want = openai["choices"][0]["message"]["content"];

  json o = s.post("/api/chat",
                  json{{"model", "tiny"}, {"messages", chat_body("a dog", 10)["messages"]}, {"stream", false},
                       {"options", {{"temperature", 0}, {"num_predict", 10}}}}
                      .dump(),
                  200);
  EXPECT_EQ(o["message"]["content"], want);
  EXPECT_EQ(o["done"], true);
  EXPECT_EQ(o["eval_count"], openai["usage"]["completion_tokens"]);

  auto res = s.client().Post("/api/chat",
                             json{{"model", "tiny"}, {"messages", chat_body("a dog", 10)["messages"]},
                                  {"options", {{"temperature", 0}, {"num_predict", 10}}}}
                                 .dump(),
                             "application/json");
  ASSERT_TRUE(res);
  std::string streamed;
  json last;
  std::istringstream lines(res->body);
  for (std::string line; std::getline(lines, line);) {
    last = json::parse(line);
    streamed += last["message"]["content"].get<std::string>();
  }
  EXPECT_EQ(last["done"], true);
  EXPECT_EQ(streamed, want);

  json a = s.post("/v1/messages",
                  json{{"model", "tiny"}, {"max_tokens", 10}, {"temperature", 0},
                       {"messages", json::array({{{"role", "user"}, {"content", "a dog"}}})}}
                      .dump(),
                  200);
  EXPECT_EQ(a["type"], "message");
  EXPECT_EQ(a["content"][0]["text"], want);
  EXPECT_EQ(a["usage"]["output_tokens"], openai["usage"]["completion_tokens"]);
  json bad = s.post("/v1/messages", json{{"messages", json::array()}}.dump(), 400);
  EXPECT_EQ(bad["type"], "error");
  EXPECT_EQ(bad["error"]["type"], "invalid_request_error");

  json tags = s.get("/api/tags");
  EXPECT_EQ(tags["models"][0]["name"], "tiny");
  json models = s.get("/v1/models");
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  json cluster = s.get("/api/cluster");
  EXPECT_EQ(cluster["slots"], 2);
  auto page = s.client().Get("/");
  ASSERT_TRUE(page);
  EXPECT_NE(page->body.find("<html"), std::string::npos);
}

}  // namespace
}  // namespace orchard::serve

namespace orchard::serve {
namespace {

// Connection threads step below the engine's priority, once, and only the thread that asks.
TEST(Server, IoThreadsYieldToTheEngine) {
  const int before = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  int in_thread = 0, again = 0;
  std::thread t([&] {
    lower_this_thread();
    in_thread = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
    lower_this_thread();
    again = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  });
  t.join();
  EXPECT_EQ(in_thread, std::min(19, before + 10));
  EXPECT_EQ(again, in_thread);
  EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())), before);
}

}  // namespace
}  // namespace orchard::serve
