#pragma once
// The HTTP server `orchard serve` and the coordinator listen with: plain, or TLS (OpenSSL,
// through cpp-httplib's SSLServer) when given a certificate and its key (--tls-cert/--tls-key).
#include <httplib.h>

#include <memory>
#include <string>

namespace orchard::serve {

struct TlsFiles {
  std::string cert, key;  // PEM files: the certificate (chain) and its private key
  bool enabled() const { return !cert.empty() || !key.empty(); }
};

// Throws orchard::Error when only one of the two files is given or one is not a readable file.
void check_tls_files(const TlsFiles& tls);

// A plain server when `tls` is empty; else TLS with those files. Throws orchard::Error naming
// the files when only one is given or OpenSSL cannot use them (unreadable, not PEM, the key not
// the certificate's).
std::unique_ptr<httplib::Server> make_http_server(const TlsFiles& tls);

}  // namespace orchard::serve
