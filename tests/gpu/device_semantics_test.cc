// SPDX-License-Identifier: Apache-2.0
// Device buffers where things go wrong or are out of the ordinary, through the public API with several ranks on one
// GPU: peers that die, never call or are aborted while a stream waits for their op; host and device buffers mixed
// across ranks; CUDA's special stream handles; pinned host buffers a stream is still writing; finalize, destroy,
// revoke and split while ops are still queued on streams; a group with an invalid op; zero-element ops;
// nonblocking communicators. Label gpu; every test skips with a reason where no CUDA device exists, and runs in CI
// on the CPU stand-ins of tests/gpu/emu (ctest Emulated.*, EmulatedHip.*).
#include <conflux.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "common/cuda_driver.h"
#include "gpu/device_test_util.h"
#include "integration/multiproc.h"
#include "integration/nccl_checks.h"

namespace cfx::itest {
namespace {

// ---- faults: a stream that waits for a device op never waits forever ------------------------------------------
//
// A device op's stream stalls on the communicator's flag until the op is over (core/device_stream.h). When the op
// cannot finish (a peer died, never came, or the user aborts), the flag must still be written, or the user's stream,
// and everything queued behind it, hangs with no error anywhere. Each scenario checks that the stream goes on (a
// copy queued behind the op runs), that the failure is the communicator's async error naming the peer, and that
// abort returns.

constexpr int kFaultTimeoutMs = 3000;            // CFX_TIMEOUT_MS in the fault scenarios
constexpr std::chrono::seconds kErrorBound{60};  // for the async error: far above any detection time
constexpr size_t kFaultCount = size_t{1} << 20;  // 4 MiB of float per rank

RunOptions faultOptions(std::vector<std::pair<std::string, std::string>> env) {
  RunOptions opts;
  opts.timeout = std::chrono::seconds(120);
  opts.failOnChildError = false;  // the victim's death is judged below, not as a failure of its own
  opts.env = std::move(env);
  opts.env.emplace_back("CFX_TIMEOUT_MS", std::to_string(kFaultTimeoutMs));
  // Heartbeats name a dead or stopped peer (5 x 200 ms) before any transfer times out.
  opts.env.emplace_back("CFX_HEARTBEAT_MS", "200");
  opts.env.emplace_back("CFX_HEARTBEAT_MISSES", "5");
  return opts;
}

// After a failed op: work queued on the stream behind it runs (the stream was released), and the bytes it moves
// are right.
void expectStreamGoesOn(const cuda::Driver& d, cuda::CUstream stream, const DevBuf& buf) {
  std::vector<uint32_t> marker(64), back(64);
  for (size_t i = 0; i < marker.size(); ++i) marker[i] = 0xC0FFEE00u + static_cast<uint32_t>(i);
  CU_OK(d.memcpyHtoDAsync(buf.ptr, marker.data(), marker.size() * 4, stream));
  CU_OK(d.memcpyDtoHAsync(back.data(), buf.ptr, back.size() * 4, stream));
  CU_OK(d.streamSynchronize(stream));
  EXPECT_EQ(back, marker) << "work queued behind the failed op did not run as queued";
}

// Three ranks on one device; rank 2 is SIGKILLed once the first all-reduce succeeded everywhere. The survivors'
// next all-reduce on device buffers must fail on their communicator (ncclRemoteError naming rank 2) and release
// their streams; then they shrink the communicator and all-reduce device buffers on it.
void peerKilledDuringADeviceOp(std::vector<std::pair<std::string, std::string>> env, bool ipc) {
  constexpr int kRanks = 3;
  constexpr int kVictim = 2;
  const RunResult result = runRanks(kRanks, faultOptions(std::move(env)), [&](RankContext& ctx) {
    const cuda::Driver& d = useDevice0();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cuda::CUstream stream = nullptr;
    CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
    DevBuf send(d, kFaultCount * 4), recv(d, kFaultCount * 4);
    const std::vector<float> ones(kFaultCount, 1.0f);
    CU_OK(d.memcpyHtoDAsync(send.ptr, ones.data(), send.bytes, stream));
    NCCL_OK(ncclAllReduce(send.p(), recv.p(), kFaultCount, ncclFloat, ncclSum, comm, stream));
    std::vector<float> out(kFaultCount);
    CU_OK(d.memcpyDtoHAsync(out.data(), recv.ptr, recv.bytes, stream));
    CU_OK(d.streamSynchronize(stream));
    ASSERT_EQ(out[kFaultCount - 1], float{kRanks}) << "the all-reduce before the fault";
    if (ipc) expectIpcPathTaken(IpcOps::Reductions);
    ASSERT_TRUE(ctx.barrier());
    if (ctx.rank() == kVictim) ctx.killSelf(SIGKILL);

    // The call only enqueues, so it may succeed; if the failure is already known it may report it.
    const ncclResult_t rc = ncclAllReduce(send.p(), recv.p(), kFaultCount, ncclFloat, ncclSum, comm, stream);
    EXPECT_TRUE(rc == ncclSuccess || rc == ncclRemoteError) << resultName(rc);
    CU_OK(d.streamSynchronize(stream));  // would hang if the failed op never wrote the stream's flag
    EXPECT_EQ(waitForAsyncError(comm, kErrorBound), ncclRemoteError);
    const std::string text = ncclGetLastError(comm);
    ctx.report("text", text);
    expectStreamGoesOn(d, stream, recv);

    // The survivors go on without the dead rank: a shrunk communicator's device all-reduce is right (over IPC, it
    // sets up its own scratch among the survivors).
    int dead = kVictim;
    ncclComm_t shrunk = nullptr;
    NCCL_OK(ncclCommShrink(comm, &dead, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT));
    ASSERT_NE(shrunk, nullptr);
    NCCL_OK(ncclAllReduce(send.p(), recv.p(), kFaultCount, ncclFloat, ncclSum, shrunk, stream));
    std::fill(out.begin(), out.end(), -1.0f);
    CU_OK(d.memcpyDtoHAsync(out.data(), recv.ptr, recv.bytes, stream));
    CU_OK(d.streamSynchronize(stream));
    EXPECT_EQ(out[0], float{kRanks - 1}) << "the shrunk communicator's all-reduce";
    EXPECT_EQ(out[kFaultCount - 1], float{kRanks - 1});
    ncclResult_t async = ncclInProgress;
    EXPECT_EQ(ncclCommGetAsyncError(shrunk, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(shrunk), ncclSuccess);
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    d.streamDestroy(stream);
  });
  EXPECT_EQ(result.terminationSignal(kVictim), SIGKILL) << result.ranks[kVictim].describe();
  int naming = 0;
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    EXPECT_TRUE(result.ranks[r].ok()) << result.ranks[r].describe();
    if (namesRank(result.report(r, "text"), kVictim)) ++naming;
  }
  EXPECT_GE(naming, 1) << "no survivor's error names the killed rank " << kVictim << ": " << result.report(0, "text")
                       << " | " << result.report(1, "text");
}

TEST(GpuCollectives, PeerKilledDuringAStagedOpFailsItReleasesTheStreamAndSurvivorsShrink) {
  SKIP_WITHOUT_GPU();
  peerKilledDuringADeviceOp({{"CFX_CUDA_IPC", "0"}}, false);
}

TEST(GpuCollectives, PeerKilledDuringAnIpcOpFailsItReleasesTheStreamAndSurvivorsShrink) {
  SKIP_WITHOUT_GPU();
  peerKilledDuringADeviceOp({{"CFX_CUDA_IPC", "1"}, {"CFX_CUDA_IPC_MIN_BYTES", "0"}}, true);
}

// Sends and receives over CUDA IPC around a ring of three; rank 2 is SIGKILLed once a first round trip succeeded.
// The survivors' next ring (rank 0 receives from the dead rank, rank 1 sends to it) must fail on their communicators
// naming rank 2, release their streams, and leave no survivor waiting for a token that never comes.
TEST(GpuCollectives, PeerKilledDuringIpcSendRecvFailsItAndReleasesTheStream) {
  SKIP_WITHOUT_GPU();
  constexpr int kRanks = 3;
  constexpr int kVictim = 2;
  const RunResult result =
      runRanks(kRanks, faultOptions({{"CFX_CUDA_IPC", "1"}, {"CFX_CUDA_IPC_MIN_BYTES", "0"}}), [&](RankContext& ctx) {
        const cuda::Driver& d = useDevice0();
        ncclComm_t comm = ctx.initComm();
        ASSERT_NE(comm, nullptr);
        cuda::CUstream stream = nullptr;
        CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
        const int r = ctx.rank();
        DevBuf send(d, kFaultCount * 4), recv(d, kFaultCount * 4);
        const std::vector<float> mine(kFaultCount, static_cast<float>(r + 1));
        CU_OK(d.memcpyHtoDAsync(send.ptr, mine.data(), send.bytes, stream));
        auto ring = [&]() -> ncclResult_t {
          if (ncclGroupStart() != ncclSuccess) return ncclInternalError;
          ncclResult_t rc = ncclSend(send.p(), kFaultCount, ncclFloat, (r + 1) % kRanks, comm, stream);
          const ncclResult_t rc2 = ncclRecv(recv.p(), kFaultCount, ncclFloat, (r + kRanks - 1) % kRanks, comm, stream);
          if (rc == ncclSuccess) rc = rc2;
          const ncclResult_t end = ncclGroupEnd();
          return rc != ncclSuccess ? rc : end;
        };
        NCCL_OK(ring());
        std::vector<float> out(kFaultCount);
        CU_OK(d.memcpyDtoHAsync(out.data(), recv.ptr, recv.bytes, stream));
        CU_OK(d.streamSynchronize(stream));
        ASSERT_EQ(out[kFaultCount - 1], static_cast<float>((r + kRanks - 1) % kRanks + 1))
            << "the ring before the fault";
        ASSERT_TRUE(ctx.barrier());
        if (r == kVictim) ctx.killSelf(SIGKILL);

        const ncclResult_t rc = ring();  // enqueues; may report a failure already known
        EXPECT_TRUE(rc == ncclSuccess || rc == ncclRemoteError) << resultName(rc);
        CU_OK(d.streamSynchronize(stream));  // would hang if the failed op never wrote the stream's flag
        EXPECT_EQ(waitForAsyncError(comm, kErrorBound), ncclRemoteError);
        const std::string text = ncclGetLastError(comm);
        EXPECT_TRUE(namesRank(text, kVictim)) << text;
        expectStreamGoesOn(d, stream, recv);
        EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
        d.streamDestroy(stream);
      });
  EXPECT_EQ(result.terminationSignal(kVictim), SIGKILL) << result.ranks[kVictim].describe();
  for (int r = 0; r < kRanks; ++r) {
    if (r != kVictim) {
      EXPECT_TRUE(result.ranks[r].ok()) << result.ranks[r].describe();
    }
  }
}

// Two ranks; rank 1 is alive and healthy but never calls the all-reduce rank 0 enqueued. Without abort, rank 0's
// op times out (CFX_TIMEOUT_MS) naming rank 1. With abort from another thread, the op ends then: while it runs,
// or before the stream even got to it (the stream is held on a word of the test's until the abort returned, so the
// op's host function and flag wait come after the communicator is gone). Either way the stream goes on. Rank 1
// waits on the test's own barrier meanwhile, then aborts too.
enum class Ending { Timeout, AbortWhileItRuns, AbortBeforeTheStreamGetsThere };

void peerNeverCalls(Ending ending) {
  const RunResult result = runRanks(2, faultOptions({}), [&](RankContext& ctx) {
    const cuda::Driver& d = useDevice0();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cuda::CUstream stream = nullptr;
    CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
    DevBuf buf(d, kFaultCount * 4);
    if (ctx.rank() == 1) {
      ASSERT_TRUE(ctx.barrier());  // rank 0's op has failed and its stream went on
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
      d.streamDestroy(stream);
      return;
    }
    const StreamHold hold(d);
    if (ending == Ending::AbortBeforeTheStreamGetsThere) {
      CU_OK(hold.hold(stream));
    }
    NCCL_OK(ncclAllReduce(buf.p(), buf.p(), kFaultCount, ncclFloat, ncclSum, comm, stream));
    if (ending == Ending::Timeout) {
      CU_OK(d.streamSynchronize(stream));
      EXPECT_EQ(waitForAsyncError(comm, kErrorBound), ncclRemoteError);
      const std::string text = ncclGetLastError(comm);
      EXPECT_TRUE(namesRank(text, 1)) << "the timeout does not name the peer that never came: " << text;
      EXPECT_NE(text.find("timeout"), std::string::npos) << text;
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    } else {
      std::thread aborter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the op waits for rank 1, or is not reached
        EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
        hold.release();  // the stream gets to the op only now
      });
      CU_OK(d.streamSynchronize(stream));
      aborter.join();
    }
    expectStreamGoesOn(d, stream, buf);
    d.streamDestroy(stream);
    ASSERT_TRUE(ctx.barrier());
  });
  for (const RankOutcome& r : result.ranks) EXPECT_TRUE(r.ok()) << r.describe();
}

