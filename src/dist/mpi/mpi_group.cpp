// The mpi backend: OpenMPI underneath, started by mpirun (which also decides
// rank and size and tears the job down when a rank dies). Half types get
// their own committed datatype and sum operator.
// The C API only: keep OpenMPI's deprecated C++ bindings out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <mutex>

#include "dist/make_group.h"
#include "dist/reduce.h"

namespace orchard::dist {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw CommError(std::string("mpi: ") + what + " failed: " + msg);
}

void sum_f16(void* in, void* inout, int* len, MPI_Datatype*) {
  add_into(inout, in, static_cast<size_t>(*len), DType::F16);
}
void sum_bf16(void* in, void* inout, int* len, MPI_Datatype*) {
  add_into(inout, in, static_cast<size_t>(*len), DType::BF16);
}

struct MpiRuntime {
  MPI_Datatype half = MPI_DATATYPE_NULL;
  MPI_Op f16 = MPI_OP_NULL, bf16 = MPI_OP_NULL;
};

MpiRuntime& runtime() {
  static MpiRuntime rt;
  static std::once_flag once;
  std::call_once(once, [] {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
      });
    }
    check(MPI_Type_contiguous(2, MPI_BYTE, &rt.half), "MPI_Type_contiguous");
    check(MPI_Type_commit(&rt.half), "MPI_Type_commit");
    check(MPI_Op_create(sum_f16, 1, &rt.f16), "MPI_Op_create");
    check(MPI_Op_create(sum_bf16, 1, &rt.bf16), "MPI_Op_create");
  });
  return rt;
}

// MPI counts are ints: larger transfers go in pieces.
constexpr size_t kMaxPiece = size_t{1} << 30;

class MpiGroup : public Group {
 public:
  explicit MpiGroup(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiGroup() override {
    if (comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "mpi"; }

  void all_sum(void* buf, size_t count, DType type) override {
    MpiRuntime& rt = runtime();
    const size_t es = dtype_size(type);
    MPI_Datatype dt = type == DType::F32 ? MPI_FLOAT : rt.half;
    MPI_Op op = type == DType::F32 ? MPI_SUM : (type == DType::F16 ? rt.f16 : rt.bf16);
    for (size_t off = 0; off < count; off += kMaxPiece / es) {
      const size_t m = std::min(kMaxPiece / es, count - off);
      check(MPI_Allreduce(MPI_IN_PLACE, static_cast<uint8_t*>(buf) + off * es, static_cast<int>(m), dt, op, comm_),
            "MPI_Allreduce");
    }
  }
  void all_gather(const void* send, void* recv, size_t bytes) override {
    if (bytes > INT_MAX) throw CommError("mpi: all_gather of more than 2 GiB per rank");
    check(MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, comm_),
          "MPI_Allgather");
  }
  void all_to_all(const void* send, void* recv, size_t bytes) override {
    if (bytes > INT_MAX) throw CommError("mpi: all_to_all of more than 2 GiB per block");
    check(MPI_Alltoall(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, comm_),
          "MPI_Alltoall");
  }
  void broadcast(void* buf, size_t bytes, int root) override {
    if (root < 0 || root >= size_) throw CommError("broadcast: root " + std::to_string(root) + " is not a rank");
    for (size_t off = 0; off == 0 || off < bytes; off += kMaxPiece) {
      const size_t m = std::min(kMaxPiece, bytes - off);
      check(MPI_Bcast(static_cast<uint8_t*>(buf) + off, static_cast<int>(m), MPI_BYTE, root, comm_), "MPI_Bcast");
      if (bytes == 0) break;
    }
  }
  void send(const void* buf, size_t bytes, int dst) override {
    for (size_t off = 0; off == 0 || off < bytes; off += kMaxPiece) {
      const size_t m = std::min(kMaxPiece, bytes - off);
      check(MPI_Send(static_cast<const uint8_t*>(buf) + off, static_cast<int>(m), MPI_BYTE, dst, 0, comm_),
            "MPI_Send");
      if (bytes == 0) break;
    }
  }
  void recv(void* buf, size_t bytes, int src) override {
    for (size_t off = 0; off == 0 || off < bytes; off += kMaxPiece) {
      const size_t m = std::min(kMaxPiece, bytes - off);
      MPI_Status st;
      check(MPI_Recv(static_cast<uint8_t*>(buf) + off, static_cast<int>(m), MPI_BYTE, src, 0, comm_, &st),
            "MPI_Recv");
      int got = 0;
      MPI_Get_count(&st, MPI_BYTE, &got);
      if (static_cast<size_t>(got) != m)
        throw CommError("mpi: rank " + std::to_string(src) + " sent " + std::to_string(got) + " bytes, expected " +
                        std::to_string(m));
      if (bytes == 0) break;
    }
  }
  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }
  std::unique_ptr<Group> split(int color, int key) override {
    MPI_Comm sub;
    check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub), "MPI_Comm_split");
    if (sub == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiGroup>(sub);
  }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

bool mpi_available() { return true; }

std::unique_ptr<Group> make_mpi_group(const Config&) {
  runtime();
  return std::make_unique<MpiGroup>(MPI_COMM_WORLD);
}

}  // namespace orchard::dist
