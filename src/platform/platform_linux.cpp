// The platform interface (platform.h) on Linux: /proc, powercap, madvise, sched_*affinity,
// accept4 and SOCK_CLOEXEC, MSG_NOSIGNAL, futex.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include <cerrno>
#include <csignal>
#include <climits>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "platform/platform.h"

namespace orchard::platform {
namespace {

// The value of `key` (e.g. "MemTotal:") in a "key value unit" file such as /proc/meminfo.
std::optional<uint64_t> keyed_kib(const char* path, const char* key) {
  std::ifstream in(path);
  const size_t n = std::strlen(key);
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, n, key) == 0) return std::strtoull(line.c_str() + n, nullptr, 10);
  return std::nullopt;
}

std::optional<uint64_t> read_u64(const std::filesystem::path& p) {
  std::ifstream in(p);
  uint64_t v = 0;
  if (in >> v) return v;
  return std::nullopt;
}

// The energy_uj file read_energy() uses: ORCHARD_ENERGY_FILE, else the first RAPL package
// domain that exists (both sysfs layouts). Empty when there is none.
std::filesystem::path energy_file() {
  if (const char* f = std::getenv("ORCHARD_ENERGY_FILE"); f && *f) return f;
  for (const char* p : {"/sys/class/powercap/intel-rapl:0/energy_uj", "/sys/class/powercap/intel-rapl/intel-rapl:0/energy_uj"})
    if (std::ifstream(p).good()) return p;
  return {};
}

// Page-aligned [begin, end) inside [p, p+n), or an empty range.
std::pair<uintptr_t, uintptr_t> inner_pages(void* p, size_t n) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t begin = (a + page - 1) / page * page, end = (a + n) / page * page;
  return {begin, end > begin ? end : begin};
}

}  // namespace

uint64_t physical_memory_bytes() {
  if (const auto kib = keyed_kib("/proc/meminfo", "MemTotal:")) return *kib * 1024;
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(size) : 0;
}

std::optional<uint64_t> available_memory_bytes() {
  if (const auto kib = keyed_kib("/proc/meminfo", "MemAvailable:")) return *kib * 1024;
  return std::nullopt;
}

std::optional<double> load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  if (in >> one) return one;
  return std::nullopt;
}

std::optional<double> uptime_seconds() {
  std::ifstream in("/proc/uptime");
  double s = 0;
  if (in >> s) return s;
  return std::nullopt;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      std::string v = line.substr(line.find(':') + 1);
      v.erase(0, v.find_first_not_of(' '));
      return v;
    }
  return {};
}

std::string executable_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

double resident_mib() { return static_cast<double>(keyed_kib("/proc/self/status", "VmRSS:").value_or(0)) / 1024.0; }

double peak_resident_mib() {
  return static_cast<double>(keyed_kib("/proc/self/status", "VmHWM:").value_or(0)) / 1024.0;
}

void advise_huge_pages(void* p, size_t n) {
  const auto [begin, end] = inner_pages(p, n);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

void release_pages(void* p, size_t n) {
  const auto [begin, end] = inner_pages(p, n);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

std::vector<int> allowed_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  return cpus;
}

void pin_to_cpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  ::sched_setaffinity(0, sizeof set, &set);
}

int tcp_socket(bool nonblocking) {
  return ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
}

int accept_connection(int listen_fd, sockaddr* addr, socklen_t* len) {
  return ::accept4(listen_fd, addr, len, SOCK_CLOEXEC);
}

bool peer_closed(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

uint64_t raise_open_file_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur < r.rlim_max) {
    rlimit want = r;
    want.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &want) == 0) r = want;
  }
  return r.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(r.rlim_cur);
}

bool make_pipe(int fds[2], bool nonblocking) { return ::pipe2(fds, O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0)) == 0; }

int lock_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

ArmFeatures arm_features() {
  ArmFeatures f;
#if defined(__aarch64__)
  const unsigned long hw = ::getauxval(AT_HWCAP), hw2 = ::getauxval(AT_HWCAP2);
  f.dotprod = (hw & HWCAP_ASIMDDP) != 0;
  f.fp16 = (hw & HWCAP_ASIMDHP) != 0;
#if defined(HWCAP2_I8MM)
  f.i8mm = (hw2 & HWCAP2_I8MM) != 0;
#else
  f.i8mm = (hw2 & (1UL << 13)) != 0;  // HWCAP2_I8MM, Linux 5.10
#endif
#endif
  return f;
}

int send_no_signal() { return MSG_NOSIGNAL; }

bool set_tcp_congestion(int fd, const std::string& name) {
  return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.c_str(), static_cast<socklen_t>(name.size())) == 0;
}

void wait_on_address(std::atomic<uint32_t>* word, uint32_t expected, long timeout_ns) {
  timespec ts{timeout_ns / 1'000'000'000, timeout_ns % 1'000'000'000};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void wake_address(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

std::optional<EnergySample> read_energy() {
  const std::filesystem::path f = energy_file();
  if (f.empty()) return std::nullopt;
  const std::optional<uint64_t> uj = read_u64(f);
  if (!uj) return std::nullopt;
  return EnergySample{*uj, read_u64(f.parent_path() / "max_energy_range_uj").value_or(0)};
}

std::string energy_source() {
  const std::filesystem::path f = energy_file();
  if (f.empty()) return "unavailable: no RAPL energy counter (/sys/class/powercap/intel-rapl:0)";
  if (!read_u64(f)) return "unavailable: " + f.string() + " cannot be read (RAPL counters are root-only on many kernels)";
  return f.string();
}

std::string os_version() {
  utsname u{};
  if (::uname(&u) != 0) return "Linux";
  return std::string(u.sysname) + " " + u.release;
}

void end_with_parent() { ::prctl(PR_SET_PDEATHSIG, SIGKILL); }

std::vector<NetInterface> network_interfaces() {
  std::vector<NetInterface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    NetInterface n;
    n.name = a->ifa_name;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    n.address = text;
    if (a->ifa_netmask)
      n.prefix = __builtin_popcount(reinterpret_cast<const sockaddr_in*>(a->ifa_netmask)->sin_addr.s_addr);
    n.up = (a->ifa_flags & IFF_UP) != 0;
    n.loopback = (a->ifa_flags & IFF_LOOPBACK) != 0;
    std::error_code ec;
    n.bridge = std::filesystem::exists("/sys/class/net/" + n.name + "/bridge", ec);
    out.push_back(std::move(n));
  }
  ::freeifaddrs(list);
  return out;
}

}  // namespace orchard::platform
