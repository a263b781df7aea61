// SPDX-License-Identifier: Apache-2.0
// Separate asynchronous ops of one communicator on host lanes (core/host_lanes.h, CFX_HOST_LANES), through the public
// API with one process per rank: results against the closed form on several streams and on one; error feedback on one
// buffer carried across lanes to the same bits as one queue gives; an op held back by its peer that no longer holds
// back the ops of other streams; abort and revoke with ops pending on lanes, a lane's failure as the communicator's
// async error, and destroy freeing every lane.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "conflux.h"
#include "multiproc.h"
#include "nccl.h"

namespace {

using cfx::itest::Hash128;
using cfx::itest::RankContext;
using cfx::itest::RunOptions;
using cfx::itest::runRanks;

cudaStream_t asCuda(cfxHostStream_t s) { return reinterpret_cast<cudaStream_t>(s); }

RunOptions withLanes(int lanes, std::vector<std::pair<std::string, std::string>> more = {}) {
  RunOptions options;
  options.env = std::move(more);
  options.env.emplace_back("CFX_HOST_LANES", std::to_string(lanes));
  return options;
}

std::vector<cfxHostStream_t> makeStreams(int n) {
  std::vector<cfxHostStream_t> streams(static_cast<size_t>(n), nullptr);
  for (auto& s : streams) EXPECT_EQ(cfxHostStreamCreate(&s), ncclSuccess);
  return streams;
}

void destroyStreams(const std::vector<cfxHostStream_t>& streams) {
  for (cfxHostStream_t s : streams) (void)cfxHostStreamDestroy(s);
}

// Mappings of /dev/shm objects in this process: the shm transport's segments, one set per communicator.
int shmMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find("/dev/shm/") != std::string::npos;
  return n;
}

// Names in /dev/shm that a communicator of this process created (/cfx-<pid>-...).
int shmNamesOfThisProcess() {
  int n = 0;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (const dirent* e = ::readdir(dir)) {
      int pid = 0;
      n += std::sscanf(e->d_name, "cfx-%d-", &pid) == 1 && pid == ::getpid();
    }
    ::closedir(dir);
  }
  return n;
}

// Progress threads of this process: one per communicator, so the parent's and its lanes'.
int progressThreads() {
  int n = 0;
  if (DIR* dir = ::opendir("/proc/self/task")) {
    while (const dirent* e = ::readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string name;
      n += std::getline(comm, name) && name.rfind("cfx-prog-", 0) == 0;
    }
    ::closedir(dir);
  }
  return n;
}

