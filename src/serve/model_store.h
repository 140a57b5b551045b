#pragma once
// The local models folder: where `orchard pull` puts files and where `-m NAME` looks them up.
//
// Layout (one file per model, as on the Hugging Face hub):
//   <folder>/<owner>/<repo>/<file>.gguf          pulled from hub repo owner/repo
//   <folder>/<owner>/<repo>/<file>.gguf.sha256   its verified sha256 (sha256sum format)
//   <folder>/<owner>/<repo>/<file>.gguf.part     a download in progress (resumable)
//   <folder>/<file>.gguf                          loose files (the built-in synthetic models)
// <folder> is $ORCHARD_MODELS, else <orchard_home()>/models.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace orchard::serve {

std::filesystem::path models_folder();

struct StoredModel {
  std::string name;            // "owner/repo/file.gguf", or "file.gguf" for a loose file
  std::filesystem::path path;
  uint64_t size = 0;
};

// Every *.gguf in the folder (loose or under owner/repo/), sorted by name; partial downloads
// and sidecars are not models. An absent folder is an empty list.
std::vector<StoredModel> list_models(const std::filesystem::path& folder);

// What `orchard models` shows beside a name; read from the GGUF header only.
struct ModelSummary {
  std::string architecture;    // general.architecture, empty if absent
  std::optional<uint64_t> parameters;
  std::string error;           // why the header could not be read (the other fields are empty)
};
ModelSummary summarize(const std::filesystem::path& gguf);

// `-m` for every command that takes a model:
//   an existing file                      -> itself
//   owner/repo/file.gguf (or without .gguf) -> that file in the folder
//   owner/repo                            -> its only GGUF (several: an error listing them)
//   file.gguf or its stem                 -> the one file of that name anywhere in the folder
// Anything else throws orchard::Error saying where it looked and how to pull the model.
std::string resolve_model(const std::string& name_or_path);
std::string resolve_model(const std::string& name_or_path, const std::filesystem::path& folder);

// Hub names become path components, so they are checked first: owner/repo must be two plain
// names, a file path relative and free of "." and ".." parts. Throws orchard::Error.
void check_repo_name(const std::string& repo);
void check_file_name(const std::string& file);
// <folder>/<owner>/<repo>/<file>, after the checks above.
std::filesystem::path model_file_path(const std::filesystem::path& folder, const std::string& repo,
                                      const std::string& file);

}  // namespace orchard::serve
