#include "serve/hub_download.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "model/json_number.h"
#include "serve/model_store.h"
#include "tensor/error.h"

namespace orchard::serve {
namespace fs = std::filesystem;

namespace {

// Incremental sha256 (OpenSSL EVP), so a resumed download's hash covers the kept part too.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { reset(); }
  void reset() {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) throw Error("sha256: OpenSSL failed");
  }
  void update(const void* data, size_t n) { EVP_DigestUpdate(ctx_.get(), data, n); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &len);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < len; ++i) {
      out += digits[md[i] >> 4];
      out += digits[md[i] & 15];
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

void hash_file(const fs::path& path, Sha256& sha) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    sha.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (!in.eof()) throw Error("cannot read " + path.string() + ": " + std::strerror(errno));
}

// A sha256 from the hub: lfs.oid, or an ETag / X-Linked-ETag ("…", W/"…"); git sha1 ETags of
// files outside LFS are not sha256 and give "".
std::string sha256_from(std::string text) {
  if (text.rfind("W/", 0) == 0) text = text.substr(2);
  text.erase(std::remove(text.begin(), text.end(), '"'), text.end());
  if (text.size() != 64 || !std::all_of(text.begin(), text.end(), [](char c) { return std::isxdigit(
                                                                                  static_cast<unsigned char>(c)); }))
    return "";
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

int64_t number_from(const std::string& text) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return static_cast<int64_t>(std::stoull(text));
}

std::string human(int64_t bytes) {
  char buf[32];
  if (bytes < 0) return "? bytes";
  if (bytes < (1 << 20)) std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(bytes));
  else if (bytes < (int64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  else std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / 1073741824.0);
  return buf;
}

std::string tree_url(const HubClient& hub, const std::string& repo) {
  return hub.url("/api/models/" + url_encode(repo, true) + "/tree/" + url_encode(hub.options().revision, false) +
                 "?recursive=true");
}

std::string resolve_url(const HubClient& hub, const std::string& repo, const std::string& file) {
  return hub.url("/" + url_encode(repo, true) + "/resolve/" + url_encode(hub.options().revision, false) + "/" +
                 url_encode(file, true));
}

std::string at_revision(const HubClient& hub, const std::string& repo, const std::string& file) {
  return repo + (file.empty() ? "" : ": file " + file) + " at revision " + hub.options().revision;
}