// Six in-place sums of odd counts over three streams (two each, so consecutive ops of a stream run on different
// lanes), a chain of three on one buffer on one stream, and an int32 sum beside them, all issued before any wait;
// ncclCommFinalize then waits for every lane.
TEST(HostLanes, AsyncAllReducesOnSeveralStreamsAndOnOneMatchTheClosedForm) {
  constexpr int kRanks = 3;
  runRanks(kRanks, withLanes(4), [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const int r = ctx.rank();
    const std::vector<cfxHostStream_t> streams = makeStreams(3);
    std::vector<std::vector<float>> bufs;
    for (int k = 0; k < 6; ++k) {
      std::vector<float> b(static_cast<size_t>(1001 + 74 * k));
      for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((r + 1) * (k + 1) + static_cast<int>(i % 7));
      bufs.push_back(std::move(b));
    }
    std::vector<float> chain(4099, static_cast<float>(r + 1));
    std::vector<int32_t> ints(777), intsOut(777);
    for (size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<int32_t>(i) * (r + 1);
    for (int k = 0; k < 6; ++k) {
      ASSERT_EQ(ncclAllReduce(bufs[k].data(), bufs[k].data(), bufs[k].size(), ncclFloat, ncclSum, comm,
                              asCuda(streams[k % 3])),
                ncclSuccess)
          << ncclGetLastError(comm);
      if (k % 2 == 0) {
        ASSERT_EQ(ncclAllReduce(chain.data(), chain.data(), chain.size(), ncclFloat, ncclSum, comm, asCuda(streams[0])),
                  ncclSuccess);
      }
    }
    ASSERT_EQ(ncclAllReduce(ints.data(), intsOut.data(), ints.size(), ncclInt32, ncclSum, comm, asCuda(streams[1])),
              ncclSuccess);
    ASSERT_EQ(ncclCommFinalize(comm), ncclSuccess) << ncclGetLastError(comm);
    for (cfxHostStream_t s : streams) EXPECT_EQ(cfxHostStreamQuery(s), ncclSuccess) << "finalize left work behind";
    const int rankSum = kRanks * (kRanks + 1) / 2;
    for (int k = 0; k < 6; ++k) {
      int bad = 0;
      for (size_t i = 0; i < bufs[k].size(); ++i) {
        bad += bufs[k][i] != static_cast<float>(rankSum * (k + 1) + kRanks * static_cast<int>(i % 7));
      }
      EXPECT_EQ(bad, 0) << "op " << k;
    }
    // (1 + 2 + 3), then times kRanks twice: an op of the chain that ran early, late or twice would show.
    int badChain = 0;
    for (float v : chain) badChain += v != static_cast<float>(rankSum * kRanks * kRanks);
    EXPECT_EQ(badChain, 0);
    int badInts = 0;
    for (size_t i = 0; i < intsOut.size(); ++i) badInts += intsOut[i] != static_cast<int32_t>(i) * rankSum;
    EXPECT_EQ(badInts, 0);
    destroyStreams(streams);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

// One buffer's int8 all-reduces (stochastic rounding) with the library's error feedback, alternating between two
// streams with no wait between them and one blocking call among them: each op runs on another lane and must use and
// update the same residual, in call order. The results (and the statistics the communicator reports) are those of one
// queue, bit for bit.
std::string feedbackAcrossLanes(int lanes) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 5003;
  constexpr int kOps = 6;
  const auto result = runRanks(kRanks, withLanes(lanes), [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const int r = ctx.rank();
    std::vector<float> x(kCount);
    for (size_t i = 0; i < kCount; ++i) x[i] = std::sin(0.37f * static_cast<float>(i) + static_cast<float>(r));
    cfxCodec int8;
    // Stochastic rounding draws from the op's sequence number, which is its call's whatever lane it ran on.
    ASSERT_EQ(cfxCodecParse("int8:sr", &int8), ncclSuccess);
    int8.mode = cfxCompressAlways;
    int8.feedback = cfxFeedbackLibrary;
    const std::vector<cfxHostStream_t> streams = makeStreams(2);
    std::vector<std::vector<float>> outs(kOps, std::vector<float>(kCount));
    for (int k = 0; k < kOps; ++k) {
      cudaStream_t s = k == 3 ? nullptr : asCuda(streams[static_cast<size_t>(k % 2)]);
      ASSERT_EQ(cfxAllReduceCompressed(x.data(), outs[k].data(), kCount, ncclFloat, ncclSum, &int8, comm, s),
                ncclSuccess)
          << ncclGetLastError(comm);
    }
    // One more once those are done (the statistics are the last op's to finish), on a lane of its own where there
    // are lanes: the communicator reports its statistics.
    for (cfxHostStream_t s : streams) ASSERT_EQ(cfxHostStreamSynchronize(s), ncclSuccess) << ncclGetLastError(comm);
    std::vector<float> last(3001);
    int8.feedback = cfxFeedbackNone;
    ASSERT_EQ(
        cfxAllReduceCompressed(x.data(), last.data(), last.size(), ncclFloat, ncclSum, &int8, comm, asCuda(streams[0])),
        ncclSuccess);
    for (cfxHostStream_t s : streams) ASSERT_EQ(cfxHostStreamSynchronize(s), ncclSuccess) << ncclGetLastError(comm);
    cfxCompressStats stats;
    ASSERT_EQ(cfxCommGetCompressStats(comm, &stats), ncclSuccess);
    EXPECT_EQ(stats.compressed, 1);
    EXPECT_EQ(std::string(stats.codec).rfind("int8", 0), 0u) << stats.codec;
    EXPECT_EQ(stats.bufferBytes, last.size() * sizeof(float));
    EXPECT_GT(stats.wireBytes, 0u);
    // The exact sum of the ranks' sines; every element within two int8 steps of each contribution and of the result.
    double worst = 0;
    Hash128 hash;
    for (int k = 0; k < kOps; ++k) {
      for (size_t i = 0; i < kCount; ++i) {
        double exact = 0;
        for (int q = 0; q < kRanks; ++q) exact += std::sin(0.37f * static_cast<float>(i) + static_cast<float>(q));
        worst = std::max(worst, std::fabs(outs[k][i] - exact));
      }
      hash.update(outs[k].data(), kCount * sizeof(float));
    }
    EXPECT_LT(worst, 2.0 * (kRanks + kRanks) / 127.0);
    ctx.report("hash", hash.digest());
    destroyStreams(streams);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
  EXPECT_TRUE(result.allReportsEqual("hash")) << "the ranks' results differ";
  return result.ranks.empty() ? std::string() : result.report(0, "hash");
}

TEST(HostLanes, ErrorFeedbackOnOneBufferCarriesAcrossLanesToTheBitsOfOneQueue) {
  const std::string oneQueue = feedbackAcrossLanes(1);
  const std::string lanes = feedbackAcrossLanes(4);
  ASSERT_FALSE(oneQueue.empty());
  EXPECT_EQ(lanes, oneQueue);
}

// Op A of stream 1 cannot finish on rank 1 until B of stream 2 has finished there: rank 0's A waits in its stream
// for a message (on a second communicator) that rank 1 sends only once its B is done. With lanes, B runs beside A and
// all completes; with one queue, rank 1's B waits behind its A, which waits for rank 0: a deadlock that rank 1's short
// timeout turns into errors (the control that shows the test can tell the two apart).
void heldBackOp(int lanes) {
  const bool oneQueue = lanes == 1;
  runRanks(2, withLanes(lanes), [&](RankContext& ctx) {
    const int r = ctx.rank();
    if (oneQueue) ::setenv("CFX_TIMEOUT_MS", r == 1 ? "1000" : "20000", 1);
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const ncclUniqueId auxId = ctx.newUniqueId();
    ncclComm_t aux = nullptr;
    ASSERT_EQ(ncclCommInitRank(&aux, 2, auxId, r), ncclSuccess);
    const std::vector<cfxHostStream_t> streams = makeStreams(2);
    std::vector<float> a(1001, static_cast<float>(r + 1)), b(999, static_cast<float>(10 * (r + 1)));
    int token = r == 1 ? 42 : 0;
    if (r == 0) {
      ASSERT_EQ(ncclRecv(&token, 1, ncclInt32, 1, aux, asCuda(streams[0])), ncclSuccess);
    }
    ASSERT_EQ(ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat, ncclSum, comm, asCuda(streams[0])), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(b.data(), b.data(), b.size(), ncclFloat, ncclSum, comm, asCuda(streams[1])), ncclSuccess);
    if (r == 1) {
      const ncclResult_t bDone = cfxHostStreamSynchronize(streams[1]);
      if (oneQueue) {
        EXPECT_NE(bDone, ncclSuccess) << "B finished behind A with one queue: the test cannot tell";
      } else {
        EXPECT_EQ(bDone, ncclSuccess) << ncclGetLastError(comm);
      }
      ASSERT_EQ(ncclSend(&token, 1, ncclInt32, 0, aux, nullptr), ncclSuccess) << ncclGetLastError(aux);
    }
    const ncclResult_t aDone = cfxHostStreamSynchronize(streams[0]);
    if (oneQueue) {
      // Rank 1's A and B gave up. (Rank 0's may still complete: rank 1's halves were in its FIFOs.)
      if (r == 1) {
        EXPECT_NE(aDone, ncclSuccess);
      }
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    } else {
      EXPECT_EQ(aDone, ncclSuccess) << ncclGetLastError(comm);
      EXPECT_EQ(cfxHostStreamSynchronize(streams[1]), ncclSuccess);
      EXPECT_EQ(token, 42);
      int bad = 0;
      for (float v : a) bad += v != 3.0f;
      for (float v : b) bad += v != 30.0f;
      EXPECT_EQ(bad, 0);
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    }
    destroyStreams(streams);
    EXPECT_EQ(ncclCommDestroy(aux), ncclSuccess);
  });
}

TEST(HostLanes, AnOpItsPeerHoldsBackNoLongerHoldsBackTheOpsOfOtherStreams) { heldBackOp(2); }

TEST(HostLanes, WithOneQueueTheSameOpsDeadlockUntilTheTimeout) { heldBackOp(1); }

// Both ranks make every lane with four launches; then rank 0 alone issues three more, which wait on lanes 0-2 for
// rank 1, and `stop` ends them there. After a barrier, `end` runs on every rank (rank 0's comm may be gone: null).
using StopFn = std::function<void(ncclComm_t, const std::vector<cfxHostStream_t>&, std::vector<float>&)>;
void opsPendingOnLanes(const StopFn& stop, const std::function<void(ncclComm_t)>& end) {
  runRanks(2, withLanes(4), [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const std::vector<cfxHostStream_t> streams = makeStreams(3);
    std::vector<float> buf(1000, 1.0f);
    for (int k = 0; k < 4; ++k) {  // on parts of their own: ops of different streams run at the same time
      float* part = buf.data() + 200 * k;
      ASSERT_EQ(ncclAllReduce(part, part, 101, ncclFloat, ncclSum, comm, asCuda(streams[k % 3])), ncclSuccess);
    }
    for (cfxHostStream_t s : streams) ASSERT_EQ(cfxHostStreamSynchronize(s), ncclSuccess) << ncclGetLastError(comm);
    if (ctx.rank() == 0) {
      for (int k = 0; k < 3; ++k) {
        float* part = buf.data() + 200 * (k + 1);
        ASSERT_EQ(ncclAllReduce(part, part, 101, ncclFloat, ncclSum, comm, asCuda(streams[k])), ncclSuccess);
      }
      stop(comm, streams, buf);
    }
    ctx.barrier();
    end(ctx.rank() == 0 ? nullptr : comm);
    destroyStreams(streams);
  });
}

TEST(HostLanes, AbortWithOpsPendingOnLanesFailsThemWithTheAbort) {
  opsPendingOnLanes(
      [](ncclComm_t comm, const std::vector<cfxHostStream_t>& streams, std::vector<float>&) {
        EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
        for (cfxHostStream_t s : streams) {
          EXPECT_NE(cfxHostStreamSynchronize(s), ncclSuccess);
          const std::string why = ncclGetLastError(nullptr);
          EXPECT_NE(why.find("abort"), std::string::npos) << why;
        }
      },
      [](ncclComm_t comm) {
        if (comm != nullptr) {
          EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
        }
      });
}

TEST(HostLanes, RevokeWithOpsPendingOnLanesFailsThemWithTheRevoke) {
  ncclComm_t revoked = nullptr;
  opsPendingOnLanes(
      [&](ncclComm_t comm, const std::vector<cfxHostStream_t>& streams, std::vector<float>& buf) {
        revoked = comm;
        EXPECT_EQ(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess);
        for (cfxHostStream_t s : streams) EXPECT_NE(cfxHostStreamQuery(s), ncclSuccess) << "revoke left a lane's op";
        EXPECT_NE(ncclAllReduce(buf.data(), buf.data(), 1, ncclFloat, ncclSum, comm, asCuda(streams[0])), ncclSuccess);
      },
      [&](ncclComm_t comm) { EXPECT_EQ(ncclCommDestroy(comm != nullptr ? comm : revoked), ncclSuccess); });
}

// Rank 0's op on lane 1 that rank 1 never joins times out there: the communicator reports it, though no op of its
// own (lane 0) failed.
TEST(HostLanes, ALanesFailureIsTheCommunicatorsAsyncError) {
  runRanks(2, withLanes(2, {{"CFX_TIMEOUT_MS", "3000"}}), [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const std::vector<cfxHostStream_t> streams = makeStreams(1);
    std::vector<float> buf(300, 1.0f);
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), 100, ncclFloat, ncclSum, comm, asCuda(streams[0])), ncclSuccess);
    }
    ASSERT_EQ(cfxHostStreamSynchronize(streams[0]), ncclSuccess) << ncclGetLastError(comm);
    if (ctx.rank() == 0) {
      ncclResult_t state = ncclInternalError;
      ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
      EXPECT_EQ(state, ncclSuccess);
      ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), 100, ncclFloat, ncclSum, comm, asCuda(streams[0])), ncclSuccess);
      EXPECT_NE(cfxHostStreamSynchronize(streams[0]), ncclSuccess);
      ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
      EXPECT_NE(state, ncclSuccess) << "a lane's timeout did not reach the communicator";
      EXPECT_NE(ncclAllReduce(buf.data(), buf.data(), 1, ncclFloat, ncclSum, comm, nullptr), ncclSuccess);
    }
    ctx.barrier();
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    destroyStreams(streams);
  });
}

