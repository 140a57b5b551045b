#include "node/activity.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "platform/platform.h"
#include "platform/wall_clock.h"

namespace orchard::node {

namespace fs = std::filesystem;

namespace {

// Time since boot, as ms; a day when unknown (only the "nobody there" answer uses it).
int64_t uptime_ms() { return static_cast<int64_t>(platform::uptime_seconds().value_or(86'400.0) * 1000); }

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A command's standard output, and whether it ran and exited 0.
std::optional<std::string> run(const std::string& command) {
  FILE* p = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  return ::pclose(p) == 0 ? std::optional(out) : std::nullopt;
}

// Session ids are digits, letters and a few marks; anything else is not passed to a shell.
bool safe_session_id(const std::string& id) {
  return !id.empty() && std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; });
}

}  // namespace

std::optional<int64_t> terminal_idle_ms(const fs::path& dev, int64_t now_ms, int64_t idle_since_boot) {
  std::error_code ec;
  if (!fs::is_directory(dev / "pts", ec)) return std::nullopt;
  std::optional<int64_t> latest_ms;
  auto consider = [&](const fs::path& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return;
    const int64_t at = static_cast<int64_t>(st.st_atim.tv_sec) * 1000 + st.st_atim.tv_nsec / 1'000'000;
    latest_ms = std::max(latest_ms.value_or(at), at);
  };
  for (const auto& e : fs::directory_iterator(dev / "pts", ec))
    if (all_digits(e.path().filename().string())) consider(e.path());  // not ptmx
  for (const auto& e : fs::directory_iterator(dev, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("tty", 0) == 0 && all_digits(name.substr(3))) consider(e.path());  // tty1…, not ttyS0 or tty
  }
  if (!latest_ms) return idle_since_boot;
  return std::max<int64_t>(0, now_ms - *latest_ms);
}

std::optional<int64_t> graphical_session_idle_ms(const std::string& out, int64_t now_ms) {
  std::string type, hint, since;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "Type") type = value;
    else if (key == "IdleHint") hint = value;
    else if (key == "IdleSinceHint") since = value;
  }
  if (type != "x11" && type != "wayland" && type != "mir") return std::nullopt;
  if (hint != "yes") return 0;  // the desktop says its user is there
  if (!all_digits(since)) return 0;
  const int64_t since_ms = std::stoll(since) / 1000;  // µs, CLOCK_REALTIME
  return std::max<int64_t>(0, now_ms - since_ms);
}

std::optional<int64_t> SystemActivity::idle_ms() {
  const int64_t now = platform::unix_time_ms();
  const int64_t boot = uptime_ms();
  std::optional<int64_t> idle = terminal_idle_ms(dev_, now, boot);
  if (!loginctl_.empty())
    if (const auto list = run(loginctl_ + " list-sessions --no-legend")) {
      if (!idle) idle = boot;  // logind answers: with no graphical session nobody is at a desktop
      std::istringstream lines(*list);
      for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        std::string id;
        if (!(fields >> id) || !safe_session_id(id)) continue;
        if (const auto show = run(loginctl_ + " show-session " + id + " -p Type -p IdleHint -p IdleSinceHint"))
          if (const auto s = graphical_session_idle_ms(*show, now)) idle = std::min(*idle, *s);
      }
    }
  return idle;
}

}  // namespace orchard::node
