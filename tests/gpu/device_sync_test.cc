// SPDX-License-Identifier: Apache-2.0
// Device-side barriers of the CUDA IPC path (CFX_CUDA_IPC_DEVICE_SYNC; transport/cuda_ipc/flag_board.h): small
// all-reduces as one kernel after one barrier (IpcOneShot) and the scratch forms with no host step, queued back to back
// on one stream, beside staged ops and ops on a second stream; the watchdog that names a rank that never arrives.
// Label gpu; every test skips with a reason where no CUDA device exists. On the emulator its counters show that no
// host function ran for these ops (no host round trip per op).
#include <conflux.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/cuda_driver.h"
#include "gpu/device_test_util.h"
#include "integration/multiproc.h"
#include "integration/nccl_checks.h"

namespace cfx::itest {
namespace {

// Device-side barriers on, with 1 MiB of scratch, which ops from 1 MiB take (a 3 MiB op is several windows of it).
RunOptions deviceSyncOptions() {
  RunOptions opts;
  opts.timeout = std::chrono::seconds(120);
  opts.env = {{"CFX_CUDA_IPC_DEVICE_SYNC", "1"},
              {"CFX_CUDA_IPC_BYTES", "1048576"},
              {"CFX_CUDA_IPC_MIN_BYTES", "1048576"},
              {"CFX_TIMEOUT_MS", "30000"}};
  return opts;
}

// Sizes from one float to a whole one-shot slot, in and out of place, queued back to back with nothing synchronised
// (consecutive one-shot ops alternate their slots), with a staged op, a 3 MiB op through the scratch in windows and
// an op on a second stream in the middle; every result checked once the streams drain. The one-shot burst runs no
// host function on the stream: nothing of it waits on a host thread.
void oneShotBurst(int n, const std::vector<std::pair<std::string, std::string>>& extraEnv, bool ownGpus) {
  RunOptions opts = deviceSyncOptions();
  opts.env.insert(opts.env.end(), extraEnv.begin(), extraEnv.end());
  runRanks(n, opts, [&](RankContext& ctx) {
    const int r = ctx.rank();
    const cuda::Driver& d = useDevice(ownGpus ? r : 0);
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cuda::CUstream stream = nullptr;
    cuda::CUstream side = nullptr;
    CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
    CU_OK(d.streamCreate(&side, cuda::kStreamNonBlocking));
    // Every count fits the default one-shot slot (64 KiB of int32) but the last two of the list.
    const std::vector<size_t> counts = {1, 7, 1000, 16384, 3, 4096, 777, (size_t{3} << 20) / 4, 200000, 2, 16384};
    auto value = [](int rank, size_t k, size_t i) { return static_cast<int32_t>((i % 101) + rank * 3 + k); };
    std::vector<std::unique_ptr<DevBuf>> ins, outs;
    for (size_t k = 0; k < counts.size(); ++k) {
      ins.push_back(std::make_unique<DevBuf>(d, counts[k] * 4));
      outs.push_back(std::make_unique<DevBuf>(d, counts[k] * 4));
      std::vector<int32_t> h(counts[k]);
      for (size_t i = 0; i < counts[k]; ++i) h[i] = value(r, k, i);
      CU_OK(d.memcpyHtoDAsync(ins[k]->ptr, h.data(), counts[k] * 4, stream));
    }
    CU_OK(d.streamSynchronize(stream));
    cfxPlanInfo plan;
    NCCL_OK(cfxCommGetPlanForBuffers(comm, cfxCollAllReduce, ins[0]->p(), outs[0]->p(), 4096, ncclInt32, 0, &plan));
    EXPECT_STREQ(plan.algorithm, "IpcOneShot") << plan.text;
    const long long hostFunctions = emulatorCount("host_functions");
    for (size_t k = 0; k < 4; ++k) {  // one-shot ops only
      void* dst = k % 2 == 1 ? ins[k]->p() : outs[k]->p();
      NCCL_OK(ncclAllReduce(ins[k]->p(), dst, counts[k], ncclInt32, ncclSum, comm, stream));
    }
    CU_OK(d.streamSynchronize(stream));
    if (hostFunctions >= 0) {
      EXPECT_EQ(emulatorCount("host_functions"), hostFunctions) << "a one-shot op waited on a host thread";
    }
    for (size_t k = 4; k < counts.size(); ++k) {
      void* dst = k % 2 == 1 ? ins[k]->p() : outs[k]->p();
      cuda::CUstream s = k == 6 ? side : stream;
      NCCL_OK(ncclAllReduce(ins[k]->p(), dst, counts[k], ncclInt32, ncclSum, comm, s));
    }
    CU_OK(d.streamSynchronize(stream));
    CU_OK(d.streamSynchronize(side));
    for (size_t k = 0; k < counts.size(); ++k) {
      const DevBuf& got = k % 2 == 1 ? *ins[k] : *outs[k];
      std::vector<int32_t> h(counts[k]);
      CU_OK(d.memcpyDtoHAsync(h.data(), got.ptr, counts[k] * 4, stream));
      CU_OK(d.streamSynchronize(stream));
      size_t bad = 0;
      for (size_t i = 0; i < counts[k]; ++i) {
        int32_t want = 0;
        for (int q = 0; q < n; ++q) want += value(q, k, i);
        bad += h[i] != want;
      }
      EXPECT_EQ(bad, 0u) << "op " << k << " (" << counts[k] << " int32), rank " << r;
    }
    ncclResult_t async = ncclInProgress;
    EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess) << ncclGetLastError(comm);
    ins.clear();
    outs.clear();
    d.streamDestroy(side);
    d.streamDestroy(stream);
    NCCL_OK(ncclCommDestroy(comm));
  });
}

TEST(GpuDeviceSync, SmallAllReducesRunAsOneKernelWithNoHostStep) {
  SKIP_WITHOUT_GPU();
  if (!reduceKernelsBuilt()) GTEST_SKIP() << "IpcOneShot needs the reduce kernels, which this build has not";
  if (deviceRuntimeIsHip()) GTEST_SKIP() << "no device-side barriers under HIP (no hipHostRegister in the adapters)";
  oneShotBurst(3, {}, false);
}

// Ranks on GPUs of their own take device-side barriers by default (CFX_CUDA_IPC_DEVICE_SYNC=-1).
TEST(GpuDeviceSync, RanksOnTheirOwnGpusUseDeviceSideBarriersByDefault) {
  SKIP_WITHOUT_GPU();
  if (!reduceKernelsBuilt()) GTEST_SKIP() << "IpcOneShot needs the reduce kernels, which this build has not";
  if (deviceRuntimeIsHip()) GTEST_SKIP() << "no device-side barriers under HIP (no hipHostRegister in the adapters)";
  const std::vector<std::pair<std::string, std::string>> emulated = {{"CFX_EMU_DEVICES", "4"},
                                                                      {"CFX_CUDA_IPC_DEVICE_SYNC", "-1"}};
  const int devices = deviceCount(emulated);
  if (devices < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << devices;
  oneShotBurst(std::min(devices, 4), emulated, true);
}

// A rank that never calls: its peers' streams wait at the op's device-side barrier until the watchdog names it
// (CFX_TIMEOUT_MS), the error becomes the communicator's async error, and the stream goes on.
TEST(GpuDeviceSync, ARankThatNeverArrivesIsNamedAndTheStreamGoesOn) {
  SKIP_WITHOUT_GPU();
  if (!reduceKernelsBuilt()) GTEST_SKIP() << "IpcOneShot needs the reduce kernels, which this build has not";
  if (deviceRuntimeIsHip()) GTEST_SKIP() << "no device-side barriers under HIP (no hipHostRegister in the adapters)";
  RunOptions opts = deviceSyncOptions();
  opts.env.emplace_back("CFX_TIMEOUT_MS", "1500");
  runRanks(2, opts, [&](RankContext& ctx) {
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    DevBuf buf(d, 4096);
    if (ctx.rank() == 0) {
      NCCL_OK(ncclAllReduce(buf.p(), buf.p(), 1024, ncclFloat32, ncclSum, self.comm, self.stream));
      EXPECT_EQ(waitForAsyncError(self.comm, std::chrono::seconds(60)), ncclRemoteError);
      const std::string text = ncclGetLastError(self.comm);
      EXPECT_NE(text.find("rank(s) 1 did not reach it"), std::string::npos) << text;
      CU_OK(d.streamSynchronize(self.stream));  // released, not left waiting
    }
    ctx.barrier();  // rank 1 stays away until rank 0 has seen the error
    EXPECT_EQ(ncclCommAbort(self.comm), ncclSuccess);
    self.comm = nullptr;
  });
}

// CFX_CHECK_CALLS=1 checks each call on the host before it runs, which a one-shot op (no host step) would skip: with it
// a small all-reduce on device buffers stages, says so, and ranks whose counts differ fail naming both calls instead
// of each reducing its own count of the others' slots.
TEST(GpuDeviceSync, WithCheckedCallsSmallOpsStageAndAMismatchIsNamed) {
  SKIP_WITHOUT_GPU();
  if (!reduceKernelsBuilt()) GTEST_SKIP() << "IpcOneShot needs the reduce kernels, which this build has not";
  if (deviceRuntimeIsHip()) GTEST_SKIP() << "no device-side barriers under HIP (no hipHostRegister in the adapters)";
  RunOptions opts = deviceSyncOptions();
  opts.env.emplace_back("CFX_CHECK_CALLS", "1");
  runRanks(3, opts, [&](RankContext& ctx) {
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    DevBuf buf(d, 4096);
    cfxPlanInfo plan;
    NCCL_OK(cfxCommGetPlanForBuffers(self.comm, cfxCollAllReduce, buf.p(), buf.p(), 1000, ncclInt32, 0, &plan));
    EXPECT_STRNE(plan.algorithm, "IpcOneShot") << plan.text;
    EXPECT_NE(std::string(plan.text).find("CFX_CHECK_CALLS"), std::string::npos) << plan.text;
    const size_t count = ctx.rank() == 2 ? 1001 : 1000;
    NCCL_OK(ncclAllReduce(buf.p(), buf.p(), count, ncclInt32, ncclSum, self.comm, self.stream));
    EXPECT_EQ(waitForAsyncError(self.comm, std::chrono::seconds(60)), ncclInvalidUsage);
    const std::string text = ncclGetLastError(self.comm);
    EXPECT_NE(text.find("mismatched operation across ranks"), std::string::npos) << text;
    EXPECT_NE(text.find("count 1001"), std::string::npos) << text;
    EXPECT_NE(text.find("count 1000"), std::string::npos) << text;
    CU_OK(d.streamSynchronize(self.stream));  // the failed op still released the stream
    EXPECT_EQ(ncclCommAbort(self.comm), ncclSuccess);
    self.comm = nullptr;
  });
}

}  // namespace
}  // namespace cfx::itest