// Once the lanes exist, a collective that rank 0 issues blocking and rank 1 on a host stream shifts which lane every
// later one takes on rank 1: the ops then meet others with other numbers and fail on every rank as mismatched calls,
// rather than pairing with one another (same shapes, other buffers) and returning wrong sums as successes.
TEST(HostLanes, ACollectiveOnAHostStreamOnOneRankOnlyFailsAsAMismatchOnEveryRank) {
  runRanks(2, withLanes(2, {{"CFX_TIMEOUT_MS", "20000"}}), [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const int r = ctx.rank();
    const std::vector<cfxHostStream_t> streams = makeStreams(3);
    std::vector<float> buf(5 * 256, static_cast<float>(r + 1));
    auto allReduce = [&](int k, cudaStream_t s) {
      float* part = buf.data() + 256 * k;
      return ncclAllReduce(part, part, 255, ncclFloat, ncclSum, comm, s);
    };
    for (int k = 0; k < 2; ++k) ASSERT_EQ(allReduce(k, asCuda(streams[static_cast<size_t>(k)])), ncclSuccess);
    for (cfxHostStream_t s : streams) ASSERT_EQ(cfxHostStreamSynchronize(s), ncclSuccess) << ncclGetLastError(comm);
    std::vector<ncclResult_t> results;
    results.push_back(allReduce(2, r == 0 ? nullptr : asCuda(streams[0])));  // lane 0 on both, by chance
    results.push_back(allReduce(3, asCuda(streams[1])));                     // lane 0 on rank 0, 1 on rank 1
    results.push_back(allReduce(4, asCuda(streams[2])));                     // lane 1 on rank 0, 0 on rank 1
    for (cfxHostStream_t s : streams) results.push_back(cfxHostStreamSynchronize(s));
    int failed = 0;
    for (ncclResult_t rc : results) failed += rc != ncclSuccess;
    EXPECT_GT(failed, 0) << "the ops of different calls paired with one another";
    ncclResult_t state = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    EXPECT_NE(state, ncclSuccess);
    const std::string why = ncclGetLastError(comm);
    EXPECT_NE(why.find("mismatch"), std::string::npos) << why;
    ctx.barrier();
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    destroyStreams(streams);
  });
}

