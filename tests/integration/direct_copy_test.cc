// SPDX-License-Identifier: Apache-2.0
// Direct (single-copy) shared-memory transfers between processes, through the public API only: large messages
// of every collective whose verbs may go direct (all-reduce, all-gather, reduce-scatter, broadcast, send/recv, all-to-all,
// reduce, gather, scatter), with CFX_SHM_DIRECT on, off and auto, from plain and from ncclMemAlloc buffers (which
// peers map and read in place), must give the same, correct bytes.
#include "integration/multiproc.h"
#include "integration/nccl_checks.h"

#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cfx::itest {
namespace {

// 64 MiB: blocks of 16-32 MiB, many read pieces per message. The sanitizer runs (CFX_TEST_QUICK) use 8 MiB, still
// 8 to 16 times the direct threshold set below; 64 MiB took 35-45 s per test under TSan.
size_t bigBytes() { return quickMode() ? size_t{8} << 20 : size_t{64} << 20; }

uint32_t valueAt(int rank, size_t i) { return static_cast<uint32_t>(rank) * 2654435761u + static_cast<uint32_t>(i); }

enum class Buffers { Plain, MemAlloc };

// Runs every collective on nRanks processes with the given CFX_SHM_DIRECT and checks every result element.
void runAll(int nRanks, const char* direct, Buffers buffers = Buffers::Plain) {
  RunOptions options;
  options.timeout = std::chrono::milliseconds(240000);
  options.env = {{"CFX_SHM_DIRECT", direct}, {"CFX_SHM_DIRECT_THRESHOLD_BYTES", "262144"}};
  runRanks(nRanks, options, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const int r = ctx.rank();
    const int n = ctx.nRanks();
    const size_t total = bigBytes() / sizeof(uint32_t);  // elements of the big buffer
    const size_t block = total / static_cast<size_t>(n);
    std::vector<uint32_t> sendPlain, recvPlain;
    uint32_t* send = nullptr;
    uint32_t* recv = nullptr;
    if (buffers == Buffers::MemAlloc) {
      ASSERT_TRUE(succeeded(ncclMemAlloc(reinterpret_cast<void**>(&send), bigBytes())));
      ASSERT_TRUE(succeeded(ncclMemAlloc(reinterpret_cast<void**>(&recv), bigBytes())));
    } else {
      sendPlain.resize(total);
      recvPlain.resize(total);
      send = sendPlain.data();
      recv = recvPlain.data();
    }

    ctx.note("all-gather");
    for (size_t i = 0; i < block; ++i) send[i] = valueAt(r, i);
    ASSERT_TRUE(succeeded(ncclAllGather(send, recv, block, ncclUint32, comm, nullptr)));
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < block; ++i) {
        ASSERT_EQ(recv[static_cast<size_t>(p) * block + i], valueAt(p, i)) << "all-gather block " << p << " at " << i;
      }
    }

    ctx.note("reduce-scatter");
    for (size_t i = 0; i < total; ++i) send[i] = valueAt(r, i);
    ASSERT_TRUE(succeeded(ncclReduceScatter(send, recv, block, ncclUint32, ncclSum, comm, nullptr)));
    for (size_t i = 0; i < block; ++i) {
      uint32_t expect = 0;
      for (int p = 0; p < n; ++p) expect += valueAt(p, static_cast<size_t>(r) * block + i);
      ASSERT_EQ(recv[i], expect) << "reduce-scatter at " << i;
    }

    ctx.note("all-reduce");
    for (size_t i = 0; i < total; ++i) send[i] = valueAt(r, i);
    ASSERT_TRUE(succeeded(ncclAllReduce(send, recv, total, ncclUint32, ncclSum, comm, nullptr)));
    for (size_t i = 0; i < total; ++i) {
      uint32_t expect = 0;
      for (int p = 0; p < n; ++p) expect += valueAt(p, i);
      ASSERT_EQ(recv[i], expect) << "all-reduce at " << i;
    }

