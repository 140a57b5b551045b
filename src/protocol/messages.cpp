#include "protocol/messages.h"

#include "model/json_number.h"
#include "protocol/json_field.h"
#include "tensor/error.h"

namespace orchard::protocol {

using nlohmann::json;

namespace {

}  // namespace

std::string job_path(const std::string& job_id, const std::string& action) {
  return "/v1/node/jobs/" + job_id + "/" + action;
}

json to_json(const OutputChunk& c) { return {{"index", c.index}, {"text", c.text}, {"tokens", c.tokens}}; }

OutputChunk chunk_from_json(const json& j) {
  OutputChunk c;
  c.index = required_field<int64_t>(j, "output chunk", "index");
  c.text = required_field<std::string>(j, "output chunk", "text");
  c.tokens = j.contains("tokens") ? required_field<std::vector<int32_t>>(j, "output chunk", "tokens") : std::vector<int32_t>{};
  return c;
}

json to_json(const Work& w) {
  json output = json::array();
  for (size_t i = 0; i < w.output.size(); ++i)
    output.push_back(to_json(OutputChunk{static_cast<int64_t>(i), w.output[i],
                                         i < w.output_tokens.size() ? w.output_tokens[i] : std::vector<int32_t>{}}));
  return {{"job_id", w.job_id}, {"attempt", w.attempt},   {"model", w.model},
          {"n_ctx", w.n_ctx},   {"max_tokens", w.max_tokens}, {"lease_deadline_ms", w.lease_deadline_ms},
          {"plan", w.plan},     {"request", w.request},   {"output", output}};
}

Work work_from_json(const json& j) {
  Work w;
  w.job_id = required_field<std::string>(j, "work", "job_id");
  w.attempt = required_field<int64_t>(j, "work", "attempt");
  w.model = required_field<std::string>(j, "work", "model");
  w.n_ctx = required_field<int64_t>(j, "work", "n_ctx");
  w.max_tokens = required_field<int64_t>(j, "work", "max_tokens");
  w.lease_deadline_ms = required_field<int64_t>(j, "work", "lease_deadline_ms");
  // The job store never hands out anything else (job_store.cpp); a node checks anyway, since
  // what is left to generate is max_tokens minus what earlier attempts produced.
  if (w.n_ctx < 1 || w.max_tokens < 1 || w.max_tokens > w.n_ctx)
    throw Error("work: max_tokens " + std::to_string(w.max_tokens) + " and n_ctx " + std::to_string(w.n_ctx) +
                " must satisfy 1 <= max_tokens <= n_ctx");
  w.plan = j.value("plan", "");
  w.request = required_field<json>(j, "work", "request");
  for (const json& c : required_field<json>(j, "work", "output")) {
    OutputChunk chunk = chunk_from_json(c);
    if (chunk.index != static_cast<int64_t>(w.output.size()))
      throw Error("work: output chunk " + std::to_string(chunk.index) + " is out of order");
    w.output.push_back(std::move(chunk.text));
    w.output_tokens.push_back(std::move(chunk.tokens));
  }
  return w;
}

json to_json(const RegisterReply& r) {
  json j = {{"node_id", r.node_id},
            {"lease_ms", r.lease_ms},
            {"heartbeat_timeout_ms", r.heartbeat_timeout_ms},
            {"heartbeat_interval_ms", r.heartbeat_interval_ms}};
  if (r.memory_challenge) j["memory_challenge"] = to_json(*r.memory_challenge);
  return j;
}

RegisterReply register_reply_from_json(const json& j) {
  RegisterReply r;
  r.node_id = required_field<std::string>(j, "registration reply", "node_id");
  r.lease_ms = required_field<int64_t>(j, "registration reply", "lease_ms");
  r.heartbeat_timeout_ms = required_field<int64_t>(j, "registration reply", "heartbeat_timeout_ms");
  r.heartbeat_interval_ms = required_field<int64_t>(j, "registration reply", "heartbeat_interval_ms");
  if (j.contains("memory_challenge") && !j["memory_challenge"].is_null())
    r.memory_challenge = memory_challenge_from_json(j["memory_challenge"]);
  return r;
}

}  // namespace orchard::protocol
