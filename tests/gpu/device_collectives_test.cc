// SPDX-License-Identifier: Apache-2.0
// Collectives on GPU memory through the public API, several ranks (processes or threads) sharing one GPU: results
// against closed-form expectations for every datatype and op, NCCL's stream semantics (the call returns once
// enqueued; the op runs after earlier stream work and before later stream work), ncclMemAlloc, and collectives
// captured into CUDA graphs and replayed. Label gpu; every test skips with a reason where no CUDA device exists.
//
// The parent never initialises CUDA: a process that forks after cuInit leaves its children unable to use the
// GPU. Whether a device exists is asked by a throwaway child.
#include <conflux.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
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

ncclRedOp_t ncclOpOf(Op op) {
  switch (op) {
    case Op::Sum: case Op::Copy: return ncclSum;
    case Op::Prod: return ncclProd;
    case Op::Max: return ncclMax;
    case Op::Min: return ncclMin;
    case Op::Avg: return ncclAvg;
    case Op::PreMulSum: return ncclSum;  // replaced by a created op
  }
  return ncclSum;
}

// Initialises the communicator; with ranksPerHost > 0 the ranks first split into "hosts" of that many
// (NCCL_HOSTID), and the communicator must see them so.
ncclComm_t initOnHosts(RankContext& ctx, int ranksPerHost) {
  if (ranksPerHost <= 0) return ctx.initComm();
  ::setenv("NCCL_HOSTID", ("gpu-host-" + std::to_string(ctx.rank() / ranksPerHost)).c_str(), 1);
  ncclComm_t comm = ctx.initComm();
  if (comm == nullptr) return nullptr;
  cfxTopologyInfo info{};
  EXPECT_EQ(cfxCommGetTopology(comm, &info), ncclSuccess);
  EXPECT_EQ(info.nHosts, (ctx.nRanks() + ranksPerHost - 1) / ranksPerHost);
  return comm;
}

// All-reduce on device buffers for every datatype and op, in place and out of place, with the PreMulSum scalar in
// device memory (read in stream order). Results must match the closed-form model bit for bit (within nRanks ULP
// for a floating-point average over a non-power-of-two count) and agree across ranks.
//
// With ranksPerHost, ranks r and r + 1 ... make one "host" (NCCL_HOSTID): shared memory within it, the network
// transport (CFX_NET in env) between hosts, as device buffers staged through pinned host memory cross hosts.
void allReduceSweep(int nRanks, size_t bigCount = 0, std::vector<std::pair<std::string, std::string>> env = {},
                    int ranksPerHost = 0) {
  RunOptions opts;
  opts.timeout = std::chrono::seconds(240);
  opts.env = std::move(env);
  runRanks(nRanks, opts, [&](RankContext& ctx) {
    const cuda::Driver& d = useDevice0();
    ncclComm_t comm = initOnHosts(ctx, ranksPerHost);
    ASSERT_NE(comm, nullptr);
    int dev = -2;
    NCCL_OK(ncclCommCuDevice(comm, &dev));
    EXPECT_EQ(dev, 0);
    cuda::CUstream stream = nullptr;
    CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
    const size_t count = bigCount != 0 ? bigCount : quickMode() ? 257 : 1031;  // odd: every chunk split is uneven
    Hash128 hash;
    for (const DtypeInfo& dt : allDtypes()) {
      for (Op op : {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg, Op::PreMulSum}) {
        const ValueModel model(dt, op, nRanks);
        std::vector<unsigned char> in(count * dt.size);
        for (size_t i = 0; i < count; ++i) storeBits(in.data(), i, dt.size, model.input(ctx.rank(), i));
        for (bool inPlace : {false, true}) {
          DevBuf send(d, in.size());
          DevBuf recvStorage(d, in.size());
          void* recv = inPlace ? send.p() : recvStorage.p();
          CU_OK(d.memcpyHtoDAsync(send.ptr, in.data(), in.size(), stream));
          ncclRedOp_t ncclOp = ncclOpOf(op);
          std::unique_ptr<DevBuf> scalar;
          if (op == Op::PreMulSum) {
            scalar = std::make_unique<DevBuf>(d, 8);
            uint64_t bits = encodeValue(dt, preMulScalar(dt));
            CU_OK(d.memcpyHtoDAsync(scalar->ptr, &bits, dt.size, stream));
            NCCL_OK(ncclRedOpCreatePreMulSum(&ncclOp, scalar->p(), dt.type, ncclScalarDevice, comm));
          }
          NCCL_OK(ncclAllReduce(send.p(), recv, count, dt.type, ncclOp, comm, stream));
          std::vector<unsigned char> out(in.size(), 0xee);
          CU_OK(d.memcpyDtoHAsync(out.data(), reinterpret_cast<CUdeviceptr>(recv), out.size(), stream));
          CU_OK(d.streamSynchronize(stream));
          if (op == Op::PreMulSum) {
            NCCL_OK(ncclRedOpDestroy(ncclOp, comm));
          }
          size_t bad = 0;
          for (size_t i = 0; i < count; ++i) {
            const uint64_t got = loadBits(out.data(), i, dt.size);
            if (!model.matchesReduction(got, i) && bad++ < 3) {
              ADD_FAILURE() << "rank " << ctx.rank() << " " << dt.name << " " << opName(op)
                            << (inPlace ? " in place" : "") << " element " << i << ": got 0x" << std::hex << got
                            << ", expected " << model.describeExpected(i);
            }
          }
          hash.update(out.data(), out.size());
        }
      }
    }
    ctx.report("hash", hash.digest());
    if (const char* ipc = std::getenv("CFX_CUDA_IPC"); ipc != nullptr && std::string(ipc) == "1") {
      expectIpcPathTaken(IpcOps::Reductions);
    }
    d.streamDestroy(stream);
    NCCL_OK(ncclCommDestroy(comm));
  });
}

TEST(GpuCollectives, AllReduceEveryTypeAndOpTwoRanksOneGpu) {
  SKIP_WITHOUT_GPU();
  allReduceSweep(2);
}

TEST(GpuCollectives, AllReduceEveryTypeAndOpFourRanksOneGpu) {
  SKIP_WITHOUT_GPU();
  allReduceSweep(4);
}

