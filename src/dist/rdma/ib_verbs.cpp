// libibverbs underneath the rdma backend: one protection domain per process,
// one completion queue per reliable-connected queue pair, RDMA write with
// immediate for data and credits. Compiled when libibverbs-dev is present;
// it has NOT run on RDMA hardware yet (see README): only its logic above the
// verbs has, against the in-process fake.
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "dist/group.h"
#include "dist/make_group.h"
#include "dist/rdma/verbs.h"

namespace orchard::dist {
bool rdma_available() { return true; }
}  // namespace orchard::dist

namespace orchard::dist::rdma {
namespace {

constexpr uint8_t kPort = 1;

[[noreturn]] void fail(const std::string& what) {
  throw CommError("rdma: " + what + (errno ? std::string(": ") + std::strerror(errno) : ""));
}

class IbQp : public QueuePair {
 public:
  IbQp(ibv_context* ctx, ibv_pd* pd, int depth, uint16_t lid, const ibv_gid& gid, int gid_index)
      : lid_(lid), gid_(gid), gid_index_(gid_index) {
    cq_ = ibv_create_cq(ctx, 2 * depth, nullptr, nullptr, 0);
    if (!cq_) fail("ibv_create_cq");
    ibv_qp_init_attr a{};
    a.send_cq = cq_;
    a.recv_cq = cq_;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = static_cast<uint32_t>(depth);
    a.cap.max_recv_wr = static_cast<uint32_t>(depth);
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    qp_ = ibv_create_qp(pd, &a);
    if (!qp_) fail("ibv_create_qp");
    psn_ = std::random_device{}() & 0xFFFFFF;
  }
  ~IbQp() override {
    if (qp_) ibv_destroy_qp(qp_);
    if (cq_) ibv_destroy_cq(cq_);
  }
  Endpoint local() const override {
    Endpoint e{};
    e.qpn = qp_->qp_num;
    e.psn = psn_;
    e.lid = lid_;
    std::memcpy(e.gid, gid_.raw, 16);
    return e;
  }
  void connect(const Endpoint& r) override {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = kPort;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    if (ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      fail("queue pair to INIT");
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = r.qpn;
    a.rq_psn = r.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = r.lid;
    a.ah_attr.port_num = kPort;
    bool global = false;
    for (uint8_t b : r.gid) global |= b != 0;
    if (global) {  // RoCE and Thunderbolt RDMA route by GID
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, r.gid, 16);
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index_);
      a.ah_attr.grh.hop_limit = 1;
    }
    if (ibv_modify_qp(qp_, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      fail("queue pair to RTR");
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;  // receiver-not-ready: retry for ever (credits bound the backlog)
    a.sq_psn = psn_;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(qp_, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC))
      fail("queue pair to RTS");
  }
  void write_imm(const Region& mr, const void* local, size_t bytes, uint64_t remote_addr, uint32_t rkey, uint32_t imm,
                 uint64_t wr_id) override {
    ibv_sge sge{reinterpret_cast<uint64_t>(local), static_cast<uint32_t>(bytes), mr.lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = wr_id;
    wr.sg_list = bytes ? &sge : nullptr;
    wr.num_sge = bytes ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(imm);
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
    if (ibv_post_send(qp_, &wr, &bad)) fail("ibv_post_send");
  }
  void post_recv(uint64_t wr_id) override {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = wr_id;
    if (ibv_post_recv(qp_, &wr, &bad)) fail("ibv_post_recv");
  }
  int poll(Completion* out, int max) override {
    ibv_wc wc[16];
    const int n = ibv_poll_cq(cq_, std::min(max, 16), wc);
    if (n < 0) fail("ibv_poll_cq");
    for (int i = 0; i < n; ++i) {
      out[i].is_recv = wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM;
      out[i].imm = out[i].is_recv ? ntohl(wc[i].imm_data) : 0;
      out[i].wr_id = wc[i].wr_id;
      out[i].ok = wc[i].status == IBV_WC_SUCCESS;
      out[i].error = out[i].ok ? "" : ibv_wc_status_str(wc[i].status);
    }
    return n;
  }

 private:
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  uint16_t lid_;
  ibv_gid gid_;
  int gid_index_;
};

class IbVerbs : public Verbs {
 public:
  explicit IbVerbs(const std::string& want) {
    errno = 0;
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list || n == 0) {
      if (list) ibv_free_device_list(list);
      errno = 0;
      fail("no RDMA device found (is the driver loaded? on macOS 26.2+, enable RDMA over Thunderbolt 5)");
    }
    ibv_device* dev = nullptr;
    for (int i = 0; i < n && !dev; ++i)
      if (want.empty() || want == ibv_get_device_name(list[i])) dev = list[i];
    if (!dev) {
      ibv_free_device_list(list);
      errno = 0;
      fail("no RDMA device named '" + want + "'");
    }
    name_ = ibv_get_device_name(dev);
    ctx_ = ibv_open_device(dev);
    ibv_free_device_list(list);
    if (!ctx_) fail("cannot open " + name_);
    pd_ = ibv_alloc_pd(ctx_);
    if (!pd_) fail("ibv_alloc_pd on " + name_);
    ibv_port_attr port{};
    if (ibv_query_port(ctx_, kPort, &port)) fail("ibv_query_port on " + name_);
    lid_ = port.lid;
    const char* gi = std::getenv("ORCHARD_RDMA_GID_INDEX");
    gid_index_ = gi ? std::atoi(gi) : 0;
    if (ibv_query_gid(ctx_, kPort, gid_index_, &gid_)) std::memset(&gid_, 0, sizeof gid_);
  }
  ~IbVerbs() override {
    if (pd_) ibv_dealloc_pd(pd_);
    if (ctx_) ibv_close_device(ctx_);
  }
  std::string device() const override { return name_; }
  Region register_memory(void* addr, size_t bytes) override {
    ibv_mr* mr = ibv_reg_mr(pd_, addr, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!mr) fail("ibv_reg_mr of " + std::to_string(bytes) + " bytes");
    return Region{addr, bytes, mr->lkey, mr->rkey, mr};
  }
  void deregister(Region& r) override {
    if (r.handle) ibv_dereg_mr(static_cast<ibv_mr*>(r.handle));
    r.handle = nullptr;
  }
  std::unique_ptr<QueuePair> create_qp(int depth) override {
    return std::make_unique<IbQp>(ctx_, pd_, depth, lid_, gid_, gid_index_);
  }

 private:
  std::string name_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  uint16_t lid_ = 0;
  ibv_gid gid_{};
  int gid_index_ = 0;
};

}  // namespace

std::unique_ptr<Verbs> open_ib_verbs(const std::string& device) { return std::make_unique<IbVerbs>(device); }

std::vector<std::string> ib_device_names() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  std::vector<std::string> names;
  for (int i = 0; list && i < n; ++i) names.emplace_back(ibv_get_device_name(list[i]));
  if (list) ibv_free_device_list(list);
  return names;
}

}  // namespace orchard::dist::rdma
