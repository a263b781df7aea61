// SPDX-License-Identifier: Apache-2.0
// Bad arguments and bad usage through the public C API: each must give NCCL's error code, leave the
// communicator usable, and never hang (integration layer; ranks are forked processes).
#include "integration/multiproc.h"
#include "integration/nccl_checks.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace cfx::itest {
namespace {

constexpr ncclResult_t kBadArg = ncclInvalidArgument;

TEST(BadInputTest, NullCommunicatorIsInvalidArgument) {
  runRanks(1, [](RankContext&) {
    std::vector<float> a(16), b(16 * 4);
    int value = 0;
    ncclResult_t state;
    ncclRedOp_t op;
    float scalar = 1;
    ncclComm_t child = nullptr;
    EXPECT_EQ(ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, nullptr, nullptr), kBadArg);
    EXPECT_EQ(ncclBroadcast(a.data(), b.data(), 16, ncclFloat32, 0, nullptr, nullptr), kBadArg);
    EXPECT_EQ(ncclBcast(a.data(), 16, ncclFloat32, 0, nullptr, nullptr), kBadArg);
    EXPECT_EQ(ncclReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, 0, nullptr, nullptr), kBadArg);
    EXPECT_EQ(ncclAllGather(a.data(), b.data(), 4, ncclFloat32, nullptr, nullptr), kBadArg);
    EXPECT_EQ(ncclReduceScatter(b.data(), a.data(), 4, ncclFloat32, ncclSum, nullptr, nullptr), kBadArg);
    EXPECT_EQ(ncclAlltoAll(a.data(), b.data(), 4, ncclFloat32, nullptr, nullptr), kBadArg);
    EXPECT_EQ(ncclGather(a.data(), b.data(), 4, ncclFloat32, 0, nullptr, nullptr), kBadArg);
    EXPECT_EQ(ncclScatter(b.data(), a.data(), 4, ncclFloat32, 0, nullptr, nullptr), kBadArg);
    EXPECT_EQ(ncclSend(a.data(), 16, ncclFloat32, 0, nullptr, nullptr), kBadArg);
    EXPECT_EQ(ncclRecv(a.data(), 16, ncclFloat32, 0, nullptr, nullptr), kBadArg);
    EXPECT_EQ(ncclCommCount(nullptr, &value), kBadArg);
    EXPECT_EQ(ncclCommUserRank(nullptr, &value), kBadArg);
    EXPECT_EQ(ncclCommCuDevice(nullptr, &value), kBadArg);
    EXPECT_EQ(ncclCommGetAsyncError(nullptr, &state), kBadArg);
    EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, nullptr), kBadArg);
    EXPECT_EQ(ncclCommSplit(nullptr, 0, 0, &child, nullptr), kBadArg);
    const char* last = ncclGetLastError(nullptr);
    ASSERT_NE(last, nullptr);
    EXPECT_STRNE(last, "");
  });
}

