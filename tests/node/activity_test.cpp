// Where the node reads its user's activity (activity.h): terminal input times under a stand-in
// /dev, logind's idle hint of graphical sessions only, and a fake loginctl end to end.
#include "node/activity.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "network/test_files.h"

namespace orchard::node {
namespace {

namespace fs = std::filesystem;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A file whose access time is `ms` (Unix ms).
void touch(const fs::path& p, int64_t ms) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "";
  const timespec t[2] = {{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1'000'000}, {0, UTIME_OMIT}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), t, 0), 0);
}

TEST(Activity, TheMostRecentTerminalInputCountsAndOtherDevicesDoNot) {
  const fs::path dev = network::test::fresh_dir("activity-dev");
  const int64_t now = 1'767'225'600'000;
  EXPECT_EQ(terminal_idle_ms(dev, now, 42), std::nullopt);  // no pts: cannot tell
  fs::create_directories(dev / "pts");
  EXPECT_EQ(terminal_idle_ms(dev, now, 42), 42);  // terminals possible, none there: since boot
  touch(dev / "pts" / "3", now - 600'000);
  touch(dev / "tty2", now - 400'000);
  touch(dev / "pts" / "ptmx", now - 1'000);  // the multiplexer, not a terminal
  touch(dev / "ttyS0", now - 1'000);         // a serial line
  touch(dev / "tty", now - 1'000);           // the controlling-terminal alias
  touch(dev / "console", now - 1'000);
  EXPECT_EQ(terminal_idle_ms(dev, now, 42), 400'000);
  touch(dev / "pts" / "0", now - 5'000);
  EXPECT_EQ(terminal_idle_ms(dev, now, 42), 5'000);
}

TEST(Activity, OnlyGraphicalSessionsIdleHintsCount) {
  const int64_t now = 1'767'225'600'000;
  EXPECT_EQ(graphical_session_idle_ms("Type=wayland\nIdleHint=yes\nIdleSinceHint=" + std::to_string((now - 90'000) * 1000) + "\n", now),
            90'000);
  EXPECT_EQ(graphical_session_idle_ms("Type=x11\nIdleHint=no\nIdleSinceHint=0\n", now), 0);
  // Nobody maintains the hint of a tty or SSH session.
  EXPECT_EQ(graphical_session_idle_ms("Type=tty\nIdleHint=no\nIdleSinceHint=0\n", now), std::nullopt);
  EXPECT_EQ(graphical_session_idle_ms("", now), std::nullopt);
}

// A stand-in loginctl: one SSH session and one desktop session idle for `idle_s` seconds.
fs::path fake_loginctl(const fs::path& dir, int idle_s) {
  const fs::path script = dir / "loginctl";
  std::ofstream(script) << "#!/bin/sh\n"
                           "case \"$1\" in\n"
                           "  list-sessions) printf '  3 1000 alice -     pts/0\\n  c2 1000 alice seat0 tty2\\n' ;;\n"
                           "  show-session) if [ \"$2\" = c2 ]; then echo Type=wayland; echo IdleHint=yes;\n"
                           "      echo IdleSinceHint=$(( ($(date +%s) - "
                        << idle_s
                        << ") * 1000000 )); else echo Type=tty; echo IdleHint=no; echo IdleSinceHint=0; fi ;;\n"
                           "  *) exit 1 ;;\n"
                           "esac\n";
  fs::permissions(script, fs::perms::owner_all);
  return script;
}

TEST(Activity, SystemActivityTakesTheMostRecentOfTerminalsAndDesktops) {
  const fs::path dir = network::test::fresh_dir("activity-system");
  const fs::path dev = dir / "dev";
  touch(dev / "pts" / "0", now_ms() - 3'600'000);  // an SSH terminal untouched for an hour
  // The desktop's user left 10 minutes ago: that is the most recent activity.
  auto idle = SystemActivity(dev, fake_loginctl(dir, 600).string()).idle_ms();
  ASSERT_TRUE(idle);
  EXPECT_GE(*idle, 598'000);
  EXPECT_LE(*idle, 700'000);
  // Without logind (the command missing), the terminal decides.
  idle = SystemActivity(dev, (dir / "no-such-loginctl").string()).idle_ms();
  ASSERT_TRUE(idle);
  EXPECT_GE(*idle, 3'598'000);
  // Neither signal: cannot tell.
  EXPECT_EQ(SystemActivity(dir / "no-dev", "").idle_ms(), std::nullopt);
}

}  // namespace
}  // namespace orchard::node
