#pragma once
// When this machine's user last gave it input, for `orchard node --when-idle --idle-after 5m`:
// the node lends only once its user has been away that long, and hands a running job back as
// soon as they return.
//
// Linux, without X (the agent may run as a service with no display): two signals, the most
// recent activity wins.
//  - logind's IdleHint / IdleSinceHint of graphical sessions (`loginctl show-session`): GNOME,
//    KDE and other desktops set them from their own input tracking. Only sessions of type x11,
//    wayland or mir count: nobody maintains the hint of a tty or SSH session, which reads
//    "not idle" forever.
//  - the access time of terminal devices (/dev/pts/N, /dev/ttyN): the kernel updates it when a
//    terminal's input is read (in steps of 8 s), which is how `w` computes IDLE, for console
//    and SSH users. Output does not touch it, so an agent printing to a terminal is not input.
// Not used: /dev/input/event* (reading events needs root or the input group, and the device
// files' times do not follow events), /proc/interrupts (a USB keyboard shares its interrupt
// with every other USB device, so the counts move without a user).
// With neither signal present at all (no loginctl, no /dev/pts), the source cannot tell, and a
// policy that asked for --idle-after does not lend: a clear refusal beats lending a machine
// whose user may be at it. With the signals present but no session or terminal, nobody is
// there: idle since boot.
//
// macOS (not built): IOKit's IOHIDSystem service carries HIDIdleTime, nanoseconds since the
// last keyboard, mouse or trackpad event, for the whole machine and without a window server
// connection: IOServiceGetMatchingService(kIOMainPortDefault, IOServiceMatching("IOHIDSystem")),
// then IORegistryEntryCreateCFProperty(service, CFSTR("HIDIdleTime"), …) as a CFNumber.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace orchard::node {

class ActivitySource {
 public:
  virtual ~ActivitySource() = default;
  // Milliseconds since the user last gave input; nullopt when this source cannot tell.
  virtual std::optional<int64_t> idle_ms() = 0;
};

// The Linux source described above.
class SystemActivity : public ActivitySource {
 public:
  // `dev` replaces /dev and `loginctl` the command (tests; "" skips logind).
  explicit SystemActivity(std::filesystem::path dev = "/dev", std::string loginctl = "loginctl")
      : dev_(std::move(dev)), loginctl_(std::move(loginctl)) {}
  std::optional<int64_t> idle_ms() override;

 private:
  std::filesystem::path dev_;
  std::string loginctl_;
};

// Milliseconds since the last input on a terminal under `dev` (pts/N, ttyN), given the time now
// (Unix ms); nullopt when `dev`/pts does not exist (no terminals to look at). `idle_since_boot`
// is returned when there are terminals but none was ever read.
std::optional<int64_t> terminal_idle_ms(const std::filesystem::path& dev, int64_t now_ms, int64_t idle_since_boot);

// One session's `loginctl show-session ID -p Type -p IdleHint -p IdleSinceHint` output: its
// idle milliseconds when it is a graphical session (0 when IdleHint=no), else nullopt.
std::optional<int64_t> graphical_session_idle_ms(const std::string& show_session_output, int64_t now_ms);

}  // namespace orchard::node
