#pragma once
// `orchard pull`: files of a Hugging Face hub repository into the models folder.
//
// The hub layout used (huggingface.co and its mirrors):
//   {endpoint}/api/models/{repo}/tree/{revision}?recursive=true   JSON list of the repo's files
//       [{"type": "file", "path": "x.gguf", "size": N, "lfs": {"oid": "<sha256>", "size": N}}, …]
//   {endpoint}/{repo}/resolve/{revision}/{file}                    the file, usually redirected
//       to a CDN; LFS files carry X-Linked-Size and X-Linked-ETag ("<sha256>") on that redirect
//
// A download goes to <file>.part and is resumed from its end with a Range request; the whole
// file's size and sha256 are checked before it is renamed into place, then the sha256 is kept
// beside it in <file>.sha256 so a second pull does not hash it again.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "serve/hub_client.h"

namespace orchard::serve {

struct RemoteFile {
  std::string path;      // inside the repo
  int64_t size = -1;     // -1: unknown
  std::string sha256;    // lower-case hex; empty: unknown (files outside LFS have only a git sha1)
};

// The repo's files at options.revision; throws orchard::Error (404, 401, network …).
std::vector<RemoteFile> list_repo_files(const HubClient& hub, const std::string& repo);

// The GGUF to pull when the user named none: the only one, else the only Q4_K_M one; else
// throws an Error listing the GGUF files and asking for one.
RemoteFile choose_gguf(const std::vector<RemoteFile>& files, const std::string& repo);

// Size and sha256 from the headers of a HEAD of the file's URL (redirect hops included).
RemoteFile remote_file_info(const HubClient& hub, const std::string& repo, const std::string& file);

// Called with the bytes the file holds so far (a resumed part counts) and its total (-1 unknown).
using ByteProgress = std::function<void(int64_t done, int64_t total)>;

struct DownloadResult {
  std::filesystem::path path;
  int64_t size = 0;
  std::string sha256;
  int64_t resumed_from = 0;     // bytes of an earlier .part the server let us keep
  bool already_present = false; // nothing was downloaded
  bool sha256_checked = false;  // false when no expected sha256 was known (size checked only)
};

// Downloads `file` (its expected size/sha256, when known, are checked) to `dest`. Throws
// orchard::Error; an interrupted transfer or a full disk leaves <dest>.part for the next try,
// a corrupted one (wrong size or sha256) deletes it.
DownloadResult download_file(const HubClient& hub, const std::string& repo, const RemoteFile& file,
                             const std::filesystem::path& dest, const ByteProgress& progress = {});

struct PullRequest {
  std::string repo;              // owner/name
  std::string file;              // empty: choose_gguf
  std::string sha256;            // expected sha256 from the user (--sha256); empty: the hub's
  std::filesystem::path folder;  // the models folder
  // Told the chosen file's name (owner/repo/file) and size (-1 unknown) before any download.
  std::function<void(const std::string& name, int64_t size)> starting;
};

struct PullResult {
  std::string name;              // owner/repo/file, what `-m` accepts
  RemoteFile remote;             // what the hub said about it
  DownloadResult download;
  std::string note;              // something the user should know (e.g. the hub was unreachable)
};

// list → choose → size/sha256 → download, as `orchard pull` does.
PullResult pull_model(const HubClient& hub, const PullRequest& request, const ByteProgress& progress = {});

}  // namespace orchard::serve
