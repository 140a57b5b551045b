#pragma once
// What the API adapters share on the HTTP side: error shapes, streaming a generation to a
// client (server-sent events or JSON lines) and cancelling it when the client goes away.
#include <httplib.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/api_error.h"
#include "serve/stream.h"

namespace orchard::serve {

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
// Each API words its errors its own way.
using ErrorShape = std::function<nlohmann::json(const ApiError&)>;

nlohmann::json openai_error(const ApiError& e);

// Runs `h`; an ApiError becomes its status and body, anything else a 500 naming it.
Handler guarded(ErrorShape shape, Handler h);

void send_json(httplib::Response& res, const nlohmann::json& body, int status = 200);

// Streams `s` to the client: `piece(text)` frames each new piece of text, `done(completion)`
// the end. A write that fails (client gone) cancels the generation, which frees its slot.
// `ping`: text written when nothing happened for a while, so a client that left is noticed
// even between tokens (an SSE comment); empty for formats that have none.
void stream_to(httplib::Response& res, std::shared_ptr<Stream> s, const std::string& content_type,
               std::function<std::string(const std::string&)> piece,
               std::function<std::string(const Completion&)> done, std::string ping = {});

// Several generations on one response, one after another (OpenAI's n choices): each one's text
// through piece(i, text), its end through done(i, completion), then end() once. A client gone
// cancels them all.
void stream_each(httplib::Response& res, std::vector<std::shared_ptr<Stream>> streams, const std::string& content_type,
                 std::function<std::string(size_t, const std::string&)> piece,
                 std::function<std::string(size_t, const Completion&)> done, std::function<std::string()> end,
                 std::string ping = {});

std::string sse(const nlohmann::json& data);                        // "data: …\n\n"
std::string sse_event(const std::string& event, const nlohmann::json& data);
std::string new_id(const std::string& prefix);                      // "chatcmpl-1a2b…"
int64_t unix_now();

}  // namespace orchard::serve
