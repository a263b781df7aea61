// SPDX-License-Identifier: Apache-2.0
// The reduce-copy kernels against the host reduce functions, bit for bit: every datatype, combine, Avg (pre-multiply
// for floats, post-division for integers) and PreMulSum, 1 to 8 sources, odd counts and odd byte offsets. Label gpu;
// skips without a CUDA device. A unit check that this build embeds kernels runs everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/cuda_driver.h"
#include "common/float_types.h"
#include "common/types.h"
#include "primitives/device_kernels.h"
#include "compress/block_quant.h"
#include "primitives/reduce.h"

namespace cfx::prims {
namespace {

#define CU_OK(call) ASSERT_EQ((call), cuda::kSuccess) << #call

// Element bits a reduction may meet. Float and double stay finite: an IEEE sum or product that makes a NaN has a
// payload that differs between x86 and the GPU (the GPU returns the canonical NaN), and NCCL makes no promise
// there. The narrow types round every NaN to their one canonical NaN, so they get infinities and NaNs too.
uint64_t randomElement(DataType t, std::mt19937_64& rng) {
  const uint64_t r = rng();
  switch (t) {
    case DataType::Float32: {
      float f = std::ldexp(static_cast<float>(static_cast<int32_t>(r & 0xFFFFF)) / 1048576.0f, static_cast<int>((r >> 20) % 40) - 20);
      if ((r >> 40) % 17 == 0) f = std::bit_cast<float>(static_cast<uint32_t>((r >> 41) & 0x807FFFFFu));  // subnormal
      if ((r >> 40) % 23 == 0) f = -0.0f;
      uint32_t b = std::bit_cast<uint32_t>(f);
      return b;
    }
    case DataType::Float64: {
      double f = std::ldexp(static_cast<double>(static_cast<int64_t>(r & 0xFFFFFFFFFull)) / 68719476736.0,
                            static_cast<int>((r >> 36) % 60) - 30);
      if ((r >> 42) % 23 == 0) f = -0.0;
      return std::bit_cast<uint64_t>(f);
    }
    default:
      return r;  // every bit pattern, truncated to the element size
  }
}

struct Case {
  ReduceOp op;
  const char* name;
};

std::vector<Case> casesFor(DataType t, int nRanks) {
  std::vector<Case> cases = {{ReduceOp::builtin(t, RedOpKind::Sum, nRanks), "sum"},
                             {ReduceOp::builtin(t, RedOpKind::Prod, nRanks), "prod"},
                             {ReduceOp::builtin(t, RedOpKind::Max, nRanks), "max"},
                             {ReduceOp::builtin(t, RedOpKind::Min, nRanks), "min"},
                             {ReduceOp::builtin(t, RedOpKind::Avg, nRanks), "avg"}};
  unsigned char scalar[8] = {};
  switch (t) {
    case DataType::Float32: { const float s = 0.375f; std::memcpy(scalar, &s, 4); break; }
    case DataType::Float64: { const double s = -1.25; std::memcpy(scalar, &s, 8); break; }
    case DataType::Float16: { const uint16_t s = fp::floatToHalf(0.3f); std::memcpy(scalar, &s, 2); break; }
    case DataType::Bfloat16: { const uint16_t s = fp::floatToBf16(1.7f); std::memcpy(scalar, &s, 2); break; }
    case DataType::Fp8E4M3: scalar[0] = fp::floatToE4M3(0.75f); break;
    case DataType::Fp8E5M2: scalar[0] = fp::floatToE5M2(3.0f); break;
    default: scalar[0] = 3; break;
  }
  cases.push_back({ReduceOp::preMulSum(t, scalar), "premulsum"});
  return cases;
}

// Device 0's primary context, the kernels loaded into it and a stream; skips without a device or kernels.
class DeviceKernelsOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    d = cuda::driver();
    int devices = 0;
    if (d == nullptr || d->deviceGetCount(&devices) != cuda::kSuccess || devices == 0) {
      GTEST_SKIP() << "no CUDA driver or no CUDA device on this machine";
    }
    if (!DeviceKernels::built()) GTEST_SKIP() << "built without nvcc: no device kernels in this build";
    cuda::CUdevice dev = 0;
    cuda::CUcontext ctx = nullptr;
    CU_OK(d->deviceGet(&dev, 0));
    CU_OK(d->primaryCtxRetain(&ctx, dev));
    CU_OK(d->ctxSetCurrent(ctx));
    auto loaded = DeviceKernels::get(ctx);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    kernels = *loaded;
    CU_OK(d->streamCreate(&stream, cuda::kStreamNonBlocking));
  }
  void TearDown() override {
    if (stream != nullptr) d->streamDestroy(stream);
  }
  const cuda::Driver* d = nullptr;
  const DeviceKernels* kernels = nullptr;
  cuda::CUstream stream = nullptr;
};

