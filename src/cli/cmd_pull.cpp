// `orchard pull` (a GGUF from a Hugging Face hub repository into the models folder) and
// `orchard models` (what that folder holds).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "serve/hub_download.h"
#include "serve/model_store.h"

namespace orchard::cli {
namespace {

std::string human_bytes(double n) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (n >= 1000 && u < 4) {
    n /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", n, units[u]);
  return buf;
}

std::string human_count(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
  else if (n >= 1000000ull) std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
  else if (n >= 1000ull) std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
  else std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
  return buf;
}

// progress.h's bar counts steps; a download wants bytes, a rate and an ETA, and a redraw
// limit (the body arrives in thousands of small pieces). Bytes kept from an earlier try count
// toward the bar but not toward the rate.
class ByteBar {
 public:
  explicit ByteBar(std::string label) : label_(std::move(label)), tty_(isatty(2) != 0) {}

  void update(int64_t done, int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (base_ < 0) base_ = done;
    done_ = done;
    total_ = total;
    if (!tty_ || now - drawn_ < std::chrono::milliseconds(100)) return;
    drawn_ = now;
    draw("");
  }

  // The final line, on terminals and in logs alike.
  void finish() {
    if (base_ >= 0) draw("\n");
  }
  // Ends a half-drawn line, so an error message starts on its own.
  void abandon() {
    if (tty_ && drawn_ != std::chrono::steady_clock::time_point{}) std::fputc('\n', stderr);
  }

 private:
  void draw(const char* end) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double rate = secs > 0 ? static_cast<double>(done_ - base_) / secs : 0;
    const int width = 30;
    std::string bar, amount = human_bytes(static_cast<double>(done_)), eta;
    if (total_ > 0) {
      const int filled = static_cast<int>(width * std::min<int64_t>(done_, total_) / total_);
      bar = "[" + std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), '.') + "] ";
      amount += " / " + human_bytes(static_cast<double>(total_));
      if (rate > 0 && done_ < total_) {
        const auto left = static_cast<long long>(static_cast<double>(total_ - done_) / rate);
        char buf[32];
        std::snprintf(buf, sizeof buf, "  ETA %lld:%02lld", left / 60, left % 60);
        eta = buf;
      }
    }
    std::fprintf(stderr, "\r%s %s%s  %s/s  %.1fs%s\x1b[K%s", label_.c_str(), bar.c_str(), amount.c_str(),
                 human_bytes(rate).c_str(), secs, eta.c_str(), end);
    std::fflush(stderr);
  }

  std::string label_;
  bool tty_;
  int64_t base_ = -1, done_ = 0, total_ = -1;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now(), drawn_{};
};

struct PullOpts {
  std::string repo, file, revision = "main", endpoint, sha256;
};

void pull(const PullOpts& o) {
  serve::HubOptions ho;
  ho.endpoint = o.endpoint.empty() ? serve::default_endpoint() : o.endpoint;
  ho.token = serve::default_token();
  ho.revision = o.revision;
  const serve::HubClient hub(ho);
  serve::PullRequest req{o.repo, o.file, o.sha256, serve::models_folder(), {}};
  req.starting = [&](const std::string& name, int64_t size) {
    std::fprintf(stderr, "pulling %s (%s) from %s\n", name.c_str(),
                 size >= 0 ? human_bytes(static_cast<double>(size)).c_str() : "size unknown", ho.endpoint.c_str());
  };
  std::unique_ptr<ByteBar> bar;
  serve::PullResult r;
  try {
    r = serve::pull_model(hub, req, [&](int64_t done, int64_t total) {
      if (!bar) bar = std::make_unique<ByteBar>("pull");
      bar->update(done, total);
    });
  } catch (...) {
    if (bar) bar->abandon();
    throw;
  }
  if (bar) bar->finish();
  if (!r.note.empty()) std::fprintf(stderr, "note: %s\n", r.note.c_str());
  const serve::DownloadResult& d = r.download;
  const std::string check = d.sha256_checked ? "sha256 verified" : "size checked; the hub gave no sha256";
  if (d.already_present)
    std::printf("%s: already present (%s, %s): %s\n", r.name.c_str(), human_bytes(static_cast<double>(d.size)).c_str(),
                r.note.empty() ? check.c_str() : "not re-checked", d.path.c_str());
  else
    std::printf("%s: pulled %s%s (%s): %s\n", r.name.c_str(), human_bytes(static_cast<double>(d.size)).c_str(),
                d.resumed_from > 0 ? (", resumed at " + human_bytes(static_cast<double>(d.resumed_from))).c_str() : "",
                check.c_str(), d.path.c_str());
  std::fprintf(stderr, "run it: orchard generate -m %s -p \"Hello\"\n", r.name.c_str());
}

