// SPDX-License-Identifier: Apache-2.0
// The device-direct (CUDA IPC) path's own tests, through the public API, several ranks sharing one GPU (or, where the
// machine or the emulator has them, a GPU each): every collective's form over several windows of scratch, groups,
// sends and receives in slot rounds, and which sizes take the path. Label gpu; every test skips with a reason where
// no CUDA device exists. device_collectives_test.cc runs the other paths and the IPC path inside its sweeps.
#include <conflux.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/cuda_driver.h"
#include "gpu/device_test_util.h"
#include "integration/dtypes.h"
#include "integration/multiproc.h"
#include "integration/sweep_model.h"

namespace cfx::itest {
namespace {

// The device-direct path (CFX_CUDA_IPC=1): all-gather (in and out of place) and broadcast between processes on one
// GPU through CUDA IPC scratch, over several windows (1 MiB of scratch, ~3 MiB per rank) and an odd byte count.
TEST(GpuCollectives, DeviceDirectAllGatherAndBroadcastOverIpc) {
  SKIP_WITHOUT_GPU();
  for (int n : {2, 3}) {
    RunOptions opts;
    opts.env = {{"CFX_CUDA_IPC", "1"},
                {"CFX_CUDA_IPC_BYTES", "1048576"},
                {"CFX_CUDA_IPC_MIN_BYTES", "0"},
                {"NCCL_DEBUG", "INFO"},
                {"NCCL_DEBUG_SUBSYS", "INIT"}};
    runRanks(n, opts, [&](RankContext& ctx) {
      RankOnDevice self(ctx);
      const cuda::Driver& d = self.d;
      ncclComm_t comm = self.comm;
      cuda::CUstream stream = self.stream;
      const int r = ctx.rank();
      const size_t count = 3 * (1 << 20) + 7;  // bytes (uint8): three full windows and a ragged tail
      auto value = [](int rank, size_t i) { return static_cast<uint8_t>((i * 131 + static_cast<size_t>(rank) * 17) >> 3); };
      std::vector<uint8_t> in(count);
      for (size_t i = 0; i < count; ++i) in[i] = value(r, i);
      for (bool inPlace : {false, true}) {
        DevBuf recv(d, count * n), send(d, count);
        const cuda::CUdeviceptr src = inPlace ? recv.ptr + static_cast<size_t>(r) * count : send.ptr;
        CU_OK(d.memcpyHtoDAsync(src, in.data(), count, stream));
        NCCL_OK(ncclAllGather(reinterpret_cast<void*>(src), recv.p(), count, ncclUint8, comm, stream));
        std::vector<uint8_t> out(count * n);
        CU_OK(d.memcpyDtoHAsync(out.data(), recv.ptr, out.size(), stream));
        CU_OK(d.streamSynchronize(stream));
        size_t bad = 0;
        for (size_t i = 0; i < out.size(); ++i) bad += out[i] != value(static_cast<int>(i / count), i % count);
        EXPECT_EQ(bad, 0u) << "all-gather" << (inPlace ? " in place" : "") << " on " << n << " ranks, rank " << r;
      }
      const int root = n - 1;
      DevBuf buf(d, count);
      CU_OK(d.memcpyHtoDAsync(buf.ptr, in.data(), count, stream));
      NCCL_OK(ncclBroadcast(buf.p(), buf.p(), count, ncclUint8, root, comm, stream));
      std::vector<uint8_t> out(count);
      CU_OK(d.memcpyDtoHAsync(out.data(), buf.ptr, count, stream));
      CU_OK(d.streamSynchronize(stream));
      size_t bad = 0;
      for (size_t i = 0; i < count; ++i) bad += out[i] != value(root, i);
      EXPECT_EQ(bad, 0u) << "broadcast on " << n << " ranks, rank " << r;
      expectIpcPathTaken(IpcOps::Copies);
    });
  }
}

// A group of collectives on device buffers, on two streams, runs device-direct when every op in it has the path (one
// op after another); with a send/recv in the group, the collectives stage and the send/recv alone goes device-direct.
// Results are right either way, and the emulator's count of copies through peers' scratch tells which path ran.
TEST(GpuCollectives, GroupedCollectivesOverIpc) {
  SKIP_WITHOUT_GPU();
  RunOptions opts;
  opts.env = ipcInSmallWindows();
  runRanks(3, opts, [&](RankContext& ctx) {
    const cuda::Driver& d = useDevice0();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cuda::CUstream s1 = nullptr, s2 = nullptr;
    CU_OK(d.streamCreate(&s1, cuda::kStreamNonBlocking));
    CU_OK(d.streamCreate(&s2, cuda::kStreamNonBlocking));
    const int n = 3;
    const int r = ctx.rank();
    const size_t count = 100003;
    auto in = [](int rank, size_t i) { return static_cast<int32_t>((i % 1000) * 3 + static_cast<size_t>(rank) * 7); };
    auto upload = [&](const DevBuf& b, size_t elems) {
      std::vector<int32_t> h(elems);
      for (size_t i = 0; i < elems; ++i) h[i] = in(r, i);
      CU_OK(d.memcpyHtoDAsync(b.ptr, h.data(), elems * 4, s1));
      CU_OK(d.streamSynchronize(s1));
    };
    auto download = [&](const DevBuf& b, size_t elems) {
      std::vector<int32_t> h(elems);
      EXPECT_EQ(d.memcpyDtoHAsync(h.data(), b.ptr, elems * 4, s1), cuda::kSuccess);
      EXPECT_EQ(d.streamSynchronize(s1), cuda::kSuccess);
      return h;
    };
    for (bool withSendRecv : {false, true}) {
      DevBuf arSend(d, count * 4), arRecv(d, count * 4), rsSend(d, count * 4 * n), rsRecv(d, count * 4);
      DevBuf agRecv(d, count * 4 * n), p2pSend(d, count * 4), p2pRecv(d, count * 4);
      upload(arSend, count);
      upload(rsSend, count * n);
      upload(p2pSend, count);
      const long long before = emulatorCount("peer_copies");
      NCCL_OK(ncclGroupStart());
      NCCL_OK(ncclAllReduce(arSend.p(), arRecv.p(), count, ncclInt32, ncclSum, comm, s1));
      NCCL_OK(ncclReduceScatter(rsSend.p(), rsRecv.p(), count, ncclInt32, ncclSum, comm, s2));
      NCCL_OK(ncclAllGather(arSend.p(), agRecv.p(), count, ncclInt32, comm, s1));
      if (withSendRecv) {
        NCCL_OK(ncclSend(p2pSend.p(), count, ncclInt32, (r + 1) % n, comm, s2));
        NCCL_OK(ncclRecv(p2pRecv.p(), count, ncclInt32, (r + n - 1) % n, comm, s2));
      }
      NCCL_OK(ncclGroupEnd());
      CU_OK(d.streamSynchronize(s2));
      const std::string what = withSendRecv ? "with a send/recv in the group" : "collectives only";
      auto sumOver = [&](size_t i) {
        int32_t sum = 0;
        for (int p = 0; p < n; ++p) sum += in(p, i);
        return sum;
      };
      size_t bad = 0;
      const std::vector<int32_t> ar = download(arRecv, count);
      for (size_t i = 0; i < count; ++i) bad += ar[i] != sumOver(i);
      EXPECT_EQ(bad, 0u) << "all-reduce, " << what << ", rank " << r;
      bad = 0;
      const std::vector<int32_t> rs = download(rsRecv, count);
      for (size_t i = 0; i < count; ++i) bad += rs[i] != sumOver(static_cast<size_t>(r) * count + i);
      EXPECT_EQ(bad, 0u) << "reduce-scatter, " << what << ", rank " << r;
      bad = 0;
      const std::vector<int32_t> ag = download(agRecv, count * n);
      for (size_t i = 0; i < count * n; ++i) bad += ag[i] != in(static_cast<int>(i / count), i % count);
      EXPECT_EQ(bad, 0u) << "all-gather, " << what << ", rank " << r;
      if (withSendRecv) {
        bad = 0;
        const std::vector<int32_t> got = download(p2pRecv, count);
        for (size_t i = 0; i < count; ++i) bad += got[i] != in((r + n - 1) % n, i);
        EXPECT_EQ(bad, 0u) << "recv in the group, rank " << r;
      }
      if (before < 0) continue;  // a real driver: which path ran is not visible
      // With a send/recv in it, the group's collectives stage and the send/recv moves device-direct: its receive
      // copies 2 chunks out of the sender's slot (400012 B in slots of 349525 B). A build without reduce kernels
      // stages the reductions, and with them a group of collectives.
      if (withSendRecv) {
        EXPECT_EQ(emulatorCount("peer_copies") - before, 2)
            << "the group's collectives did not stage, or its send/recv did not go device-direct, rank " << r;
      } else if (!reduceKernelsBuilt()) {
        EXPECT_EQ(emulatorCount("peer_copies"), before)
            << "a group that cannot run device-direct did not stage, rank " << r;
      } else {
        EXPECT_GT(emulatorCount("peer_copies"), before) << "a group of collectives staged, rank " << r;
      }
    }
    d.streamDestroy(s1);
    d.streamDestroy(s2);
    NCCL_OK(ncclCommDestroy(comm));
  });
}

// Sends and receives of device buffers over CUDA IPC, in one group with an all-reduce (it stages) and a message to
// self (one device copy): each rank sends two messages to the next, of sizes that differ per pair so pairs take
// different numbers of rounds through a slot (1 MiB of scratch over 3 ranks), and the second of which is small. The
// receiver must get both, in order; which path ran shows in the emulator's count of copies from peers' scratch.
TEST(GpuCollectives, SendRecvOverIpcInRoundsBesideStagedOps) {
  SKIP_WITHOUT_GPU();
  RunOptions opts;
  opts.env = ipcInSmallWindows();
  runRanks(3, opts, [&](RankContext& ctx) {
    const cuda::Driver& d = useDevice0();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cuda::CUstream s1 = nullptr, s2 = nullptr;
    CU_OK(d.streamCreate(&s1, cuda::kStreamNonBlocking));
    CU_OK(d.streamCreate(&s2, cuda::kStreamNonBlocking));
    const int n = 3;
    const int r = ctx.rank();
    const int next = (r + 1) % n;
    const int prev = (r + n - 1) % n;
    auto bigBytes = [](int from) { return static_cast<size_t>(from + 1) * 400000 + static_cast<size_t>(from); };
    const size_t smallBytes = 1001;
    const size_t selfBytes = 4097;
    const size_t arCount = 1000;
    auto value = [](int from, int msg, size_t i) {
      return static_cast<uint8_t>(i * 13 + static_cast<size_t>(from) * 29 + static_cast<size_t>(msg) * 71);
    };
    auto upload = [&](const DevBuf& b, int msg, size_t bytes) {
      std::vector<uint8_t> h(bytes);
      for (size_t i = 0; i < bytes; ++i) h[i] = value(r, msg, i);
      CU_OK(d.memcpyHtoDAsync(b.ptr, h.data(), bytes, s1));
      CU_OK(d.streamSynchronize(s1));
    };
    auto expectFrom = [&](const DevBuf& b, int from, int msg, size_t bytes, const char* what) {
      std::vector<uint8_t> h(bytes);
      CU_OK(d.memcpyDtoHAsync(h.data(), b.ptr, bytes, s1));
      CU_OK(d.streamSynchronize(s1));
      size_t bad = 0;
      for (size_t i = 0; i < bytes; ++i) bad += h[i] != value(from, msg, i);
      EXPECT_EQ(bad, 0u) << what << ", rank " << r;
    };
    DevBuf bigOut(d, bigBytes(r)), bigIn(d, bigBytes(prev)), smallOut(d, smallBytes), smallIn(d, smallBytes);
    DevBuf selfOut(d, selfBytes), selfIn(d, selfBytes), ar(d, arCount * 4);
    upload(bigOut, 0, bigBytes(r));
    upload(smallOut, 1, smallBytes);
    upload(selfOut, 2, selfBytes);
    std::vector<int32_t> arHost(arCount, r + 1);
    CU_OK(d.memcpyHtoDAsync(ar.ptr, arHost.data(), arCount * 4, s1));
    CU_OK(d.streamSynchronize(s1));
    const long long before = emulatorCount("peer_copies");
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclAllReduce(ar.p(), ar.p(), arCount, ncclInt32, ncclSum, comm, s1));
    NCCL_OK(ncclRecv(bigIn.p(), bigBytes(prev), ncclUint8, prev, comm, s2));
    NCCL_OK(ncclSend(bigOut.p(), bigBytes(r), ncclUint8, next, comm, s1));
    NCCL_OK(ncclSend(smallOut.p(), smallBytes, ncclUint8, next, comm, s1));
    NCCL_OK(ncclSend(selfOut.p(), selfBytes, ncclUint8, r, comm, s2));
    NCCL_OK(ncclRecv(selfIn.p(), selfBytes, ncclUint8, r, comm, s2));
    NCCL_OK(ncclRecv(smallIn.p(), smallBytes, ncclUint8, prev, comm, s2));
    NCCL_OK(ncclGroupEnd());
    CU_OK(d.streamSynchronize(s2));
    expectFrom(bigIn, prev, 0, bigBytes(prev), "first message from the previous rank");
    expectFrom(smallIn, prev, 1, smallBytes, "second message from the previous rank");
    expectFrom(selfIn, r, 2, selfBytes, "message to self");
    std::vector<int32_t> arOut(arCount);
    CU_OK(d.memcpyDtoHAsync(arOut.data(), ar.ptr, arCount * 4, s1));
    CU_OK(d.streamSynchronize(s1));
    size_t bad = 0;
    for (int32_t v : arOut) bad += v != n * (n + 1) / 2;
    EXPECT_EQ(bad, 0u) << "all-reduce in the group, rank " << r;
    // Per round each receiver copies one chunk out of a peer's slot: 3 chunks of the big message (at most
    // 349525 B each; rank 2's is 1.2 MB: 4) and 1 of the small one.
    if (before >= 0) {
      const long long chunks = static_cast<long long>((bigBytes(prev) + 349524) / 349525) + 1;
      EXPECT_EQ(emulatorCount("peer_copies") - before, chunks)
          << "rank " << r << "'s receives did not go device-direct";
    }
    d.streamDestroy(s1);
    d.streamDestroy(s2);
    NCCL_OK(ncclCommDestroy(comm));
  });
}

// With CFX_CUDA_IPC=1 and ranks sharing a GPU, ops below 8 MiB stage through host memory (each of the IPC path's
// waits would cost a context switch there) and larger ones take the IPC path; results are right either way. Which
// path ran is visible on the emulator only (its count of copies through peers' scratch).
TEST(GpuCollectives, IpcPathTakesOnlyLargeOpsWhereRanksShareAGpu) {
  SKIP_WITHOUT_GPU();
  RunOptions opts;
  opts.env = {{"CFX_CUDA_IPC", "1"}, {"CFX_CUDA_IPC_BYTES", "4194304"}};
  runRanks(2, opts, [&](RankContext& ctx) {
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    ncclComm_t comm = self.comm;
    cuda::CUstream stream = self.stream;
    const int r = ctx.rank();
    auto value = [](int rank, size_t i) { return static_cast<uint8_t>(i * 7 + static_cast<size_t>(rank) * 101); };
    // Per rank: 4 MiB - 1 (output 8 MiB - 2, below the threshold), then 4 MiB (output 8 MiB).
    for (size_t count : {(size_t{4} << 20) - 1, size_t{4} << 20}) {
      const long long before = emulatorCount("peer_copies");
      std::vector<uint8_t> in(count);
      for (size_t i = 0; i < count; ++i) in[i] = value(r, i);
      DevBuf send(d, count), recv(d, 2 * count);
      CU_OK(d.memcpyHtoDAsync(send.ptr, in.data(), count, stream));
      NCCL_OK(ncclAllGather(send.p(), recv.p(), count, ncclUint8, comm, stream));
      std::vector<uint8_t> out(2 * count);
      CU_OK(d.memcpyDtoHAsync(out.data(), recv.ptr, out.size(), stream));
      CU_OK(d.streamSynchronize(stream));
      size_t bad = 0;
      for (size_t i = 0; i < out.size(); ++i) bad += out[i] != value(static_cast<int>(i / count), i % count);
      EXPECT_EQ(bad, 0u) << "all-gather of " << count << " B per rank, rank " << r;
      if (before < 0) continue;  // a real driver: which path ran is not visible
      const bool large = 2 * count >= (size_t{8} << 20);
      if (large)
        EXPECT_GT(emulatorCount("peer_copies"), before) << "an 8 MiB all-gather staged";
      else
        EXPECT_EQ(emulatorCount("peer_copies"), before) << "an all-gather below 8 MiB took the IPC path";
    }
  });
}

// nccl-tests' sweep on one stream, as `all_reduce_perf -b 8 -e 16M -f 8 -c 1 -n 5 -w 1` runs it with 4 ranks on one
// GPU: both warm-up orders nccl-tests has had (the largest size, then the smallest; or every size out of place and
// in place), then per size and placement a synchronising op, 5 queued ops and a checked one. `minBytes` is
// CFX_CUDA_IPC_MIN_BYTES (empty: the default rule, 8 MiB where ranks share a GPU), so the sweep crosses from staged
// ops to the IPC path and back; `ncclMemory`: buffers from ncclMemAlloc, as nccl-tests takes them, else cuMemAlloc.
// Besides the results: no rank loads a module once its communicator exists (see Communicator::setupDeviceDirect).
// Quick runs of a build without kernels (the sanitizer builds: every op stages, so no size rule is crossed) sweep up
// to 1 MiB with one queued op: under ThreadSanitizer the 16 MiB sweeps took 214 s of the stage's 675.
void ncclTestsSweep(const char* minBytes, bool ncclMemory) {
  RunOptions opts;
  opts.timeout = std::chrono::seconds(120);
  opts.env = {{"CFX_CUDA_IPC", "1"}, {"CFX_TIMEOUT_MS", "30000"}};
  if (minBytes[0] != '\0') opts.env.emplace_back("CFX_CUDA_IPC_MIN_BYTES", minBytes);
  runRanks(4, opts, [&](RankContext& ctx) {
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    const long long loadsAtInit = emulatorCount("module_loads");
    const int r = ctx.rank();
    const int n = ctx.nRanks();
    const bool small = quickMode() && !reduceKernelsBuilt();
    const size_t maxCount = (small ? size_t{1} << 20 : size_t{16} << 20) / 4;
    const int queued = small ? 1 : 5;
    void* send = nullptr;
    void* recv = nullptr;
    if (ncclMemory) {
      NCCL_OK(ncclMemAlloc(&send, maxCount * 4));
      NCCL_OK(ncclMemAlloc(&recv, maxCount * 4));
    }
    DevBuf plainSend(d, ncclMemory ? 1 : maxCount * 4), plainRecv(d, ncclMemory ? 1 : maxCount * 4);
    if (!ncclMemory) {
      send = plainSend.p();
      recv = plainRecv.p();
    }
    std::vector<float> h(maxCount);
    auto op = [&](size_t count, bool inPlace) {
      NCCL_OK(ncclAllReduce(inPlace ? recv : send, recv, count, ncclFloat32, ncclSum, self.comm, self.stream));
    };
    auto sync = [&] { CU_OK(d.streamSynchronize(self.stream)); };
    std::vector<size_t> counts;
    for (size_t b = 8; b <= maxCount * 4; b *= 8) counts.push_back(b / 4);
    ctx.note("warm-up, largest then smallest");
    op(counts.back(), false);
    sync();
    op(counts.front(), false);
    sync();
    ctx.note("warm-up, every size");
    for (size_t count : counts) {
      op(count, false);
      op(count, true);
      sync();
    }
    for (size_t count : counts) {
      for (bool inPlace : {false, true}) {
        ctx.note("size " + std::to_string(count * 4) + (inPlace ? " in place" : ""));
        op(count, inPlace);
        sync();
        for (int i = 0; i < queued; ++i) op(count, inPlace);
        sync();
        for (size_t i = 0; i < count; ++i) h[i] = static_cast<float>((i % 97) + static_cast<size_t>(r));
        CU_OK(d.memcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(inPlace ? recv : send), h.data(), count * 4,
                                self.stream));
        op(count, inPlace);
        CU_OK(d.memcpyDtoHAsync(h.data(), reinterpret_cast<CUdeviceptr>(recv), count * 4, self.stream));
        sync();
        size_t bad = 0;
        for (size_t i = 0; i < count; ++i) bad += h[i] != static_cast<float>((i % 97) * n + n * (n - 1) / 2);
        EXPECT_EQ(bad, 0u) << count * 4 << " B" << (inPlace ? " in place" : "") << ", rank " << r;
      }
    }
    if (ncclMemory) {
      NCCL_OK(ncclMemFree(send));
      NCCL_OK(ncclMemFree(recv));
    }
    if (loadsAtInit < 0) return;  // a real driver does not say
    if (reduceKernelsBuilt()) {
      EXPECT_GT(loadsAtInit, 0) << "the IPC path's kernels were not loaded at init";
    }
    EXPECT_EQ(emulatorCount("module_loads"), loadsAtInit) << "a module was loaded during the ops, rank " << r;
    expectIpcPathTaken(IpcOps::Reductions);  // all-reduces only: without kernels (sanitizer builds) they all stage
  });
}

