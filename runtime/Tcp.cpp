//===- Tcp.cpp - The ranks of environment-launched runs, over TCP --------===//
//
// Runs without MPI (DESIGN.md section 8: rank, world size and a rendezvous
// address from the environment, as torchrun sets them) join over TCP:
// rank 0 listens on the rendezvous address, every other rank connects to it
// (retrying until the timeout, since rank 0 may start last) and says who it
// is; rank 0 checks the ranks and world sizes and answers once all are
// there. That star is also the data path:
//   all_reduce  every rank sends its buffer to rank 0, which combines them
//               in rank order (the bits a thread group computes) and sends
//               the result to all;
//   all_gather  rank 0 assembles the blocks in rank order and sends them;
//   broadcast   the root's bytes go through rank 0 to all.
// Each contribution carries a header (collective, dtype, op, bytes, root),
// so ranks that disagree on the sequence of collectives stop with a message
// naming both calls instead of misreading bytes. Rank 0 moves (N - 1) x
// the data each way: fine for CPU runs and for bootstrapping NCCL, whose
// unique id is one broadcast; the GPU's data goes through NCCL.
//
// A rank that dies closes its sockets; its peers' reads end and they throw,
// and a rank that throws in a collective closes all of its connections too,
// so every rank stops instead of waiting forever. Subgroups (replica groups
// other than the whole world) are lockstepSubgroup's: each group
// collective is a world all_gather of which every rank keeps its group's
// part, so every rank calls it together, as the ranks of one plan do.
//
//===----------------------------------------------------------------------===//

