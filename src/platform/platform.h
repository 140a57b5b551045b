#pragma once
// Everything Orchard asks of the operating system, in one place. platform_linux.cpp implements it
// for Linux; a macOS port is one more file implementing the same functions (docs/architecture.md
// lists what each must do there). Code outside src/platform makes no OS-specific call: it asks
// here. Every function is safe to call from any thread.
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace orchard::platform {

// Installed memory in bytes; 0 when it cannot be read.
uint64_t physical_memory_bytes();
// Memory that can be allocated without swapping (Linux: MemAvailable), when known.
std::optional<uint64_t> available_memory_bytes();
// The 1-minute load average (runnable threads), when known.
std::optional<double> load_average();
// Seconds since the machine booted, when known.
std::optional<double> uptime_seconds();
// The CPU's marketing name ("AMD EPYC 9B14"); empty when unknown.
std::string cpu_model();
// The operating system and its version ("Linux 6.1.0-18-amd64", "macOS 26.2").
std::string os_version();

// A network interface's IPv4 address (interfaces with several appear once for each).
struct NetInterface {
  std::string name;     // "eth0", "en0", "bridge0"
  std::string address;  // dotted IPv4
  int prefix = 0;       // netmask length
  bool up = false, loopback = false;
  bool bridge = false;  // a software bridge (macOS: bridge0 is the Thunderbolt Bridge)
};
std::vector<NetInterface> network_interfaces();

// Called in a child process before exec: the child is killed when its parent dies (a cluster
// member's rank must not outlive the agent that started it). Linux: PR_SET_PDEATHSIG; macOS has
// no such flag (its implementation would watch the parent with kqueue's NOTE_EXIT).
void end_with_parent();

// The running executable's absolute path; empty when it cannot be found.
std::string executable_path();
// This process's resident memory now and at its peak, in MiB (0 when unknown).
double resident_mib();
double peak_resident_mib();

// Hints about memory the caller owns: back [p, p+n) with huge pages where the OS can (no-op
// elsewhere), and give the pages of [p, p+n) back (their contents are reloaded or zero on the
// next touch). Both round inward to whole pages.
void advise_huge_pages(void* p, size_t n);
void release_pages(void* p, size_t n);

// The Arm extensions the kernels can use, as this CPU reports them (Linux: the auxiliary vector's
// hwcaps; macOS: sysctl hw.optional.arm.FEAT_DotProd, FEAT_I8MM, FEAT_FP16). All false elsewhere.
struct ArmFeatures {
  bool dotprod = false;  // SDOT/UDOT: int8 dot products (Armv8.2 optional, every Apple M chip)
  bool i8mm = false;     // SMMLA: int8 2×8 · 8×2 matrix tiles (Apple M2 and later)
  bool fp16 = false;     // half-precision arithmetic
};
ArmFeatures arm_features();

// The CPUs this process may run on, and restricting the calling process to some of them (both
// empty / no-op where the OS has no such call: macOS schedules by its own affinity hints).
std::vector<int> allowed_cpus();
void pin_to_cpus(const std::vector<int>& cpus);

// A TCP socket (IPv4, stream), close-on-exec so launched ranks do not inherit it, optionally
// non-blocking; -1 with errno set on failure. accept(2) likewise.
int tcp_socket(bool nonblocking);
int accept_connection(int listen_fd, sockaddr* addr, socklen_t* len);
// Whether the peer of a connected TCP socket closed its side or the connection broke (a FIN or a
// reset arrived), without reading any data (Linux: poll's POLLRDHUP; elsewhere a peek that reads 0).
bool peer_closed(int fd);
// Raises this process's open-file limit to the most it may have (a server holding tens of
// thousands of connections needs one descriptor each); returns the limit now in force.
uint64_t raise_open_file_limit();
// A pipe whose ends are close-on-exec (and non-blocking if asked); false with errno on failure.
bool make_pipe(int fds[2], bool nonblocking);
// An exclusive lock on the file at `path` (created, mode 0600, when absent) held while the
// returned descriptor stays open (close-on-exec): -1 with errno EWOULDBLOCK when another open
// of the file holds it (this process's or another's), other errno values on failure. Linux and
// macOS: flock(2).
int lock_file(const std::string& path);
// Flags for send(2)/sendmsg(2) so that a peer gone away is an EPIPE error, not SIGPIPE (Linux:
// MSG_NOSIGNAL; macOS sets SO_NOSIGPIPE on the socket instead and passes 0).
int send_no_signal();
// Use the named TCP congestion control on this socket (Linux: TCP_CONGESTION, e.g. "cubic");
// false where the OS has no such option or does not offer that algorithm.
bool set_tcp_congestion(int fd, const std::string& name);

// Sleep while *word == expected, at most timeout_ns (Linux: futex; macOS: os_sync_wait_on_address),
// and wake every sleeper on word. Works across processes on shared memory.
void wait_on_address(std::atomic<uint32_t>* word, uint32_t expected, long timeout_ns);
void wake_address(std::atomic<uint32_t>* word);

// The CPU package's energy counter: microjoules since an arbitrary start, wrapping to 0 after
// `range` (Linux: powercap RAPL, /sys/class/powercap/intel-rapl:0; macOS would read IOReport's
// energy model). ORCHARD_ENERGY_FILE names a file read instead, laid out as RAPL's energy_uj
// (its max_energy_range_uj beside it), which is how tests provide a counter.
struct EnergySample {
  uint64_t microjoules = 0;
  uint64_t range = 0;  // the counter wraps here; 0: does not wrap
};
std::optional<EnergySample> read_energy();
// Where read_energy() reads, or why there is nothing to read ("unavailable: …").
std::string energy_source();

}  // namespace orchard::platform
