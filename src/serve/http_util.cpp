#include "serve/http_util.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

namespace orchard::serve {

using nlohmann::json;

json openai_error(const ApiError& e) {
  json err = {{"message", e.what()}, {"type", e.type()}};
  err["param"] = e.param().empty() ? json() : json(e.param());
  err["code"] = e.code().empty() ? json() : json(e.code());
  return {{"error", err}};
}

void send_json(httplib::Response& res, const json& body, int status) {
  res.status = status;
  // Invalid UTF-8 from a model is replaced rather than failing the whole response.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

Handler guarded(ErrorShape shape, Handler h) {
  return [shape = std::move(shape), h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    try {
      h(req, res);
    } catch (const ApiError& e) {
      if (e.status() == 429) res.set_header("Retry-After", std::to_string(e.retry_after_s()));
      send_json(res, shape(e), e.status());
    } catch (const std::exception& e) {
      send_json(res, shape(ApiError(500, "server_error", std::string("internal error: ") + e.what())), 500);
    }
  };
}

void stream_each(httplib::Response& res, std::vector<std::shared_ptr<Stream>> streams, const std::string& content_type,
                 std::function<std::string(size_t, const std::string&)> piece,
                 std::function<std::string(size_t, const Completion&)> done, std::function<std::string()> end,
                 std::string ping) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  auto cancel_all = [streams] {
    for (const auto& s : streams)
      if (!s->done()) s->cancel();
  };
  res.set_chunked_content_provider(
      content_type,
      [streams, piece = std::move(piece), done = std::move(done), end = std::move(end), ping = std::move(ping),
       cancel_all](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& text) { return text.empty() || sink.write(text.data(), text.size()); };
        std::string text;
        auto quiet_since = std::chrono::steady_clock::now();
        for (size_t i = 0; i < streams.size(); ++i) {
          const auto& s = streams[i];
          for (bool finished = false; !finished;) {
            switch (s->wait(text, std::chrono::milliseconds(100))) {
              case Stream::Got::Text:
                if (!write(piece(i, text))) {
                  cancel_all();
                  return false;
                }
                quiet_since = std::chrono::steady_clock::now();
                break;
              case Stream::Got::Done:
                if (!write(done(i, s->completion()))) {
                  cancel_all();
                  return false;
                }
                finished = true;
                break;
              case Stream::Got::Timeout:
                if (!ping.empty() && std::chrono::steady_clock::now() - quiet_since > std::chrono::milliseconds(500)) {
                  if (!write(ping)) {
                    cancel_all();
                    return false;
                  }
                  quiet_since = std::chrono::steady_clock::now();
                }
                break;
            }
          }
        }
        if (write(end ? end() : std::string())) sink.done();
        return true;
      },
      // Called however the response ends; a generation nobody reads any more is stopped.
      [cancel_all](bool) { cancel_all(); });
}

void stream_to(httplib::Response& res, std::shared_ptr<Stream> s, const std::string& content_type,
               std::function<std::string(const std::string&)> piece,
               std::function<std::string(const Completion&)> done, std::string ping) {
  stream_each(
      res, {std::move(s)}, content_type, [piece = std::move(piece)](size_t, const std::string& t) { return piece(t); },
      [done = std::move(done)](size_t, const Completion& c) { return done(c); }, {}, std::move(ping));
}

std::string sse(const json& data) {
  return "data: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::string sse_event(const std::string& event, const json& data) {
  return "event: " + event + "\n" + sse(data);
}

std::string new_id(const std::string& prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char b[40];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(salt ^ (++counter * 0x9E3779B97F4A7C15ull)));
  return prefix + b;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace orchard::serve