// The same sweep through the device-direct path (CFX_CUDA_IPC=1: reduce kernels on CUDA IPC scratch), over several
// windows (1 MiB of scratch per rank); PreMulSum with a device scalar still takes the staged path.
TEST(GpuCollectives, AllReduceEveryTypeAndOpThreeRanksOneGpuOverIpc) {
  SKIP_WITHOUT_GPU();
  // Quick runs are the sanitizer builds', which have no device kernels: their all-reduces stage, as the sweeps
  // above do, so a short count serves.
  const size_t count = quickMode() ? 2001 : 300001;
  allReduceSweep(3, count, ipcInSmallWindows());
}

// Every other collective, rooted ones at a non-zero root, on an odd count, with device buffers: each output element
// is checked against the inputs the model gives every rank.
// ranksPerHost and env: as allReduceSweep's. With CFX_CUDA_IPC=1 in env, each collective must also have taken the
// device-direct path (on the emulator, where that is visible).
void everyCollective(int n, int ranksPerHost = 0, std::vector<std::pair<std::string, std::string>> env = {},
                     size_t count = 333) {
  RunOptions opts;
  opts.timeout = std::chrono::seconds(120);
  opts.env = std::move(env);
  runRanks(n, opts, [&](RankContext& ctx) {
    const cuda::Driver& d = useDevice0();
    ncclComm_t comm = initOnHosts(ctx, ranksPerHost);
    ASSERT_NE(comm, nullptr);
    cuda::CUstream stream = nullptr;
    CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
    const DtypeInfo& dt = dtypeInfo(ncclFloat32);
    const ValueModel model(dt, Op::Sum, n);
    const int root = 1;
    const char* ipcEnv = std::getenv("CFX_CUDA_IPC");
    const bool ipc = ipcEnv != nullptr && std::string(ipcEnv) == "1" && emulatorCount("peer_copies") >= 0;
    // The device-direct path copies through peers' scratch, and reduces with a kernel where the build has them.
    const bool kernels = reduceKernelsBuilt();
    long long copiesBefore = 0;
    long long kernelsBefore = 0;
    auto mark = [&] {
      copiesBefore = emulatorCount("peer_copies");
      kernelsBefore = emulatorCount("kernel_launches");
    };
    auto expectDirect = [&](const char* what, bool reduces) {
      if (!ipc) return;
      if (reduces) {
        if (kernels) {
          EXPECT_GT(emulatorCount("kernel_launches"), kernelsBefore) << what << " did not run device-direct";
        }
      } else {
        EXPECT_GT(emulatorCount("peer_copies"), copiesBefore) << what << " did not run device-direct";
      }
    };
    const int r = ctx.rank();
    auto input = [&](int rank, size_t i) { return model.input(rank, i); };
    auto upload = [&](const DevBuf& b, auto&& value) {
      std::vector<unsigned char> h(b.bytes);
      for (size_t i = 0; i < b.bytes / dt.size; ++i) storeBits(h.data(), i, dt.size, value(i));
      ASSERT_EQ(d.memcpyHtoDAsync(b.ptr, h.data(), h.size(), stream), cuda::kSuccess);
      ASSERT_EQ(d.streamSynchronize(stream), cuda::kSuccess);
    };
    auto download = [&](const DevBuf& b) {
      std::vector<unsigned char> h(b.bytes);
      EXPECT_EQ(d.memcpyDtoHAsync(h.data(), b.ptr, h.size(), stream), cuda::kSuccess);
      EXPECT_EQ(d.streamSynchronize(stream), cuda::kSuccess);
      return h;
    };
    auto expectAll = [&](const char* what, const std::vector<unsigned char>& got, auto&& want) {
      size_t bad = 0;
      for (size_t i = 0; i < got.size() / dt.size; ++i) {
        if (loadBits(got.data(), i, dt.size) != want(i) && bad++ < 3) {
          ADD_FAILURE() << what << " rank " << r << " element " << i;
        }
      }
    };
    const size_t bytes = count * dt.size;
    {  // broadcast
      DevBuf buf(d, bytes);
      upload(buf, [&](size_t i) { return input(r, i); });
      mark();
      NCCL_OK(ncclBroadcast(buf.p(), buf.p(), count, ncclFloat32, root, comm, stream));
      expectAll("Broadcast", download(buf), [&](size_t i) { return input(root, i); });
      if (r != root) expectDirect("Broadcast", false);  // the root reads only its own scratch
    }
    {  // reduce
      DevBuf send(d, bytes), recv(d, bytes);
      upload(send, [&](size_t i) { return input(r, i); });
      upload(recv, [&](size_t) { return uint64_t{0x7fc00001}; });
      mark();
      NCCL_OK(ncclReduce(send.p(), recv.p(), count, ncclFloat32, ncclSum, root, comm, stream));
      auto got = download(recv);
      expectDirect("Reduce", true);
      if (r == root)
        expectAll("Reduce", got, [&](size_t i) { return model.expectedReduction(i); });
      else
        expectAll("Reduce (non-root recvbuff untouched)", got, [&](size_t) { return uint64_t{0x7fc00001}; });
    }
    {  // all-gather, in place: the input is this rank's slice of the output
      DevBuf recv(d, bytes * n);
      upload(recv, [&](size_t i) { return i / count == static_cast<size_t>(r) ? input(r, i % count) : 0; });
      void* slice = static_cast<char*>(recv.p()) + r * bytes;
      mark();
      NCCL_OK(ncclAllGather(slice, recv.p(), count, ncclFloat32, comm, stream));
      expectAll("AllGather", download(recv), [&](size_t i) { return input(static_cast<int>(i / count), i % count); });
      expectDirect("AllGather", false);
    }
    {  // reduce-scatter
      DevBuf send(d, bytes * n), recv(d, bytes);
      upload(send, [&](size_t i) { return input(r, i); });
      mark();
      NCCL_OK(ncclReduceScatter(send.p(), recv.p(), count, ncclFloat32, ncclSum, comm, stream));
      expectAll("ReduceScatter", download(recv), [&](size_t i) { return model.expectedReduction(r * count + i); });
      expectDirect("ReduceScatter", true);
    }
    {  // reduce-scatter in place: the output is this rank's block of the input
      DevBuf buf(d, bytes * n);
      upload(buf, [&](size_t i) { return input(r, i); });
      void* slice = static_cast<char*>(buf.p()) + r * bytes;
      mark();
      NCCL_OK(ncclReduceScatter(buf.p(), slice, count, ncclFloat32, ncclSum, comm, stream));
      const std::vector<unsigned char> all = download(buf);
      const std::vector<unsigned char> got(all.begin() + static_cast<ptrdiff_t>(r * bytes),
                                           all.begin() + static_cast<ptrdiff_t>((r + 1) * bytes));
      expectAll("ReduceScatter in place", got, [&](size_t i) { return model.expectedReduction(r * count + i); });
      expectDirect("ReduceScatter in place", true);
    }
    {  // all-to-all
      DevBuf send(d, bytes * n), recv(d, bytes * n);
      upload(send, [&](size_t i) { return input(r, i); });
      mark();
      NCCL_OK(ncclAlltoAll(send.p(), recv.p(), count, ncclFloat32, comm, stream));
      expectAll("AlltoAll", download(recv),
                [&](size_t i) { return input(static_cast<int>(i / count), r * count + i % count); });
      expectDirect("AlltoAll", false);
    }
    {  // gather and scatter at the root
      DevBuf send(d, bytes), recv(d, bytes * n);
      upload(send, [&](size_t i) { return input(r, i); });
      mark();
      NCCL_OK(ncclGather(send.p(), recv.p(), count, ncclFloat32, root, comm, stream));
      if (r == root) {
        expectAll("Gather", download(recv), [&](size_t i) { return input(static_cast<int>(i / count), i % count); });
        expectDirect("Gather", false);
      }
      DevBuf sc(d, bytes * n), out(d, bytes);
      upload(sc, [&](size_t i) { return input(r, i); });
      mark();
      NCCL_OK(ncclScatter(sc.p(), out.p(), count, ncclFloat32, root, comm, stream));
      expectAll("Scatter", download(out), [&](size_t i) { return input(root, r * count + i); });
      if (r != root) expectDirect("Scatter", false);
    }
    {  // send/recv around a ring, grouped, plus a message to self
      DevBuf send(d, bytes), recv(d, bytes), self(d, bytes);
      upload(send, [&](size_t i) { return input(r, i); });
      NCCL_OK(ncclGroupStart());
      NCCL_OK(ncclSend(send.p(), count, ncclFloat32, (r + 1) % n, comm, stream));
      NCCL_OK(ncclRecv(recv.p(), count, ncclFloat32, (r + n - 1) % n, comm, stream));
      NCCL_OK(ncclSend(send.p(), count, ncclFloat32, r, comm, stream));
      NCCL_OK(ncclRecv(self.p(), count, ncclFloat32, r, comm, stream));
      NCCL_OK(ncclGroupEnd());
      expectAll("Recv", download(recv), [&](size_t i) { return input((r + n - 1) % n, i); });
      expectAll("Recv from self", download(self), [&](size_t i) { return input(r, i); });
    }
    d.streamDestroy(stream);
    NCCL_OK(ncclCommDestroy(comm));
  });
}

