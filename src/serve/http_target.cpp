#include "serve/http_target.h"

namespace orchard::serve {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void parse_query(std::string_view q, httplib::Params& out) {
  while (!q.empty()) {
    const size_t amp = q.find('&');
    const std::string_view pair = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    out.emplace(url_decode(pair.substr(0, eq), true),
                eq == std::string_view::npos ? std::string() : url_decode(pair.substr(eq + 1), true));
  }
}

}  // namespace

std::string url_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
      i += 2;
    } else {
      out += plus_is_space && s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

void set_target(httplib::Request& req, std::string_view target) {
  req.target = std::string(target);
  const size_t q = target.find('?');
  req.path = url_decode(target.substr(0, q), false);
  req.params.clear();
  if (q != std::string_view::npos) parse_query(target.substr(q + 1), req.params);
}

}  // namespace orchard::serve
