// SPDX-License-Identifier: Apache-2.0
// The host-side logic of device-buffer ops (src/core/device_stream): where an op's staging copies go, per stream,
// and the gate the progress thread waits at. The GPU side runs in tests/gpu; this is what can be checked anywhere.
#include "core/device_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace cfx::core {
namespace {

StagedRange range(uintptr_t device, size_t bytes, bool in, bool out) {
  StagedRange r;
  r.device = static_cast<cuda::CUdeviceptr>(device);
  r.host = reinterpret_cast<void*>(device + 0x1000);
  r.bytes = bytes;
  r.copyIn = in;
  r.copyOut = out;
  return r;
}

TEST(PlanStreamCopies, AnOpOfZeroElementsStillGetsOneEntryPerStream) {
  // The first version of on-stream staging indexed an empty list here and crashed on a GPU (an 8-byte all-gather
  // over 4 ranks is 0 elements per rank).
  Result<std::vector<StreamCopies>> copies = planStreamCopies({}, {}, 2);
  ASSERT_TRUE(copies.ok()) << copies.status().message();
  ASSERT_EQ(copies.value().size(), 2u);
  for (const StreamCopies& c : copies.value()) {
    EXPECT_TRUE(c.in.empty());
    EXPECT_TRUE(c.out.empty());
  }
}

TEST(PlanStreamCopies, InputsGoOnTheFirstNamingStreamAndOutputsOnEveryOne) {
  const std::vector<StagedRange> ranges = {range(0x10000, 4096, true, false),   // an input of stream 1's op
                                           range(0x20000, 8192, false, true),   // an output of stream 0's op
                                           range(0x30000, 256, true, true)};    // in place, named on 2 then 0
  const std::vector<std::vector<size_t>> streamsOf = {{1}, {0}, {2, 0}};
  Result<std::vector<StreamCopies>> copies = planStreamCopies(ranges, streamsOf, 3);
  ASSERT_TRUE(copies.ok()) << copies.status().message();
  const std::vector<StreamCopies>& c = copies.value();
  ASSERT_EQ(c.size(), 3u);
  ASSERT_EQ(c[0].in.size(), 0u);
  ASSERT_EQ(c[0].out.size(), 2u);
  EXPECT_EQ(c[0].out[0].device, ranges[1].device);
  EXPECT_EQ(c[0].out[1].device, ranges[2].device);
  ASSERT_EQ(c[1].in.size(), 1u);
  EXPECT_EQ(c[1].in[0].device, ranges[0].device);
  EXPECT_EQ(c[1].in[0].bytes, 4096u);
  EXPECT_EQ(c[1].in[0].host, ranges[0].host);
  EXPECT_TRUE(c[1].out.empty());
  ASSERT_EQ(c[2].in.size(), 1u);
  EXPECT_EQ(c[2].in[0].device, ranges[2].device);
  ASSERT_EQ(c[2].out.size(), 1u);
  EXPECT_EQ(c[2].out[0].device, ranges[2].device);
}

TEST(PlanStreamCopies, ListsThatDoNotFitAreAnInternalError) {
  const std::vector<StagedRange> one = {range(0x10000, 64, true, true)};
  Result<std::vector<StreamCopies>> missing = planStreamCopies(one, {}, 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Errc::InternalError);
  Result<std::vector<StreamCopies>> none = planStreamCopies(one, {{}}, 1);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("names no stream"), std::string::npos);
  Result<std::vector<StreamCopies>> beyond = planStreamCopies(one, {{3}}, 2);
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.status().message().find("stream 3 of 2"), std::string::npos);
}

TEST(ReadyGate, OpensOnlyOnceEveryStreamGotThere) {
  ReadyGate gate(2);
  std::atomic<bool> abort{false};
  std::atomic<bool> passed{false};
  std::thread waiter([&] {
    EXPECT_TRUE(gate.wait(abort).ok());
    passed = true;
  });
  gate.open();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(passed.load()) << "the gate opened after one of its two streams";
  gate.open();
  waiter.join();
  EXPECT_TRUE(passed.load());
}

TEST(ReadyGate, AFailedEnqueueAndAnAbortEndTheWaitWithAnError) {
  ReadyGate failed(3);
  std::atomic<bool> abort{false};
  failed.fail(Status::error(Errc::InvalidUsage, "cuLaunchHostFunc failed"));
  Status st = failed.wait(abort);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Errc::InvalidUsage);

  ReadyGate never(1);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    abort = true;
  });
  Status aborted = never.wait(abort);
  aborter.join();
  ASSERT_FALSE(aborted.ok());
  EXPECT_EQ(aborted.code(), Errc::RemoteError);
}

// Made-up addresses: the pool only hands them around, and the allocator records what it was asked for.
struct FakeAllocator {
  std::vector<size_t> sizes;
  uintptr_t next = 0x10000000;
  StagingPool::Allocate fn() {
    return [this](size_t bytes) -> Result<void*> {
      sizes.push_back(bytes);
      next += 0x10000000;
      return reinterpret_cast<void*>(next);
    };
  }
};

cuda::CUstream fakeStream(uintptr_t v) { return reinterpret_cast<cuda::CUstream>(v); }

