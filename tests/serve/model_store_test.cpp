// The models folder (listing, resolving -m names) and `pull` against an in-process hub that
// serves the Hugging Face layout: a tree listing, resolve URLs redirected to a "CDN" on another
// port (carrying X-Linked-Size / X-Linked-ETag), and byte ranges.
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "model/gguf_writer.h"
#include "serve/hub_download.h"
#include "serve/model_store.h"
#include "tensor/error.h"

namespace orchard::serve {
namespace {

namespace fs = std::filesystem;

std::string sha256_hex(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr);
  std::string out;
  char buf[3];
  for (unsigned int i = 0; i < len; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", md[i]);
    out += buf;
  }
  return out;
}

// A small but real GGUF (header + one 64 KiB tensor), so `models` can read its header.
std::string gguf_bytes(const std::string& arch, int rows) {
  GGUFWriter w;
  w.set_string("general.architecture", arch);
  std::vector<uint8_t> data(static_cast<size_t>(rows) * 256 * 4);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  w.add_tensor("token_embd.weight", DType::F32, {256, rows}, std::move(data));
  const std::vector<uint8_t> bytes = w.to_bytes();
  return std::string(bytes.begin(), bytes.end());
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::path(::testing::TempDir()) / ("orchard-store-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

struct Repo {
  std::map<std::string, std::string> files;   // path -> bytes the hub advertises (size, sha256)
  std::map<std::string, std::string> served;  // path -> bytes the CDN actually sends, when different
  bool lfs_in_listing = true;
  std::string token;                          // non-empty: private, needs this bearer token
};

class FakeHub {
 public:
  std::map<std::string, Repo> repos;
  size_t cut_after = 0;        // the CDN drops the connection after this many bytes of a body...
  std::atomic<int> cuts_left{0};  // ...this many times
  std::mutex mu;
  std::vector<std::string> cdn_ranges;  // the Range header of every CDN request ("" when none)
  std::vector<std::string> cdn_auth;    // the Authorization header the CDN saw
  std::vector<std::string> cdn_sig;     // the redirect's signature parameter, as the CDN decoded it

  FakeHub() {
    hub_port_ = hub_.bind_to_any_port("127.0.0.1");
    cdn_port_ = cdn_.bind_to_any_port("127.0.0.1");
    hub_.Get(R"(/api/models/([^/]+/[^/]+)/tree/main)", [this](const httplib::Request& req, httplib::Response& res) {
      const Repo* repo = find(req, res, req.matches[1]);
      if (!repo) return;
      nlohmann::json list = nlohmann::json::array();
      for (const auto& [path, bytes] : repo->files) {
        nlohmann::json e = {{"type", "file"}, {"path", path}, {"size", bytes.size()}};
        if (repo->lfs_in_listing) e["lfs"] = {{"oid", sha256_hex(bytes)}, {"size", bytes.size()}};
        list.push_back(e);
      }
      list.push_back({{"type", "directory"}, {"path", "docs"}});
      res.set_content(list.dump(), "application/json");
    });
    hub_.Get(R"(/([^/]+/[^/]+)/resolve/main/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      const Repo* repo = find(req, res, req.matches[1]);
      if (!repo) return;
      auto it = repo->files.find(req.matches[2]);
      if (it == repo->files.end()) {
        res.status = 404;
        res.set_header("X-Error-Code", "EntryNotFound");
        return;
      }
      res.status = 302;
      res.set_header("Location", cdn() + "/cdn/" + std::string(req.matches[1]) + "/" + it->first + "?sig=a+b%2Fc");
      res.set_header("X-Linked-Size", std::to_string(it->second.size()));
      res.set_header("X-Linked-ETag", "\"" + sha256_hex(it->second) + "\"");
    });
    cdn_.Get(R"(/cdn/([^/]+/[^/]+)/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu);
        cdn_ranges.push_back(req.get_header_value("Range"));
        cdn_auth.push_back(req.get_header_value("Authorization"));
        cdn_sig.push_back(req.get_param_value("sig"));
      }
      const Repo& repo = repos.at(req.matches[1]);
      const std::string path = req.matches[2];
      auto served = repo.served.find(path);
      const std::string body = served != repo.served.end() ? served->second : repo.files.at(path);
      const bool cut = cut_after > 0 && cuts_left.fetch_sub(1) > 0;
      res.set_content_provider(body.size(), "application/octet-stream",
                               [body, cut, this](size_t offset, size_t length, httplib::DataSink& sink) {
                                 if (cut && offset >= cut_after) return false;  // drop the connection
                                 size_t n = std::min<size_t>(length, 4096);
                                 if (cut) n = std::min(n, cut_after - offset);
                                 sink.write(body.data() + offset, n);
                                 return true;
                               });
    });
    hub_thread_ = std::thread([this] { hub_.listen_after_bind(); });
    cdn_thread_ = std::thread([this] { cdn_.listen_after_bind(); });
    // stop() is a no-op on a server that is not running yet, so wait until both are.
    for (int i = 0; i < 2000 && !(hub_.is_running() && cdn_.is_running()); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeHub() {
    hub_.stop();
    cdn_.stop();
    hub_thread_.join();
    cdn_thread_.join();
  }

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(hub_port_); }
  std::string cdn() const { return "http://127.0.0.1:" + std::to_string(cdn_port_); }
  HubClient client(const std::string& token = "") const {
    HubOptions o;
    o.endpoint = endpoint();
    o.token = token;
    o.read_timeout_s = 5;
    return HubClient(o);
  }

 private:
  const Repo* find(const httplib::Request& req, httplib::Response& res, const std::string& name) {
    auto it = repos.find(name);
    if (it == repos.end()) {
      res.status = 404;
      res.set_header("X-Error-Code", "RepoNotFound");
      res.set_header("X-Error-Message", "Repository not found");
      return nullptr;
    }
    if (!it->second.token.empty() && req.get_header_value("Authorization") != "Bearer " + it->second.token) {
      res.status = 401;
      res.set_content("Invalid username or password.", "text/plain");
      return nullptr;
    }
    return &it->second;
  }

  httplib::Server hub_, cdn_;
  int hub_port_ = 0, cdn_port_ = 0;
  std::thread hub_thread_, cdn_thread_;
};

std::string error_from(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

class HubPull : public ::testing::Test {
 protected:
  void SetUp() override {
    model = gguf_bytes("llama", 64);
    hub.repos["owner/model-GGUF"].files = {{"model-Q4_K_M.gguf", model}, {"README.md", "# hello\n"}};
    folder = fresh_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  PullResult pull(const std::string& repo, const std::string& file = "", const std::string& token = "") {
    return pull_model(hub.client(token), PullRequest{repo, file, "", folder, {}});
  }

  FakeHub hub;
  std::string model;
  fs::path folder;
};

TEST_F(HubPull, FullPullInstallsTheSourceBytesVerified) {
  int64_t last_done = -1, last_total = -1;
  const PullResult r = pull_model(hub.client(), PullRequest{"owner/model-GGUF", "", "", folder, {}},
                                  [&](int64_t done, int64_t total) {
                                    EXPECT_GE(done, last_done);
                                    last_done = done;
                                    last_total = total;
                                  });
  EXPECT_EQ(r.name, "owner/model-GGUF/model-Q4_K_M.gguf");
  const fs::path dest = folder / "owner/model-GGUF/model-Q4_K_M.gguf";
  EXPECT_EQ(r.download.path, dest);
  EXPECT_EQ(read_file(dest), model);
  EXPECT_EQ(r.download.sha256, sha256_hex(model));
  EXPECT_TRUE(r.download.sha256_checked);
  EXPECT_FALSE(r.download.already_present);
  EXPECT_EQ(last_done, static_cast<int64_t>(model.size()));
  EXPECT_EQ(last_total, static_cast<int64_t>(model.size()));
  EXPECT_FALSE(fs::exists(folder / "owner/model-GGUF/model-Q4_K_M.gguf.part"));
  EXPECT_EQ(read_file(folder / "owner/model-GGUF/model-Q4_K_M.gguf.sha256").substr(0, 64), sha256_hex(model));
  // The signed redirect query reached the CDN untouched ('+' not re-encoded), and a second
  // pull downloads nothing.
  ASSERT_EQ(hub.cdn_sig.size(), 1u);
  EXPECT_EQ(hub.cdn_sig[0], "a b/c");
  const size_t requests = hub.cdn_ranges.size();
  const PullResult again = pull("owner/model-GGUF");
  EXPECT_TRUE(again.download.already_present);
  EXPECT_EQ(hub.cdn_ranges.size(), requests);
}

TEST_F(HubPull, SizeAndShaComeFromTheRedirectWhenTheListingHasNoLfs) {
  hub.repos["owner/model-GGUF"].lfs_in_listing = false;
  const PullResult r = pull("owner/model-GGUF", "model-Q4_K_M.gguf");
  EXPECT_EQ(r.remote.sha256, sha256_hex(model));
  EXPECT_TRUE(r.download.sha256_checked);
  EXPECT_EQ(read_file(r.download.path), model);
}

TEST_F(HubPull, InterruptedDownloadResumesWithARangeRequest) {
  hub.cut_after = 20000;
  hub.cuts_left = 1;
  const std::string err = error_from([&] { pull("owner/model-GGUF"); });
  EXPECT_NE(err.find("run the same command again to resume"), std::string::npos) << err;
  const fs::path part = folder / "owner/model-GGUF/model-Q4_K_M.gguf.part";
  ASSERT_TRUE(fs::exists(part));
  const auto kept = fs::file_size(part);
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, model.size());

  const PullResult r = pull("owner/model-GGUF");
  EXPECT_EQ(read_file(r.download.path), model);
  EXPECT_EQ(r.download.resumed_from, static_cast<int64_t>(kept));
  ASSERT_EQ(hub.cdn_ranges.size(), 2u);
  EXPECT_EQ(hub.cdn_ranges[0], "");
  EXPECT_EQ(hub.cdn_ranges[1], "bytes=" + std::to_string(kept) + "-");
}

TEST_F(HubPull, AnExistingPartIsContinuedAndTheWholeFileHashed) {
  const size_t half = model.size() / 2;
  write_file(folder / "owner/model-GGUF/model-Q4_K_M.gguf.part", model.substr(0, half));
  const PullResult r = pull("owner/model-GGUF");
  EXPECT_EQ(read_file(r.download.path), model);
  EXPECT_EQ(r.download.sha256, sha256_hex(model));
  ASSERT_EQ(hub.cdn_ranges.size(), 1u);
  EXPECT_EQ(hub.cdn_ranges[0], "bytes=" + std::to_string(half) + "-");
}

TEST_F(HubPull, CorruptedDownloadIsRefusedAndNothingInstalled) {
  std::string bad = model;
  bad[bad.size() / 2] ^= 0x55;
  hub.repos["owner/model-GGUF"].served["model-Q4_K_M.gguf"] = bad;
  const std::string err = error_from([&] { pull("owner/model-GGUF"); });
  EXPECT_NE(err.find("corrupted download"), std::string::npos) << err;
  EXPECT_NE(err.find("sha256 " + sha256_hex(bad) + ", expected " + sha256_hex(model)), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(folder / "owner/model-GGUF/model-Q4_K_M.gguf"));
  EXPECT_FALSE(fs::exists(folder / "owner/model-GGUF/model-Q4_K_M.gguf.part"));
  EXPECT_TRUE(list_models(folder).empty());
}

TEST_F(HubPull, AStalePartLongerThanTheFileIsDiscarded) {
  write_file(folder / "owner/model-GGUF/model-Q4_K_M.gguf.part", model + "extra bytes");
  const PullResult r = pull("owner/model-GGUF");
  EXPECT_EQ(read_file(r.download.path), model);
  EXPECT_EQ(hub.cdn_ranges.at(0), "");
}

TEST_F(HubPull, UserShaMustAgreeWithTheHub) {
  const std::string err = error_from([&] {
    pull_model(hub.client(), PullRequest{"owner/model-GGUF", "", std::string(64, 'a'), folder, {}});
  });
  EXPECT_NE(err.find("differs from the hub's sha256"), std::string::npos) << err;
}

TEST_F(HubPull, MissingRepoAndFileNameWhatWasNotFound) {
  std::string err = error_from([&] { pull("owner/nothing"); });
  EXPECT_NE(err.find("owner/nothing"), std::string::npos) << err;
  EXPECT_NE(err.find("repository not found"), std::string::npos) << err;
  EXPECT_NE(err.find("404"), std::string::npos) << err;
  err = error_from([&] { pull("owner/model-GGUF", "model-Q8_0.gguf"); });
  EXPECT_NE(err.find("model-Q8_0.gguf"), std::string::npos) << err;
  EXPECT_NE(err.find("revision main"), std::string::npos) << err;
  EXPECT_NE(err.find("model-Q4_K_M.gguf"), std::string::npos) << err;  // what it does have
  // The resolve URL alone (a mirror without the listing API) gives the same kind of answer.
  err = error_from([&] { remote_file_info(hub.client(), "owner/model-GGUF", "model-Q8_0.gguf"); });
  EXPECT_NE(err.find("file not found"), std::string::npos) << err;
}

TEST_F(HubPull, PrivateRepoAsksForHfTokenAndTheTokenStaysOffTheCdn) {
  hub.repos["owner/private"].files = {{"p.gguf", model}};
  hub.repos["owner/private"].token = "hf_secret";
  std::string err = error_from([&] { pull("owner/private"); });
  EXPECT_NE(err.find("401"), std::string::npos) << err;
  EXPECT_NE(err.find("HF_TOKEN"), std::string::npos) << err;
  err = error_from([&] { pull("owner/private", "", "hf_wrong"); });
  EXPECT_NE(err.find("HF_TOKEN was sent but does not grant access"), std::string::npos) << err;
  const PullResult r = pull("owner/private", "", "hf_secret");
  EXPECT_EQ(read_file(r.download.path), model);
  ASSERT_FALSE(hub.cdn_auth.empty());
  for (const std::string& auth : hub.cdn_auth) EXPECT_EQ(auth, "");
}

TEST_F(HubPull, UnreachableEndpointIsNamed) {
  HubOptions o;
  o.endpoint = "http://127.0.0.1:1";
  const std::string err = error_from([&] { pull_model(HubClient(o), PullRequest{"owner/model-GGUF", "", "", folder, {}}); });
  EXPECT_NE(err.find("cannot reach http://127.0.0.1:1"), std::string::npos) << err;
}

TEST_F(HubPull, UnwritableFolderIsAClearError) {
  write_file(folder / "not-a-folder", "x");
  const std::string err = error_from([&] {
    pull_model(hub.client(), PullRequest{"owner/model-GGUF", "", "", folder / "not-a-folder" / "models", {}});
  });
  EXPECT_NE(err.find("cannot create"), std::string::npos) << err;
}

TEST_F(HubPull, SeveralGgufsWithoutOneQ4KMAskForAFile) {
  hub.repos["owner/many"].files = {{"m-Q8_0.gguf", model}, {"m-F16.gguf", model}};
  const std::string err = error_from([&] { pull("owner/many"); });
  EXPECT_NE(err.find("name the one to pull"), std::string::npos) << err;
  EXPECT_NE(err.find("m-Q8_0.gguf"), std::string::npos) << err;
  EXPECT_NE(err.find("m-F16.gguf"), std::string::npos) << err;
}

TEST_F(HubPull, HostileFileNamesFromTheHubAreRefused) {
  hub.repos["owner/evil"].files = {{"../../escape.gguf", model}};
  const std::string err = error_from([&] { pull("owner/evil"); });
  EXPECT_NE(err.find("not a usable file name"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(folder.parent_path() / "escape.gguf"));
}

TEST(HubChoose, PrefersTheOnlyGgufThenQ4KM) {
  EXPECT_EQ(choose_gguf({{"README.md", 1, ""}, {"a.gguf", 2, ""}}, "o/r").path, "a.gguf");
  EXPECT_EQ(choose_gguf({{"a-Q8_0.gguf", 2, ""}, {"a-q4_k_m.gguf", 2, ""}}, "o/r").path, "a-q4_k_m.gguf");
  EXPECT_NE(error_from([] { choose_gguf({{"README.md", 1, ""}}, "o/r"); }).find("no .gguf"), std::string::npos);
}

// ---- the folder ----

class ModelStore : public ::testing::Test {
 protected:
  void SetUp() override {
    folder = fresh_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    write_file(folder / "a/one/only.gguf", gguf_bytes("qwen2", 4));
    write_file(folder / "a/two/x-Q4_K_M.gguf", gguf_bytes("llama", 4));
    write_file(folder / "a/two/x-Q8_0.gguf", gguf_bytes("llama", 4));
    write_file(folder / "b/two/x-Q8_0.gguf", gguf_bytes("llama", 4));
    write_file(folder / "a/two/x-F16.gguf.part", "partial");
    write_file(folder / "a/one/only.gguf.sha256", "abc  only.gguf\n");
    write_file(folder / "loose-tiny.gguf", gguf_bytes("llama", 4));
  }
  std::string resolve(const std::string& name) { return resolve_model(name, folder); }
  fs::path folder;
};

TEST_F(ModelStore, ListsGgufFilesOnlySortedByName) {
  std::vector<std::string> names;
  for (const StoredModel& m : list_models(folder)) names.push_back(m.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a/one/only.gguf", "a/two/x-Q4_K_M.gguf", "a/two/x-Q8_0.gguf",
                                              "b/two/x-Q8_0.gguf", "loose-tiny.gguf"}));
  EXPECT_TRUE(list_models(folder / "absent").empty());
}

TEST_F(ModelStore, SummaryReadsArchitectureAndParameters) {
  const ModelSummary s = summarize(folder / "a/one/only.gguf");
  EXPECT_EQ(s.architecture, "qwen2");
  EXPECT_EQ(s.parameters, 4u * 256u);
  const ModelSummary bad = summarize(folder / "a/two/x-F16.gguf.part");
  EXPECT_FALSE(bad.error.empty());
}

TEST_F(ModelStore, ResolvesPathsFullNamesReposAndBareNames) {
  const std::string only = (folder / "a/one/only.gguf").string();
  EXPECT_EQ(resolve(only), only);  // an existing path is itself
  EXPECT_EQ(resolve("a/one/only.gguf"), only);
  EXPECT_EQ(resolve("a/one/only"), only);
  EXPECT_EQ(resolve("a/one"), only);
  EXPECT_EQ(resolve("only.gguf"), only);
  EXPECT_EQ(resolve("only"), only);
  EXPECT_EQ(resolve("x-Q4_K_M"), (folder / "a/two/x-Q4_K_M.gguf").string());
  EXPECT_EQ(resolve("loose-tiny"), (folder / "loose-tiny.gguf").string());
}

TEST_F(ModelStore, AmbiguousNamesListTheCandidates) {
  std::string err = error_from([&] { resolve("a/two"); });
  EXPECT_NE(err.find("a/two/x-Q4_K_M.gguf"), std::string::npos) << err;
  EXPECT_NE(err.find("a/two/x-Q8_0.gguf"), std::string::npos) << err;
  err = error_from([&] { resolve("x-Q8_0.gguf"); });
  EXPECT_NE(err.find("b/two/x-Q8_0.gguf"), std::string::npos) << err;
}

TEST_F(ModelStore, UnknownNamesSayWhereItLookedAndSuggestPull) {
  std::string err = error_from([&] { resolve("someone/else"); });
  EXPECT_NE(err.find(folder.string()), std::string::npos) << err;
  EXPECT_NE(err.find("orchard pull someone/else"), std::string::npos) << err;
  err = error_from([&] { resolve("someone/else/f.gguf"); });
  EXPECT_NE(err.find("orchard pull someone/else f.gguf"), std::string::npos) << err;
  err = error_from([&] { resolve("x-F16"); });  // a .part is not a model yet
  EXPECT_NE(err.find("not found"), std::string::npos) << err;
}

TEST_F(ModelStore, FolderComesFromOrchardModels) {
  ::setenv("ORCHARD_MODELS", folder.c_str(), 1);
  EXPECT_EQ(models_folder(), folder);
  EXPECT_EQ(resolve_model("only"), (folder / "a/one/only.gguf").string());
  ::unsetenv("ORCHARD_MODELS");
  EXPECT_EQ(models_folder().filename(), "models");
}

TEST(ModelStoreNames, HubNamesAreCheckedBeforeBecomingPaths) {
  for (const std::string bad : {"a", "a/b/c", "../b", "a/..", "a b/c", "/a/b", ""})
    EXPECT_THROW(check_repo_name(bad), Error) << bad;
  EXPECT_NO_THROW(check_repo_name("bartowski/Llama-3.2-1B-Instruct-GGUF"));
  for (const std::string bad : {"../x.gguf", "/etc/passwd", "a//b.gguf", "a/./b.gguf", ""})
    EXPECT_THROW(check_file_name(bad), Error) << bad;
  EXPECT_NO_THROW(check_file_name("Q4_K_M/model-00001-of-00002.gguf"));
  EXPECT_EQ(model_file_path("/m", "o/r", "sub/f.gguf"), fs::path("/m/o/r/sub/f.gguf"));
}

}  // namespace
}  // namespace orchard::serve
