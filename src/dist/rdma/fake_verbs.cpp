#include "dist/rdma/fake_verbs.h"

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "dist/group.h"

namespace orchard::dist::rdma {
namespace {

class FakeQp;

struct Fabric {
  std::mutex mu;
  std::map<uint32_t, FakeQp*> qps;
  std::map<uint32_t, Region> regions;  // by rkey
  uint32_t next_qpn = 100, next_key = 1000;
  std::atomic<bool> broken{false};
};

Fabric& fabric() {
  static Fabric f;
  return f;
}

class FakeQp : public QueuePair {
 public:
  explicit FakeQp(int depth) : depth_(depth) {
    std::lock_guard<std::mutex> lock(fabric().mu);
    qpn_ = fabric().next_qpn++;
    fabric().qps[qpn_] = this;
  }
  ~FakeQp() override {
    std::lock_guard<std::mutex> lock(fabric().mu);
    fabric().qps.erase(qpn_);
  }
  Endpoint local() const override {
    Endpoint e{};
    e.qpn = qpn_;
    e.psn = qpn_ * 7;
    e.lid = 1;
    return e;
  }
  void connect(const Endpoint& remote) override {
    std::lock_guard<std::mutex> lock(fabric().mu);
    if (!fabric().qps.count(remote.qpn)) throw CommError("rdma (fake): no queue pair " + std::to_string(remote.qpn));
    remote_ = remote.qpn;
  }
  void write_imm(const Region& mr, const void* local, size_t bytes, uint64_t remote_addr, uint32_t rkey, uint32_t imm,
                 uint64_t wr_id) override {
    Completion done{false, 0, wr_id, true, ""};
    const auto* src = static_cast<const uint8_t*>(local);
    if (bytes && (src < static_cast<uint8_t*>(mr.addr) || src + bytes > static_cast<uint8_t*>(mr.addr) + mr.bytes)) {
      done.ok = false;
      done.error = "local protection error (buffer outside its registered region)";
    }
    std::unique_lock<std::mutex> lock(fabric().mu);
    if (done.ok && fabric().broken) {
      done.ok = false;
      done.error = "transport retry counter exceeded (peer unreachable)";
    }
    FakeQp* peer = nullptr;
    if (done.ok) {
      auto it = fabric().qps.find(remote_);
      auto reg = fabric().regions.find(rkey);
      if (it == fabric().qps.end()) {
        done.ok = false;
        done.error = "remote queue pair gone";
      } else if (reg == fabric().regions.end() ||
                 remote_addr < reinterpret_cast<uint64_t>(reg->second.addr) ||
                 remote_addr + bytes > reinterpret_cast<uint64_t>(reg->second.addr) + reg->second.bytes) {
        done.ok = false;
        done.error = "remote access error (bad rkey or out of bounds)";
      } else {
        peer = it->second;
      }
    }
    if (peer) {
      if (bytes) std::memcpy(reinterpret_cast<void*>(remote_addr), src, bytes);
      peer->deliver(imm);
    }
    lock.unlock();
    std::lock_guard<std::mutex> mine(mu_);
    if (++outstanding_ > depth_) throw CommError("rdma (fake): send queue overflow");
    cq_.push_back(done);
  }
  void post_recv(uint64_t wr_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!unmatched_.empty()) {
      cq_.push_back(Completion{true, unmatched_.front(), wr_id, true, ""});
      unmatched_.pop_front();
      return;
    }
    recv_ids_.push_back(wr_id);
  }
  // An incoming immediate takes a posted receive; with none posted it waits
  // for the next one, as a NIC's receiver-not-ready retries would.
  void deliver(uint32_t imm) {
    std::lock_guard<std::mutex> lock(mu_);
    if (recv_ids_.empty()) {
      unmatched_.push_back(imm);
      return;
    }
    cq_.push_back(Completion{true, imm, recv_ids_.front(), true, ""});
    recv_ids_.pop_front();
  }
  int poll(Completion* out, int max) override {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    while (n < max && !cq_.empty()) {
      if (!cq_.front().is_recv) --outstanding_;
      out[n++] = std::move(cq_.front());
      cq_.pop_front();
    }
    return n;
  }

 private:
  int depth_;
  uint32_t qpn_ = 0, remote_ = 0;
  std::mutex mu_;
  std::deque<Completion> cq_;
  std::deque<uint64_t> recv_ids_;
  std::deque<uint32_t> unmatched_;
  int outstanding_ = 0;
};

class FakeVerbs : public Verbs {
 public:
  std::string device() const override { return "fake0"; }
  Region register_memory(void* addr, size_t bytes) override {
    std::lock_guard<std::mutex> lock(fabric().mu);
    Region r{addr, bytes, fabric().next_key, fabric().next_key + 1, nullptr};
    fabric().next_key += 2;
    fabric().regions[r.rkey] = r;
    return r;
  }
  void deregister(Region& r) override {
    std::lock_guard<std::mutex> lock(fabric().mu);
    fabric().regions.erase(r.rkey);
  }
  std::unique_ptr<QueuePair> create_qp(int depth) override { return std::make_unique<FakeQp>(depth); }
};

}  // namespace

std::unique_ptr<Verbs> make_fake_verbs() { return std::make_unique<FakeVerbs>(); }
void fake_break_links() { fabric().broken = true; }
void fake_reset() { fabric().broken = false; }

}  // namespace orchard::dist::rdma