TEST(BadInputTest, NullOutputPointersAreInvalidArgument) {
  runRanks(1, [](RankContext& ctx) {
    EXPECT_EQ(ncclGetVersion(nullptr), kBadArg);
    EXPECT_EQ(ncclGetUniqueId(nullptr), kBadArg);
    EXPECT_EQ(ncclMemAlloc(nullptr, 64), kBadArg);
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    EXPECT_EQ(ncclCommCount(comm, nullptr), kBadArg);
    EXPECT_EQ(ncclCommUserRank(comm, nullptr), kBadArg);
    EXPECT_EQ(ncclCommCuDevice(comm, nullptr), kBadArg);
    EXPECT_EQ(ncclCommGetAsyncError(comm, nullptr), kBadArg);
    EXPECT_EQ(ncclCommSplit(comm, 0, 0, nullptr, nullptr), kBadArg);
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

// Runs body on every rank of a 2-rank communicator, then checks the communicator still works.
void withComm(int nRanks, const std::function<void(RankContext&, ncclComm_t)>& body) {
  runRanks(nRanks, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    body(ctx, comm);
    expectAllReduceSum(comm, ctx.rank() + 1, nRanks * (nRanks + 1) / 2);
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

TEST(BadInputTest, NullBuffersWithNonZeroCountAreInvalidArgument) {
  withComm(2, [](RankContext& ctx, ncclComm_t comm) {
    std::vector<float> a(32), b(64);
    const int peer = 1 - ctx.rank();
    EXPECT_EQ(ncclAllReduce(nullptr, b.data(), 16, ncclFloat32, ncclSum, comm, nullptr), kBadArg);
    EXPECT_EQ(ncclAllReduce(a.data(), nullptr, 16, ncclFloat32, ncclSum, comm, nullptr), kBadArg);
    EXPECT_EQ(ncclAllGather(nullptr, b.data(), 16, ncclFloat32, comm, nullptr), kBadArg);
    EXPECT_EQ(ncclAllGather(a.data(), nullptr, 16, ncclFloat32, comm, nullptr), kBadArg);
    EXPECT_EQ(ncclReduceScatter(nullptr, a.data(), 16, ncclFloat32, ncclSum, comm, nullptr), kBadArg);
    EXPECT_EQ(ncclReduceScatter(b.data(), nullptr, 16, ncclFloat32, ncclSum, comm, nullptr), kBadArg);
    EXPECT_EQ(ncclAlltoAll(nullptr, b.data(), 16, ncclFloat32, comm, nullptr), kBadArg);
    EXPECT_EQ(ncclAlltoAll(b.data(), nullptr, 16, ncclFloat32, comm, nullptr), kBadArg);
    EXPECT_EQ(ncclBcast(nullptr, 16, ncclFloat32, 0, comm, nullptr), kBadArg);
    // Every rank passes NULL where the buffer is needed: root's sendbuff, every recvbuff of a broadcast.
    EXPECT_EQ(ncclBroadcast(a.data(), nullptr, 16, ncclFloat32, 0, comm, nullptr), kBadArg);
    EXPECT_EQ(ncclReduce(a.data(), nullptr, 16, ncclFloat32, ncclSum, ctx.rank(), comm, nullptr), kBadArg);
    EXPECT_EQ(ncclGather(nullptr, b.data(), 16, ncclFloat32, 0, comm, nullptr), kBadArg);
    EXPECT_EQ(ncclScatter(a.data(), nullptr, 16, ncclFloat32, 0, comm, nullptr), kBadArg);
    EXPECT_EQ(ncclSend(nullptr, 16, ncclFloat32, peer, comm, nullptr), kBadArg);
    EXPECT_EQ(ncclRecv(nullptr, 16, ncclFloat32, peer, comm, nullptr), kBadArg);
  });
}

TEST(BadInputTest, NullBuffersWithZeroCountAreAccepted) {
  withComm(2, [](RankContext& ctx, ncclComm_t comm) {
    EXPECT_TRUE(succeeded(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, nullptr)));
    EXPECT_TRUE(succeeded(ncclBroadcast(nullptr, nullptr, 0, ncclInt8, 1, comm, nullptr)));
    EXPECT_TRUE(succeeded(ncclAllGather(nullptr, nullptr, 0, ncclInt8, comm, nullptr)));
    EXPECT_TRUE(succeeded(ncclGroupStart()));
    EXPECT_TRUE(succeeded(ncclSend(nullptr, 0, ncclInt8, 1 - ctx.rank(), comm, nullptr)));
    EXPECT_TRUE(succeeded(ncclRecv(nullptr, 0, ncclInt8, 1 - ctx.rank(), comm, nullptr)));
    EXPECT_TRUE(succeeded(ncclGroupEnd()));
  });
}

TEST(BadInputTest, DatatypeOutOfRangeIsInvalidArgument) {
  withComm(2, [](RankContext& ctx, ncclComm_t comm) {
    std::vector<uint64_t> a(16), b(32);
    for (int t : {static_cast<int>(ncclNumTypes), -1, 255, INT_MAX}) {
      const auto type = static_cast<ncclDataType_t>(t);
      EXPECT_EQ(ncclAllReduce(a.data(), b.data(), 4, type, ncclSum, comm, nullptr), kBadArg) << t;
      EXPECT_EQ(ncclBroadcast(a.data(), b.data(), 4, type, 0, comm, nullptr), kBadArg) << t;
      EXPECT_EQ(ncclAllGather(a.data(), b.data(), 4, type, comm, nullptr), kBadArg) << t;
      EXPECT_EQ(ncclSend(a.data(), 4, type, 1 - ctx.rank(), comm, nullptr), kBadArg) << t;
      EXPECT_EQ(ncclRecv(a.data(), 4, type, 1 - ctx.rank(), comm, nullptr), kBadArg) << t;
    }
  });
}

TEST(BadInputTest, OpOutOfRangeIsInvalidArgument) {
  withComm(2, [](RankContext&, ncclComm_t comm) {
    std::vector<float> a(16), b(32);
    for (int o : {static_cast<int>(ncclNumOps), static_cast<int>(ncclNumOps) + 17, -1,
                  static_cast<int>(ncclMaxRedOp)}) {
      const auto op = static_cast<ncclRedOp_t>(o);
      EXPECT_EQ(ncclAllReduce(a.data(), b.data(), 4, ncclFloat32, op, comm, nullptr), kBadArg) << o;
      EXPECT_EQ(ncclReduce(a.data(), b.data(), 4, ncclFloat32, op, 0, comm, nullptr), kBadArg) << o;
      EXPECT_EQ(ncclReduceScatter(b.data(), a.data(), 4, ncclFloat32, op, comm, nullptr), kBadArg) << o;
    }
  });
}

TEST(BadInputTest, DestroyedOrMismatchedPreMulSumIsInvalidArgument) {
  withComm(2, [](RankContext&, ncclComm_t comm) {
    std::vector<float> a(16, 1.0f), b(16);
    std::vector<int32_t> ia(16, 1), ib(16);
    float scalar = 2.0f;
    ncclRedOp_t op;
    ASSERT_TRUE(succeeded(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm)));
    EXPECT_EQ(ncclAllReduce(ia.data(), ib.data(), 16, ncclInt32, op, comm, nullptr), kBadArg)
        << "an op created for float32 used with int32";
    EXPECT_TRUE(succeeded(ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, op, comm, nullptr)));
    EXPECT_EQ(b[0], 4.0f);
    EXPECT_TRUE(succeeded(ncclRedOpDestroy(op, comm)));
    EXPECT_EQ(ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, op, comm, nullptr), kBadArg) << "destroyed op";
    EXPECT_EQ(ncclRedOpDestroy(op, comm), kBadArg) << "destroying twice";
    EXPECT_EQ(ncclRedOpDestroy(ncclSum, comm), kBadArg) << "built-in ops cannot be destroyed";
    EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, nullptr, ncclFloat32, ncclScalarHostImmediate, comm), kBadArg);
    EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclNumTypes, ncclScalarHostImmediate, comm), kBadArg);
  });
}

