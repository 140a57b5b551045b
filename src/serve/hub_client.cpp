#include "serve/hub_client.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "tensor/error.h"

namespace orchard::serve {
namespace {

constexpr int kMaxRedirects = 10;
constexpr size_t kMaxErrorBody = 4096;

struct SplitUrl {
  std::string origin;  // scheme://host[:port]
  std::string target;  // /path?query (at least "/")
};

SplitUrl split_url(const std::string& url) {
  const size_t scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https")
    throw Error("'" + url + "' is not an http:// or https:// URL");
  const size_t path_start = url.find_first_of("/?", scheme_end + 3);
  SplitUrl s;
  s.origin = url.substr(0, path_start);
  s.target = path_start == std::string::npos ? "/" : url.substr(path_start);
  if (s.target[0] == '?') s.target = "/" + s.target;
  if (s.origin.size() <= scheme_end + 3) throw Error("'" + url + "' names no host");
  return s;
}

// A Location header against the URL that sent it (absolute, scheme-relative, or path).
std::string resolve_location(const std::string& location, const std::string& from) {
  if (location.rfind("http://", 0) == 0 || location.rfind("https://", 0) == 0) return location;
  const SplitUrl base = split_url(from);
  if (location.rfind("//", 0) == 0) return base.origin.substr(0, base.origin.find(':')) + ":" + location;
  if (!location.empty() && location[0] == '/') return base.origin + location;
  const std::string dir = base.target.substr(0, base.target.find('?'));
  return base.origin + dir.substr(0, dir.rfind('/') + 1) + location;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The hub's own explanation, when it gave one, else the start of the body.
std::string hub_explanation(const HttpResult& r) {
  std::string text = r.hops.empty() ? "" : r.final().header("x-error-message");
  if (text.empty()) {
    text = r.body.substr(0, std::min<size_t>(r.body.find('\n'), 200));
    if (text.find('<') != std::string::npos) text.clear();  // an HTML error page says nothing useful
  }
  return text.empty() ? "" : " (the server said: " + text + ")";
}

}  // namespace

std::string default_endpoint() {
  if (const char* e = std::getenv("HF_ENDPOINT"); e && *e) return e;
  return "https://huggingface.co";
}

std::string default_token() {
  if (const char* t = std::getenv("HF_TOKEN"); t && *t) return t;
  return "";
}

std::string url_encode(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string HttpReply::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

HubClient::HubClient(HubOptions options) : options_(std::move(options)) {
  if (options_.endpoint.empty()) options_.endpoint = default_endpoint();
  endpoint_ = options_.endpoint;
  while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
  try {
    origin_ = split_url(endpoint_).origin;
  } catch (const Error& e) {
    throw Error(std::string("hub endpoint: ") + e.what() + " (set by --endpoint or $HF_ENDPOINT)");
  }
}

HttpResult HubClient::get(const std::string& url, const std::map<std::string, std::string>& extra,
                          const ReplyCheck& check, const BodySink& sink) const {
  return request("GET", url, extra, check, sink);
}

HttpResult HubClient::head(const std::string& url) const { return request("HEAD", url, {}, {}, {}); }

HttpResult HubClient::request(const std::string& method, const std::string& start_url,
                              const std::map<std::string, std::string>& extra, const ReplyCheck& check,
                              const BodySink& sink) const {
  HttpResult result;
  std::string url = start_url;
  for (int hop = 0; hop <= kMaxRedirects; ++hop) {
    const SplitUrl where = split_url(url);
    httplib::Client cli(where.origin);
    if (!cli.is_valid()) {
      result.network_error = "unsupported URL";
      result.failed_url = url;
      return result;
    }
    cli.set_follow_location(false);
    cli.set_url_encode(false);  // paths are encoded by us; redirect targets arrive encoded (and signed)
    cli.set_connection_timeout(options_.connect_timeout_s, 0);
    cli.set_read_timeout(options_.read_timeout_s, 0);
    cli.set_write_timeout(options_.read_timeout_s, 0);
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    // The expected sha256 arrives over this same connection, so it is only as good as the TLS check.
    cli.enable_server_certificate_verification(true);
#endif

    httplib::Headers headers{{"User-Agent", "orchard/0.1"}};
    for (const auto& [k, v] : extra) headers.emplace(k, v);
    if (!options_.token.empty() && where.origin == origin_)
      headers.emplace("Authorization", "Bearer " + options_.token);

    HttpReply reply;
    reply.url = url;
    bool have_reply = false, to_sink = false;
    result.body.clear();
    auto take_reply = [&](const httplib::Response& res) {
      reply.status = res.status;
      reply.headers.clear();
      for (const auto& [k, v] : res.headers) reply.headers.emplace(lower(k), v);
      have_reply = true;
    };
    auto on_reply = [&](const httplib::Response& res) {
      take_reply(res);
      const bool success = res.status >= 200 && res.status < 300;
      if (success && check && !check(reply)) {
        result.stopped = true;
        return false;
      }
      to_sink = success && static_cast<bool>(sink);
      return true;
    };
    auto on_body = [&](const char* data, size_t n) {
      if (to_sink) {
        if (sink(data, n)) return true;
        result.stopped = true;
        return false;
      }
      const bool success = reply.status >= 200 && reply.status < 300;
      if (success || result.body.size() < kMaxErrorBody)
        result.body.append(data, success ? n : std::min(n, kMaxErrorBody - result.body.size()));
      return true;
    };
    httplib::Result res = method == "HEAD" ? cli.Head(where.target, headers)
                                           : cli.Get(where.target, headers, on_reply, on_body);
    if (res) take_reply(*res);
    if (have_reply) result.hops.push_back(reply);
    if (result.stopped) return result;
    if (!res) {
      result.network_error = httplib::to_string(res.error());
      result.failed_url = url;
      return result;
    }
    const std::string location = reply.header("location");
    if (reply.status < 300 || reply.status >= 400 || reply.status == 304 || location.empty()) return result;
    const std::string next = resolve_location(location, url);
    // A HEAD learns what it needs from the hub's own redirect; a CDN's signed URL may be valid
    // for GET only.
    if (method == "HEAD" && split_url(next).origin != where.origin) return result;
    url = next;
  }
  result.network_error = "more than " + std::to_string(kMaxRedirects) + " redirects";
  result.failed_url = start_url;
  return result;
}

std::string HubClient::network_message(const HttpResult& r) const {
  std::string host;
  try {
    host = split_url(r.failed_url).origin;
  } catch (const Error&) {
    host = r.failed_url;
  }
  std::string msg = "cannot reach " + host + " (" + r.network_error + ")";
  if (host != origin_) msg += ", where " + endpoint_ + " redirected";
  return msg + ": check the network connection, or point --endpoint / $HF_ENDPOINT at a reachable hub mirror";
}

std::string HubClient::status_message(const HttpResult& r, const std::string& what) const {
  const int status = r.hops.empty() ? 0 : r.final().status;
  const std::string code = r.hops.empty() ? "" : r.final().header("x-error-code");
  const std::string http = "HTTP " + std::to_string(status) + " from " + (r.hops.empty() ? endpoint_ : r.final().url);
  const std::string said = hub_explanation(r);
  if (status == 401 || status == 403) {
    std::string msg = what + ": access denied (" + http + ")" + said + ": ";
    if (code == "RepoNotFound") msg += "the repository does not exist, or is private; ";
    else msg += status == 403 ? "the repository is gated; accept its terms on its page, and " : "the repository is private or gated; ";
    if (options_.token.empty())
      msg += "set HF_TOKEN to a Hugging Face access token with read access to it";
    else
      msg += "the token in HF_TOKEN was sent but does not grant access: check it is valid and allowed this repository";
    return msg;
  }
  if (status == 404) {
    std::string kind = "not found";
    if (code == "RepoNotFound") kind = "repository not found";
    else if (code == "RevisionNotFound") kind = "revision " + options_.revision + " not found";
    else if (code == "EntryNotFound") kind = "file not found";
    return what + ": " + kind + " (" + http + ")" + said + ": check the repository name, file and --revision";
  }
  if (status == 429) return what + ": rate limited (" + http + ")" + said + "; wait a while and run it again";
  if (status >= 500) return what + ": the hub failed (" + http + ")" + said + "; try again later";
  return what + ": unexpected " + http + said;
}

}  // namespace orchard::serve