// A peer that dies before the lanes exist: the launch that makes them fails with that peer's failure once the
// survivors' communicators know of it, rather than waiting for the dead peer until the bootstrap's timeout (300 s
// here, beyond the job's limit).
TEST(HostLanes, APeerDeadBeforeTheLanesAreMadeFailsTheLaunchThatMakesThem) {
  runRanks(3, withLanes(4, {{"CFX_BOOTSTRAP_TIMEOUT_MS", "300000"}}), [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    std::vector<float> buf(512, 1.0f);
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), 100, ncclFloat, ncclSum, comm, nullptr), ncclSuccess);
    if (ctx.rank() == 2) ctx.killSelf(SIGKILL);
    const std::vector<cfxHostStream_t> streams = makeStreams(2);
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), 100, ncclFloat, ncclSum, comm, asCuda(streams[0])), ncclSuccess);
    EXPECT_NE(ncclAllReduce(buf.data() + 256, buf.data() + 256, 100, ncclFloat, ncclSum, comm, asCuda(streams[1])),
              ncclSuccess);
    const std::string why = ncclGetLastError(comm);
    EXPECT_NE(why.find("rank 2"), std::string::npos) << why;
    EXPECT_NE(cfxHostStreamSynchronize(streams[0]), ncclSuccess);
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    destroyStreams(streams);
  });
}