TEST(GpuCollectives, PeerThatNeverCallsTimesTheOpOutAndReleasesTheStream) {
  SKIP_WITHOUT_GPU();
  peerNeverCalls(Ending::Timeout);
}

TEST(GpuCollectives, AbortFromAnotherThreadReleasesAStreamWaitingForAPeer) {
  SKIP_WITHOUT_GPU();
  peerNeverCalls(Ending::AbortWhileItRuns);
}

TEST(GpuCollectives, AbortBeforeTheStreamReachedTheOpReleasesItToo) {
  SKIP_WITHOUT_GPU();
  peerNeverCalls(Ending::AbortBeforeTheStreamGetsThere);
}

// Rank 0 passes device buffers, rank 1 host buffers, to the same all-gather. Staged, both run the host algorithm
// (rank 0 on its staging), so the result is right on both. Over CUDA IPC rank 0 runs the device-direct protocol
// and rank 1 the host one: both must fail with a named mismatch (rank 0's saying why it took another protocol),
// and rank 0's stream must go on. (An all-gather, as it runs over IPC in every build; an all-reduce stages where
// the build has no device kernels, as the sanitizer builds.)
void mixedHostAndDeviceBuffers(bool ipc) {
  std::vector<std::pair<std::string, std::string>> env = {{"CFX_CUDA_IPC", "0"}};
  if (ipc) env = {{"CFX_CUDA_IPC", "1"}, {"CFX_CUDA_IPC_MIN_BYTES", "0"}};
  const RunResult result = runRanks(2, faultOptions(env), [&](RankContext& ctx) {
    const cuda::Driver& d = useDevice0();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cuda::CUstream stream = nullptr;
    CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
    const size_t count = kFaultCount / 2;
    DevBuf send(d, count * 4), recv(d, 2 * count * 4);
    std::vector<float> hostSend(count, static_cast<float>(ctx.rank() + 1)), hostRecv(2 * count, -1.0f);
    CU_OK(d.memcpyHtoDAsync(send.ptr, hostSend.data(), send.bytes, stream));
    const bool onDevice = ctx.rank() == 0;
    const ncclResult_t rc = ncclAllGather(onDevice ? send.p() : hostSend.data(), onDevice ? recv.p() : hostRecv.data(),
                                          count, ncclFloat, comm, stream);
    CU_OK(d.streamSynchronize(stream));
    if (onDevice) {
      CU_OK(d.memcpyDtoHAsync(hostRecv.data(), recv.ptr, recv.bytes, stream));
      CU_OK(d.streamSynchronize(stream));
    }
    if (!ipc) {
      EXPECT_EQ(rc, ncclSuccess) << ncclGetLastError(comm);
      ncclResult_t async = ncclInProgress;
      EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
      EXPECT_EQ(async, ncclSuccess);
      EXPECT_EQ(hostRecv[0], 1.0f);
      EXPECT_EQ(hostRecv[count - 1], 1.0f);
      EXPECT_EQ(hostRecv[count], 2.0f);
      EXPECT_EQ(hostRecv[2 * count - 1], 2.0f);
      NCCL_OK(ncclCommDestroy(comm));
    } else {
      // Rank 1's call runs the op (host buffers) and returns its error; rank 0's fails on the stream.
      EXPECT_EQ(onDevice ? waitForAsyncError(comm, kErrorBound) : rc, ncclInvalidUsage);
      const std::string text = ncclGetLastError(comm);
      EXPECT_NE(text.find("mismatched operation"), std::string::npos) << text;
      if (onDevice) {
        EXPECT_NE(text.find("host buffers"), std::string::npos) << text;
      }
      expectStreamGoesOn(d, stream, recv);
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    }
    d.streamDestroy(stream);
  });
  for (const RankOutcome& r : result.ranks) EXPECT_TRUE(r.ok()) << r.describe();
}

