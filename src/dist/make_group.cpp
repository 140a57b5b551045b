#include "dist/make_group.h"

#include <cstring>

namespace orchard::dist {
namespace {

// A job of one: every collective is the identity.
class SoloGroup : public Group {
 public:
  explicit SoloGroup(std::string backend) : backend_(std::move(backend)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return backend_.c_str(); }
  void all_sum(void*, size_t, DType) override {}
  void all_gather(const void* send, void* recv, size_t bytes) override {
    if (send != recv) std::memmove(recv, send, bytes);
  }
  void all_to_all(const void* send, void* recv, size_t bytes) override {
    if (bytes && send != recv) std::memmove(recv, send, bytes);
  }
  void broadcast(void*, size_t, int root) override {
    if (root != 0) throw CommError("broadcast: root " + std::to_string(root) + " is not a rank of a group of 1");
  }
  void send(const void*, size_t, int dst) override {
    throw CommError("send to rank " + std::to_string(dst) + " in a group of 1");
  }
  void recv(void*, size_t, int src) override {
    throw CommError("recv from rank " + std::to_string(src) + " in a group of 1");
  }
  void barrier() override {}
  std::unique_ptr<Group> split(int color, int) override {
    return color < 0 ? nullptr : std::make_unique<SoloGroup>(backend_);
  }

 private:
  std::string backend_;
};

}  // namespace

std::unique_ptr<Group> make_group(const Config& config) {
  const std::string& b = config.backend;
  if (b != "tcp" && b != "shm" && b != "mpi" && b != "rdma")
    throw CommError("unknown backend '" + b + "' (choose tcp, shm, mpi or rdma)");
  if (b == "mpi") return make_mpi_group(config);  // mpirun decides the size
  if (config.size == 1) return std::make_unique<SoloGroup>(b);
  if (b == "tcp") return make_tcp_group(config);
  if (b == "shm") return make_shm_group(config);
  return make_rdma_group(config);
}

std::unique_ptr<Group> make_group_from_env() { return make_group(Config::from_env()); }

std::vector<std::string> available_backends() {
  std::vector<std::string> out = {"tcp", "shm"};
  if (mpi_available()) out.push_back("mpi");
  if (rdma_available()) out.push_back("rdma");
  return out;
}

}  // namespace orchard::dist
