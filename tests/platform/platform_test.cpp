// The platform interface on this OS: what the rest of Orchard asks of it, and the energy counter
// read from a file the test provides (laid out as Linux's powercap RAPL files).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "platform/energy_meter.h"
#include "platform/platform.h"

namespace orchard::platform {
namespace {

namespace fs = std::filesystem;

// A powercap-like folder: energy_uj and max_energy_range_uj; ORCHARD_ENERGY_FILE points at it
// while the object lives.
class CounterFile {
 public:
  explicit CounterFile(uint64_t range) : dir_(fs::temp_directory_path() / ("orchard-energy-" + std::to_string(getpid()))) {
    fs::create_directories(dir_);
    if (range) std::ofstream(dir_ / "max_energy_range_uj") << range << "\n";
    set(0);
    setenv("ORCHARD_ENERGY_FILE", (dir_ / "energy_uj").c_str(), 1);
  }
  ~CounterFile() {
    unsetenv("ORCHARD_ENERGY_FILE");
    fs::remove_all(dir_);
  }
  void set(uint64_t uj) { std::ofstream(dir_ / "energy_uj") << uj << "\n"; }

 private:
  fs::path dir_;
};

TEST(Energy, JoulesBetweenTwoReadingsOfTheCounter) {
  CounterFile counter(/*range=*/0);
  counter.set(1'000'000);
  EnergyMeter meter;
  ASSERT_TRUE(meter.available());
  counter.set(3'500'000);
  ASSERT_TRUE(meter.joules().has_value());
  EXPECT_DOUBLE_EQ(*meter.joules(), 2.5);
  meter.restart();
  EXPECT_DOUBLE_EQ(*meter.joules(), 0.0);
  EXPECT_NE(energy_source().find("energy_uj"), std::string::npos) << energy_source();
}

TEST(Energy, ACounterThatWrapsIsCountedAcrossTheWrap) {
  CounterFile counter(/*range=*/5'000'000);
  counter.set(4'500'000);
  EnergyMeter meter;
  counter.set(500'000);  // wrapped at 5 J: 0.5 J to the wrap, 0.5 J after it
  EXPECT_DOUBLE_EQ(meter.joules().value_or(-1), 1.0);
}

TEST(Energy, NoCounterIsUnavailableSayingWhy) {
  setenv("ORCHARD_ENERGY_FILE", "/nonexistent/energy_uj", 1);
  EXPECT_FALSE(read_energy().has_value());
  EXPECT_FALSE(EnergyMeter().joules().has_value());
  EXPECT_EQ(energy_source().rfind("unavailable", 0), 0u) << energy_source();
  EXPECT_NE(energy_source().find("/nonexistent/energy_uj"), std::string::npos) << energy_source();
  unsetenv("ORCHARD_ENERGY_FILE");
}

TEST(Platform, MemoryProcessAndCpusAreKnown) {
  EXPECT_GT(physical_memory_bytes(), uint64_t{64} << 20);
  if (const auto avail = available_memory_bytes()) {
    EXPECT_LE(*avail, physical_memory_bytes());
  }
  const double resident = resident_mib();  // read first: the peak read after it covers it
  EXPECT_GT(resident, 0.0);
  EXPECT_GE(peak_resident_mib(), resident);
  EXPECT_TRUE(fs::exists(executable_path())) << executable_path();
  EXPECT_GE(load_average().value_or(0.0), 0.0);
  EXPECT_GT(uptime_seconds().value_or(1.0), 0.0);
  const std::vector<int> cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  // Pinning to the CPUs already allowed changes nothing visible but must be accepted.
  pin_to_cpus(cpus);
  EXPECT_EQ(allowed_cpus(), cpus);
}

TEST(Platform, PipesAndSocketsAreCloseOnExec) {
  int fds[2];
  ASSERT_TRUE(make_pipe(fds, /*nonblocking=*/true));
  for (int fd : fds) {
    EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC);
    EXPECT_TRUE(::fcntl(fd, F_GETFL) & O_NONBLOCK);
    ::close(fd);
  }
  const int s = tcp_socket(/*nonblocking=*/false);
  ASSERT_GE(s, 0);
  EXPECT_TRUE(::fcntl(s, F_GETFD) & FD_CLOEXEC);
  EXPECT_FALSE(::fcntl(s, F_GETFL) & O_NONBLOCK);
  ::close(s);
}

TEST(Platform, AWaiterOnAnAddressWakesWhenWokenOrTimedOut) {
  std::atomic<uint32_t> word{0};
  // A changed value returns at once; an unchanged one after the timeout.
  wait_on_address(&word, 1, 1'000'000'000);
  const auto t0 = std::chrono::steady_clock::now();
  wait_on_address(&word, 0, 20'000'000);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(5));
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    word.store(1);
    wake_address(&word);
  });
  while (word.load() == 0) wait_on_address(&word, 0, 2'000'000'000);
  waker.join();
  EXPECT_EQ(word.load(), 1u);
}

TEST(Platform, HintsOnMemoryKeepItUsable) {
  std::vector<uint8_t> buf(8 << 20, 7);
  advise_huge_pages(buf.data(), buf.size());
  EXPECT_EQ(buf[4 << 20], 7);
  // Released anonymous pages read back as zero; the partial pages at the ends keep their data.
  release_pages(buf.data(), buf.size());
  EXPECT_EQ(buf[4 << 20], 0);
}

}  // namespace
}  // namespace orchard::platform