TEST(GpuCollectives, HostBuffersOnOneRankDeviceOnAnotherStagedGiveTheRightResult) {
  SKIP_WITHOUT_GPU();
  mixedHostAndDeviceBuffers(false);
}

TEST(GpuCollectives, HostBuffersOnOneRankDeviceOnAnotherOverIpcFailAsANamedMismatch) {
  SKIP_WITHOUT_GPU();
  mixedHostAndDeviceBuffers(true);
}

// The same for a send and its receive: rank 0 sends from a device buffer, so over CUDA IPC it hands the message over
// through its scratch with a token on the host transport; rank 1 receives into host memory, so it waits for the
// message itself. Rank 1's receive gets the token instead and fails at once with a named mismatch; rank 0's op
// fails on the stream, naming rank 1 (its slot is never handed back), and its stream goes on.
TEST(GpuCollectives, DeviceSendToAHostReceiveOverIpcFailsAsANamedMismatch) {
  SKIP_WITHOUT_GPU();
  const RunResult result =
      runRanks(2, faultOptions({{"CFX_CUDA_IPC", "1"}, {"CFX_CUDA_IPC_MIN_BYTES", "0"}}), [&](RankContext& ctx) {
        const cuda::Driver& d = useDevice0();
        ncclComm_t comm = ctx.initComm();
        ASSERT_NE(comm, nullptr);
        cuda::CUstream stream = nullptr;
        CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
        const size_t bytes = 100000;
        DevBuf buf(d, bytes);
        std::vector<uint8_t> host(bytes, 0);
        if (ctx.rank() == 0) {
          NCCL_OK(ncclSend(buf.p(), bytes, ncclUint8, 1, comm, stream));
          const ncclResult_t async = waitForAsyncError(comm, kErrorBound);
          EXPECT_NE(async, ncclSuccess);
          EXPECT_NE(async, ncclInProgress);
          const std::string text = ncclGetLastError(comm);
          EXPECT_TRUE(namesRank(text, 1)) << text;
          expectStreamGoesOn(d, stream, buf);
        } else {
          EXPECT_EQ(ncclRecv(host.data(), bytes, ncclUint8, 0, comm, stream), ncclInvalidUsage);
          const std::string text = ncclGetLastError(comm);
          EXPECT_NE(text.find("mismatched operation"), std::string::npos) << text;
        }
        EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
        d.streamDestroy(stream);
      });
  for (const RankOutcome& r : result.ranks) EXPECT_TRUE(r.ok()) << r.describe();
}

