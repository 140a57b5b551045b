// Peak resident memory of loading a model (read into memory, bound, repacked), for one setting
// of how often the file's copy is given back while repacking. ru_maxrss is per process, so
// compare settings in separate runs:
//   for e in 0 128 0 128; do build/bench/load_peak MODEL --release-every $e; done
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "model/gguf.h"
#include "model/hparams.h"
#include "model/weights.h"

int main(int argc, char** argv) {
  std::string path;
  long long every_mib = 128;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("usage: load_peak MODEL.gguf [--release-every MIB]\n"
                  "Loads MODEL as `orchard` does (read into memory, weights bound and repacked for this CPU)\n"
                  "and prints the seconds taken and the process's peak resident memory. --release-every:\n"
                  "MiB of the file's copy repacked between givings-back (default 128, as orchard loads;\n"
                  "0 = only once everything is packed, the behaviour before).\n");
      return 0;
    }
    if (a == "--release-every") {
      if (i + 1 >= argc) { std::fprintf(stderr, "load_peak: --release-every needs a value\n"); return 2; }
      char* end = nullptr;
      every_mib = std::strtoll(argv[++i], &end, 10);
      if (*end != '\0' || every_mib < 0 || every_mib > (1LL << 30)) {
        std::fprintf(stderr, "load_peak: --release-every takes MiB, 0 or more\n");
        return 2;
      }
    } else if (path.empty() && a.rfind("-", 0) != 0) {
      path = a;
    } else {
      std::fprintf(stderr, "load_peak: unexpected argument %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (path.empty()) { std::fprintf(stderr, "load_peak: a model file is required (see --help)\n"); return 2; }
  try {
    const auto t0 = std::chrono::steady_clock::now();
    auto file = orchard::GGUFFile::open(path, orchard::GGUFLoad::Read);
    const orchard::HParams hp = orchard::HParams::from_gguf(*file);
    orchard::ModelWeights w = orchard::ModelWeights::bind(*file, hp);
    w.pack_for_cpu(file.get(), every_mib == 0 ? SIZE_MAX : static_cast<size_t>(every_mib) << 20);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    std::printf("%s  release every %s  load %.2f s  peak RSS %.2f GB (file %.2f GB)\n", path.c_str(),
                every_mib == 0 ? "at the end" : (std::to_string(every_mib) + " MiB").c_str(), s,
                static_cast<double>(u.ru_maxrss) * 1024 / 1e9, static_cast<double>(file->file_size()) / 1e9);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "load_peak: %s\n", e.what());
    return 1;
  }
  return 0;
}