TEST(DeviceKernels, BuildEmbedsKernelsWhenNvccWasFound) {
  // Not a GPU test: says what this build holds, so a missing nvcc in CI shows up here rather than on a GPU machine.
  if (!DeviceKernels::built()) GTEST_SKIP() << "built without nvcc: no device kernels in this build";
  EXPECT_STRNE(DeviceKernels::archs(), "");
}

TEST_F(DeviceKernelsOnGpu, ReduceCopyIsBitIdenticalToTheHost) {

  std::mt19937_64 rng(2026);
  constexpr int kMaxSrc = 8;
  size_t checked = 0;
  for (int ti = 0; ti < kNumDataTypes; ++ti) {
    const auto t = static_cast<DataType>(ti);
    const size_t es = dataTypeSize(t);
    for (size_t count : {size_t{1}, size_t{1031}, size_t{70001}}) {
      // One device block holds 8 sources and the output, each at an odd byte offset (no alignment assumed).
      const size_t stride = count * es + 64;
      cuda::CUdeviceptr base = 0;
      CU_OK(d->memAlloc(&base, stride * (kMaxSrc + 1) + 64));
      std::vector<std::vector<unsigned char>> srcs(kMaxSrc, std::vector<unsigned char>(count * es));
      std::vector<cuda::CUdeviceptr> dsrc(kMaxSrc);
      for (int k = 0; k < kMaxSrc; ++k) {
        for (size_t i = 0; i < count; ++i) {
          const uint64_t bits = randomElement(t, rng);
          std::memcpy(srcs[k].data() + i * es, &bits, es);
        }
        dsrc[k] = base + k * stride + (t == DataType::Float64 ? 8 : 3);  // doubles stay 8-byte aligned for the host
        CU_OK(d->memcpyHtoDAsync(dsrc[k], srcs[k].data(), count * es, stream));
      }
      const cuda::CUdeviceptr ddst = base + kMaxSrc * stride + 5;
      for (int nSrc : {1, 2, 3, 8}) {
        for (const Case& c : casesFor(t, nSrc)) {
          // Host: the first source prepared, each later one folded in as a local input; post on the last step.
          std::vector<unsigned char> want(count * es);
          prepareLocal(c.op, want.data(), srcs[0].data(), count, nSrc == 1);
          for (int k = 1; k < nSrc; ++k) reduceLocal(c.op, want.data(), want.data(), srcs[k].data(), count, k == nSrc - 1);
          ASSERT_TRUE(kernels->reduceCopy(c.op, ddst, dsrc.data(), nSrc, count, true, stream).ok());
          std::vector<unsigned char> got(count * es, 0xAB);
          CU_OK(d->memcpyDtoHAsync(got.data(), ddst, got.size(), stream));
          CU_OK(d->streamSynchronize(stream));
          size_t firstBad = count;
          for (size_t i = 0; i < count && firstBad == count; ++i) {
            if (std::memcmp(got.data() + i * es, want.data() + i * es, es) != 0) firstBad = i;
          }
          if (firstBad != count) {
            uint64_t g = 0, w = 0;
            std::memcpy(&g, got.data() + firstBad * es, es);
            std::memcpy(&w, want.data() + firstBad * es, es);
            ADD_FAILURE() << dataTypeName(t) << " " << c.name << " nSrc " << nSrc << " count " << count
                          << ": element " << firstBad << " device 0x" << std::hex << g << " host 0x" << w;
          }
          ++checked;
        }
      }
      d->memFree(base);
    }
  }
  RecordProperty("cases", static_cast<int>(checked));
}