// CUDA's special stream handles. CU_STREAM_PER_THREAD (2) names a different stream in every thread, so two ops
// under that one handle from two threads must not stage in one block as ops of one stream do (StagingPool): here
// thread A's stream is held before its op while thread B's op on its own per-thread stream is enqueued after it;
// were they to share a block, A's copy in, running last, would overwrite B's input. The legacy handles (0 and 1)
// name one stream, whose ops may share.
TEST(GpuCollectives, PerThreadAndLegacyStreamHandles) {
  SKIP_WITHOUT_GPU();
  runRanks(2, [&](RankContext& ctx) {
    const cuda::Driver& d = useDevice0();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const auto legacy = reinterpret_cast<cuda::CUstream>(uintptr_t{1});
    const auto perThread = reinterpret_cast<cuda::CUstream>(uintptr_t{2});
    const size_t count = size_t{1} << 16;
    const float me = static_cast<float>(ctx.rank() + 1);
    DevBuf x(d, count * 4), y(d, count * 4);
    const StreamHold hold(d);

    // Each thread fills its buffer, runs its all-reduce in place and reads it back, all on its per-thread stream.
    auto run = [&](const DevBuf& buf, float value, bool held, std::atomic<int>* step, std::vector<float>* out) {
      useDevice0();
      const std::vector<float> in(count, value);
      EXPECT_EQ(d.memcpyHtoDAsync(buf.ptr, in.data(), buf.bytes, perThread), cuda::kSuccess);
      if (held) {
        EXPECT_EQ(hold.hold(perThread), cuda::kSuccess);
      }
      EXPECT_EQ(ncclAllReduce(buf.p(), buf.p(), count, ncclFloat, ncclSum, comm, perThread), ncclSuccess)
          << ncclGetLastError(comm);
      step->store(1);
      while (step->load() != 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (held) hold.release();
      out->assign(count, -1.0f);
      EXPECT_EQ(d.memcpyDtoHAsync(out->data(), buf.ptr, buf.bytes, perThread), cuda::kSuccess);
      EXPECT_EQ(d.streamSynchronize(perThread), cuda::kSuccess);
    };
    std::atomic<int> stepA{0}, stepB{0};
    std::vector<float> outA, outB;
    std::thread a(run, std::cref(x), me, true, &stepA, &outA);
    while (stepA.load() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::thread b(run, std::cref(y), 10 * me, false, &stepB, &outB);  // enqueued after A's, one thread at a time
    while (stepB.load() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stepA.store(2);
    stepB.store(2);
    a.join();
    b.join();
    ASSERT_EQ(outA.size(), count);
    ASSERT_EQ(outB.size(), count);
    EXPECT_EQ(outA[0], 3.0f) << "thread A's all-reduce on its per-thread stream";
    EXPECT_EQ(outA[count - 1], 3.0f);
    EXPECT_EQ(outB[0], 30.0f) << "thread B's all-reduce on its per-thread stream: its input was overwritten?";
    EXPECT_EQ(outB[count - 1], 30.0f);

    // The legacy stream under both its names.
    std::vector<float> in(count, me), out(count, -1.0f);
    CU_OK(d.memcpyHtoDAsync(x.ptr, in.data(), x.bytes, nullptr));
    NCCL_OK(ncclAllReduce(x.p(), y.p(), count, ncclFloat, ncclSum, comm, nullptr));
    NCCL_OK(ncclAllReduce(y.p(), x.p(), count, ncclFloat, ncclSum, comm, legacy));
    CU_OK(d.memcpyDtoHAsync(out.data(), x.ptr, x.bytes, legacy));
    CU_OK(d.streamSynchronize(nullptr));
    EXPECT_EQ(out[0], 6.0f) << "two all-reduces on the legacy stream, the second summing the first's result";
    EXPECT_EQ(out[count - 1], 6.0f);
    NCCL_OK(ncclCommDestroy(comm));
  });
}

// Pinned host buffers run as host buffers (at the call), but a stream can still be writing them: here the stream,
// held back, has a copy into the buffer queued when the all-reduce is called. The call must wait for the stream, so
// the op reads what the copy wrote, not what the buffer held before (NCCL orders such an op on the stream).
TEST(GpuCollectives, PinnedHostBuffersWaitForTheStreamsEarlierWork) {
  SKIP_WITHOUT_GPU();
  runRanks(2, [&](RankContext& ctx) {
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    ncclComm_t comm = self.comm;
    cuda::CUstream stream = self.stream;
    const size_t count = size_t{1} << 16;
    DevBuf src(d, count * 4);
    const std::vector<float> mine(count, static_cast<float>(ctx.rank() + 1));
    CU_OK(d.memcpyHtoDAsync(src.ptr, mine.data(), src.bytes, stream));
    CU_OK(d.streamSynchronize(stream));
    void* pinned = nullptr;
    CU_OK(d.memHostAlloc(&pinned, count * 4, cuda::kHostAllocPortable));
    auto* values = static_cast<float*>(pinned);
    std::fill(values, values + count, -1.0f);  // what the op would read if it ran before the copy
    const StreamHold hold(d);
    CU_OK(hold.hold(stream));
    CU_OK(d.memcpyDtoHAsync(pinned, src.ptr, src.bytes, stream));  // pinned: asynchronous, behind the hold
    std::thread releaser = hold.releaseAfter(std::chrono::milliseconds(200));
    const ncclResult_t rc = ncclAllReduce(pinned, pinned, count, ncclFloat, ncclSum, comm, stream);
    releaser.join();
    EXPECT_EQ(rc, ncclSuccess) << ncclGetLastError(comm);
    CU_OK(d.streamSynchronize(stream));
    EXPECT_EQ(values[0], 3.0f) << "the op ran before the stream's copy into its buffer";
    EXPECT_EQ(values[count - 1], 3.0f);
    d.memFreeHost(pinned);
  });
}

// NCCL's ncclCommFinalize flushes the operations a communicator has not completed, and ncclCommDestroy finalizes
// first when the user did not. So a device op whose stream has not reached it yet (held by earlier work) must still
// run, with the right result, when its communicator is finalized and destroyed right after the call: rank 0
// finalizes then destroys, rank 1 only destroys, each while its stream is still held.
TEST(GpuCollectives, FinalizeAndDestroyCompleteOpsTheStreamHasNotReachedYet) {
  SKIP_WITHOUT_GPU();
  runRanks(2, [&](RankContext& ctx) {
    const cuda::Driver& d = useDevice0();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cuda::CUstream stream = nullptr;
    CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
    const size_t count = 300007;
    DevBuf send(d, count * 4), recv(d, count * 4);
    std::vector<int32_t> in(count), out(count, -1);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i % 1009) + 7 * ctx.rank();
    CU_OK(d.memcpyHtoDAsync(send.ptr, in.data(), send.bytes, stream));
    const StreamHold hold(d);
    CU_OK(hold.hold(stream));
    NCCL_OK(ncclAllReduce(send.p(), recv.p(), count, ncclInt32, ncclSum, comm, stream));
    std::thread releaser = hold.releaseAfter(std::chrono::milliseconds(300));  // finalize or destroy runs by then
    if (ctx.rank() == 0) {
      EXPECT_EQ(ncclCommFinalize(comm), ncclSuccess) << ncclGetLastError(nullptr);
    }
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess) << ncclGetLastError(nullptr);
    releaser.join();
    CU_OK(d.memcpyDtoHAsync(out.data(), recv.ptr, recv.bytes, stream));  // queued behind the op
    CU_OK(d.streamSynchronize(stream));
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[i], 2 * static_cast<int32_t>(i % 1009) + 7) << "element " << i;
    }
    d.streamDestroy(stream);
  });
}

