// SPDX-License-Identifier: Apache-2.0
// Security and robustness through the public C API, ranks as processes (integration layer): a count no buffer can
// hold is refused naming the call on every rank; a job without a secret says so once and refuses to span hosts
// unless CFX_ALLOW_INSECURE=1; CFX_SECRET_FILE must be private; who is missing at bootstrap is named on every rank;
// and a health datagram forged by someone who knows everything about a secretless job but its session secret
// changes nothing. (The intruder who joins a cfxrun job is perf/cfxrun/secret_test.sh; relays that tamper with the
// bytes in flight are tests/unit/transport.)
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "conflux.h"
#include "free_port.h"
#include "integration/multiproc.h"
#include "integration/nccl_checks.h"

namespace cfx::itest {
namespace {

std::string freeLoopbackPort() { return std::to_string(testports::freeLoopbackPort()); }

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// ---- arguments ------------------------------------------------------------------------------------------------

TEST(SecurityTest, CountsNoBufferCanHoldAreRefusedNamingTheCallOnEveryRank) {
  runRanks(2, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    std::vector<float> a(64), b(128);
    const size_t wraps = SIZE_MAX / 2;  // x 4 bytes wraps around: this segfaulted in memcpy before the check
    const auto refused = [](ncclResult_t rc, const char* call) {
      EXPECT_EQ(rc, ncclInvalidArgument) << call;
      EXPECT_TRUE(contains(ncclGetLastError(nullptr), call)) << ncclGetLastError(nullptr);
    };
    refused(ncclAllReduce(a.data(), a.data(), wraps, ncclFloat32, ncclSum, comm, nullptr), "ncclAllReduce");
    refused(ncclBroadcast(a.data(), a.data(), wraps, ncclFloat32, 0, comm, nullptr), "ncclBroadcast");
    refused(ncclReduce(a.data(), b.data(), wraps, ncclInt8, ncclSum, 0, comm, nullptr), "ncclReduce");
    // count x nRanks overflows where count x 4 bytes alone would not.
    refused(ncclAllGather(a.data(), b.data(), SIZE_MAX / 6, ncclFloat32, comm, nullptr), "ncclAllGather");
    refused(ncclReduceScatter(b.data(), a.data(), SIZE_MAX / 6, ncclFloat32, ncclSum, comm, nullptr),
            "ncclReduceScatter");
    refused(ncclAlltoAll(a.data(), b.data(), uint64_t{1} << 47, ncclFloat64, comm, nullptr), "ncclAlltoAll");
    refused(ncclSend(a.data(), wraps, ncclFloat32, 1 - ctx.rank(), comm, nullptr), "ncclSend");
    refused(ncclRecv(a.data(), wraps, ncclFloat32, 1 - ctx.rank(), comm, nullptr), "ncclRecv");
    // A buffer that would run past the end of the address space, and a byte size past any buffer.
    refused(ncclAllReduce(reinterpret_cast<void*>(UINTPTR_MAX - 64), reinterpret_cast<void*>(UINTPTR_MAX - 64), 1024,
                          ncclFloat32, ncclSum, comm, nullptr),
            "ncclAllReduce");
    void* handle = nullptr;
    refused(ncclCommRegister(comm, a.data(), SIZE_MAX, &handle), "ncclCommRegister");
    void* p = nullptr;
    refused(ncclMemAlloc(&p, SIZE_MAX - 1), "ncclMemAlloc");
    cfxPlanInfo plan;
    refused(cfxCommGetPlan(comm, 0, wraps, ncclFloat32, &plan), "cfxCommGetPlan");
    cfxStateEntry entry{a.data(), wraps, ncclFloat32};
    unsigned long long hash[2];
    refused(cfxStateHash(&entry, 1, hash), "cfxStateHash");
    // The communicator is untouched: the ranks still agree on the next all-reduce.
    expectAllReduceSum(comm, ctx.rank() + 1, 3);
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

// ---- secrets --------------------------------------------------------------------------------------------------

TEST(SecurityTest, ASecretlessCommunicatorAcrossHostsRefusesToFormUnlessAllowed) {
  for (const std::string allow : {"", "CFX_ALLOW_INSECURE", "CFX_SECRET"}) {
    SCOPED_TRACE(allow.empty() ? "nothing set" : allow);
    RunOptions options;
    options.env = {{"NCCL_COMM_ID", "127.0.0.1:" + freeLoopbackPort()}};
    if (!allow.empty()) options.env.emplace_back(allow, "1");
    runRanks(2, options, [&](RankContext& ctx) {
      ::setenv("NCCL_HOSTID", ("security-host-" + std::to_string(ctx.rank())).c_str(), 1);
      ncclUniqueId id{};
      ASSERT_TRUE(succeeded(ncclGetUniqueId(&id)));
      ncclComm_t comm = nullptr;
      const ncclResult_t rc = ncclCommInitRank(&comm, ctx.nRanks(), id, ctx.rank());
      if (!allow.empty()) {
        ASSERT_TRUE(succeeded(rc));
        expectAllReduceSum(comm, 1, 2);
        EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
        return;
      }
      EXPECT_EQ(rc, ncclInvalidUsage);
      const std::string why = ncclGetLastError(nullptr);
      EXPECT_TRUE(contains(why, "spans 2 hosts") && contains(why, "CFX_SECRET") && contains(why, "CFX_ALLOW_INSECURE"))
          << why;
    });
  }
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(SecurityTest, ASecretlessJobSaysSoOncePerProcessNamingTheFix) {
  RunOptions options;
  options.env = {{"NCCL_DEBUG", "WARN"}};
  runRanks(2, options, [&](RankContext& ctx) {
    const std::string log = ::testing::TempDir() + "cfx_secretless_" + std::to_string(getpid()) + ".log";
    ::setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
    for (int round = 0; round < 2; ++round) {  // two communicators, one WARN
      const std::string port = ctx.broadcast(0, ctx.rank() == 0 ? freeLoopbackPort() : "");
      ::setenv("NCCL_COMM_ID", ("127.0.0.1:" + port).c_str(), 1);
      ncclUniqueId id{};
      ASSERT_TRUE(succeeded(ncclGetUniqueId(&id)));
      ncclComm_t comm = nullptr;
      ASSERT_TRUE(succeeded(ncclCommInitRank(&comm, ctx.nRanks(), id, ctx.rank())));
      expectAllReduceSum(comm, 1, 2);
      EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
    }
    const std::string text = readFile(log);
    ::unlink(log.c_str());
    size_t warns = 0;
    for (size_t at = text.find("has no secret"); at != std::string::npos; at = text.find("has no secret", at + 1)) {
      ++warns;
    }
    EXPECT_EQ(warns, 1u) << text;
    EXPECT_TRUE(contains(text, "Set CFX_SECRET")) << text;
  });
}

TEST(SecurityTest, ASecretFileMustBePrivate) {
  RunOptions options;
  options.env = {{"NCCL_COMM_ID", "127.0.0.1:" + freeLoopbackPort()}};
  const std::string path = ::testing::TempDir() + "cfx_secret_" + std::to_string(getpid());
  {
    std::ofstream f(path);
    f << "a shared secret of this job\n";
  }
  ::chmod(path.c_str(), 0644);
  options.env.emplace_back("CFX_SECRET_FILE", path);
  runRanks(2, options, [&](RankContext& ctx) {
    ncclUniqueId id{};
    EXPECT_EQ(ncclGetUniqueId(&id), ncclInvalidUsage);
    const std::string why = ncclGetLastError(nullptr);
    EXPECT_TRUE(contains(why, path) && contains(why, "mode 0644")) << why;
    ctx.barrier();
    if (ctx.rank() == 0) ::chmod(path.c_str(), 0600);
    ctx.barrier();
    ASSERT_TRUE(succeeded(ncclGetUniqueId(&id)));
    ncclComm_t comm = nullptr;
    ASSERT_TRUE(succeeded(ncclCommInitRank(&comm, ctx.nRanks(), id, ctx.rank())));
    expectAllReduceSum(comm, 2, 4);
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
  ::unlink(path.c_str());
}

// ---- who is missing -------------------------------------------------------------------------------------------

TEST(SecurityTest, AMissingRankIsNamedOnEveryRankThatJoined) {
  // Three ranks expected, rank 2 never comes. Rank 0 serves the root (NCCL_COMM_ID) and gives up first; rank 1
  // started later, so it still waits when rank 0's process leaves. It used to see only "connection closed".
  RunOptions options;
  options.env = {{"NCCL_COMM_ID", "127.0.0.1:" + freeLoopbackPort()}, {"CFX_BOOTSTRAP_TIMEOUT_MS", "2000"}};
  runRanks(2, options, [](RankContext& ctx) {
    if (ctx.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(800));
    ncclUniqueId id{};
    ASSERT_TRUE(succeeded(ncclGetUniqueId(&id)));
    ncclComm_t comm = nullptr;
    EXPECT_NE(ncclCommInitRank(&comm, 3, id, ctx.rank()), ncclSuccess);
    const std::string why = ncclGetLastError(nullptr);
    EXPECT_TRUE(contains(why, "missing rank 2")) << "rank " << ctx.rank() << ": " << why;
    // Rank 0's process leaves now, as a launcher's would.
  });
}

// ---- a forged health datagram ---------------------------------------------------------------------------------

// The UDP ports process `pid` has open (its health monitor's), from /proc.
std::vector<uint16_t> udpPortsOf(pid_t pid) {
  std::set<std::string> inodes;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      char target[128] = {};
      if (::readlink((dir + "/" + e->d_name).c_str(), target, sizeof(target) - 1) > 0 &&
          std::strncmp(target, "socket:[", 8) == 0) {
        inodes.insert(std::string(target + 8, std::strlen(target + 8) - 1));
      }
    }
    ::closedir(d);
  }
  std::vector<uint16_t> ports;
  std::ifstream udp("/proc/net/udp");
  std::string line;
  std::getline(udp, line);
  while (std::getline(udp, line)) {
    std::istringstream fields(line);
    std::string sl, local, remote, st, queues, timer, retr, uid, timeout, inode;
    fields >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode;
    if (inodes.count(inode) != 0) ports.push_back(static_cast<uint16_t>(std::stoul(local.substr(9), nullptr, 16)));
  }
  return ports;
}

// A failure notice "rank `victim` exited", sealed as a health datagram (faulttol/health_wire.h) with the key and
// the communicator tag someone who knows the job's address and its (empty) secret can compute, to rank `receiver`;
// `legacy` writes the format of library versions before wire version 2 (big-endian, label v1, the magic read
// big-endian, no receiver).
std::vector<uint8_t> forgedNotice(const std::string& hostPort, int sender, int receiver, int victim, int nRanks,
                                  bool legacy) {
  const std::string seed = "cfx-comm-id/v1|" + hostPort + "|";
  uint8_t digest[32];
  SHA256(reinterpret_cast<const unsigned char*>(seed.data()), seed.size(), digest);
  uint64_t magic = 0;
  for (int i = 0; i < 8; ++i) magic |= uint64_t{digest[legacy ? 7 - i : i]} << (8 * i);
  const uint8_t zeroSecret[32] = {};
  uint64_t tag = 1469598103934665603ull;  // FNV-1a over the secret, then over the magic's bytes in memory
  for (uint8_t b : zeroSecret) tag = (tag ^ b) * 1099511628211ull;
  for (int i = 0; i < 8; ++i) tag = (tag ^ static_cast<uint8_t>(magic >> (8 * i))) * 1099511628211ull;

  std::vector<uint8_t> v;
  const auto put = [&](uint64_t x, int n) {
    for (int i = 0; i < n; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * (legacy ? n - 1 - i : i))));
  };
  const std::string host = "attacker";
  const std::string text = "forged";
  put(0x43465848, 4);  // "CFXH"
  put(legacy ? 1 : 3, 2);
  put(2, 2);  // FailureNotice
  put(tag, 8);
  put(static_cast<uint32_t>(sender), 4);
  if (!legacy) put(static_cast<uint32_t>(receiver), 4);
  put(static_cast<uint32_t>(nRanks), 4);
  put(uint64_t{1} << 40, 8);  // a counter beyond anything the real sender used
  put(1, 4);
  put(32 + host.size() + text.size(), 4);
  put(static_cast<uint32_t>(victim), 4);
  put(1, 4);  // Exited
  put(static_cast<uint32_t>(sender), 4);
  put(4242, 4);
  put(0, 8);
  put(host.size(), 2);
  put(0, 2);
  put(text.size(), 2);
  put(0, 2);
  v.insert(v.end(), host.begin(), host.end());
  v.insert(v.end(), text.begin(), text.end());
  const std::string label = legacy ? "cfx-health-v1" : "cfx-health-v3";
  std::vector<uint8_t> signedBytes(label.begin(), label.end());
  signedBytes.insert(signedBytes.end(), v.begin(), v.end());
  unsigned macLen = 0;
  uint8_t mac[32];
  HMAC(EVP_sha256(), zeroSecret, sizeof(zeroSecret), signedBytes.data(), signedBytes.size(), mac, &macLen);
  v.insert(v.end(), mac, mac + 32);
  return v;
}

TEST(SecurityTest, AForgedHealthDatagramChangesNothingEvenInASecretlessJob) {
  // The strongest case for the forger: no CFX_SECRET, one host, and it knows the job's address. It used to kill
  // every rank within milliseconds; the monitors now key their datagrams with the communicator's session secret.
  const std::string hostPort = "127.0.0.1:" + freeLoopbackPort();
  RunOptions options;
  options.env = {{"NCCL_COMM_ID", hostPort}};
  runRanks(3, options, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const std::vector<std::string> pids = ctx.allGather(std::to_string(getpid()));
    if (ctx.rank() == 0) {
      const int sock = ::socket(AF_INET, SOCK_DGRAM, 0);
      int sent = 0;
      for (int r = 0; r < ctx.nRanks(); ++r) {
        for (const uint16_t port : udpPortsOf(static_cast<pid_t>(std::stoi(pids[static_cast<size_t>(r)])))) {
          sockaddr_in to{};
          to.sin_family = AF_INET;
          to.sin_port = htons(port);
          to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
          for (const bool legacy : {false, true}) {
            const std::vector<uint8_t> d = forgedNotice(hostPort, 1, r, 2, ctx.nRanks(), legacy);
            sent += ::sendto(sock, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)) > 0;
          }
        }
      }
      ::close(sock);
      EXPECT_GE(sent, 2 * ctx.nRanks()) << "the forger found every rank's health port";
    }
    ctx.barrier();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the monitors read what arrived
    expectAllReduceSum(comm, 1, 3);
    int nFailures = -1;
    EXPECT_TRUE(succeeded(cfxCommGetFailures(comm, nullptr, 0, &nFailures)));
    EXPECT_EQ(nFailures, 0);
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

}  // namespace
}  // namespace cfx::itest