// A peer that dies while a rank waits for rank 0's lane ids: rank 0 learns it on an op of its own and then refuses
// its next launch, so it never sends them, and its abort ends the connection the waiting rank reads. That rank's
// error names the rank that died, not rank 0, whose connection ended only because of it. (Rank 1 issues its launches
// at once and rank 2 dies 300 ms later, so rank 1 is waiting by then; were it not, its own launch would find the
// failure first and name it too.)
TEST(HostLanes, APeerDyingWhileARankWaitsForTheLaneIdsIsNamedRatherThanRankZero) {
  runRanks(3, withLanes(2, {{"CFX_BOOTSTRAP_TIMEOUT_MS", "300000"}}), [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    std::vector<float> buf(512, 1.0f);
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), 100, ncclFloat, ncclSum, comm, nullptr), ncclSuccess);
    if (ctx.rank() == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ctx.killSelf(SIGKILL);
    }
    const std::vector<cfxHostStream_t> streams = makeStreams(2);
    auto launch = [&](size_t k) {
      float* part = buf.data() + 256 * k;
      return ncclAllReduce(part, part, 100, ncclFloat, ncclSum, comm, asCuda(streams[k]));
    };
    if (ctx.rank() == 0) {
      (void)launch(0);  // on the parent; it fails once rank 2 is gone
      EXPECT_NE(cfxHostStreamSynchronize(streams[0]), ncclSuccess);
      EXPECT_NE(launch(1), ncclSuccess);  // refused: the lanes' ids are never sent
    } else {
      (void)launch(0);
      EXPECT_NE(launch(1), ncclSuccess);  // waits for rank 0's ids until rank 0 aborts
      const std::string why = ncclGetLastError(comm);
      EXPECT_NE(why.find("rank 2"), std::string::npos) << why;
    }
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    destroyStreams(streams);
  });
}

