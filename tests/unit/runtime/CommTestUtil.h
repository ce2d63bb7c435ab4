//===- CommTestUtil.h - Ranks on threads, for communicator tests -*- C++ -*-===//
//
// Helpers of the tests that run a collective step or kernel on a thread
// group (rt::makeThreadGroup): one thread per rank with its communicator
// installed, and the message of an rt::Error. No MLIR: the runtime's
// CommTest and the compiler's step-shard tests share it.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TESTS_UNIT_RUNTIME_COMMTESTUTIL_H
#define STEP_TESTS_UNIT_RUNTIME_COMMTESTUTIL_H

#include "runtime/Comm.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace step::test {

/// Runs body(r) on one thread per rank of `ranks`, with rank r's
/// communicator installed (CommScope), and waits for all. An exception
/// escaping a rank is a failure naming it.
inline void onRanks(const std::vector<std::unique_ptr<rt::Communicator>> &ranks,
             const std::function<void(int)> &body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r)
    threads.emplace_back([&, r] {
      rt::CommScope scope(*ranks[static_cast<size_t>(r)]);
      try {
        body(r);
      } catch (const std::exception &e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  for (std::thread &t : threads)
    t.join();
}

/// onRanks, where each rank's rt::Error is expected: its message goes to
/// errors[r] ("" when the rank threw none).
inline void onRanksCatching(
    const std::vector<std::unique_ptr<rt::Communicator>> &ranks,
    std::vector<std::string> &errors, const std::function<void(int)> &body) {
  onRanks(ranks, [&](int r) {
    try {
      body(r);
    } catch (const rt::Error &e) {
      errors[static_cast<size_t>(r)] = e.what();
    }
  });
}

/// The message of the rt::Error `f` throws, or "" when it throws none.
inline std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const rt::Error &e) {
    return e.what();
  }
  return "";
}

/// A loopback port nobody listens on now (the kernel's pick).
inline int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len), 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline rt::TcpOptions loopback(int port, double timeout = 30) {
  rt::TcpOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.timeoutSeconds = timeout;
  return o;
}

/// A TCP world of `n` ranks in this process: each joins on its own thread,
/// as separate processes would.
inline std::vector<std::unique_ptr<rt::Communicator>> makeTcpGroup(int n) {
  rt::TcpOptions o = loopback(freePort());
  std::vector<std::unique_ptr<rt::Communicator>> ranks(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        ranks[static_cast<size_t>(r)] = rt::connectTcp(r, n, o);
      } catch (const rt::Error &e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  for (std::thread &t : threads)
    t.join();
  return ranks;
}

} // namespace step::test

#endif // STEP_TESTS_UNIT_RUNTIME_COMMTESTUTIL_H