#include "runtime/Comm.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace step::rt {
namespace {
using Clock = std::chrono::steady_clock;

constexpr uint64_t kHello = 0x3150435454455453ull; // "STEPTCP1"

enum class Coll : uint32_t { AllReduce = 1, AllGather, Broadcast };

const char *collName(uint32_t c) {
  switch (static_cast<Coll>(c)) {
  case Coll::AllReduce: return "all_reduce";
  case Coll::AllGather: return "all_gather";
  case Coll::Broadcast: return "broadcast";
  }
  return "an unknown collective";
}

/// What a rank says it is calling; rank 0 compares every rank's with its own.
struct Header {
  uint32_t coll = 0, dtype = 0, op = 0;
  int32_t root = 0;
  uint64_t bytes = 0;
  bool operator==(const Header &o) const {
    return coll == o.coll && dtype == o.dtype && op == o.op &&
           root == o.root && bytes == o.bytes;
  }
  std::string str() const {
    return std::string(collName(coll)) + " of " + std::to_string(bytes) +
           " bytes" +
           (static_cast<Coll>(coll) == Coll::Broadcast
                ? " from rank " + std::to_string(root)
                : "");
  }
};

struct Hello {
  uint64_t magic = kHello;
  int32_t rank = 0, size = 0;
};

std::string sysError(const std::string &what) {
  return what + ": " + std::strerror(errno);
}

void setNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

class TcpCommunicator final : public Communicator {
public:
  TcpCommunicator(int rank, int size, std::vector<int> fds)
      : rank_(rank), size_(size), fds_(std::move(fds)) {}
  ~TcpCommunicator() override { closeAll(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "tcp"; }

  void allReduce(const void *in, void *out, int64_t count, DType dtype,
                 CommOp op) override {
    checkReducible(dtype, op); // before any message
    size_t n = static_cast<size_t>(count) * dtypeSize(dtype);
    Header h{static_cast<uint32_t>(Coll::AllReduce),
             static_cast<uint32_t>(dtype), static_cast<uint32_t>(op), 0, n};
    guarded(h, [&] {
      if (rank_ != 0) {
        send(0, &h, sizeof h);
        send(0, in, n);
        recv(0, out, n);
        return;
      }
      std::vector<uint8_t> acc(static_cast<const uint8_t *>(in),
                               static_cast<const uint8_t *>(in) + n),
          part(n);
      for (int r = 1; r < size_; ++r) {
        expectHeader(r, h);
        recv(r, part.data(), n);
        combineInto(acc.data(), part.data(), count, dtype, op);
      }
      for (int r = 1; r < size_; ++r)
        send(r, acc.data(), n);
      if (n)
        std::memcpy(out, acc.data(), n);
    });
  }

  void allGather(const void *in, void *out, int64_t bytes) override {
    auto n = static_cast<size_t>(bytes);
    size_t all = n * static_cast<size_t>(size_);
    Header h{static_cast<uint32_t>(Coll::AllGather), 0, 0, 0, n};
    guarded(h, [&] {
      if (rank_ != 0) {
        send(0, &h, sizeof h);
        send(0, in, n);
        recv(0, out, all);
        return;
      }
      std::vector<uint8_t> buf(all);
      if (n)
        std::memcpy(buf.data(), in, n);
      for (int r = 1; r < size_; ++r) {
        expectHeader(r, h);
        recv(r, buf.data() + n * static_cast<size_t>(r), n);
      }
      for (int r = 1; r < size_; ++r)
        send(r, buf.data(), all);
      if (all)
        std::memcpy(out, buf.data(), all);
    });
  }

  void broadcast(void *data, int64_t bytes, int root) override {
    auto n = static_cast<size_t>(bytes);
    Header h{static_cast<uint32_t>(Coll::Broadcast), 0, 0, root, n};
    guarded(h, [&] {
      if (root < 0 || root >= size_)
        throw Error("broadcast from rank " + std::to_string(root) +
                    ", which is not a rank of " + std::to_string(size_));
      if (rank_ != 0) {
        send(0, &h, sizeof h);
        if (rank_ == root)
          send(0, data, n);
        else
          recv(0, data, n);
        return;
      }
      for (int r = 1; r < size_; ++r) {
        expectHeader(r, h);
        if (r == root)
          recv(r, data, n);
      }
      for (int r = 1; r < size_; ++r)
        if (r != root)
          send(r, data, n);
    });
  }

  [[noreturn]] void abortAll(int code) override {
    closeAll(); // the peers' reads end: they stop too
    std::_Exit(code);
  }

protected:
  std::unique_ptr<Communicator> split(int color, int position) override {
    return lockstepSubgroup(*this, color, position);
  }

private:
  /// Runs a collective; on any failure closes every connection (peers
  /// waiting on this rank stop as well) and throws naming the collective.
  template <typename F> void guarded(const Header &h, F body) {
    if (broken_)
      throw Error("tcp communicator (rank " + std::to_string(rank_) +
                  "): " + h.str() + " after an earlier failure: " + broken_msg_);
    try {
      body();
    } catch (const Error &e) {
      broken_ = true;
      broken_msg_ = e.what();
      closeAll();
      throw Error("tcp communicator (rank " + std::to_string(rank_) + ", " +
                  h.str() + "): " + e.what());
    }
  }

  void expectHeader(int r, const Header &mine) {
    Header h;
    recv(r, &h, sizeof h);
    if (!(h == mine))
      throw Error("rank " + std::to_string(r) + " called " + h.str() +
                  " where rank 0 called " + mine.str() +
                  " (the ranks run different steps?)");
  }

  int fdOf(int peer) const { return fds_[static_cast<size_t>(peer)]; }

  static std::string closedBy(int peer) {
    return "rank " + std::to_string(peer) +
           " closed its connection (it exited or died); every rank stops";
  }

  void send(int peer, const void *p, size_t n) {
    const auto *b = static_cast<const uint8_t *>(p);
    while (n) {
      ssize_t k = ::send(fdOf(peer), b, n, MSG_NOSIGNAL);
      if (k < 0 && errno == EINTR)
        continue;
      if (k < 0 && (errno == EPIPE || errno == ECONNRESET))
        throw Error(closedBy(peer));
      if (k <= 0)
        throw Error(sysError("cannot send to rank " + std::to_string(peer)));
      b += k;
      n -= static_cast<size_t>(k);
    }
  }

  void recv(int peer, void *p, size_t n) {
    auto *b = static_cast<uint8_t *>(p);
    while (n) {
      ssize_t k = ::recv(fdOf(peer), b, n, 0);
      if (k < 0 && errno == EINTR)
        continue;
      if (k == 0 || (k < 0 && errno == ECONNRESET))
        throw Error(closedBy(peer));
      if (k < 0)
        throw Error(sysError("cannot receive from rank " +
                             std::to_string(peer)));
      b += k;
      n -= static_cast<size_t>(k);
    }
  }

  void closeAll() {
    for (int &fd : fds_)
      if (fd >= 0) {
        ::shutdown(fd, SHUT_RDWR);
        ::close(fd);
        fd = -1;
      }
  }

  int rank_, size_;
  /// Rank 0: one socket per rank (index 0 unused); others: [0] to rank 0.
  std::vector<int> fds_;
  bool broken_ = false;
  std::string broken_msg_;
};

/// The addresses of host:port (numeric port), for bind or connect.
struct AddrList {
  addrinfo *list = nullptr;
  AddrList(const std::string &host, int port, bool passive) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    std::string service = std::to_string(port);
    int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(),
                           service.c_str(), &hints, &list);
    if (rc != 0)
      throw Error("cannot resolve the rendezvous address '" + host + ":" +
                  service + "': " + ::gai_strerror(rc));
  }
  ~AddrList() {
    if (list)
      ::freeaddrinfo(list);
  }
};