TEST(StagingPool, BlocksComeInFourSizesPerPowerOfTwo) {
  EXPECT_EQ(StagingPool::blockSize(1), 64u << 10);
  EXPECT_EQ(StagingPool::blockSize(64u << 10), 64u << 10);
  EXPECT_EQ(StagingPool::blockSize((64u << 10) + 1), 80u << 10);
  EXPECT_EQ(StagingPool::blockSize(1u << 20), 1u << 20);
  EXPECT_EQ(StagingPool::blockSize((1u << 20) + 1), 1280u << 10);
  // A 1 GiB out-of-place all-reduce stages 2 GiB and some alignment: 2.5 GiB, not the 4 GiB of a power of two.
  EXPECT_EQ(StagingPool::blockSize((size_t{2} << 30) + 300), (size_t{5} << 30) / 2);
  for (size_t bytes : {size_t{70000}, size_t{3} << 20, (size_t{3} << 20) + 7, size_t{1000000007}}) {
    const size_t size = StagingPool::blockSize(bytes);
    EXPECT_GE(size, bytes);
    EXPECT_LE(size - bytes, size / 5) << bytes;
  }
}

TEST(StagingPool, OpsEnqueuedAheadOnOneStreamShareItsBlock) {
  StagingPool pool;
  FakeAllocator alloc;
  const cuda::CUstream s = fakeStream(0x100);
  std::vector<StagingBlock> inFlight;
  for (int i = 0; i < 25; ++i) {
    Result<StagingBlock> b = pool.take(3u << 20, s, alloc.fn());
    ASSERT_TRUE(b.ok());
    inFlight.push_back(b.value());
  }
  ASSERT_EQ(alloc.sizes.size(), 1u);  // 25 ops in flight, one allocation
  for (const StagingBlock& b : inFlight) EXPECT_EQ(b.p, inFlight.front().p);
  EXPECT_EQ(pool.byStream.at(s).users, 25);
  for (const StagingBlock& b : inFlight) pool.settle(b);
  EXPECT_EQ(pool.byStream.at(s).users, 0);
  EXPECT_TRUE(pool.free.empty());  // still the stream's, for its next op
}

TEST(StagingPool, AGrownStreamBlockFreesTheOldOneOnlyAfterItsLastOp) {
  StagingPool pool;
  FakeAllocator alloc;
  const cuda::CUstream s = fakeStream(0x100);
  StagingBlock small = pool.take(1u << 20, s, alloc.fn()).value();
  StagingBlock small2 = pool.take(1u << 20, s, alloc.fn()).value();
  StagingBlock big = pool.take(8u << 20, s, alloc.fn()).value();
  ASSERT_EQ(alloc.sizes.size(), 2u);
  EXPECT_NE(big.p, small.p);
  ASSERT_EQ(pool.retired.size(), 1u);
  // Another stream's op must not get the retired block while the first stream may still copy through it.
  StagingBlock other = pool.take(1u << 20, fakeStream(0x200), alloc.fn()).value();
  EXPECT_NE(other.p, small.p);
  pool.settle(small);
  EXPECT_TRUE(pool.free.empty());
  pool.settle(small2);
  EXPECT_TRUE(pool.retired.empty());
  ASSERT_EQ(pool.free.size(), 1u);
  EXPECT_EQ(pool.free.front().second, small.p);
  // Now free: a multi-stream op (no stream) takes it instead of allocating.
  const size_t allocations = alloc.sizes.size();
  StagingBlock own = pool.take(1u << 20, nullptr, alloc.fn()).value();
  EXPECT_EQ(own.p, small.p);
  EXPECT_EQ(alloc.sizes.size(), allocations);
  pool.settle(own);
  EXPECT_EQ(pool.free.size(), 1u);
  pool.settle(big);
  EXPECT_EQ(pool.byStream.at(s).users, 0);
}

TEST(StagingPool, OwnBlocksAreNotSharedWhileInFlight) {
  StagingPool pool;
  FakeAllocator alloc;
  StagingBlock a = pool.take(100, nullptr, alloc.fn()).value();
  StagingBlock b = pool.take(100, nullptr, alloc.fn()).value();
  EXPECT_NE(a.p, b.p);
  pool.settle(a);
  StagingBlock c = pool.take(100, nullptr, alloc.fn()).value();
  EXPECT_EQ(c.p, a.p);
  EXPECT_EQ(alloc.sizes.size(), 2u);
}

TEST(StagingPool, AFailedAllocationIsReturnedAndLeavesThePoolAsItWas) {
  StagingPool pool;
  auto failing = [](size_t) -> Result<void*> { return Status::error(Errc::SystemError, "no pinned memory"); };
  Result<StagingBlock> b = pool.take(1u << 20, fakeStream(0x100), failing);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Errc::SystemError);
  EXPECT_TRUE(pool.byStream.empty());
}

TEST(StagingPool, BlocksSettledAfterCloseStayOut) {
  StagingPool pool;
  FakeAllocator alloc;
  StagingBlock b = pool.take(100, nullptr, alloc.fn()).value();
  pool.closed = true;
  pool.settle(b);
  EXPECT_TRUE(pool.free.empty());
}

TEST(DeviceState, ACommunicatorIsBoundToTheContextOfItsFirstDeviceBuffers) {
  // Contexts are only compared here, so made-up handles do; without a driver nothing is allocated or freed.
  DeviceState dev(3);
  auto* first = reinterpret_cast<cuda::CUcontext>(uintptr_t{0x1000});
  auto* second = reinterpret_cast<cuda::CUcontext>(uintptr_t{0x2000});
  EXPECT_TRUE(dev.bindContext(first).ok());
  EXPECT_TRUE(dev.bindContext(first).ok());
  Status other = dev.bindContext(second);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.code(), Errc::InvalidUsage);
  EXPECT_NE(other.message().find("rank 3"), std::string::npos) << other.message();
  EXPECT_NE(other.message().find("two CUDA contexts"), std::string::npos) << other.message();
}

}  // namespace
}  // namespace cfx::core