TEST(GpuCollectives, EveryCollectiveThreeRanksOneGpu) {
  SKIP_WITHOUT_GPU();
  everyCollective(3, 0, {{"CFX_CUDA_IPC", "0"}});
}

// The same through the device-direct path: every collective has a form there, each over several windows of 1 MiB
// of scratch and a ragged last one (300001 floats: 3 windows of each block for reduce-scatter and all-to-all on 3
// ranks, 3 of the input for reduce, 2 for broadcast).
TEST(GpuCollectives, EveryCollectiveOverIpcInWindows) {
  SKIP_WITHOUT_GPU();
  // The sanitizer runs (quick) take 3 ranks only, whose uneven splits cover what 2 do: 28 s under TSan for both.
  for (int n : {2, 3}) {
    if (n == 2 && quickMode()) continue;
    everyCollective(n, 0, ipcInSmallWindows(), 300001);
  }
}

// Device buffers between hosts: each op stages through pinned host memory, and the host algorithm carries it over
// the network transport between hosts (shared memory within one). Here the "hosts" are NCCL_HOSTID groups on one
// machine, so the network is loopback: 2 + 1 ranks for every collective (a host of one rank), 2 + 2 for the
// all-reduce sweep (the hierarchical algorithms' shape).
void stagedAcrossHosts(const char* net) {
  everyCollective(3, 2, {{"CFX_NET", net}});
  allReduceSweep(4, 0, {{"CFX_NET", net}}, 2);
}

TEST(GpuCollectives, StagedAcrossHostsOverTcp) {
  SKIP_WITHOUT_GPU();
  stagedAcrossHosts("tcp");
}

TEST(GpuCollectives, StagedAcrossHostsOverUcx) {
  SKIP_WITHOUT_GPU();
#if !CFX_TEST_HAVE_UCX
  GTEST_SKIP() << "built without UCX: the UCX transport is not in this library";
#else
#if defined(__SANITIZE_THREAD__)
  // UCX's mmap hooks crash under ThreadSanitizer unless the process started with them off (tests/integration's
  // UCX tests say more).
  const char* memEvents = std::getenv("UCX_MEM_EVENTS");
  if (memEvents == nullptr || std::string(memEvents) != "no") GTEST_SKIP() << "UCX under TSan needs UCX_MEM_EVENTS=no";
#endif
  stagedAcrossHosts("ucx");
#endif
}

