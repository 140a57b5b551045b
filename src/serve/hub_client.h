#pragma once
// HTTP to a Hugging Face hub (or a mirror of its layout): URLs under an endpoint, GET and HEAD
// with redirects followed by hand, and error messages that say what a status means on the hub.
//
// Redirects are followed here rather than by the HTTP library because the hub puts a file's
// size and sha256 (X-Linked-Size, X-Linked-ETag) on the redirect itself, and because the token
// must not travel to another host (the CDN a download is redirected to).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace orchard::serve {

struct HubOptions {
  std::string endpoint;          // empty: default_endpoint()
  std::string token;             // sent as "Authorization: Bearer" to the endpoint's host only
  std::string revision = "main";
  int connect_timeout_s = 15;
  int read_timeout_s = 60;       // a stalled transfer fails after this long without a byte
};

// $HF_ENDPOINT, else https://huggingface.co.
std::string default_endpoint();
// $HF_TOKEN, else empty.
std::string default_token();

// Percent-encodes a URL path; '/' is kept when `keep_slash` (file paths), encoded otherwise
// (revisions such as refs/pr/1 are one path segment on the hub).
std::string url_encode(const std::string& s, bool keep_slash);

// One HTTP reply: a redirect hop or the final answer. Header names are lower-cased.
struct HttpReply {
  int status = 0;
  std::string url;
  std::map<std::string, std::string> headers;
  std::string header(const std::string& lower_name) const;
};

struct HttpResult {
  std::vector<HttpReply> hops;  // every reply in order; the last is the final one
  std::string body;             // a non-2xx body (first few KiB) or a body with no sink
  std::string network_error;    // non-empty when the connection failed (then hops may be empty)
  std::string failed_url;       // the URL whose connection failed
  bool stopped = false;         // a callback asked to stop
  const HttpReply& final() const { return hops.back(); }
  bool ok() const { return network_error.empty() && !stopped && !hops.empty(); }
};

class HubClient {
 public:
  explicit HubClient(HubOptions options);
  const HubOptions& options() const { return options_; }
  // endpoint + path ("/api/models/…"), path already encoded.
  std::string url(const std::string& path) const { return endpoint_ + path; }

  // Called once the final 2xx reply's headers are in, before its body; false stops.
  using ReplyCheck = std::function<bool(const HttpReply&)>;
  // Receives the final 2xx body in pieces; false stops.
  using BodySink = std::function<bool(const char*, size_t)>;

  // GET following up to 10 redirects; `extra` headers go to every hop (Range, say). Never
  // throws for network or HTTP failures: the result says what happened.
  HttpResult get(const std::string& url, const std::map<std::string, std::string>& extra = {},
                 const ReplyCheck& check = {}, const BodySink& sink = {}) const;
  // HEAD follows redirects within a host only: the hub's redirect carries the file's size and
  // sha256, and a CDN's signed URL may be valid for GET alone.
  HttpResult head(const std::string& url) const;

  // "cannot reach https://huggingface.co (Connection): …" for a result that failed in the network.
  std::string network_message(const HttpResult& r) const;
  // What a non-2xx status means for `what` (e.g. "bartowski/X: file a.gguf at revision main").
  std::string status_message(const HttpResult& r, const std::string& what) const;

 private:
  HttpResult request(const std::string& method, const std::string& url,
                     const std::map<std::string, std::string>& extra, const ReplyCheck& check,
                     const BodySink& sink) const;

  HubOptions options_;
  std::string endpoint_;  // without a trailing '/'
  std::string origin_;    // scheme://host[:port] of the endpoint: where the token may go
};

}  // namespace orchard::serve
