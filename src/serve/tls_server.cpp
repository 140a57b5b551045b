#include "serve/tls_server.h"

#include <filesystem>

#include "tensor/error.h"

namespace orchard::serve {

void check_tls_files(const TlsFiles& tls) {
  if (tls.cert.empty() || tls.key.empty())
    throw Error("TLS needs both --tls-cert and --tls-key (got only " + std::string(tls.cert.empty() ? "the key" : "the certificate") + ")");
  for (const std::string& f : {tls.cert, tls.key})
    if (!std::filesystem::is_regular_file(f)) throw Error("TLS: " + f + " is not a readable file");
}

std::unique_ptr<httplib::Server> make_http_server(const TlsFiles& tls) {
  if (!tls.enabled()) return std::make_unique<httplib::Server>();
  check_tls_files(tls);
  auto server = std::make_unique<httplib::SSLServer>(tls.cert.c_str(), tls.key.c_str());
  if (!server->is_valid())
    throw Error("TLS: OpenSSL cannot use the certificate " + tls.cert + " with the key " + tls.key +
                " (not PEM, or the key is not the certificate's)");
  return server;
}

}  // namespace orchard::serve