double secondsLeft(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

/// poll()'s timeout until `deadline` (0 once it has passed).
int msLeft(Clock::time_point deadline) {
  return static_cast<int>(std::max(0.0, secondsLeft(deadline)) * 1000);
}

void recvExact(int fd, void *p, size_t n, Clock::time_point deadline,
               const std::string &who) {
  auto *b = static_cast<uint8_t *>(p);
  while (n) {
    pollfd pfd{fd, POLLIN, 0};
    int rc = ::poll(&pfd, 1, msLeft(deadline));
    if (rc == 0)
      throw Error("timed out waiting for " + who);
    ssize_t k = rc < 0 ? -1 : ::recv(fd, b, n, 0);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      throw Error(who + " closed the connection during the handshake");
    b += k;
    n -= static_cast<size_t>(k);
  }
}

std::unique_ptr<Communicator> rendezvousRoot(int size, const TcpOptions &o,
                                             Clock::time_point deadline) {
  AddrList addrs(o.host, o.port, true);
  int lfd = -1;
  std::string why = "no address";
  for (addrinfo *a = addrs.list; a && lfd < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0)
      continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, size) == 0)
      lfd = fd;
    else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  if (lfd < 0)
    throw Error("rank 0 cannot listen on " + o.host + ":" +
                std::to_string(o.port) + ": " + why +
                " (is another run using the port?)");
  std::vector<int> fds(static_cast<size_t>(size), -1);
  auto fail = [&](const std::string &msg) {
    ::close(lfd);
    for (int fd : fds)
      if (fd >= 0)
        ::close(fd);
    throw Error(msg);
  };
  for (int joined = 1; joined < size;) {
    pollfd pfd{lfd, POLLIN, 0};
    int ready = ::poll(&pfd, 1, msLeft(deadline));
    if (ready < 0)
      continue; // EINTR: the deadline is checked again
    if (ready == 0) {
      std::string missing;
      for (int r = 1; r < size; ++r)
        if (fds[static_cast<size_t>(r)] < 0)
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      fail("rank 0 timed out after " + std::to_string(o.timeoutSeconds) +
           " s waiting for rank(s) " + missing + " to connect to " + o.host +
           ":" + std::to_string(o.port));
    }
    int fd = ::accept(lfd, nullptr, nullptr);
    if (fd < 0)
      continue;
    Hello h;
    try {
      // A few seconds per hello, so that a silent connection (a port
      // probe) cannot hold the rendezvous until the deadline.
      recvExact(fd, &h, sizeof h,
                std::min(deadline, Clock::now() + std::chrono::seconds(5)),
                "a connecting rank");
    } catch (const Error &) {
      ::close(fd); // not one of ours, or gone: keep listening
      continue;
    }
    if (h.magic != kHello) {
      ::close(fd);
      continue;
    }
    if (h.size != size || h.rank < 1 || h.rank >= size ||
        fds[static_cast<size_t>(h.rank)] >= 0) {
      ::close(fd);
      fail("rank " + std::to_string(h.rank) + " joined a world of " +
           std::to_string(h.size) + " ranks, but rank 0's world has " +
           std::to_string(size) +
           (h.size == size ? " and that rank is taken or out of range" : "") +
           " (check each process's rank and world size)");
    }
    setNoDelay(fd);
    fds[static_cast<size_t>(h.rank)] = fd;
    ++joined;
  }
  ::close(lfd);
  // Everyone is here: release them.
  for (int r = 1; r < size; ++r) {
    Hello ok;
    if (::send(fds[static_cast<size_t>(r)], &ok, sizeof ok, MSG_NOSIGNAL) !=
        static_cast<ssize_t>(sizeof ok))
      fail(sysError("rank 0 cannot answer rank " + std::to_string(r)));
  }
  return std::make_unique<TcpCommunicator>(0, size, std::move(fds));
}