std::vector<RemoteFile> parse_listing(const std::string& body, const std::string& repo) {
  std::vector<RemoteFile> files;
  try {
    for (const auto& e : nlohmann::json::parse(body)) {
      if (!e.is_object() || !e.contains("type") || e["type"] != "file") continue;
      RemoteFile f;
      f.path = e.at("path").get<std::string>();
      f.size = e.contains("size") ? exact_get<int64_t>(e["size"]) : -1;
      if (auto lfs = e.find("lfs"); lfs != e.end() && lfs->is_object()) {
        f.sha256 = sha256_from(lfs->value("oid", ""));
        if (lfs->contains("size")) f.size = exact_get<int64_t>((*lfs)["size"]);
      }
      files.push_back(std::move(f));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(repo + ": the hub's file listing is not the JSON expected (" + e.what() + ")");
  }
  return files;
}

bool is_gguf(const std::string& path) {
  if (path.size() < 5) return false;
  std::string tail = path.substr(path.size() - 5);
  for (char& c : tail) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return tail == ".gguf";
}

std::string file_list(const std::vector<const RemoteFile*>& files) {
  std::string out;
  for (const RemoteFile* f : files) out += "\n  " + f->path + "  (" + human(f->size) + ")";
  return out;
}

std::vector<const RemoteFile*> ggufs_of(const std::vector<RemoteFile>& files) {
  std::vector<const RemoteFile*> out;
  for (const RemoteFile& f : files)
    if (is_gguf(f.path)) out.push_back(&f);
  return out;
}

// What a previous pull left: the file, verified against `expect` (via the sidecar when it can).
bool present_and_verified(const fs::path& dest, const fs::path& sidecar, const RemoteFile& expect,
                          DownloadResult& out) {
  std::error_code ec;
  const auto size = static_cast<int64_t>(fs::file_size(dest, ec));
  if (ec || (expect.size >= 0 && size != expect.size)) return false;
  std::string recorded;
  if (std::ifstream in(sidecar); in) in >> recorded;
  recorded = sha256_from(recorded);
  std::string sha = recorded;
  if (!expect.sha256.empty() && sha != expect.sha256) {
    Sha256 h;
    hash_file(dest, h);
    sha = h.hex();
    if (sha != expect.sha256) return false;
  }
  out.path = dest;
  out.size = size;
  out.sha256 = sha;
  out.already_present = true;
  out.sha256_checked = !expect.sha256.empty() || !recorded.empty();
  return true;
}

void write_sidecar(const fs::path& sidecar, const std::string& sha, const fs::path& dest) {
  fs::path tmp = sidecar;
  tmp += ".tmp";
  {
    std::ofstream out(tmp);
    out << sha << "  " << dest.filename().string() << "\n";
    if (!out) return;  // only a cache: the next pull hashes the file again
  }
  std::error_code ec;
  fs::rename(tmp, sidecar, ec);
}

// "bytes 100-199/200" -> {100, 200}; {-1, -1} when unreadable.
std::pair<int64_t, int64_t> content_range(const std::string& text) {
  const size_t dash = text.find('-'), slash = text.find('/');
  if (text.rfind("bytes ", 0) != 0 || dash == std::string::npos || slash == std::string::npos) return {-1, -1};
  return {number_from(text.substr(6, dash - 6)), number_from(text.substr(slash + 1))};
}

// Fills what `file` lacks from the X-Linked-* / ETag / length headers of the replies in `r`.
void learn_from_headers(const HttpResult& r, RemoteFile& file) {
  for (const HttpReply& hop : r.hops) {
    const bool final_2xx = &hop == &r.hops.back() && hop.status >= 200 && hop.status < 300;
    if (file.sha256.empty()) file.sha256 = sha256_from(hop.header("x-linked-etag"));
    if (file.sha256.empty() && final_2xx) file.sha256 = sha256_from(hop.header("etag"));
    if (file.size < 0) file.size = number_from(hop.header("x-linked-size"));
    if (file.size < 0 && final_2xx && hop.status == 200) file.size = number_from(hop.header("content-length"));
  }
}

}  // namespace

std::vector<RemoteFile> list_repo_files(const HubClient& hub, const std::string& repo) {
  const HttpResult r = hub.get(tree_url(hub, repo));
  if (!r.ok()) throw Error(at_revision(hub, repo, "") + ": " + hub.network_message(r));
  if (r.final().status != 200) throw Error(hub.status_message(r, "repository " + at_revision(hub, repo, "")));
  return parse_listing(r.body, repo);
}

RemoteFile choose_gguf(const std::vector<RemoteFile>& files, const std::string& repo) {
  const std::vector<const RemoteFile*> ggufs = ggufs_of(files);
  if (ggufs.size() == 1) return *ggufs.front();
  if (ggufs.empty()) throw Error(repo + " has no .gguf file; Orchard runs GGUF models (look for a -GGUF repository)");
  std::vector<const RemoteFile*> q4km;
  for (const RemoteFile* f : ggufs) {
    std::string upper = f->path;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (upper.find("Q4_K_M") != std::string::npos) q4km.push_back(f);
  }
  if (q4km.size() == 1) return *q4km.front();
  throw Error(repo + " has " + std::to_string(ggufs.size()) +
              " GGUF files; name the one to pull: orchard pull " + repo + " FILE" + file_list(ggufs));
}

RemoteFile remote_file_info(const HubClient& hub, const std::string& repo, const std::string& file) {
  RemoteFile info;
  info.path = file;
  const HttpResult r = hub.head(resolve_url(hub, repo, file));
  if (!r.ok()) throw Error(at_revision(hub, repo, file) + ": " + hub.network_message(r));
  const int status = r.final().status;
  if (status == 401 || status == 403 || status == 404) throw Error(hub.status_message(r, at_revision(hub, repo, file)));
  learn_from_headers(r, info);
  return info;
}