TEST(BadInputTest, RootOutOfRangeIsInvalidArgument) {
  withComm(3, [](RankContext&, ncclComm_t comm) {
    std::vector<float> a(16), b(64);
    for (int root : {-1, 3, 4, INT_MAX}) {
      EXPECT_EQ(ncclBroadcast(a.data(), b.data(), 4, ncclFloat32, root, comm, nullptr), kBadArg) << root;
      EXPECT_EQ(ncclBcast(a.data(), 4, ncclFloat32, root, comm, nullptr), kBadArg) << root;
      EXPECT_EQ(ncclReduce(a.data(), b.data(), 4, ncclFloat32, ncclSum, root, comm, nullptr), kBadArg) << root;
      EXPECT_EQ(ncclGather(a.data(), b.data(), 4, ncclFloat32, root, comm, nullptr), kBadArg) << root;
      EXPECT_EQ(ncclScatter(b.data(), a.data(), 4, ncclFloat32, root, comm, nullptr), kBadArg) << root;
    }
  });
}

TEST(BadInputTest, PeerOutOfRangeIsInvalidArgument) {
  withComm(2, [](RankContext&, ncclComm_t comm) {
    std::vector<float> a(16);
    for (int peer : {-1, 2, 100}) {
      EXPECT_EQ(ncclSend(a.data(), 4, ncclFloat32, peer, comm, nullptr), kBadArg) << peer;
      EXPECT_EQ(ncclRecv(a.data(), 4, ncclFloat32, peer, comm, nullptr), kBadArg) << peer;
    }
  });
}

// A group is atomic, as in NCCL: a call that fails inside it (a bad datatype, a NULL communicator) fails
// ncclGroupEnd, and none of the group's operations runs; the communicator goes on.
TEST(BadInputTest, ErrorInsideAGroupIsReportedByGroupEndAndNothingRuns) {
  withComm(2, [](RankContext&, ncclComm_t comm) {
    std::vector<float> a(16, 1.0f), b(16, -3.0f);
    const std::vector<float> untouched = b;
    ASSERT_TRUE(succeeded(ncclGroupStart()));
    EXPECT_TRUE(succeeded(ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, comm, nullptr)));
    EXPECT_EQ(ncclAllReduce(a.data(), b.data(), 16, static_cast<ncclDataType_t>(99), ncclSum, comm, nullptr),
              kBadArg);
    const ncclResult_t rc = ncclGroupEnd();
    EXPECT_NE(rc, ncclSuccess) << "ncclGroupEnd must report the error recorded inside the group";
    EXPECT_EQ(b, untouched) << "an operation of the failed group ran";

    ASSERT_TRUE(succeeded(ncclGroupStart()));
    EXPECT_TRUE(succeeded(ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, comm, nullptr)));
    EXPECT_NE(ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, nullptr, nullptr), ncclSuccess);
    EXPECT_NE(ncclGroupEnd(), ncclSuccess) << "a NULL communicator inside the group must fail it";
    EXPECT_EQ(b, untouched) << "an operation of the failed group ran";

    EXPECT_TRUE(succeeded(ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, comm, nullptr)));
    EXPECT_EQ(b, std::vector<float>(16, 2.0f));
  });
}

