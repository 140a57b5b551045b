// `orchard pull` and `orchard models` as a user runs them, against a hub on this machine, with
// ORCHARD_MODELS pointing at a temporary folder; `generate -m NAME` then finds what was pulled.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_run.h"
#include "model/synthetic/synthetic.h"
#include "test_data.h"

namespace orchard {
namespace {

namespace fs = std::filesystem;

// A few fixed replies over plain sockets (this test program links no HTTP library). It reads
// one request per connection, answers, and closes; it ignores Range, as some servers do.
class TinyHub {
 public:
  struct Reply {
    int status = 200;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
  };
  std::map<std::string, Reply> routes;  // by path, query ignored

  TinyHub() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("TinyHub: cannot listen on 127.0.0.1");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~TinyHub() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> requests() {  // "METHOD target | range"
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      timeval tv{5, 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      std::string req;
      char buf[4096];
      ssize_t n;
      while (req.find("\r\n\r\n") == std::string::npos && (n = ::recv(c, buf, sizeof buf, 0)) > 0) req.append(buf, n);
      answer(c, req);
      ::close(c);
    }
  }

  void answer(int c, const std::string& req) {
    const std::string method = req.substr(0, req.find(' '));
    const size_t t0 = req.find(' ') + 1;
    const std::string target = req.substr(t0, req.find(' ', t0) - t0);
    std::string range;
    for (const std::string key : {"\r\nRange: ", "\r\nrange: "})
      if (size_t at = req.find(key); at != std::string::npos)
        range = req.substr(at + key.size(), req.find("\r\n", at + 2) - at - key.size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(method + " " + target + " | " + range);
    }
    auto it = routes.find(target.substr(0, target.find('?')));
    const Reply reply = it != routes.end() ? it->second : Reply{404, "not found", {}};
    std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " X\r\nConnection: close\r\nContent-Length: " +
                      std::to_string(reply.body.size()) + "\r\n";
    for (const auto& [k, v] : reply.headers) out += k + ": " + v + "\r\n";
    out += "\r\n";
    if (method != "HEAD") out += reply.body;
    for (size_t sent = 0; sent < out.size();) {
      const ssize_t k = ::send(c, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (k <= 0) return;
      sent += static_cast<size_t>(k);
    }
  }

  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// coreutils' sha256sum: this test program does not link OpenSSL.
std::string sha256_of(const fs::path& p) {
  FILE* f = popen(("sha256sum '" + p.string() + "'").c_str(), "r");
  char buf[65] = {};
  const size_t n = f ? fread(buf, 1, 64, f) : 0;
  if (f) pclose(f);
  return std::string(buf, n);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class PullCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_path_ = new fs::path(fs::path(::testing::TempDir()) / ("orchard-pull-src-" + std::to_string(::getpid())) /
                               "tiny-Q8_0.gguf");
    fs::create_directories(model_path_->parent_path());
    write_synthetic_model(model_shape("tiny"), DType::Q8_0, 42, model_path_->string());
  }
  static void TearDownTestSuite() {
    fs::remove_all(model_path_->parent_path());
    delete model_path_;
  }

  void SetUp() override {
    folder = fs::path(::testing::TempDir()) / ("orchard-pull-" + std::to_string(::getpid()) + "-" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(folder);
    ::setenv("ORCHARD_MODELS", folder.c_str(), 1);
    ::unsetenv("HF_TOKEN");
    ::unsetenv("HF_ENDPOINT");
    bytes = read_file(*model_path_);
    const std::string sha = sha256_of(*model_path_);
    ASSERT_EQ(sha.size(), 64u);
    const nlohmann::json tree = nlohmann::json::array(
        {{{"type", "file"}, {"path", "README.md"}, {"size", 6}},
         {{"type", "file"}, {"path", "tiny-Q8_0.gguf"}, {"size", bytes.size()},
          {"lfs", {{"oid", sha}, {"size", bytes.size()}}}}});
    hub.routes["/api/models/owner/tiny-GGUF/tree/main"] = {200, tree.dump(), {{"Content-Type", "application/json"}}};
    hub.routes["/owner/tiny-GGUF/resolve/main/tiny-Q8_0.gguf"] = {
        302, "", {{"Location", "/files/tiny-Q8_0.gguf?x=1"}, {"X-Linked-Size", std::to_string(bytes.size())},
                  {"X-Linked-ETag", "\"" + sha + "\""}}};
    hub.routes["/files/tiny-Q8_0.gguf"] = {200, bytes, {}};
    hub.routes["/api/models/owner/private/tree/main"] = {401, "Invalid username or password.", {}};
  }
  void TearDown() override {
    ::unsetenv("ORCHARD_MODELS");
    fs::remove_all(folder);
  }

  std::string pull_args(const std::string& rest) { return "pull " + rest + " --endpoint " + hub.endpoint(); }

  static fs::path* model_path_;
  TinyHub hub;
  fs::path folder;
  std::string bytes;
};
fs::path* PullCli::model_path_ = nullptr;

TEST_F(PullCli, PullsAModelThatModelsListsAndGenerateRuns) {
  const Out r = run(pull_args("owner/tiny-GGUF"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "owner/tiny-GGUF/tiny-Q8_0.gguf: pulled")) << r.out;
  EXPECT_TRUE(has(r.out, "sha256 verified")) << r.out;
  EXPECT_TRUE(has(r.err, "orchard generate -m owner/tiny-GGUF/tiny-Q8_0.gguf")) << r.err;
  EXPECT_EQ(read_file(folder / "owner/tiny-GGUF/tiny-Q8_0.gguf"), bytes);

  const Out again = run(pull_args("owner/tiny-GGUF tiny-Q8_0.gguf"));
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_TRUE(has(again.out, "already present")) << again.out;

  const Out models = run("models");
  ASSERT_EQ(models.code, 0) << models.err;
  EXPECT_TRUE(has(models.out, "NAME")) << models.out;
  EXPECT_TRUE(has(models.out, "owner/tiny-GGUF/tiny-Q8_0.gguf")) << models.out;
  EXPECT_TRUE(has(models.out, "llama")) << models.out;

  const Out json = run("models --json");
  ASSERT_EQ(json.code, 0) << json.err;
  const auto list = nlohmann::json::parse(json.out);
  ASSERT_EQ(list.size(), 1u) << json.out;
  EXPECT_EQ(list[0]["name"], "owner/tiny-GGUF/tiny-Q8_0.gguf");
  EXPECT_EQ(list[0]["size"], bytes.size());
  EXPECT_EQ(list[0]["architecture"], "llama");
  EXPECT_GT(list[0]["parameters"].get<uint64_t>(), 1000000u);

  for (const std::string name : {"owner/tiny-GGUF", "tiny-Q8_0"}) {
    const Out g = run("generate -m " + name + " -p Hello -n 2 --temp 0 -t 1");
    EXPECT_EQ(g.code, 0) << name << ": " << g.err;
    EXPECT_TRUE(has(g.err, "stats:")) << g.err;
  }
}

TEST_F(PullCli, APartIsRestartedWhenTheServerIgnoresRange) {
  fs::create_directories(folder / "owner/tiny-GGUF");
  std::ofstream(folder / "owner/tiny-GGUF/tiny-Q8_0.gguf.part", std::ios::binary)
      << std::string(bytes.size() / 2, 'z');
  const Out r = run(pull_args("owner/tiny-GGUF"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_file(folder / "owner/tiny-GGUF/tiny-Q8_0.gguf"), bytes);
  bool ranged = false;
  for (const std::string& req : hub.requests())
    ranged = ranged || has(req, "GET /files/tiny-Q8_0.gguf?x=1 | bytes=" + std::to_string(bytes.size() / 2) + "-");
  EXPECT_TRUE(ranged);
}

TEST_F(PullCli, ErrorsAreClearAndExitNonZero) {
  Out r = run(pull_args("owner/missing"));
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.err, "owner/missing") && has(r.err, "404")) << r.err;
  r = run(pull_args("owner/private"));
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.err, "HF_TOKEN")) << r.err;
  r = run("pull owner/tiny-GGUF --endpoint http://127.0.0.1:1");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.err, "cannot reach http://127.0.0.1:1")) << r.err;
  r = run("pull not-a-repo --endpoint " + hub.endpoint());
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.err, "OWNER/REPO")) << r.err;
  EXPECT_TRUE(!fs::exists(folder) || fs::is_empty(folder));
}

TEST_F(PullCli, GenerateWithAnUnknownModelSuggestsPull) {
  const Out r = run("generate -m someone/some-GGUF -n 1");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.err, "orchard pull someone/some-GGUF")) << r.err;
  EXPECT_TRUE(has(r.err, folder.string())) << r.err;
}

TEST_F(PullCli, ModelsOnAnEmptyFolderSaysHowToPull) {
  const Out r = run("models");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(has(r.err, "orchard pull")) << r.err;
  EXPECT_EQ(nlohmann::json::parse(run("models --json").out), nlohmann::json::array());
}

TEST_F(PullCli, HelpShowsExamples) {
  const Out pull = run("pull --help");
  EXPECT_EQ(pull.code, 0);
  EXPECT_TRUE(has(pull.out, "Examples") && has(pull.out, "--revision") && has(pull.out, "HF_TOKEN")) << pull.out;
  const Out models = run("models --help");
  EXPECT_EQ(models.code, 0);
  EXPECT_TRUE(has(models.out, "Examples") && has(models.out, "--json")) << models.out;
}

}  // namespace
}  // namespace orchard
