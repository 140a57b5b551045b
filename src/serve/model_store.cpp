#include "serve/model_store.h"

#include <algorithm>
#include <cstdlib>
#include <system_error>

#include "model/gguf.h"
#include "model/synthetic/synthetic.h"
#include "tensor/error.h"

namespace orchard::serve {
namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::vector<std::string> split_slashes(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t slash = s.find('/', start);
    parts.push_back(s.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) return parts;
    start = slash + 1;
  }
}

bool plain_hub_name(const std::string& part) {
  if (part.empty() || part == "." || part == ".." || part.size() > 96) return false;
  return std::all_of(part.begin(), part.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
  });
}

std::string file_name_of(const std::string& name) {
  const size_t slash = name.rfind('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

std::string without_gguf(const std::string& s) {
  return ends_with(s, ".gguf") ? s.substr(0, s.size() - 5) : s;
}

std::string list_names(const std::vector<const StoredModel*>& models) {
  std::string out;
  for (const StoredModel* m : models) out += "\n  " + m->name;
  return out;
}

std::string ambiguous(const std::string& name, const std::vector<const StoredModel*>& matches) {
  return "model '" + name + "' matches " + std::to_string(matches.size()) +
         " files in the models folder; name one of them:" + list_names(matches);
}

}  // namespace

fs::path models_folder() {
  if (const char* env = std::getenv("ORCHARD_MODELS"); env && *env) return env;
  return fs::path(orchard_home()) / "models";
}

std::vector<StoredModel> list_models(const fs::path& folder) {
  std::vector<StoredModel> out;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return out;
  fs::recursive_directory_iterator it(folder, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code fec;
    if (!it->is_regular_file(fec) || it->path().extension() != ".gguf") continue;
    StoredModel m;
    m.path = it->path();
    m.name = fs::relative(it->path(), folder, fec).generic_string();
    m.size = it->file_size(fec);
    if (!fec) out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const StoredModel& a, const StoredModel& b) { return a.name < b.name; });
  return out;
}

ModelSummary summarize(const fs::path& gguf) {
  ModelSummary s;
  try {
    auto f = GGUFFile::open(gguf.string(), GGUFLoad::Map);
    s.architecture = f->get_string("general.architecture").value_or("");
    uint64_t params = 0;
    for (const auto& t : f->tensors()) params += static_cast<uint64_t>(t.n_elements());
    s.parameters = params;
  } catch (const std::exception& e) {
    s.error = e.what();
  }
  return s;
}

std::string resolve_model(const std::string& name_or_path) { return resolve_model(name_or_path, models_folder()); }

std::string resolve_model(const std::string& name, const fs::path& folder) {
  std::error_code ec;
  if (name.empty()) throw Error("no model named: pass a GGUF file or a model from `orchard models`");
  if (fs::exists(name, ec) && !fs::is_directory(name, ec)) return name;

  const std::vector<StoredModel> models = list_models(folder);
  const std::vector<std::string> parts = split_slashes(name);
  std::vector<const StoredModel*> matches;
  auto pick = [&](auto&& keep) {
    matches.clear();
    for (const StoredModel& m : models)
      if (keep(m)) matches.push_back(&m);
  };

  // A full name (owner/repo/file, with or without .gguf) is exact.
  pick([&](const StoredModel& m) { return m.name == name || without_gguf(m.name) == name; });
  if (!matches.empty()) return matches.front()->path.string();

  if (parts.size() == 2) {
    // owner/repo: the repo's single GGUF.
    pick([&](const StoredModel& m) { return m.name.rfind(name + "/", 0) == 0; });
    if (matches.size() == 1) return matches.front()->path.string();
    if (matches.size() > 1)
      throw Error("model '" + name + "' has " + std::to_string(matches.size()) +
                  " GGUF files in the models folder; name one of them with -m:" + list_names(matches));
  } else if (parts.size() == 1) {
    // A bare file name or stem, wherever it is in the folder.
    pick([&](const StoredModel& m) {
      const std::string file = file_name_of(m.name);
      return file == name || without_gguf(file) == name;
    });
    if (matches.size() == 1) return matches.front()->path.string();
    if (matches.size() > 1) throw Error(ambiguous(name, matches));
  }

  std::string msg = "model '" + name + "' not found: it is not a file, and the models folder " + folder.string() +
                    " (set by $ORCHARD_MODELS, else <orchard home>/models) has no model of that name";
  msg += models.empty() ? " (it holds none)" : " (`orchard models` lists the " + std::to_string(models.size()) +
                                                    " it holds)";
  if (parts.size() == 2 && plain_hub_name(parts[0]) && plain_hub_name(parts[1]))
    msg += ". Download it with: orchard pull " + name;
  else if (parts.size() >= 3 && plain_hub_name(parts[0]) && plain_hub_name(parts[1]))
    msg += ". Download it with: orchard pull " + parts[0] + "/" + parts[1] + " " +
           name.substr(parts[0].size() + parts[1].size() + 2);
  else
    msg += ". Download a model with: orchard pull OWNER/REPO [FILE]";
  throw Error(msg);
}

void check_repo_name(const std::string& repo) {
  const std::vector<std::string> parts = split_slashes(repo);
  if (parts.size() != 2 || !plain_hub_name(parts[0]) || !plain_hub_name(parts[1]))
    throw Error("'" + repo +
                "' is not a hub repository name: expected OWNER/REPO made of letters, digits, '-', '_' and "
                "'.', e.g. bartowski/Llama-3.2-1B-Instruct-GGUF");
}

void check_file_name(const std::string& file) {
  bool ok = !file.empty() && file.size() < 1024;
  for (const std::string& part : split_slashes(file))
    ok = ok && !part.empty() && part != "." && part != "..";
  for (char c : file) ok = ok && static_cast<unsigned char>(c) >= 0x20 && c != '\\' && c != 0x7f;
  if (!ok) throw Error("'" + file + "' is not a usable file name in a hub repository (a relative path is expected)");
}

fs::path model_file_path(const fs::path& folder, const std::string& repo, const std::string& file) {
  check_repo_name(repo);
  check_file_name(file);
  return folder / repo / file;
}

}  // namespace orchard::serve