// A rank 0 that stops (SIGSTOP: its connections stay open) before it sends the lanes' ids: the ranks waiting for them
// fail once heartbeats find it hung (3 s by default), and the error names it, rather than at the bootstrap's timeout
// (300 s here, beyond the job's limit).
TEST(HostLanes, ARankZeroThatStopsBeforeSendingTheLaneIdsIsNamedOnceHeartbeatsFindIt) {
  RunOptions options = withLanes(2, {{"CFX_BOOTSTRAP_TIMEOUT_MS", "300000"}});
  options.failOnChildError = false;
  const cfx::itest::RunResult result = runRanks(3, options, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const std::vector<std::string> pids = ctx.allGather(std::to_string(::getpid()));
    std::vector<float> buf(512, 1.0f);
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), 100, ncclFloat, ncclSum, comm, nullptr), ncclSuccess);
    ctx.barrier();
    if (ctx.rank() == 0) ctx.killSelf(SIGSTOP);
    const std::vector<cfxHostStream_t> streams = makeStreams(2);
    const auto start = std::chrono::steady_clock::now();
    (void)ncclAllReduce(buf.data(), buf.data(), 100, ncclFloat, ncclSum, comm, asCuda(streams[0]));  // the parent's
    EXPECT_NE(ncclAllReduce(buf.data() + 256, buf.data() + 256, 100, ncclFloat, ncclSum, comm, asCuda(streams[1])),
              ncclSuccess);  // makes the lanes: waits for rank 0's ids
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string why = ncclGetLastError(comm);
    EXPECT_NE(why.find("rank 0"), std::string::npos) << why;
    EXPECT_LT(waited, 60.0) << why;
    EXPECT_NE(cfxHostStreamSynchronize(streams[0]), ncclSuccess);
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    destroyStreams(streams);
    if (ctx.rank() == 1) ::kill(std::stoi(pids[0]), SIGKILL);
  });
  for (int r = 1; r < 3; ++r) EXPECT_TRUE(result.ranks[r].ok()) << result.ranks[r].describe();
  EXPECT_EQ(result.ranks[0].termSignal, SIGKILL);
}

