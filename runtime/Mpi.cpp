//===- Mpi.cpp - The MPI communicator (CPU ranks started by mpirun) -------===//
//
// Built only when CMake finds MPI (STEP_HAVE_MPI). MPI is initialized on
// first use (MPI_THREAD_SERIALIZED: one thread at a time talks to it, so
// the CPU executor's collective thread may) and finalized at exit. all_reduce is MPI_Reduce to rank 0 followed by MPI_Bcast, so every
// rank gets the same bits whatever algorithm the library picks (MPI does
// not promise that of MPI_Allreduce).
//
//===----------------------------------------------------------------------===//

#include "runtime/Comm.h"

// The C API only (no C++ bindings to link).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace step::rt {
namespace {

/// The thread support MPI provides (MPI_Query_thread after init).
int threadLevel = MPI_THREAD_SINGLE;

void check(int rc, const char *what) {
  if (rc == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(std::string("MPI: ") + what + " failed: " +
              std::string(text, static_cast<size_t>(len)));
}

/// MPI counts are ints: larger transfers are refused, not truncated.
int mpiCount(int64_t n, const char *what) {
  if (n < 0 || n > INT32_MAX)
    throw Error(std::string("MPI: ") + what + " of " + std::to_string(n) +
                " elements or bytes exceeds MPI's int count (2^31 - 1)");
  return static_cast<int>(n);
}

MPI_Datatype mpiType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::I32:
    return MPI_INT32_T;
  case DType::I64:
    return MPI_INT64_T;
  case DType::I1:
    return MPI_UINT8_T;
  default:
    throw Error(std::string("MPI: no reduction for ") + dtypeName(dtype) +
                " (f16/bf16 are reduced in f32)");
  }
}

class MpiCommunicator final : public Communicator {
public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  /// A communicator split from another is ours to free (the world is not),
  /// unless MPI has already been finalized at exit.
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_WORLD && !finalized)
      MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "mpi"; }
  bool anyThread() const override {
    return threadLevel >= MPI_THREAD_SERIALIZED;
  }

  void allReduce(const void *in, void *out, int64_t count, DType dtype,
                 CommOp op) override {
    if (dtype == DType::I1 && op == CommOp::Sum)
      throw Error("all_reduce: i1 values reduce by max or min, not sum");
    MPI_Op mop = op == CommOp::Sum   ? MPI_SUM
                 : op == CommOp::Max ? MPI_MAX
                                       : MPI_MIN;
    size_t bytes = static_cast<size_t>(count) * dtypeSize(dtype);
    std::vector<uint8_t> send(static_cast<const uint8_t *>(in),
                              static_cast<const uint8_t *>(in) + bytes);
    int n = mpiCount(count, "all_reduce");
    check(MPI_Reduce(send.data(), out, n, mpiType(dtype), mop, 0, comm_),
          "MPI_Reduce");
    check(MPI_Bcast(out, n, mpiType(dtype), 0, comm_), "MPI_Bcast");
  }
  void allGather(const void *in, void *out, int64_t bytes) override {
    std::vector<uint8_t> send(static_cast<const uint8_t *>(in),
                              static_cast<const uint8_t *>(in) + bytes);
    int n = mpiCount(bytes, "all_gather");
    check(MPI_Allgather(send.data(), n, MPI_BYTE, out, n, MPI_BYTE, comm_),
          "MPI_Allgather");
  }
  void broadcast(void *data, int64_t bytes, int root) override {
    check(MPI_Bcast(data, mpiCount(bytes, "broadcast"), MPI_BYTE, root, comm_),
          "MPI_Bcast");
  }

  [[noreturn]] void abortAll(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

protected:
  std::unique_ptr<Communicator> split(int color, int position) override {
    MPI_Comm sub;
    check(MPI_Comm_split(comm_, color, position, &sub), "MPI_Comm_split");
    return std::make_unique<MpiCommunicator>(sub);
  }

private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

void finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Finalize();
}

} // namespace

bool haveMpi() { return true; }

Communicator &mpiCommunicator() {
  static MpiCommunicator *world = [] {
    int initialized = 0;
    check(MPI_Initialized(&initialized), "MPI_Initialized");
    if (!initialized) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
            "MPI_Init_thread");
      std::atexit(finalize);
    }
    check(MPI_Query_thread(&threadLevel), "MPI_Query_thread");
    // Errors come back as codes, so check() can say which call failed.
    check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
          "MPI_Comm_set_errhandler");
    return new MpiCommunicator(MPI_COMM_WORLD);
  }();
  return *world;
}

} // namespace step::rt