// A device op, then a host op, on one communicator: rank 0's stream is held, so its host op is queued behind the
// device op; rank 1's device op is over before its host op is called, which then runs at once (NULL stream) or is
// queued on an idle communicator (a cfx host stream). Both ranks must still run the two ops as one sequence (the
// second op's messages must not be matched with the first's), and get both results right.
void hostOpBehindADeviceOp(bool onHostStream) {
  RunOptions opts;
  opts.env = {{"CFX_CUDA_IPC", "0"}, {"CFX_TIMEOUT_MS", "20000"}};
  runRanks(2, opts, [&](RankContext& ctx) {
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    ncclComm_t comm = self.comm;
    cuda::CUstream stream = self.stream;
    const int r = ctx.rank();
    const size_t count = 4099;
    const StreamHold hold(d);
    DevBuf dev(d, count * 4);
    std::vector<int32_t> devIn(count, r + 1), hostIn(count, 10 * (r + 1)), hostOut(count, -1);
    CU_OK(d.memcpyHtoDAsync(dev.ptr, devIn.data(), count * 4, stream));
    CU_OK(d.streamSynchronize(stream));
    if (r == 0) {
      CU_OK(hold.hold(stream));
    }
    NCCL_OK(ncclAllReduce(dev.p(), dev.p(), count, ncclInt32, ncclSum, comm, stream));
    if (r == 1) {
      CU_OK(d.streamSynchronize(stream));  // its device op is over
    }
    std::thread release;
    if (r == 0) release = hold.releaseAfter(std::chrono::milliseconds(300));
    cfxHostStream_t hostStream = nullptr;
    if (onHostStream) {
      NCCL_OK(cfxHostStreamCreate(&hostStream));
    }
    ncclResult_t rc = ncclAllReduce(hostIn.data(), hostOut.data(), count, ncclInt32, ncclSum, comm,
                                    reinterpret_cast<cudaStream_t>(hostStream));
    if (rc == ncclSuccess && onHostStream) rc = cfxHostStreamSynchronize(hostStream);
    if (release.joinable()) release.join();
    EXPECT_EQ(rc, ncclSuccess) << ncclGetLastError(comm);
    if (onHostStream) {
      NCCL_OK(cfxHostStreamDestroy(hostStream));
    }
    CU_OK(d.streamSynchronize(stream));
    std::vector<int32_t> devOut(count, -1);
    CU_OK(d.memcpyDtoHAsync(devOut.data(), dev.ptr, count * 4, stream));
    CU_OK(d.streamSynchronize(stream));
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) bad += (devOut[i] != 3) + (hostOut[i] != 30);
    EXPECT_EQ(bad, 0u) << "rank " << r << ": device result " << devOut[0] << ", host result " << hostOut[0];
    ncclResult_t async = ncclInProgress;
    EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess) << ncclGetLastError(comm);
  });
}

TEST(GpuCollectives, AHostOpQueuedBehindADeviceOpKeepsTheOrderAcrossRanks) {
  SKIP_WITHOUT_GPU();
  hostOpBehindADeviceOp(false);
}

TEST(GpuCollectives, AHostStreamOpQueuedBehindADeviceOpKeepsTheOrderAcrossRanks) {
  SKIP_WITHOUT_GPU();
  hostOpBehindADeviceOp(true);
}

// The call returns while the stream is still blocked before it; the op reads what the stream wrote before it,
// and work after it sees its result. A host-written word holds the stream back the way a long kernel would.
TEST(GpuCollectives, StreamOrderingLikeNccl) {
  SKIP_WITHOUT_GPU();
  runRanks(2, [&](RankContext& ctx) {
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    ncclComm_t comm = self.comm;
    cuda::CUstream stream = self.stream;
    const StreamHold gate(d);
    const size_t count = 1 << 20;
    // Pinned: a copy from pageable memory would block this thread until the (held) stream reached it.
    void* inPinned = nullptr;
    CU_OK(d.memHostAlloc(&inPinned, count * sizeof(float), cuda::kHostAllocPortable));
    for (size_t i = 0; i < count; ++i) static_cast<float*>(inPinned)[i] = static_cast<float>(ctx.rank() + 1);
    std::vector<float> out(count, -1.0f);
    void* outPinned = nullptr;
    CU_OK(d.memHostAlloc(&outPinned, count * sizeof(float), cuda::kHostAllocPortable));
    std::memcpy(outPinned, out.data(), count * sizeof(float));
    DevBuf buf(d, count * sizeof(float));
    CU_OK(d.memsetD8Async(buf.ptr, 0, buf.bytes, stream));
    CU_OK(gate.hold(stream));
    CU_OK(d.memcpyHtoDAsync(buf.ptr, inPinned, buf.bytes, stream));  // runs only once the gate opens
    // Returning at all proves the call only enqueued: the stream stays blocked until this rank opens the gate.
    NCCL_OK(ncclAllReduce(buf.p(), buf.p(), count, ncclFloat32, ncclSum, comm, stream));
    CU_OK(d.memcpyDtoHAsync(outPinned, buf.ptr, buf.bytes, stream));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(static_cast<float*>(outPinned)[0], -1.0f) << "work after the collective ran before the stream reached it";
    ctx.barrier();
    gate.release();
    CU_OK(d.streamSynchronize(stream));
    const float want = 3.0f;  // 1 + 2
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) bad += static_cast<float*>(outPinned)[i] != want;
    EXPECT_EQ(bad, 0u) << "elements differ from " << want;
    d.memFreeHost(outPinned);
    d.memFreeHost(inPinned);
  });
}