TEST(BadInputTest, GroupEndWithoutStartIsInvalidUsage) {
  runRanks(1, [](RankContext&) {
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
    EXPECT_TRUE(succeeded(ncclGroupStart()));
    EXPECT_TRUE(succeeded(ncclGroupEnd()));
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  });
}

TEST(BadInputTest, InitWithBadRankOrSizeIsInvalidArgument) {
  runRanks(1, [](RankContext& ctx) {
    const ncclUniqueId id = ctx.uniqueId();
    ncclComm_t comm = nullptr;
    EXPECT_EQ(ncclCommInitRank(&comm, 2, id, 2), kBadArg);
    EXPECT_EQ(ncclCommInitRank(&comm, 2, id, -1), kBadArg);
    EXPECT_EQ(ncclCommInitRank(&comm, 0, id, 0), kBadArg);
    EXPECT_EQ(ncclCommInitRank(&comm, -3, id, 0), kBadArg);
    EXPECT_EQ(ncclCommInitRank(nullptr, 1, id, 0), kBadArg);
    EXPECT_EQ(ncclCommInitAll(nullptr, 2, nullptr), kBadArg);
    ncclComm_t comms[2];
    EXPECT_EQ(ncclCommInitAll(comms, -1, nullptr), kBadArg);
  });
}

TEST(BadInputTest, ConfigNotMadeByTheInitializerIsInvalidArgument) {
  runRanks(1, [](RankContext& ctx) {
    ncclComm_t comm = nullptr;
    ncclConfig_t noMagic = NCCL_CONFIG_INITIALIZER;
    noMagic.magic = 0;
    EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, ctx.newUniqueId(), 0, &noMagic), kBadArg);
    ncclConfig_t badBlocking = NCCL_CONFIG_INITIALIZER;
    badBlocking.blocking = 2;
    EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, ctx.newUniqueId(), 0, &badBlocking), kBadArg);
    ncclConfig_t badCtas = NCCL_CONFIG_INITIALIZER;
    badCtas.minCTAs = 8;
    badCtas.maxCTAs = 2;
    EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, ctx.newUniqueId(), 0, &badCtas), kBadArg);
    ncclConfig_t good = NCCL_CONFIG_INITIALIZER;
    ASSERT_TRUE(succeeded(ncclCommInitRankConfig(&comm, 1, ctx.newUniqueId(), 0, &good)));
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

TEST(BadInputTest, DoubleFinalizeIsInvalidArgument) {
  runRanks(2, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    EXPECT_TRUE(succeeded(ncclCommFinalize(comm)));
    EXPECT_EQ(ncclCommFinalize(comm), kBadArg);
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

// Ranks disagree on the element count of one AllReduce. Each must get an error within the configured
// timeout instead of hanging or returning garbage.
TEST(BadInputTest, MismatchedCountsFailInsteadOfHanging) {
  RunOptions options;
  options.timeout = 60s;
  options.env = {{"CFX_TIMEOUT_MS", "5000"}};
  runRanks(2, options, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const size_t count = ctx.rank() == 0 ? 100000 : 150000;
    std::vector<float> send(count, 1.0f), recv(count, 0.0f);
    const auto start = std::chrono::steady_clock::now();
    ncclResult_t rc = ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr);
    ncclResult_t async = ncclSuccess;
    if (rc == ncclSuccess || rc == ncclInProgress) {
      rc = ncclSuccess;
      async = waitWhileInProgress(comm, std::chrono::seconds(20));
    }
    const auto seconds =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count();
    const ncclResult_t err = rc != ncclSuccess ? rc : async;
    EXPECT_TRUE(err == ncclInvalidUsage || err == ncclRemoteError)
        << "rank " << ctx.rank() << ": call returned " << resultName(rc) << ", async state " << resultName(async)
        << "; last error: " << ncclGetLastError(nullptr);
    EXPECT_LT(seconds, 20) << "the error took too long";
    EXPECT_TRUE(succeeded(ncclCommAbort(comm)));
  });
}