TEST(GpuCollectives, NcclTestsSweepAcrossTheDefaultIpcSizeRule) {
  SKIP_WITHOUT_GPU();
  ncclTestsSweep("", true);
}

TEST(GpuCollectives, NcclTestsSweepAtOtherIpcSizeRules) {
  SKIP_WITHOUT_GPU();
  ncclTestsSweep("0", false);
  if (!quickMode() || reduceKernelsBuilt()) ncclTestsSweep("4096", false);
}

// This rank's log so far (NCCL_DEBUG_FILE set to `dir`/log.%p by the test).
std::string ownLog(const std::string& dir) {
  std::ifstream in(dir + "/log." + std::to_string(::getpid()));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Where every rank can map the others' memory, the CUDA IPC path is on without CFX_CUDA_IPC, for plain cuMemAlloc
// buffers too: a 16 MiB all-reduce copies through peers' scratch, a 4 KiB one stages (ranks share the GPU), and
// cfxCommGetPlanForBuffers and the INFO/TUNING lines name the algorithm or say why the op stages.
TEST(GpuCollectives, CudaIpcIsTheDefaultWhereRanksMapEachOthersMemory) {
  SKIP_WITHOUT_GPU();
  if (!reduceKernelsBuilt()) GTEST_SKIP() << "its all-reduce takes the IPC path only with the reduce kernels built";
  char dirTemplate[] = "/tmp/cfx-ipc-default.XXXXXX";
  ASSERT_NE(::mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;
  RunOptions opts;
  opts.env = {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "INIT,TUNING"}, {"NCCL_DEBUG_FILE", dir + "/log.%p"}};
  runRanks(2, opts, [&](RankContext& ctx) {
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    const int r = ctx.rank();
    const size_t bigCount = (size_t{16} << 20) / 4;
    DevBuf big(d, bigCount * 4), small(d, 4096);
    std::vector<float> host(1024);
    cfxPlanInfo plan;
    NCCL_OK(cfxCommGetPlanForBuffers(self.comm, cfxCollAllReduce, big.p(), big.p(), bigCount, ncclFloat32, 0, &plan));
    EXPECT_STREQ(plan.algorithm, "IpcScratch") << plan.text;
    NCCL_OK(cfxCommGetPlanForBuffers(self.comm, cfxCollAllReduce, small.p(), small.p(), 1024, ncclFloat32, 0, &plan));
    EXPECT_STRNE(plan.algorithm, "IpcScratch");
    EXPECT_NE(std::string(plan.text).find("staged (below CFX_CUDA_IPC_MIN_BYTES"), std::string::npos) << plan.text;
    NCCL_OK(cfxCommGetPlanForBuffers(self.comm, cfxCollAllReduce, host.data(), host.data(), 1024, ncclFloat32, 0,
                                     &plan));
    EXPECT_EQ(std::string(plan.text).find("device buffers"), std::string::npos) << plan.text;
    std::vector<float> h(bigCount);
    for (size_t i = 0; i < bigCount; ++i) h[i] = static_cast<float>(i % 251 + static_cast<size_t>(r));
    CU_OK(d.memcpyHtoDAsync(big.ptr, h.data(), big.bytes, self.stream));
    const long long before = emulatorCount("peer_copies");
    NCCL_OK(ncclAllReduce(big.p(), big.p(), bigCount, ncclFloat32, ncclSum, self.comm, self.stream));
    CU_OK(d.memcpyDtoHAsync(h.data(), big.ptr, big.bytes, self.stream));
    CU_OK(d.streamSynchronize(self.stream));
    size_t bad = 0;
    for (size_t i = 0; i < bigCount; ++i) bad += h[i] != static_cast<float>(2 * (i % 251) + 1);
    EXPECT_EQ(bad, 0u) << "rank " << r;
    if (before >= 0) {
      EXPECT_GT(emulatorCount("peer_copies"), before) << "the 16 MiB all-reduce staged";
    }
    EXPECT_NE(ownLog(dir).find("AllReduce 16777216 B on 2 ranks, device buffers: IpcScratch"), std::string::npos);
  });
  std::filesystem::remove_all(dir);
}

// Where some rank cannot map the others' memory (here: two "hosts", NCCL_HOSTID), the path is off with one INFO line
// saying why, and device buffers stage with right results.
TEST(GpuCollectives, WithoutCudaIpcBetweenEveryPairOneInfoLineSaysWhy) {
  SKIP_WITHOUT_GPU();
  char dirTemplate[] = "/tmp/cfx-ipc-off.XXXXXX";
  ASSERT_NE(::mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;
  RunOptions opts;
  opts.env = {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "INIT"}, {"NCCL_DEBUG_FILE", dir + "/log.%p"}};
  runRanks(2, opts, [&](RankContext& ctx) {
    ::setenv("NCCL_HOSTID", ("ipc-off-host-" + std::to_string(ctx.rank())).c_str(), 1);
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    const size_t count = (size_t{16} << 20) / 4;
    DevBuf buf(d, count * 4);
    std::vector<float> h(count, static_cast<float>(ctx.rank() + 1));
    CU_OK(d.memcpyHtoDAsync(buf.ptr, h.data(), buf.bytes, self.stream));
    const long long before = emulatorCount("peer_copies");
    NCCL_OK(ncclAllReduce(buf.p(), buf.p(), count, ncclFloat32, ncclSum, self.comm, self.stream));
    CU_OK(d.memcpyDtoHAsync(h.data(), buf.ptr, buf.bytes, self.stream));
    CU_OK(d.streamSynchronize(self.stream));
    EXPECT_EQ(std::count(h.begin(), h.end(), 3.0f), static_cast<long>(count));
    if (before >= 0) {
      EXPECT_EQ(emulatorCount("peer_copies"), before) << "copied through a peer's scratch across hosts";
    }
    const std::string log = ownLog(dir);
    const std::string line = "device-direct (CUDA IPC) path off: the ranks run on 2 hosts";
    EXPECT_NE(log.find(line), std::string::npos) << log;
    EXPECT_EQ(log.find(line), log.rfind(line)) << "said more than once";
  });
  std::filesystem::remove_all(dir);
}

// Ranks on GPUs of their own (NVIDIA's NCCL's setting), staged and over CUDA IPC, which with no GPU shared takes
// ops of every size and moves them between GPUs (peer access over NVLink or PCIe). Needs two devices: the CPU
// emulation of the driver makes them (CFX_EMU_DEVICES), a machine with one GPU skips.
TEST(GpuCollectives, RanksOnTheirOwnGpusStagedAndOverIpc) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, std::string>> emulated = {{"CFX_EMU_DEVICES", "4"}};
  const int devices = deviceCount(emulated);
  if (devices < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << devices;
  const int n = std::min(devices, 4);
  for (bool ipc : {false, true}) {
    RunOptions opts;
    opts.timeout = std::chrono::seconds(120);
    opts.env = emulated;
    opts.env.insert(opts.env.end(), {{"CFX_CUDA_IPC", ipc ? "1" : "0"}, {"CFX_CUDA_IPC_BYTES", "1048576"}});
    runRanks(n, opts, [&](RankContext& ctx) {
      const int r = ctx.rank();
      const cuda::Driver& d = useDevice(r);
      ncclComm_t comm = ctx.initComm();
      ASSERT_NE(comm, nullptr);
      int dev = -1;
      NCCL_OK(ncclCommCuDevice(comm, &dev));
      EXPECT_EQ(dev, r);
      cuda::CUstream stream = nullptr;
      CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
      auto run = [&](const char* what, size_t inCount, size_t outCount, auto&& input, auto&& expected, auto&& call) {
        DevBuf in(d, inCount * 4), out(d, outCount * 4);
        std::vector<int32_t> h(inCount);
        for (size_t i = 0; i < inCount; ++i) h[i] = input(i);
        CU_OK(d.memcpyHtoDAsync(in.ptr, h.data(), h.size() * 4, stream));
        call(in.p(), out.p());
        std::vector<int32_t> got(outCount);
        CU_OK(d.memcpyDtoHAsync(got.data(), out.ptr, got.size() * 4, stream));
        CU_OK(d.streamSynchronize(stream));
        size_t bad = 0;
        for (size_t i = 0; i < outCount; ++i) bad += got[i] != expected(i);
        EXPECT_EQ(bad, 0u) << what << (ipc ? " over IPC" : " staged") << ", rank " << r << " on device " << r;
      };
      for (size_t count : {size_t{1001}, size_t{300001}}) {  // one window; several (1 MiB of scratch)
        const auto ni = static_cast<int32_t>(n);
        run(
            "all-reduce (sum)", count, count, [&](size_t i) { return static_cast<int32_t>(i % 97) + r; },
            [&](size_t i) { return ni * static_cast<int32_t>(i % 97) + ni * (ni - 1) / 2; },
            [&](void* in, void* out) { NCCL_OK(ncclAllReduce(in, out, count, ncclInt32, ncclSum, comm, stream)); });
        run(
            "all-reduce (max)", count, count, [&](size_t i) { return static_cast<int32_t>(i * 3) - 7 * r; },
            [&](size_t i) { return static_cast<int32_t>(i * 3); },
            [&](void* in, void* out) { NCCL_OK(ncclAllReduce(in, out, count, ncclInt32, ncclMax, comm, stream)); });
        run(
            "all-gather", count, count * n, [&](size_t i) { return static_cast<int32_t>(i * 5) + 1000 * r; },
            [&](size_t i) { return static_cast<int32_t>(i % count * 5) + 1000 * static_cast<int32_t>(i / count); },
            [&](void* in, void* out) { NCCL_OK(ncclAllGather(in, out, count, ncclInt32, comm, stream)); });
        run(
            "broadcast", count, count, [&](size_t i) { return static_cast<int32_t>(i) * (r + 1); },
            [&](size_t i) { return static_cast<int32_t>(i) * n; },
            [&](void* in, void* out) { NCCL_OK(ncclBroadcast(in, out, count, ncclInt32, n - 1, comm, stream)); });
      }
      if (ipc) expectIpcPathTaken(IpcOps::CopiesAndReductions);
      d.streamDestroy(stream);
      NCCL_OK(ncclCommDestroy(comm));
    });
  }
}

}  // namespace
}  // namespace cfx::itest