// ncclCommRevoke on one rank stops every rank's in-flight operations (NCCL 2.28), device ops included: rank 1's
// op is running (its stream reached it, and it waits for the revoker, who never joins), rank 2's is still queued
// behind held stream work. Both fail with the revoke named, both streams go on (rank 2's once its hold is
// released), later calls on the revoked communicator are refused, and a split of it runs a device all-reduce right.
TEST(GpuCollectives, RevokeStopsRunningAndQueuedDeviceOpsAndTheSplitWorks) {
  SKIP_WITHOUT_GPU();
  constexpr int kRanks = 3;
  constexpr int kRevoker = 0;
  constexpr int kQueued = 2;  // its op waits behind held stream work when the revoke comes
  RunOptions opts;
  opts.timeout = std::chrono::seconds(120);
  opts.env = {{"CFX_TIMEOUT_MS", "60000"}};  // only the revoke can end rank 1's wait
  runRanks(kRanks, opts, [&](RankContext& ctx) {
    const int me = ctx.rank();
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    ncclComm_t comm = self.comm;
    cuda::CUstream stream = self.stream;
    const size_t count = kFaultCount / 4;
    DevBuf send(d, count * 4), recv(d, count * 4);
    const std::vector<float> mine(count, static_cast<float>(me + 1));
    CU_OK(d.memcpyHtoDAsync(send.ptr, mine.data(), send.bytes, stream));
    const StreamHold hold(d);
    if (me == kRevoker) {
      ASSERT_TRUE(ctx.barrier());                                   // the others' ops are enqueued
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 1's is waiting for this rank by now
      NCCL_OK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
    } else {
      if (me == kQueued) {
        CU_OK(hold.hold(stream));
      }
      NCCL_OK(ncclAllReduce(send.p(), recv.p(), count, ncclFloat, ncclSum, comm, stream));
      ASSERT_TRUE(ctx.barrier());
      EXPECT_NE(waitForAsyncError(comm, kErrorBound), ncclSuccess);
      const std::string text = ncclGetLastError(comm);
      EXPECT_NE(text.find("evoke"), std::string::npos) << "stopped by something else than the revoke: " << text;
      hold.release();
      CU_OK(d.streamSynchronize(stream));
      expectStreamGoesOn(d, stream, recv);
    }
    EXPECT_EQ(ncclAllReduce(send.p(), recv.p(), count, ncclFloat, ncclSum, comm, stream), ncclInvalidUsage);
    const char* last = ncclGetLastError(nullptr);
    EXPECT_NE(std::string(last ? last : "").find("revoked by rank " + std::to_string(kRevoker)), std::string::npos)
        << (last ? last : "");
    ASSERT_TRUE(ctx.barrier());
    ncclComm_t child = nullptr;
    NCCL_OK(ncclCommSplit(comm, 0, me, &child, nullptr));
    ASSERT_NE(child, nullptr);
    NCCL_OK(ncclAllReduce(send.p(), recv.p(), count, ncclFloat, ncclSum, child, stream));
    std::vector<float> out(count, 0.0f);
    CU_OK(d.memcpyDtoHAsync(out.data(), recv.ptr, recv.bytes, stream));
    CU_OK(d.streamSynchronize(stream));
    EXPECT_EQ(out[0], 1.0f + 2.0f + 3.0f) << "the split's all-reduce";
    EXPECT_EQ(out[count - 1], 1.0f + 2.0f + 3.0f);
    NCCL_OK(ncclCommDestroy(child));
  });
}