DownloadResult download_file(const HubClient& hub, const std::string& repo, const RemoteFile& file,
                             const fs::path& dest, const ByteProgress& progress) {
  const std::string what = repo + "/" + file.path;
  fs::path part = dest, sidecar = dest;
  part += ".part";
  sidecar += ".sha256";
  std::error_code ec;
  fs::create_directories(dest.parent_path(), ec);
  if (ec)
    throw Error("cannot create " + dest.parent_path().string() + ": " + ec.message() +
                " (set ORCHARD_MODELS to a writable folder)");

  DownloadResult result;
  RemoteFile expect = file;
  if (fs::exists(dest, ec) && present_and_verified(dest, sidecar, expect, result)) return result;

  Sha256 sha;
  int64_t have = 0;
  if (fs::exists(part, ec)) {
    have = static_cast<int64_t>(fs::file_size(part, ec));
    if (ec || (expect.size >= 0 && have > expect.size)) {
      fs::remove(part, ec);
      have = 0;
    } else {
      hash_file(part, sha);
    }
  }
  result.resumed_from = have;

  // Two tries: the second starts from zero when the server would not continue the part.
  bool finished = expect.size >= 0 && have == expect.size;
  for (int attempt = 0; attempt < 2 && !finished; ++attempt) {
    FILE* out = std::fopen(part.c_str(), "ab");
    if (!out)
      throw Error("cannot write " + part.string() + ": " + std::strerror(errno) +
                  " (set ORCHARD_MODELS to a writable folder)");
    int64_t total = expect.size;
    int write_errno = 0;
    bool misplaced = false;  // a 206 that does not continue where the part ends
    std::map<std::string, std::string> extra;
    if (have > 0) extra["Range"] = "bytes=" + std::to_string(have) + "-";

    auto check = [&](const HttpReply& reply) {
      if (reply.status == 206) {
        const auto [start, size] = content_range(reply.header("content-range"));
        if (start != have) {
          misplaced = true;
          return false;
        }
        if (total < 0) total = size;
      } else {
        // A full answer: whatever the part held is replaced.
        if (have > 0 && !(out = std::freopen(part.c_str(), "wb", out))) {
          write_errno = errno;
          return false;
        }
        sha.reset();
        have = 0;
        result.resumed_from = 0;
        if (total < 0) total = number_from(reply.header("content-length"));
      }
      if (progress) progress(have, total);
      return true;
    };
    auto sink = [&](const char* data, size_t n) {
      if (std::fwrite(data, 1, n, out) != n) {
        write_errno = errno;
        return false;
      }
      sha.update(data, n);
      have += static_cast<int64_t>(n);
      if (progress) progress(have, total);
      return true;
    };
    const HttpResult r = hub.get(resolve_url(hub, repo, file.path), extra, check, sink);
    if (out && std::fflush(out) != 0 && write_errno == 0) write_errno = errno;
    if (out) {
      ::fsync(::fileno(out));
      std::fclose(out);
    }
    learn_from_headers(r, expect);

    if (write_errno != 0)
      throw Error("cannot write " + part.string() + ": " + std::strerror(write_errno) +
                  (write_errno == ENOSPC ? " (the disk is full: free some space" : " (fix that") +
                  ", then run the same command again to resume from the " + human(have) + " kept)");
    if (misplaced || (r.ok() && r.final().status == 416)) {
      fs::remove(part, ec);
      sha.reset();
      have = 0;
      result.resumed_from = 0;
      continue;
    }
    if (!r.network_error.empty())
      throw Error(what + ": the download stopped after " + human(have) + " of " + human(total) + " (" +
                  hub.network_message(r) + "); run the same command again to resume");
    const int status = r.final().status;
    if (status < 200 || status >= 300) throw Error(hub.status_message(r, at_revision(hub, repo, file.path)));
    finished = true;
  }
  if (!finished)
    throw Error(what + ": the server answered the range request with other bytes twice; run the same command again");

  if (expect.size >= 0 && have < expect.size)
    throw Error(what + ": the download ended early, at " + std::to_string(have) + " of " +
                std::to_string(expect.size) + " bytes; run the same command again to resume");
  if (expect.size >= 0 && have > expect.size) {
    fs::remove(part, ec);
    throw Error("corrupted download of " + what + ": " + std::to_string(have) + " bytes, expected " +
                std::to_string(expect.size) + "; the partial file was deleted, run the same command again");
  }
  result.sha256 = sha.hex();
  if (!expect.sha256.empty() && result.sha256 != expect.sha256) {
    fs::remove(part, ec);
    throw Error("corrupted download of " + what + ": sha256 " + result.sha256 + ", expected " + expect.sha256 +
                "; the partial file was deleted, run the same command again");
  }
  fs::remove(sidecar, ec);  // it described the file being replaced
  fs::rename(part, dest, ec);
  if (ec) throw Error("cannot move " + part.string() + " to " + dest.string() + ": " + ec.message());
  write_sidecar(sidecar, result.sha256, dest);
  result.path = dest;
  result.size = have;
  result.sha256_checked = !expect.sha256.empty();
  return result;
}