// Destroy frees every lane: no mapping of a shared-memory segment and no name in /dev/shm are left behind, though
// the lanes had mapped segments of their own.
TEST(HostLanes, DestroyFreesEveryLane) {
  runRanks(2, withLanes(4), [&](RankContext& ctx) {
    const int before = shmMappings();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    std::vector<float> buf(1000, 1.0f);
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), 100, ncclFloat, ncclSum, comm, nullptr), ncclSuccess);
    const int parentOnly = shmMappings();
    const std::vector<cfxHostStream_t> streams = makeStreams(4);
    for (int k = 0; k < 4; ++k) {
      ASSERT_EQ(
          ncclAllReduce(buf.data() + 200 * k, buf.data() + 200 * k, 100, ncclFloat, ncclSum, comm, asCuda(streams[k])),
          ncclSuccess);
    }
    for (cfxHostStream_t s : streams) ASSERT_EQ(cfxHostStreamSynchronize(s), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_GT(shmMappings(), parentOnly) << "the lanes mapped no segment: is the shm transport off?";
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    EXPECT_EQ(shmMappings(), before);
    EXPECT_EQ(shmNamesOfThisProcess(), 0);
    destroyStreams(streams);
  });
}

// The automatic CFX_HOST_LANES (0) keeps one queue where the ranks share a host or a short path (loopback tcp), and
// a count that is set is kept: four async sums on four streams, checked against the closed form, then the progress
// threads counted (the parent's, plus one per lane).
TEST(HostLanes, TheAutomaticCountKeepsOneQueueOnOneHostOrAShortPath) {
  const std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, int>> cases = {
      {{{"CFX_HOST_LANES", "0"}}, 1},
      {{{"CFX_HOST_LANES", "0"}, {"NCCL_SHM_DISABLE", "1"}}, 1},
      {{{"CFX_HOST_LANES", "4"}, {"NCCL_SHM_DISABLE", "1"}}, 4},
  };
  for (const auto& [env, threads] : cases) {
    RunOptions options;
    options.env = env;
    runRanks(2, options, [&](RankContext& ctx) {
      ncclComm_t comm = ctx.initComm();
      ASSERT_NE(comm, nullptr);
      const std::vector<cfxHostStream_t> streams = makeStreams(4);
      std::vector<std::vector<int32_t>> bufs(4, std::vector<int32_t>(513));
      for (int k = 0; k < 4; ++k) {
        for (size_t i = 0; i < bufs[k].size(); ++i) bufs[k][i] = static_cast<int32_t>(i) * (ctx.rank() + 1) + k;
        ASSERT_EQ(
            ncclAllReduce(bufs[k].data(), bufs[k].data(), bufs[k].size(), ncclInt32, ncclSum, comm, asCuda(streams[k])),
            ncclSuccess);
      }
      for (cfxHostStream_t s : streams) ASSERT_EQ(cfxHostStreamSynchronize(s), ncclSuccess) << ncclGetLastError(comm);
      int bad = 0;
      for (int k = 0; k < 4; ++k) {
        for (size_t i = 0; i < bufs[k].size(); ++i) bad += bufs[k][i] != static_cast<int32_t>(i) * 3 + 2 * k;
      }
      EXPECT_EQ(bad, 0);
      EXPECT_EQ(progressThreads(), threads) << env.front().second << (env.size() > 1 ? " without shm" : "");
      destroyStreams(streams);
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    });
  }
}

// CFX_HOST_LANES and CFX_CHECK_CALLS change which messages an op exchanges, so a rank that sets them apart would pair
// the wrong messages or wait for ones never sent (a rank with one lane never makes the lanes the others wait in).
// Making the communicator refuses instead, on every rank, naming the setting and the rank that differs.
TEST(HostLanes, ASettingThatDiffersOnOneRankFailsInitOnEveryRankNamingIt) {
  for (const char* name : {"CFX_HOST_LANES", "CFX_CHECK_CALLS"}) {
    runRanks(3, [&](RankContext& ctx) {
      const bool odd = ctx.rank() == 2;
      ::setenv(name, std::string(name) == "CFX_HOST_LANES" ? (odd ? "1" : "4") : (odd ? "1" : "0"), 1);
      ncclComm_t comm = nullptr;
      EXPECT_EQ(ncclCommInitRank(&comm, 3, ctx.uniqueId(), ctx.rank()), ncclInvalidUsage) << name;
      const std::string why = ncclGetLastError(nullptr);
      EXPECT_NE(why.find(name), std::string::npos) << why;
      EXPECT_NE(why.find("rank 2 has 1"), std::string::npos) << why;
      if (comm != nullptr) (void)ncclCommAbort(comm);
    });
  }
}

}  // namespace