// Quantise on the device equals quantise on the host, byte for byte (scales and payload), for every codec and input
// type, odd tails, zero blocks and non-finite values; dequantise (plain and accumulating) likewise.
TEST_F(DeviceKernelsOnGpu, QuantizeIsByteIdenticalToTheHost) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (quant::Codec codec : {quant::Codec::Int8, quant::Codec::Fp8E4M3, quant::Codec::Int4}) {
    for (DataType inType : {DataType::Float32, DataType::Bfloat16, DataType::Float16}) {
      for (size_t block : {size_t{32}, size_t{256}, size_t{4096}}) {
        const size_t count = 3 * block + 17;  // an odd tail
        const size_t es = dataTypeSize(inType);
        std::vector<unsigned char> in(count * es);
        for (size_t i = 0; i < count; ++i) {
          float x = i < block ? 0.0f : dist(rng);  // the first block is all zero
          if (i == block + 1) x = std::numeric_limits<float>::infinity();
          if (i == block + 2) x = std::numeric_limits<float>::quiet_NaN();
          if (inType == DataType::Float32) std::memcpy(in.data() + 4 * i, &x, 4);
          else {
            const uint16_t h = inType == DataType::Bfloat16 ? fp::floatToBf16(x) : fp::floatToHalf(x);
            std::memcpy(in.data() + 2 * i, &h, 2);
          }
        }
        const size_t qbytes = quant::quantizedBytes(codec, count, block);
        std::vector<unsigned char> want(qbytes);
        ASSERT_TRUE(quant::quantize(codec, inType, in.data(), count, block, want.data()).ok());
        cuda::CUdeviceptr din = 0, dq = 0, dout = 0;
        CU_OK(d->memAlloc(&din, in.size()));
        CU_OK(d->memAlloc(&dq, qbytes));
        CU_OK(d->memAlloc(&dout, count * 4));
        CU_OK(d->memcpyHtoDAsync(din, in.data(), in.size(), stream));
        ASSERT_TRUE(kernels->quantize(codec, inType, din, count, block, dq, stream).ok());
        std::vector<unsigned char> got(qbytes);
        CU_OK(d->memcpyDtoHAsync(got.data(), dq, qbytes, stream));
        CU_OK(d->streamSynchronize(stream));
        EXPECT_EQ(got, want) << "quantize codec " << static_cast<int>(codec) << " from " << dataTypeName(inType)
                             << " block " << block;
        for (bool accumulate : {false, true}) {
          std::vector<float> base(count);
          for (size_t i = 0; i < count; ++i) base[i] = static_cast<float>(i % 7) * 0.125f;
          std::vector<float> wantOut = base;
          ASSERT_TRUE(quant::dequantize(codec, want.data(), count, block, wantOut.data(), accumulate).ok());
          CU_OK(d->memcpyHtoDAsync(dout, base.data(), count * 4, stream));
          ASSERT_TRUE(kernels->dequantize(codec, dq, count, block, dout, accumulate, stream).ok());
          std::vector<float> gotOut(count);
          CU_OK(d->memcpyDtoHAsync(gotOut.data(), dout, count * 4, stream));
          CU_OK(d->streamSynchronize(stream));
          EXPECT_EQ(std::memcmp(gotOut.data(), wantOut.data(), count * 4), 0)
              << "dequantize codec " << static_cast<int>(codec) << (accumulate ? " accumulating" : "");
        }
        d->memFree(din);
        d->memFree(dq);
        d->memFree(dout);
      }
    }
  }
}

}  // namespace
}  // namespace cfx::prims