// Ops enqueued ahead of the GPU on one stream share that stream's staging block (core/device_stream.h,
// StagingPool), which grows mid-queue: sizes rise and fall with nothing synchronised between them, out of place and
// in place, and a grouped pair on two streams (a block of its own) in the middle. Every element of every output is
// checked once the stream drains. Staged throughout (CFX_CUDA_IPC=0), and with the default, where the 12 MiB op
// takes the CUDA IPC path in the middle of the staged queue.
void opsQueuedAhead(const char* ipc) {
  constexpr int n = 2;
  RunOptions opts;
  opts.env = {{"CFX_CUDA_IPC", ipc}};
  runRanks(n, opts, [&](RankContext& ctx) {
    const cuda::Driver& d = useDevice0();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cuda::CUstream stream = nullptr;
    cuda::CUstream side = nullptr;
    CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
    CU_OK(d.streamCreate(&side, cuda::kStreamNonBlocking));
    const int r = ctx.rank();
    const std::vector<size_t> counts = {100, 70000, 1 << 20, 333, 3 << 20, 5000, 1 << 20, 17};
    // Inputs are small integers, so every float sum is exact: op k on rank r adds (r + 1) * (k + 1) + i % 7.
    auto value = [](int rank, size_t k, size_t i) { return static_cast<float>((rank + 1) * (k + 1) + i % 7); };
    auto want = [&](size_t k, size_t i) {
      float sum = 0;
      for (int q = 0; q < n; ++q) sum += value(q, k, i);
      return sum;
    };
    std::vector<std::unique_ptr<DevBuf>> ins, outs;
    for (size_t k = 0; k < counts.size(); ++k) {
      ins.push_back(std::make_unique<DevBuf>(d, counts[k] * sizeof(float)));
      outs.push_back(std::make_unique<DevBuf>(d, counts[k] * sizeof(float)));
      std::vector<float> h(counts[k]);
      for (size_t i = 0; i < counts[k]; ++i) h[i] = value(r, k, i);
      CU_OK(d.memcpyHtoDAsync(ins[k]->ptr, h.data(), ins[k]->bytes, stream));
    }
    DevBuf sideBuf(d, 4096 * sizeof(float));
    DevBuf sideBuf2(d, 4096 * sizeof(float));
    {
      std::vector<float> h(4096, static_cast<float>(r + 1));
      CU_OK(d.memcpyHtoDAsync(sideBuf.ptr, h.data(), sideBuf.bytes, stream));
      CU_OK(d.memcpyHtoDAsync(sideBuf2.ptr, h.data(), sideBuf2.bytes, stream));
    }
    CU_OK(d.streamSynchronize(stream));
    ctx.barrier();
    for (size_t k = 0; k < counts.size(); ++k) {
      const bool inPlace = k % 3 == 2;
      void* dst = inPlace ? ins[k]->p() : outs[k]->p();
      NCCL_OK(ncclAllReduce(ins[k]->p(), dst, counts[k], ncclFloat32, ncclSum, comm, stream));
      if (k == 3) {
        NCCL_OK(ncclGroupStart());
        NCCL_OK(ncclAllReduce(sideBuf.p(), sideBuf.p(), 4096, ncclFloat32, ncclSum, comm, side));
        NCCL_OK(ncclAllReduce(sideBuf2.p(), sideBuf2.p(), 4096, ncclFloat32, ncclMax, comm, stream));
        NCCL_OK(ncclGroupEnd());
      }
    }
    CU_OK(d.streamSynchronize(stream));
    CU_OK(d.streamSynchronize(side));
    for (size_t k = 0; k < counts.size(); ++k) {
      const DevBuf& got = k % 3 == 2 ? *ins[k] : *outs[k];
      std::vector<float> h(counts[k]);
      CU_OK(d.memcpyDtoHAsync(h.data(), got.ptr, got.bytes, stream));
      CU_OK(d.streamSynchronize(stream));
      size_t bad = 0;
      for (size_t i = 0; i < counts[k]; ++i) bad += h[i] != want(k, i);
      EXPECT_EQ(bad, 0u) << "op " << k << " (" << counts[k] << " floats): first " << h[0] << ", want " << want(k, 0);
    }
    std::vector<float> h(4096);
    CU_OK(d.memcpyDtoHAsync(h.data(), sideBuf.ptr, sideBuf.bytes, stream));
    CU_OK(d.streamSynchronize(stream));
    EXPECT_EQ(std::count(h.begin(), h.end(), 3.0f), 4096) << "grouped sum on the side stream";
    CU_OK(d.memcpyDtoHAsync(h.data(), sideBuf2.ptr, sideBuf2.bytes, stream));
    CU_OK(d.streamSynchronize(stream));
    EXPECT_EQ(std::count(h.begin(), h.end(), 2.0f), 4096) << "grouped max on the main stream";
    ins.clear();
    outs.clear();
    d.streamDestroy(side);
    d.streamDestroy(stream);
    NCCL_OK(ncclCommDestroy(comm));
  });
}

TEST(GpuCollectives, OpsQueuedAheadShareAndGrowTheStreamBlock) {
  SKIP_WITHOUT_GPU();
  for (const char* ipc : {"0", "-1"}) opsQueuedAhead(ipc);
}

// One process, four ranks on one GPU (ncclCommInitAll with the same device four times; NVIDIA's NCCL refuses it
// with "Duplicate GPU detected"), driven from one thread in a group.
TEST(GpuCollectives, FourRanksOneProcessOneGpu) {
  SKIP_WITHOUT_GPU();
  runRanks(1, [&](RankContext&) {
    const cuda::Driver& d = useDevice0();
    constexpr int n = 4;
    ncclComm_t comms[n];
    int devs[n] = {0, 0, 0, 0};
    NCCL_OK(ncclCommInitAll(comms, n, devs));
    const size_t count = 4097;
    std::vector<std::unique_ptr<DevBuf>> bufs;
    std::vector<cuda::CUstream> streams(n);
    for (int r = 0; r < n; ++r) {
      CU_OK(d.streamCreate(&streams[r], cuda::kStreamNonBlocking));
      bufs.push_back(std::make_unique<DevBuf>(d, count * sizeof(int32_t)));
      std::vector<int32_t> in(count);
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i) * (r + 1);
      CU_OK(d.memcpyHtoDAsync(bufs[r]->ptr, in.data(), in.size() * sizeof(int32_t), streams[r]));
    }
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < n; ++r) {
      NCCL_OK(ncclAllReduce(bufs[r]->p(), bufs[r]->p(), count, ncclInt32, ncclSum, comms[r], streams[r]));
    }
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < n; ++r) {
      std::vector<int32_t> out(count);
      CU_OK(d.memcpyDtoHAsync(out.data(), bufs[r]->ptr, out.size() * sizeof(int32_t), streams[r]));
      CU_OK(d.streamSynchronize(streams[r]));
      size_t bad = 0;
      for (size_t i = 0; i < count; ++i) bad += out[i] != static_cast<int32_t>(i) * 10;
      EXPECT_EQ(bad, 0u) << "rank " << r;
      d.streamDestroy(streams[r]);
    }
    for (int r = 0; r < n; ++r) NCCL_OK(ncclCommDestroy(comms[r]));
  });
}