// ncclCommSplit does not wait for the parent's operations (it runs on the bootstrap), so a split made while a device
// op is still queued on the parent's stream must neither wait for it nor disturb it: the child runs its own device
// all-reduce on another stream meanwhile, and the parent's op completes with the right result once its stream is
// released.
TEST(GpuCollectives, SplitWhileADeviceOpIsQueuedOnTheParent) {
  SKIP_WITHOUT_GPU();
  runRanks(3, [&](RankContext& ctx) {
    const int me = ctx.rank();
    const cuda::Driver& d = useDevice0();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cuda::CUstream held = nullptr, other = nullptr;
    CU_OK(d.streamCreate(&held, cuda::kStreamNonBlocking));
    CU_OK(d.streamCreate(&other, cuda::kStreamNonBlocking));
    const size_t count = 65537;
    DevBuf send(d, count * 4), recv(d, count * 4), childRecv(d, count * 4);
    std::vector<int32_t> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i % 251) * (me + 1);
    CU_OK(d.memcpyHtoDAsync(send.ptr, in.data(), send.bytes, held));
    CU_OK(d.streamSynchronize(held));
    const StreamHold hold(d);
    CU_OK(hold.hold(held));
    NCCL_OK(ncclAllReduce(send.p(), recv.p(), count, ncclInt32, ncclSum, comm, held));
    ncclComm_t child = nullptr;
    NCCL_OK(ncclCommSplit(comm, me % 2, me, &child, nullptr));  // {0, 2} and {1}
    ASSERT_NE(child, nullptr);
    NCCL_OK(ncclAllReduce(send.p(), childRecv.p(), count, ncclInt32, ncclSum, child, other));
    std::vector<int32_t> out(count, -1);
    CU_OK(d.memcpyDtoHAsync(out.data(), childRecv.ptr, childRecv.bytes, other));
    CU_OK(d.streamSynchronize(other));
    const int32_t childFactor = me % 2 == 0 ? 1 + 3 : 2;
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[i], static_cast<int32_t>(i % 251) * childFactor) << "child, element " << i;
    }
    hold.release();
    CU_OK(d.memcpyDtoHAsync(out.data(), recv.ptr, recv.bytes, held));
    CU_OK(d.streamSynchronize(held));
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[i], static_cast<int32_t>(i % 251) * (1 + 2 + 3)) << "parent, element " << i;
    }
    NCCL_OK(ncclCommDestroy(child));
    NCCL_OK(ncclCommDestroy(comm));
    d.streamDestroy(held);
    d.streamDestroy(other);
  });
}