PullResult pull_model(const HubClient& hub, const PullRequest& req, const ByteProgress& progress) {
  check_repo_name(req.repo);
  PullResult out;
  if (req.file.empty()) {
    out.remote = choose_gguf(list_repo_files(hub, req.repo), req.repo);
    check_file_name(out.remote.path);
  } else {
    check_file_name(req.file);
    out.remote.path = req.file;
    const HttpResult r = hub.get(tree_url(hub, req.repo));
    const fs::path dest = model_file_path(req.folder, req.repo, req.file);
    if (!r.ok()) {
      // Offline with the file already pulled: use it, as a package manager would.
      fs::path sidecar = dest;
      sidecar += ".sha256";
      if (fs::exists(dest) && fs::exists(sidecar)) {
        out.name = req.repo + "/" + req.file;
        out.download.path = dest;
        out.download.size = static_cast<int64_t>(fs::file_size(dest));
        out.download.already_present = true;
        out.note = "could not check the hub for a newer version: " + hub.network_message(r);
        return out;
      }
      throw Error(at_revision(hub, req.repo, "") + ": " + hub.network_message(r));
    }
    const int status = r.final().status;
    const std::string code = r.final().header("x-error-code");
    if (status == 200) {
      const std::vector<RemoteFile> files = parse_listing(r.body, req.repo);
      auto it = std::find_if(files.begin(), files.end(), [&](const RemoteFile& f) { return f.path == req.file; });
      if (it == files.end()) {
        const std::vector<const RemoteFile*> ggufs = ggufs_of(files);
        throw Error(at_revision(hub, req.repo, req.file) + ": no such file in the repository" +
                    (ggufs.empty() ? std::string(" (it has no GGUF files)") : "; its GGUF files are:" + file_list(ggufs)));
      }
      out.remote = *it;
    } else if (status == 401 || status == 403 || !code.empty()) {
      throw Error(hub.status_message(r, "repository " + at_revision(hub, req.repo, "")));
    }
    // Any other answer: a mirror without the listing API; the file's own headers still tell.
  }
  if (out.remote.sha256.empty() || out.remote.size < 0) {
    const RemoteFile info = remote_file_info(hub, req.repo, out.remote.path);
    if (out.remote.sha256.empty()) out.remote.sha256 = info.sha256;
    if (out.remote.size < 0) out.remote.size = info.size;
  }
  if (!req.sha256.empty()) {
    const std::string wanted = sha256_from(req.sha256);
    if (wanted.empty()) throw Error("--sha256 '" + req.sha256 + "' is not 64 hexadecimal digits");
    if (!out.remote.sha256.empty() && out.remote.sha256 != wanted)
      throw Error(req.repo + "/" + out.remote.path + ": --sha256 " + wanted + " differs from the hub's sha256 " +
                  out.remote.sha256);
    out.remote.sha256 = wanted;
  }
  out.name = req.repo + "/" + out.remote.path;
  if (req.starting) req.starting(out.name, out.remote.size);
  out.download = download_file(hub, req.repo, out.remote, model_file_path(req.folder, req.repo, out.remote.path),
                               progress);
  return out;
}

}  // namespace orchard::serve
