// SPDX-License-Identifier: Apache-2.0
// The collectives of this wave on device buffers (staged through host memory): a compressed all-reduce, an exclusive
// affine All-Scan, a built-in scan and a delta broadcast give, on device memory, exactly the bits the same calls give
// on host memory; a user op on device buffers is refused. On the CPU stand-in in every make test, on a GPU in
// run_on_gpu.sh.
#include <conflux.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/cuda_driver.h"
#include "gpu/device_test_util.h"
#include "integration/multiproc.h"

namespace cfx::itest {
namespace {

std::vector<float> inputOf(int rank, size_t n) {
  std::mt19937 rng(static_cast<uint32_t>(rank + 1));
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void matmul(const void*, void*, size_t, ncclDataType_t, void*) {}

TEST(GpuWave2, CompressedScanAndDeltaOpsGiveTheHostBitsOnDeviceBuffers) {
  SKIP_WITHOUT_GPU();
  RunOptions opts;
  opts.timeout = std::chrono::seconds(120);
  runRanks(3, opts, [&](RankContext& ctx) {
    const cuda::Driver& d = useDevice0();
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cuda::CUstream stream = nullptr;
    CU_OK(d.streamCreate(&stream, cuda::kStreamNonBlocking));
    const size_t count = 3 * 1000;  // whole groups of the affine op below (12 elements)
    const std::vector<float> in = inputOf(ctx.rank(), count);
    DevBuf send(d, count * 4), recv(d, count * 4);
    // (EXPECT, not ASSERT: these return their results.)
    auto onDevice = [&](auto&& call) {
      std::vector<float> out(count);
      EXPECT_EQ(d.memcpyHtoDAsync(send.ptr, in.data(), count * 4, stream), cuda::kSuccess);
      EXPECT_EQ(call(send.p(), recv.p(), stream), ncclSuccess) << ncclGetLastError(comm);
      EXPECT_EQ(d.memcpyDtoHAsync(out.data(), recv.ptr, count * 4, stream), cuda::kSuccess);
      EXPECT_EQ(d.streamSynchronize(stream), cuda::kSuccess);
      return out;
    };
    auto onHost = [&](auto&& call) {
      std::vector<float> out(count);
      EXPECT_EQ(call(in.data(), out.data(), nullptr), ncclSuccess) << ncclGetLastError(comm);
      return out;
    };
    cfxCodec int8;
    NCCL_OK(cfxCodecParse("int8", &int8));
    int8.mode = cfxCompressAlways;
    auto compressed = [&](const void* s, void* r, cudaStream_t st) {
      return cfxAllReduceCompressed(s, r, count, ncclFloat, ncclSum, &int8, comm, st);
    };
    ncclRedOp_t affine;
    NCCL_OK(cfxRedOpCreateAffine(&affine, 2, 5, 0, ncclFloat, comm));
    auto affineScan = [&](const void* s, void* r, cudaStream_t st) {
      return cfxExScan(s, r, count, ncclFloat, affine, comm, st);
    };
    auto sumScan = [&](const void* s, void* r, cudaStream_t st) {
      return cfxScan(s, r, count, ncclFloat, ncclMax, comm, st);
    };
    auto delta = [&](const void* s, void* r, cudaStream_t st) {
      return cfxBroadcastDelta(s, r, count, ncclFloat, 1, comm, st);
    };
    EXPECT_EQ(onDevice(compressed), onHost(compressed));
    EXPECT_EQ(onDevice(affineScan), onHost(affineScan));
    EXPECT_EQ(onDevice(sumScan), onHost(sumScan));
    // The delta broadcast keeps state per receive buffer: the device buffer's first call and the host buffer's first
    // call both send everything; a second call on the device buffer sends nothing new and still lands the same bits.
    const std::vector<float> viaDevice = onDevice(delta);
    EXPECT_EQ(viaDevice, onHost(delta));
    EXPECT_EQ(onDevice(delta), viaDevice);
    EXPECT_EQ(viaDevice, inputOf(1, count)) << "every rank holds the root's buffer";
    // A user op runs on the host: device buffers are refused by name.
    ncclRedOp_t user;
    NCCL_OK(cfxRedOpCreateUser(&user, matmul, nullptr, 4, 0, ncclFloat, comm));
    EXPECT_EQ(cfxScan(send.p(), recv.p(), count, ncclFloat, user, comm, stream), ncclInvalidArgument);
    NCCL_OK(ncclRedOpDestroy(user, comm));
    NCCL_OK(ncclRedOpDestroy(affine, comm));
    NCCL_OK(ncclCommDestroy(comm));
    CU_OK(d.streamDestroy(stream));
  });
}

}  // namespace
}  // namespace cfx::itest