// After what a test did, the communicator and the stream go on: an int32 all-reduce of `a` (count elements) into `b`
// gives `expected` throughout, and the communicator has no async error.
void expectNextAllReduceRight(const cuda::Driver& d, ncclComm_t comm, cuda::CUstream stream, const DevBuf& a,
                              const DevBuf& b, size_t count, int32_t expected) {
  NCCL_OK(ncclAllReduce(a.p(), b.p(), count, ncclInt32, ncclSum, comm, stream));
  std::vector<int32_t> out(count, -1);
  CU_OK(d.memcpyDtoHAsync(out.data(), b.ptr, count * 4, stream));
  CU_OK(d.streamSynchronize(stream));
  EXPECT_EQ(std::count(out.begin(), out.end(), expected), static_cast<std::ptrdiff_t>(count))
      << "the all-reduce after it: element 0 is " << out[0];
  ncclResult_t async = ncclInProgress;
  EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
}

// An invalid op in a group of device ops (a root out of range) fails the group on every rank that makes it, and
// loses nothing: no op of the group is enqueued (the stream is not left waiting for one that never runs), and the
// next device all-reduce on the same communicator and stream is right on every rank.
TEST(GpuCollectives, AnInvalidOpFailsItsWholeGroupAndTheCommunicatorGoesOn) {
  SKIP_WITHOUT_GPU();
  runRanks(2, [&](RankContext& ctx) {
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    ncclComm_t comm = self.comm;
    cuda::CUstream stream = self.stream;
    const size_t count = 4097;
    DevBuf a(d, count * 4), b(d, count * 4);
    std::vector<int32_t> in(count, ctx.rank() + 1), out(count, -1);
    const std::vector<int32_t> marker(count, -9);
    CU_OK(d.memcpyHtoDAsync(a.ptr, in.data(), a.bytes, stream));
    CU_OK(d.memcpyHtoDAsync(b.ptr, marker.data(), b.bytes, stream));
    NCCL_OK(ncclGroupStart());
    const ncclResult_t first = ncclAllReduce(a.p(), b.p(), count, ncclInt32, ncclSum, comm, stream);
    const ncclResult_t bad = ncclBroadcast(a.p(), b.p(), count, ncclInt32, /*root=*/7, comm, stream);
    const ncclResult_t end = ncclGroupEnd();
    EXPECT_EQ(first, ncclSuccess);
    EXPECT_EQ(bad, ncclInvalidArgument);
    EXPECT_EQ(end, ncclInvalidArgument) << "the group with the invalid op must fail as a whole";
    CU_OK(d.memcpyDtoHAsync(out.data(), b.ptr, b.bytes, stream));
    CU_OK(d.streamSynchronize(stream));
    EXPECT_EQ(out, marker) << "an op of the failed group ran";
    expectNextAllReduceRight(d, comm, stream, a, b, count, 1 + 2);
  });
}