std::unique_ptr<Communicator> rendezvousPeer(int rank, int size,
                                             const TcpOptions &o,
                                             Clock::time_point deadline) {
  std::string why;
  while (true) {
    AddrList addrs(o.host, o.port, false);
    for (addrinfo *a = addrs.list; a; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0)
        continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        why = std::strerror(errno);
        ::close(fd);
        continue;
      }
      Hello h;
      h.rank = rank;
      h.size = size;
      Hello ok;
      try {
        if (::send(fd, &h, sizeof h, MSG_NOSIGNAL) !=
            static_cast<ssize_t>(sizeof h))
          throw Error(sysError("send"));
        recvExact(fd, &ok, sizeof ok, deadline, "rank 0");
      } catch (const Error &e) {
        ::close(fd);
        throw Error("rank " + std::to_string(rank) + " could not join rank 0 at " +
                    o.host + ":" + std::to_string(o.port) + ": " + e.what());
      }
      if (ok.magic != kHello) {
        ::close(fd);
        throw Error("rank " + std::to_string(rank) + ": " + o.host + ":" +
                    std::to_string(o.port) + " is not a StepJIT rank 0");
      }
      setNoDelay(fd);
      std::vector<int> fds{fd};
      return std::make_unique<TcpCommunicator>(rank, size, std::move(fds));
    }
    if (secondsLeft(deadline) <= 0)
      throw Error("rank " + std::to_string(rank) + " timed out after " +
                  std::to_string(o.timeoutSeconds) +
                  " s connecting to rank 0 at " + o.host + ":" +
                  std::to_string(o.port) + " (" + why + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

/// The first of the variables that is set, with its name.
const char *envOf(std::initializer_list<const char *> names,
                  std::string *which) {
  for (const char *n : names)
    if (const char *v = std::getenv(n)) {
      *which = n;
      return v;
    }
  return nullptr;
}

int envInt(std::initializer_list<const char *> names, int lo, int hi,
           const std::string &meaning) {
  std::string which;
  const char *v = envOf(names, &which);
  if (!v)
    throw Error("environment launch: " + std::string(*names.begin()) +
                " is not set (" + meaning + ")");
  char *end = nullptr;
  errno = 0;
  long x = std::strtol(v, &end, 10);
  if (!*v || *end || errno || x < lo || x > hi)
    throw Error("environment launch: " + which + "='" + v + "' is not " +
                meaning + " (expected " + std::to_string(lo) + ".." +
                std::to_string(hi) + ")");
  return static_cast<int>(x);
}

std::mutex envMutex;
std::unique_ptr<Communicator> envWorld;
} // namespace

std::unique_ptr<Communicator> connectTcp(int rank, int size,
                                         const TcpOptions &o) {
  if (size < 1 || rank < 0 || rank >= size)
    throw Error("rank " + std::to_string(rank) + " is not a rank of a world of " +
                std::to_string(size));
  if (size == 1)
    return std::make_unique<TcpCommunicator>(0, 1, std::vector<int>{-1});
  auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(
                                     o.timeoutSeconds * 1000));
  return rank == 0 ? rendezvousRoot(size, o, deadline)
                   : rendezvousPeer(rank, size, o, deadline);
}

bool launchedByEnv() {
  return std::getenv("STEP_WORLD_SIZE") || std::getenv("WORLD_SIZE");
}

Communicator &envCommunicator() {
  std::lock_guard<std::mutex> lock(envMutex);
  if (envWorld)
    return *envWorld;
  int size = envInt({"STEP_WORLD_SIZE", "WORLD_SIZE"}, 1, 1 << 20,
                    "a world size");
  int rank = envInt({"STEP_RANK", "RANK"}, 0, size - 1,
                    "a rank of the world");
  TcpOptions o;
  std::string which;
  if (const char *host = envOf({"STEP_MASTER_ADDR", "MASTER_ADDR"}, &which))
    o.host = host;
  o.port = envInt({"STEP_MASTER_PORT", "MASTER_PORT"}, 1, 65535,
                  "the rendezvous port");
  if (std::getenv("STEP_CONNECT_TIMEOUT"))
    o.timeoutSeconds = envInt({"STEP_CONNECT_TIMEOUT"}, 1, 86400,
                              "a timeout in seconds");
  envWorld = connectTcp(rank, size, o);
  return *envWorld;
}

void abortWorld(int code) {
  if (launchedByMpi() && haveMpi())
    mpiCommunicator().abortAll(code);
  std::unique_lock<std::mutex> lock(envMutex, std::try_to_lock);
  if (lock.owns_lock() && envWorld)
    envWorld->abortAll(code);
}

} // namespace step::rt