// Which device a communicator binds to, as in NCCL: ncclCommInitAll's comm i to devlist[i] (device i without a
// list), and a creation deferred by a group to the device current at its ncclCommInitRank call, not to whatever the
// thread that runs it at ncclGroupEnd has (it ran on a thread with no device, and made host communicators).
TEST(GpuCollectives, CommunicatorsBindToTheDeviceOfTheirCreation) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, std::string>> emulated = {{"CFX_EMU_DEVICES", "3"}};
  const int devices = deviceCount(emulated);
  if (devices < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << devices;
  RunOptions opts;
  opts.env = emulated;
  runRanks(1, opts, [&](RankContext&) {
    useDevice0();
    constexpr int n = 3;
    ncclComm_t comms[n];
    const int devs[n] = {1, 0, 1};
    NCCL_OK(ncclCommInitAll(comms, n, devs));
    for (int r = 0; r < n; ++r) {
      int dev = -2;
      NCCL_OK(ncclCommCuDevice(comms[r], &dev));
      EXPECT_EQ(dev, devs[r]) << "ncclCommInitAll's rank " << r;
    }
    for (int r = 0; r < n; ++r) NCCL_OK(ncclCommDestroy(comms[r]));
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id));
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < n; ++r) {
      useDevice(devs[r]);
      NCCL_OK(ncclCommInitRank(&comms[r], n, id, r));
    }
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < n; ++r) {
      int dev = -2;
      NCCL_OK(ncclCommCuDevice(comms[r], &dev));
      EXPECT_EQ(dev, devs[r]) << "rank " << r << " created in a group";
    }
    for (int r = 0; r < n; ++r) NCCL_OK(ncclCommDestroy(comms[r]));
  });
}

// ncclMemAlloc gives device memory when the thread has a current device; ncclMemFree releases it.
TEST(GpuCollectives, MemAllocReturnsDeviceMemory) {
  SKIP_WITHOUT_GPU();
  runRanks(1, [&](RankContext&) {
    const cuda::Driver& d = useDevice0();
    void* p = nullptr;
    NCCL_OK(ncclMemAlloc(&p, 3 << 20));
    unsigned memType = 0;
    CU_OK(d.pointerGetAttribute(&memType, cuda::kPointerAttrMemoryType, reinterpret_cast<CUdeviceptr>(p)));
    EXPECT_EQ(memType, cuda::kMemoryTypeDevice);
    // Every byte is usable (the block is rounded up to the granularity, not down); peers' access to it is what
    // device_window_test.cc's zero-copy windows show.
    const size_t bytes = 3 << 20;
    std::vector<uint8_t> in(bytes), out(bytes);
    for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<uint8_t>(i * 7 + 3);
    CU_OK(d.memcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(p), in.data(), bytes, nullptr));
    CU_OK(d.memcpyDtoHAsync(out.data(), reinterpret_cast<CUdeviceptr>(p), bytes, nullptr));
    CU_OK(d.streamSynchronize(nullptr));
    EXPECT_EQ(out, in);
    NCCL_OK(ncclMemFree(p));
    EXPECT_EQ(ncclMemFree(p), ncclInvalidArgument) << "a second free must be refused, not freed again";
  });
}

constexpr int kCaptureGlobal = 0;  // CUDA's default mode: other threads' allocations during capture are errors
constexpr int kCaptureRelaxed = 2;