// Zero-element operations on a device stream (PyTorch sends and receives empty tensors, and they must still
// match): send/recv of 0 elements in a group, and collectives of count 0, complete without touching anything, and
// the stream and the communicator go on: the all-reduce after them is right.
TEST(GpuCollectives, ZeroElementOpsOnAStreamCompleteAndTheNextOpIsRight) {
  SKIP_WITHOUT_GPU();
  runRanks(2, [&](RankContext& ctx) {
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    ncclComm_t comm = self.comm;
    cuda::CUstream stream = self.stream;
    const int peer = 1 - ctx.rank();
    const size_t count = 1000;
    DevBuf a(d, count * 4), b(d, count * 4);
    const std::vector<int32_t> in(count, 10 * (ctx.rank() + 1));
    CU_OK(d.memcpyHtoDAsync(a.ptr, in.data(), a.bytes, stream));
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(a.p(), 0, ncclInt32, peer, comm, stream));
    NCCL_OK(ncclRecv(b.p(), 0, ncclInt32, peer, comm, stream));
    NCCL_OK(ncclGroupEnd());
    NCCL_OK(ncclAllReduce(a.p(), b.p(), 0, ncclInt32, ncclSum, comm, stream));
    NCCL_OK(ncclAllGather(a.p(), b.p(), 0, ncclInt32, comm, stream));
    NCCL_OK(ncclBroadcast(a.p(), b.p(), 0, ncclInt32, 1, comm, stream));
    expectNextAllReduceRight(d, comm, stream, a, b, count, 10 + 20);
  });
}

// A nonblocking communicator (config.blocking = 0, as PyTorch's TORCH_NCCL_USE_COMM_NONBLOCKING makes) with device
// buffers: init and a grouped all-reduce may return ncclInProgress, and ncclCommGetAsyncError is polled until they
// are enqueued; the results come through the stream, and finalize completes the same way.
TEST(GpuCollectives, NonblockingCommunicatorOnDeviceBuffers) {
  SKIP_WITHOUT_GPU();
  runRanks(3, [&](RankContext& ctx) {
    const cuda::Driver& d = useDevice0();
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    const ncclResult_t rc = ncclCommInitRankConfig(&comm, ctx.nRanks(), ctx.uniqueId(), ctx.rank(), &config);
    ASSERT_TRUE(rc == ncclSuccess || rc == ncclInProgress) << resultName(rc);
    ASSERT_NE(comm, nullptr);
    ASSERT_EQ(waitWhileInProgress(comm), ncclSuccess);
    cuda::CUstream stream = nullptr;
    CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
    const size_t count = 4099;
    DevBuf a(d, count * 4), b(d, count * 4);
    std::vector<int32_t> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i % 97) * (ctx.rank() + 1);
    CU_OK(d.memcpyHtoDAsync(a.ptr, in.data(), a.bytes, stream));
    NCCL_OK(ncclGroupStart());
    const ncclResult_t arc = ncclAllReduce(a.p(), b.p(), count, ncclInt32, ncclSum, comm, stream);
    ASSERT_TRUE(arc == ncclSuccess || arc == ncclInProgress) << resultName(arc);
    const ncclResult_t grc = ncclGroupEnd();
    ASSERT_TRUE(grc == ncclSuccess || grc == ncclInProgress) << resultName(grc);
    ASSERT_EQ(waitWhileInProgress(comm), ncclSuccess);
    std::vector<int32_t> out(count, -1);
    CU_OK(d.memcpyDtoHAsync(out.data(), b.ptr, b.bytes, stream));
    CU_OK(d.streamSynchronize(stream));
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[i], static_cast<int32_t>(i % 97) * (1 + 2 + 3)) << "element " << i;
    }
    const ncclResult_t frc = ncclCommFinalize(comm);
    ASSERT_TRUE(frc == ncclSuccess || frc == ncclInProgress) << resultName(frc);
    ASSERT_EQ(waitWhileInProgress(comm), ncclSuccess);
    NCCL_OK(ncclCommDestroy(comm));
    d.streamDestroy(stream);
  });
}

}  // namespace
}  // namespace cfx::itest