void list(bool json) {
  const auto folder = serve::models_folder();
  const auto models = serve::list_models(folder);
  nlohmann::json out = nlohmann::json::array();
  struct Row {
    std::string name, size, arch, params;
  };
  std::vector<Row> rows;
  for (const auto& m : models) {
    const serve::ModelSummary s = serve::summarize(m.path);
    nlohmann::json j = {{"name", m.name}, {"path", m.path.string()}, {"size", m.size},
                        {"architecture", s.architecture}};
    j["parameters"] = s.parameters ? nlohmann::json(*s.parameters) : nlohmann::json(nullptr);
    if (!s.error.empty()) j["error"] = s.error;
    out.push_back(std::move(j));
    rows.push_back({m.name, human_bytes(static_cast<double>(m.size)),
                    s.error.empty() ? (s.architecture.empty() ? "?" : s.architecture) : "unreadable",
                    s.parameters ? human_count(*s.parameters) : "?"});
  }
  if (json) {
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  if (models.empty()) {
    std::fprintf(stderr, "no models in %s yet: orchard pull OWNER/REPO downloads one\n", folder.c_str());
    return;
  }
  size_t w = 4;
  for (const Row& r : rows) w = std::max(w, r.name.size());
  std::printf("%-*s  %10s  %-12s  %8s\n", static_cast<int>(w), "NAME", "SIZE", "ARCH", "PARAMS");
  for (const Row& r : rows)
    std::printf("%-*s  %10s  %-12s  %8s\n", static_cast<int>(w), r.name.c_str(), r.size.c_str(), r.arch.c_str(),
                r.params.c_str());
  std::fprintf(stderr, "(%zu in %s)\n", models.size(), folder.c_str());
}

}  // namespace

void register_pull(CLI::App& app) {
  auto o = std::make_shared<PullOpts>();
  auto* cmd = app.add_subcommand("pull", "Download a GGUF model from a Hugging Face hub repository into the models folder");
  cmd->add_option("repo", o->repo, "Repository, OWNER/NAME")->required();
  cmd->add_option("file", o->file,
                  "GGUF file in the repository (default: its only GGUF, else its Q4_K_M one)");
  cmd->add_option("--revision", o->revision, "Branch, tag or commit")->capture_default_str();
  cmd->add_option("--endpoint", o->endpoint, "Hub URL (default: $HF_ENDPOINT, else https://huggingface.co)");
  cmd->add_option("--sha256", o->sha256, "Expected sha256 of the file, when the hub does not give one");
  cmd->footer(
      "Examples:\n"
      "  orchard pull bartowski/Llama-3.2-1B-Instruct-GGUF                       # its Q4_K_M file\n"
      "  orchard pull bartowski/Llama-3.2-1B-Instruct-GGUF Llama-3.2-1B-Instruct-Q8_0.gguf\n"
      "  orchard generate -m bartowski/Llama-3.2-1B-Instruct-GGUF -p Hello\n"
      "  HF_TOKEN=hf_... orchard pull meta-llama/SOME-GATED-REPO FILE.gguf       # gated or private\n"
      "Files go to $ORCHARD_MODELS (default ~/.cache/orchard/models) as OWNER/NAME/FILE. An\n"
      "interrupted pull resumes where it stopped; the size and sha256 are checked before a file\n"
      "is put in place.");
  cmd->callback([o] { pull(*o); });

  auto json = std::make_shared<bool>(false);
  auto* models = app.add_subcommand("models", "List the models in the models folder");
  models->add_flag("--json", *json, "Print a JSON array (name, path, size, architecture, parameters)");
  models->footer(
      "Examples:\n"
      "  orchard models\n"
      "  orchard models --json\n"
      "  ORCHARD_MODELS=/data/models orchard models\n"
      "Every NAME works as -m: the full OWNER/NAME/FILE.gguf, OWNER/NAME when it holds one GGUF,\n"
      "or the file name alone when no other file shares it.");
  models->callback([json] { list(*json); });
}

}  // namespace orchard::cli
