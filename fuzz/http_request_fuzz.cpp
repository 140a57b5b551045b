// What the coordinator's event server reads off a connection comes from anyone who can reach
// its port: any bytes go through Beast's request parser (with the server's header and body
// limits) and, once a request is whole, into httplib's Request shape (serve/http_target.h) —
// a parse error or a request, never a crash, a hang or a leak.
#include <utility>  // before Beast: Asio's awaitable.hpp uses std::exchange without it (Boost 1.74)

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "serve/http_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace http = boost::beast::http;
  http::request_parser<http::string_body> parser;
  parser.header_limit(64 << 10);
  parser.body_limit(1 << 20);
  parser.eager(true);
  boost::beast::error_code ec;
  // As the server's reads do: fed until the message is whole, the input ends or it is refused.
  for (size_t at = 0; at < size && !parser.is_done();) {
    const size_t used = parser.put(boost::asio::buffer(data + at, size - at), ec);
    if (ec || used == 0) break;
    at += used;
  }
  if (!parser.is_done()) return 0;
  const auto& m = parser.get();
  httplib::Request req;
  orchard::serve::set_target(req, std::string_view(m.target().data(), m.target().size()));
  for (const auto& f : m) req.headers.emplace(std::string(f.name_string()), std::string(f.value()));
  // The decoded path and parameters never grow beyond the target they came from.
  if (req.path.size() > req.target.size()) __builtin_trap();
  for (const auto& [k, v] : req.params)
    if (k.size() + v.size() > req.target.size()) __builtin_trap();
  return 0;
}
