// TLS between nodes and the coordinator (issue 26): a coordinator given --tls-cert/--tls-key
// serves HTTPS; a node that pins its certificate (--ca-cert) registers, one pinning another
// certificate — or trusting only the system's CAs — is refused with a message saying so, and does
// not retry. Certificates are made here with OpenSSL (self-signed, for 127.0.0.1).
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "network/coordinator.h"
#include "network/nodes_fixture.h"
#include "network/test_files.h"
#include "node/coordinator_client.h"
#include "serve/tls_server.h"

namespace orchard::node {
namespace {

struct CertFiles {
  std::string cert, key;
};

// A self-signed certificate for IP 127.0.0.1 (its own CA), valid for a day, and its P-256 key.
CertFiles self_signed(const std::filesystem::path& dir, const std::string& name, long serial) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
  X509_set_pubkey(x, key);
  X509_NAME* subject = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1, 0);
  X509_set_issuer_name(x, subject);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  for (const auto& [nid, value] : {std::pair{NID_subject_alt_name, "IP:127.0.0.1"}, std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_sign(x, key, EVP_sha256());
  CertFiles f{(dir / (name + ".crt")).string(), (dir / (name + ".key")).string()};
  FILE* c = std::fopen(f.cert.c_str(), "w");
  PEM_write_X509(c, x);
  std::fclose(c);
  FILE* k = std::fopen(f.key.c_str(), "w");
  PEM_write_PrivateKey(k, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(k);
  X509_free(x);
  EVP_PKEY_free(key);
  return f;
}

TEST(Tls, ANodeRegistersWithThePinnedCertificateAndIsRefusedWithAnother) {
  const auto dir = network::test::fresh_dir("tls");
  const CertFiles good = self_signed(dir, "coordinator", 1), other = self_signed(dir, "stranger", 2);

  network::CoordinatorOptions o;
  o.data_dir = dir / "data";
  o.port = 0;
  o.http_threads = 8;
  o.tls = {good.cert, good.key};
  network::Coordinator coordinator(o);
  const int port = coordinator.bind();
  std::thread running([&] { coordinator.run(); });
  const std::string url = "https://127.0.0.1:" + std::to_string(port);
  bool up = false;
  for (int i = 0; i < 500 && !up; ++i) {
    httplib::Client c(url);
    c.set_ca_cert_path(good.cert.c_str());
    auto r = c.Get("/health");
    up = r && r->status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(up) << "no HTTPS answer from the coordinator";
  // Plain HTTP to the TLS port gets no answer.
  EXPECT_FALSE(httplib::Client("http://127.0.0.1:" + std::to_string(port)).Get("/health"));

  const protocol::NodeIdentity identity = protocol::NodeIdentity::from_key(protocol::generate_ed25519_key());
  protocol::NodeInfo info = network::testing::single(identity.id(), 64, 100);
  EXPECT_NO_THROW(CoordinatorClient(url, identity, good.cert).register_node(info));
  for (const std::string& ca : {other.cert, std::string()}) {
    try {
      CoordinatorClient(url, identity, ca).register_node(info);
      ADD_FAILURE() << "registered through an untrusted certificate (ca '" << ca << "')";
    } catch (const CallError& e) {
      EXPECT_EQ(e.code, "tls") << e.what();
      EXPECT_NE(std::string(e.what()).find("not trusted"), std::string::npos) << e.what();
    }
  }
  coordinator.stop();
  running.join();
}

TEST(Tls, ServersRefuseHalfOrMismatchedCertificateFiles) {
  const auto dir = network::test::fresh_dir("tls-files");
  const CertFiles a = self_signed(dir, "a", 3), b = self_signed(dir, "b", 4);
  EXPECT_NE(dynamic_cast<httplib::SSLServer*>(serve::make_http_server({a.cert, a.key}).get()), nullptr);
  EXPECT_EQ(dynamic_cast<httplib::SSLServer*>(serve::make_http_server({}).get()), nullptr);
  auto message = [](const serve::TlsFiles& f) {
    try {
      serve::make_http_server(f);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({a.cert, ""}).find("--tls-key"), std::string::npos);
  EXPECT_NE(message({a.cert, b.key}).find("cannot use"), std::string::npos) << message({a.cert, b.key});
  EXPECT_NE(message({a.cert, (dir / "missing.key").string()}).find("not a readable file"), std::string::npos);
}

}  // namespace
}  // namespace orchard::node