// Collectives captured into a CUDA graph, replayed with new inputs each time, with an eager all-reduce on the same
// stream between replays (the progress thread must run the replay that the stream reaches first). The capture is
// in global mode on a communicator's first device op, so the library's first allocations happen during it.
void graphReplaySweep(int n, std::vector<std::pair<std::string, std::string>> env) {
  RunOptions opts;
  opts.timeout = std::chrono::seconds(120);
  opts.env = std::move(env);
  runRanks(n, opts, [&](RankContext& ctx) {
    const cuda::Driver& d = useDevice0();
    const GraphApi& g = graphApi();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cuda::CUstream stream = nullptr;
    CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
    const int r = ctx.rank();
    const size_t count = 100003;  // odd: chunks split unevenly
    DevBuf arIn(d, count * 4), arOut(d, count * 4), arInPlace(d, count * 4), agOut(d, count * 4 * n),
        bcast(d, count * 4), eager(d, count * 4), rsIn(d, count * 4 * n), rsOut(d, count * 4);
    auto input = [](int rank, int iter, size_t i) { return static_cast<int32_t>((i % 1013) * (rank + 1) + iter * 7); };
    ASSERT_EQ(g.beginCapture(stream, kCaptureGlobal), cuda::kSuccess);
    NCCL_OK(ncclAllReduce(arIn.p(), arOut.p(), count, ncclInt32, ncclSum, comm, stream));
    NCCL_OK(ncclAllReduce(arInPlace.p(), arInPlace.p(), count, ncclInt32, ncclMax, comm, stream));
    NCCL_OK(ncclAllGather(arIn.p(), agOut.p(), count, ncclInt32, comm, stream));
    NCCL_OK(ncclBroadcast(bcast.p(), bcast.p(), count, ncclInt32, n - 1, comm, stream));
    NCCL_OK(ncclReduceScatter(rsIn.p(), rsOut.p(), count, ncclInt32, ncclSum, comm, stream));
    cuda::CUgraph graph = nullptr;
    ASSERT_EQ(g.endCapture(stream, &graph), cuda::kSuccess);
    void* exec = nullptr;
    ASSERT_EQ(g.instantiate(&exec, graph, 0), cuda::kSuccess);
    int64_t sumRanks = 0;
    for (int k = 0; k < n; ++k) sumRanks += k + 1;
    for (int iter = 0; iter < 5; ++iter) {
      std::vector<int32_t> in(count), inMax(count), eagerIn(count), rsInHost(count * n);
      for (size_t i = 0; i < count * n; ++i) rsInHost[i] = input(r, iter, i);
      for (size_t i = 0; i < count; ++i) {
        in[i] = input(r, iter, i);
        inMax[i] = static_cast<int32_t>(((i + static_cast<size_t>(r) * 31) % 97) + iter);
        eagerIn[i] = iter - r;
      }
      CU_OK(d.memcpyHtoDAsync(arIn.ptr, in.data(), count * 4, stream));
      CU_OK(d.memcpyHtoDAsync(arInPlace.ptr, inMax.data(), count * 4, stream));
      CU_OK(d.memcpyHtoDAsync(bcast.ptr, in.data(), count * 4, stream));
      CU_OK(d.memcpyHtoDAsync(eager.ptr, eagerIn.data(), count * 4, stream));
      CU_OK(d.memcpyHtoDAsync(rsIn.ptr, rsInHost.data(), count * 4 * n, stream));
      ASSERT_EQ(g.launch(exec, stream), cuda::kSuccess);
      NCCL_OK(ncclAllReduce(eager.p(), eager.p(), count, ncclInt32, ncclSum, comm, stream));
      std::vector<int32_t> ar(count), mx(count), ag(count * n), bc(count), eg(count), rs(count);
      CU_OK(d.memcpyDtoHAsync(rs.data(), rsOut.ptr, count * 4, stream));
      CU_OK(d.memcpyDtoHAsync(ar.data(), arOut.ptr, count * 4, stream));
      CU_OK(d.memcpyDtoHAsync(mx.data(), arInPlace.ptr, count * 4, stream));
      CU_OK(d.memcpyDtoHAsync(ag.data(), agOut.ptr, count * 4 * n, stream));
      CU_OK(d.memcpyDtoHAsync(bc.data(), bcast.ptr, count * 4, stream));
      CU_OK(d.memcpyDtoHAsync(eg.data(), eager.ptr, count * 4, stream));
      CU_OK(d.streamSynchronize(stream));
      size_t bad[6] = {};
      for (size_t i = 0; i < count; ++i) {
        int32_t maxWant = INT32_MIN;
        for (int k = 0; k < n; ++k)
          maxWant = std::max(maxWant, static_cast<int32_t>(((i + static_cast<size_t>(k) * 31) % 97) + iter));
        bad[0] += ar[i] != static_cast<int32_t>((i % 1013) * sumRanks + n * iter * 7);
        bad[1] += mx[i] != maxWant;
        bad[3] += bc[i] != input(n - 1, iter, i);
        bad[4] += eg[i] != n * iter - (n * (n - 1)) / 2;
        const size_t j = static_cast<size_t>(r) * count + i;
        bad[5] += rs[i] != static_cast<int32_t>((j % 1013) * sumRanks + n * iter * 7);
        for (int k = 0; k < n; ++k) bad[2] += ag[static_cast<size_t>(k) * count + i] != input(k, iter, i);
      }
      EXPECT_EQ(bad[0], 0u) << "captured all-reduce (sum), replay " << iter << ", rank " << r;
      EXPECT_EQ(bad[1], 0u) << "captured all-reduce (max, in place), replay " << iter << ", rank " << r;
      EXPECT_EQ(bad[2], 0u) << "captured all-gather, replay " << iter << ", rank " << r;
      EXPECT_EQ(bad[3], 0u) << "captured broadcast, replay " << iter << ", rank " << r;
      EXPECT_EQ(bad[4], 0u) << "eager all-reduce between replays " << iter << ", rank " << r;
      EXPECT_EQ(bad[5], 0u) << "captured reduce-scatter, replay " << iter << ", rank " << r;
    }
    EXPECT_EQ(g.execDestroy(exec), cuda::kSuccess);
    EXPECT_EQ(g.destroy(graph), cuda::kSuccess);
    if (const char* ipc = std::getenv("CFX_CUDA_IPC"); ipc != nullptr && std::string(ipc) == "1") {
      expectIpcPathTaken(IpcOps::Reductions);  // the eager all-reduce: the captured ops stage
    }
    d.streamDestroy(stream);
    NCCL_OK(ncclCommDestroy(comm));
  });
}

TEST(GpuCollectives, GraphCapturedCollectivesReplayStaged) {
  SKIP_WITHOUT_GPU();
  for (int n : {2, 3}) graphReplaySweep(n, {{"CFX_CUDA_IPC", "0"}});
}

// With the CUDA IPC path on: the captured ops stage (a device-direct program hands the stream back and forth by
// sequence numbers, which a replay cannot repeat), and the eager all-reduce between replays takes the path.
TEST(GpuCollectives, GraphCapturedCollectivesReplayOverIpc) {
  SKIP_WITHOUT_GPU();
  graphReplaySweep(3, ipcInSmallWindows());
}

// Four communicators of one process on one GPU, their streams forked from one capturing stream and joined back,
// one group all-reduce across them captured into one graph and replayed.
TEST(GpuCollectives, GraphCapturedGroupFourRanksOneProcess) {
  SKIP_WITHOUT_GPU();
  runRanks(1, [&](RankContext&) {
    const cuda::Driver& d = useDevice0();
    const GraphApi& g = graphApi();
    constexpr int n = 4;
    ncclComm_t comms[n];
    int devs[n] = {0, 0, 0, 0};
    NCCL_OK(ncclCommInitAll(comms, n, devs));
    const size_t count = 4097;
    std::vector<std::unique_ptr<DevBuf>> bufs;
    std::vector<cuda::CUstream> streams(n);
    std::vector<cuda::CUevent> forked(n), joined(n);
    for (int r = 0; r < n; ++r) {
      CU_OK(d.streamCreate(&streams[r], cuda::kStreamNonBlocking));
      CU_OK(d.eventCreate(&forked[r], cuda::kEventDisableTiming));
      CU_OK(d.eventCreate(&joined[r], cuda::kEventDisableTiming));
      bufs.push_back(std::make_unique<DevBuf>(d, count * sizeof(int32_t)));
    }
    ASSERT_EQ(g.beginCapture(streams[0], kCaptureRelaxed), cuda::kSuccess);
    CU_OK(d.eventRecord(forked[0], streams[0]));
    for (int r = 1; r < n; ++r) CU_OK(d.streamWaitEvent(streams[r], forked[0], 0));
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < n; ++r) {
      NCCL_OK(ncclAllReduce(bufs[r]->p(), bufs[r]->p(), count, ncclInt32, ncclSum, comms[r], streams[r]));
    }
    NCCL_OK(ncclGroupEnd());
    for (int r = 1; r < n; ++r) {
      CU_OK(d.eventRecord(joined[r], streams[r]));
      CU_OK(d.streamWaitEvent(streams[0], joined[r], 0));
    }
    cuda::CUgraph graph = nullptr;
    ASSERT_EQ(g.endCapture(streams[0], &graph), cuda::kSuccess);
    void* exec = nullptr;
    ASSERT_EQ(g.instantiate(&exec, graph, 0), cuda::kSuccess);
    for (int iter = 1; iter <= 3; ++iter) {
      for (int r = 0; r < n; ++r) {
        std::vector<int32_t> in(count);
        for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i) * (r + 1) * iter;
        CU_OK(d.memcpyHtoDAsync(bufs[r]->ptr, in.data(), in.size() * sizeof(int32_t), streams[0]));
      }
      ASSERT_EQ(g.launch(exec, streams[0]), cuda::kSuccess);
      CU_OK(d.streamSynchronize(streams[0]));
      for (int r = 0; r < n; ++r) {
        std::vector<int32_t> out(count);
        CU_OK(d.memcpyDtoHAsync(out.data(), bufs[r]->ptr, out.size() * sizeof(int32_t), streams[0]));
        CU_OK(d.streamSynchronize(streams[0]));
        size_t bad = 0;
        for (size_t i = 0; i < count; ++i) bad += out[i] != static_cast<int32_t>(i) * 10 * iter;
        EXPECT_EQ(bad, 0u) << "rank " << r << ", replay " << iter;
      }
    }
    EXPECT_EQ(g.execDestroy(exec), cuda::kSuccess);
    EXPECT_EQ(g.destroy(graph), cuda::kSuccess);
    for (int r = 0; r < n; ++r) {
      d.eventDestroy(forked[r]);
      d.eventDestroy(joined[r]);
      d.streamDestroy(streams[r]);
    }
    for (int r = 0; r < n; ++r) NCCL_OK(ncclCommDestroy(comms[r]));
  });
}