    ctx.note("in-place all-gather");
    for (size_t i = 0; i < block; ++i) recv[static_cast<size_t>(r) * block + i] = valueAt(r + 3, i);
    ASSERT_TRUE(succeeded(ncclAllGather(recv + static_cast<size_t>(r) * block, recv, block, ncclUint32, comm, nullptr)));
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < block; ++i) ASSERT_EQ(recv[static_cast<size_t>(p) * block + i], valueAt(p + 3, i));
    }

    ctx.note("broadcast");
    const int root = n - 1;
    for (size_t i = 0; i < total; ++i) send[i] = valueAt(r, i);
    ASSERT_TRUE(succeeded(ncclBroadcast(send, recv, total, ncclUint32, root, comm, nullptr)));
    for (size_t i = 0; i < total; ++i) ASSERT_EQ(recv[i], valueAt(root, i)) << "broadcast at " << i;

    ctx.note("all-to-all");
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < block; ++i) send[static_cast<size_t>(p) * block + i] = valueAt(r * 64 + p, i);
    }
    ASSERT_TRUE(succeeded(ncclAlltoAll(send, recv, block, ncclUint32, comm, nullptr)));
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < block; ++i) {
        ASSERT_EQ(recv[static_cast<size_t>(p) * block + i], valueAt(p * 64 + r, i)) << "all-to-all from " << p;
      }
    }

    ctx.note("send/recv ring");
    for (size_t i = 0; i < total; ++i) send[i] = valueAt(r + 100, i);
    ASSERT_TRUE(succeeded(ncclGroupStart()));
    ASSERT_TRUE(succeeded(ncclSend(send, total, ncclUint32, (r + 1) % n, comm, nullptr)));
    ASSERT_TRUE(succeeded(ncclRecv(recv, total, ncclUint32, (r + n - 1) % n, comm, nullptr)));
    ASSERT_TRUE(succeeded(ncclGroupEnd()));
    for (size_t i = 0; i < total; ++i) ASSERT_EQ(recv[i], valueAt((r + n - 1) % n + 100, i)) << "recv at " << i;

    ctx.note("gather and scatter");
    for (size_t i = 0; i < block; ++i) send[i] = valueAt(r + 7, i);
    ASSERT_TRUE(succeeded(ncclGather(send, recv, block, ncclUint32, 0, comm, nullptr)));
    if (r == 0) {
      for (int p = 0; p < n; ++p) {
        for (size_t i = 0; i < block; ++i) ASSERT_EQ(recv[static_cast<size_t>(p) * block + i], valueAt(p + 7, i));
      }
    }
    for (size_t i = 0; i < total; ++i) send[i] = valueAt(9, i);
    ASSERT_TRUE(succeeded(ncclScatter(send, recv, block, ncclUint32, 0, comm, nullptr)));
    for (size_t i = 0; i < block; ++i) ASSERT_EQ(recv[i], valueAt(9, static_cast<size_t>(r) * block + i));

    ctx.note("reduce");
    for (size_t i = 0; i < total; ++i) send[i] = static_cast<uint32_t>(i) + static_cast<uint32_t>(r);
    ASSERT_TRUE(succeeded(ncclReduce(send, recv, total, ncclUint32, ncclSum, 0, comm, nullptr)));
    if (r == 0) {
      const uint32_t ranksSum = static_cast<uint32_t>(n * (n - 1) / 2);
      for (size_t i = 0; i < total; ++i) {
        ASSERT_EQ(recv[i], static_cast<uint32_t>(n) * static_cast<uint32_t>(i) + ranksSum) << "reduce at " << i;
      }
    }
    if (buffers == Buffers::MemAlloc) {
      EXPECT_TRUE(succeeded(ncclMemFree(send)));
      EXPECT_TRUE(succeeded(ncclMemFree(recv)));
    }
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

TEST(DirectCopyTest, TwoProcessesDirect) { runAll(2, "1"); }
TEST(DirectCopyTest, FourProcessesDirect) { runAll(4, "1"); }
TEST(DirectCopyTest, FourProcessesSliced) { runAll(4, "0"); }
TEST(DirectCopyTest, TwoProcessesMappedMemAlloc) { runAll(2, "auto", Buffers::MemAlloc); }
TEST(DirectCopyTest, ThreeProcessesMappedMemAlloc) { runAll(3, "auto", Buffers::MemAlloc); }
// auto with malloc'd buffers: no direct messages between processes, the Direct algorithms run in slices.
TEST(DirectCopyTest, ThreeProcessesAutoPlain) { runAll(3, "auto"); }

// Blocks freed and allocated again, more of them than the mapping cache holds (shm_export.h): every op must read
// the block its sender names now, never a stale mapping of an earlier one.
TEST(DirectCopyTest, ReallocatedBuffersAreNeverReadThroughStaleMappings) {
  RunOptions options;
  options.timeout = std::chrono::milliseconds(120000);
  options.env = {{"CFX_SHM_DIRECT", "auto"}, {"CFX_SHM_DIRECT_THRESHOLD_BYTES", "262144"}};
  runRanks(2, options, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const int r = ctx.rank();
    constexpr size_t kBlock = (size_t{512} << 10) / sizeof(uint32_t);  // above the threshold: sent direct
    for (int round = 0; round < 80; ++round) {
      uint32_t* send = nullptr;
      uint32_t* recv = nullptr;
      ASSERT_TRUE(succeeded(ncclMemAlloc(reinterpret_cast<void**>(&send), kBlock * sizeof(uint32_t))));
      ASSERT_TRUE(succeeded(ncclMemAlloc(reinterpret_cast<void**>(&recv), 2 * kBlock * sizeof(uint32_t))));
      for (size_t i = 0; i < kBlock; ++i) send[i] = valueAt(r * 1000 + round, i);
      ASSERT_TRUE(succeeded(ncclAllGather(send, recv, kBlock, ncclUint32, comm, nullptr)));
      for (int p = 0; p < 2; ++p) {
        for (size_t i = 0; i < kBlock; ++i) {
          ASSERT_EQ(recv[static_cast<size_t>(p) * kBlock + i], valueAt(p * 1000 + round, i)) << "round " << round;
        }
      }
      EXPECT_TRUE(succeeded(ncclMemFree(send)));
      EXPECT_TRUE(succeeded(ncclMemFree(recv)));
    }
    EXPECT_TRUE(succeeded(ncclCommDestroy(comm)));
  });
}

}  // namespace
}  // namespace cfx::itest