// ---- a stranger at the bootstrap root ------------------------------------------------------------------------

struct Listener {
  int family;
  std::string addressHex;
  unsigned port;
};

std::set<std::string> ownSocketInodes() {
  std::set<std::string> inodes;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return inodes;
  while (dirent* e = ::readdir(dir)) {
    char target[256];
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = ::readlink(path.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (std::strncmp(target, "socket:[", 8) == 0) inodes.insert(std::string(target + 8, std::strlen(target + 8) - 1));
  }
  ::closedir(dir);
  return inodes;
}

// Listening TCP sockets owned by this process, found through /proc: no decoding of the unique id.
std::vector<Listener> ownListeners() {
  const std::set<std::string> inodes = ownSocketInodes();
  std::vector<Listener> out;
  for (const auto& [file, family] : {std::pair{"/proc/self/net/tcp", AF_INET}, std::pair{"/proc/self/net/tcp6", AF_INET6}}) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::istringstream s(line);
      std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
      s >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state != "0A" || inodes.count(inode) == 0) continue;
      const size_t colon = local.find(':');
      out.push_back({family, local.substr(0, colon), static_cast<unsigned>(std::stoul(local.substr(colon + 1), nullptr, 16))});
    }
  }
  return out;
}

int connectTo(const Listener& l) {
  const int fd = ::socket(l.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int rc;
  if (l.family == AF_INET) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(l.port));
    uint32_t raw = static_cast<uint32_t>(std::stoul(l.addressHex, nullptr, 16));  // /proc prints host order
    a.sin_addr.s_addr = raw == 0 ? htonl(INADDR_LOOPBACK) : raw;
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(l.port));
    bool any = l.addressHex.find_first_not_of('0') == std::string::npos;
    if (any) {
      a.sin6_addr = in6addr_loopback;
    } else {
      for (int w = 0; w < 4; ++w) {
        const uint32_t word = static_cast<uint32_t>(std::stoul(l.addressHex.substr(8 * w, 8), nullptr, 16));
        std::memcpy(&a.sin6_addr.s6_addr[4 * w], &word, 4);
      }
    }
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  if (rc != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST(BadInputTest, StrangerAtTheBootstrapRootDoesNotBreakInit) {
  const RunResult result = runRanks(3, [](RankContext& ctx) {
    ncclUniqueId id{};
    std::string idBytes;
    std::vector<int> idle;
    if (ctx.rank() == 0) {
      const auto before = ownListeners();
      EXPECT_TRUE(succeeded(ncclGetUniqueId(&id)));
      std::vector<Listener> fresh;
      for (const auto& l : ownListeners()) {
        bool old = false;
        for (const auto& b : before) old = old || (b.port == l.port && b.family == l.family);
        if (!old) fresh.push_back(l);
      }
      ctx.report("root-listeners", std::to_string(fresh.size()));
      for (const auto& l : fresh) {
        // One stranger sends garbage and leaves, one connects and closes, one stays connected and silent.
        if (int fd = connectTo(l); fd >= 0) {
          std::string junk(4096, '\0');
          for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>(i * 131 + 7);
          (void)!::write(fd, junk.data(), junk.size());
          ::close(fd);
        }
        if (int fd = connectTo(l); fd >= 0) ::close(fd);
        if (int fd = connectTo(l); fd >= 0) {
          (void)!::write(fd, "GET / HTTP/1.0\r\n", 16);
          idle.push_back(fd);
        }
      }
      idBytes.assign(reinterpret_cast<const char*>(&id), sizeof(id));
    }
    const std::string shared = ctx.broadcast(0, idBytes);
    ASSERT_EQ(shared.size(), sizeof(id));
    std::memcpy(&id, shared.data(), sizeof(id));
    ncclComm_t comm = nullptr;
    ASSERT_TRUE(succeeded(ncclCommInitRank(&comm, ctx.nRanks(), id, ctx.rank())));
    expectAllReduceSum(comm, ctx.rank() + 1, 6);
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
    for (int fd : idle) ::close(fd);
  });
  if (result.ok() && result.report(0, "root-listeners") == "0") {
    GTEST_SKIP() << "ncclGetUniqueId opened no listening socket in the calling process; nothing to attack";
  }
}

}  // namespace
}  // namespace cfx::itest