// A graph may outlive its communicator: replaying it then skips the op with a warning instead of stalling the
// stream, and destroying it later is harmless. Host buffers in a capture are refused, and a one-rank collective
// is captured as a plain device copy.
TEST(GpuCollectives, GraphEdgesOutlivedCommHostBuffersOneRank) {
  SKIP_WITHOUT_GPU();
  runRanks(2, [&](RankContext& ctx) {
    const cuda::Driver& d = useDevice0();
    const GraphApi& g = graphApi();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cuda::CUstream stream = nullptr;
    CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
    const size_t count = 1000;
    DevBuf buf(d, count * 4);
    std::vector<int32_t> ones(count, 1);
    CU_OK(d.memcpyHtoDAsync(buf.ptr, ones.data(), count * 4, stream));

    // Host buffers: refused, and the capture is still valid.
    void* pinned = nullptr;
    CU_OK(d.memHostAlloc(&pinned, count * 4, cuda::kHostAllocPortable));
    ASSERT_EQ(g.beginCapture(stream, kCaptureRelaxed), cuda::kSuccess);
    EXPECT_EQ(ncclAllReduce(pinned, pinned, count, ncclInt32, ncclSum, comm, stream), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("host buffers"), std::string::npos) << ncclGetLastError(comm);
    NCCL_OK(ncclAllReduce(buf.p(), buf.p(), count, ncclInt32, ncclSum, comm, stream));
    cuda::CUgraph graph = nullptr;
    ASSERT_EQ(g.endCapture(stream, &graph), cuda::kSuccess);
    void* exec = nullptr;
    ASSERT_EQ(g.instantiate(&exec, graph, 0), cuda::kSuccess);
    ASSERT_EQ(g.launch(exec, stream), cuda::kSuccess);
    ASSERT_EQ(g.launch(exec, stream), cuda::kSuccess);
    std::vector<int32_t> out(count);
    CU_OK(d.memcpyDtoHAsync(out.data(), buf.ptr, count * 4, stream));
    CU_OK(d.streamSynchronize(stream));
    EXPECT_EQ(out[0], 4) << "two replays of a 2-rank in-place sum of ones";
    EXPECT_EQ(out[count - 1], 4);

    NCCL_OK(ncclCommDestroy(comm));
    ASSERT_EQ(g.launch(exec, stream), cuda::kSuccess);  // the op is skipped; the stream must not stall
    CU_OK(d.memcpyDtoHAsync(out.data(), buf.ptr, count * 4, stream));
    CU_OK(d.streamSynchronize(stream));
    EXPECT_EQ(out[0], 4) << "a replay after destroy changed the buffer";
    EXPECT_EQ(g.execDestroy(exec), cuda::kSuccess);
    EXPECT_EQ(g.destroy(graph), cuda::kSuccess);
    d.memFreeHost(pinned);

    // One rank: the capture holds a device-to-device copy, replayed with the graph.
    ncclComm_t solo = nullptr;
    int dev0 = 0;
    NCCL_OK(ncclCommInitAll(&solo, 1, &dev0));
    DevBuf src(d, count * 4), dst(d, count * 4);
    ASSERT_EQ(g.beginCapture(stream, kCaptureGlobal), cuda::kSuccess);
    NCCL_OK(ncclAllReduce(src.p(), dst.p(), count, ncclInt32, ncclSum, solo, stream));
    ASSERT_EQ(g.endCapture(stream, &graph), cuda::kSuccess);
    ASSERT_EQ(g.instantiate(&exec, graph, 0), cuda::kSuccess);
    for (int32_t v : {5, 9}) {
      std::vector<int32_t> in(count, v + ctx.rank());
      CU_OK(d.memcpyHtoDAsync(src.ptr, in.data(), count * 4, stream));
      ASSERT_EQ(g.launch(exec, stream), cuda::kSuccess);
      CU_OK(d.memcpyDtoHAsync(out.data(), dst.ptr, count * 4, stream));
      CU_OK(d.streamSynchronize(stream));
      EXPECT_EQ(out[count / 2], v + ctx.rank()) << "one-rank captured all-reduce";
    }
    EXPECT_EQ(g.execDestroy(exec), cuda::kSuccess);
    EXPECT_EQ(g.destroy(graph), cuda::kSuccess);
    NCCL_OK(ncclCommDestroy(solo));
    d.streamDestroy(stream);
  });
}

}  // namespace
}  // namespace cfx::itest
