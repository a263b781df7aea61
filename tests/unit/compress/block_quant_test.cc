// SPDX-License-Identifier: Apache-2.0
// The absmax block quantisers: layout sizes, error bounds of a round trip, all-zero blocks, odd tails, non-finite inputs and
// bad arguments. The device kernels are checked against these byte for byte in tests/gpu.
#include "compress/block_quant.h"

#include <cstring>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace cfx::compress::quant {
namespace {

TEST(Quantize, LayoutHoldsScalesThenPayload) {
  EXPECT_EQ(scaleCount(1000, 256), 4u);
  EXPECT_EQ(quantizedBytes(Codec::Int8, 1000, 256), 4u * 4 + 1000);
  EXPECT_EQ(quantizedBytes(Codec::Fp8E4M3, 1000, 256), 4u * 4 + 1000);
  EXPECT_EQ(quantizedBytes(Codec::Int4, 1001, 256), 4u * 4 + 501);
  EXPECT_EQ(quantizedBytes(Codec::Int8, 0, 256), 0u);
}

// Round trip of random fp32 data with odd tails: int codecs are within half a step (scale / 2) of the input, fp8
// within its relative rounding (2^-4 of the scaled value) plus the smallest subnormal step.
TEST(Quantize, RoundTripErrorIsBoundedForEveryCodec) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (Codec codec : {Codec::Int8, Codec::Fp8E4M3, Codec::Int4}) {
    for (size_t count : {size_t{1}, size_t{255}, size_t{1000}, size_t{4097}}) {
      const size_t block = 64;
      std::vector<float> in(count);
      for (float& x : in) x = dist(rng);
      std::vector<unsigned char> q(quantizedBytes(codec, count, block));
      ASSERT_TRUE(quantize(codec, DataType::Float32, in.data(), count, block, q.data()).ok());
      std::vector<float> out(count, -1.0f);
      ASSERT_TRUE(dequantize(codec, q.data(), count, block, out.data(), false).ok());
      for (size_t i = 0; i < count; ++i) {
        float scale;
        std::memcpy(&scale, q.data() + (i / block) * 4, 4);
        const double err = std::fabs(static_cast<double>(out[i]) - in[i]);
        const double bound = codec == Codec::Fp8E4M3 ? std::fabs(in[i]) / 16.0 + scale * std::ldexp(1.0, -9)
                                                     : scale / 2.0 * (1 + 1e-6);
        ASSERT_LE(err, bound) << "codec " << static_cast<int>(codec) << " count " << count << " element " << i;
      }
    }
  }
}

TEST(Quantize, ZeroBlocksNonFiniteInputsAndAccumulate) {
  const size_t block = 4;
  std::vector<float> in = {0.0f, -0.0f, 0.0f, 0.0f,  // an all-zero block: scale 0, payload 0
                           1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), -2.0f};
  for (Codec codec : {Codec::Int8, Codec::Fp8E4M3, Codec::Int4}) {
    std::vector<unsigned char> q(quantizedBytes(codec, in.size(), block));
    ASSERT_TRUE(quantize(codec, DataType::Float32, in.data(), in.size(), block, q.data()).ok());
    float scale0, scale1;
    std::memcpy(&scale0, q.data(), 4);
    std::memcpy(&scale1, q.data() + 4, 4);
    EXPECT_EQ(scale0, 0.0f);
    EXPECT_EQ(scale1, 2.0f / codecMax(codec));  // absmax of the finite values
    std::vector<float> out(in.size(), 10.0f);
    ASSERT_TRUE(dequantize(codec, q.data(), in.size(), block, out.data(), true).ok());  // accumulate onto 10
    EXPECT_EQ(out[0], 10.0f);
    EXPECT_TRUE(std::isnan(out[5])) << "NaN decodes to NaN";
    EXPECT_TRUE(std::isnan(out[6])) << "+inf decodes to NaN, never to a clamped finite value";
    EXPECT_FLOAT_EQ(out[7], 8.0f);
  }
}

TEST(Quantize, Bf16AndFp16InputsAndBadArguments) {
  const uint16_t bf[3] = {fp::floatToBf16(1.0f), fp::floatToBf16(-0.5f), fp::floatToBf16(0.25f)};
  std::vector<unsigned char> q(quantizedBytes(Codec::Int8, 3, 2));
  ASSERT_TRUE(quantize(Codec::Int8, DataType::Bfloat16, bf, 3, 2, q.data()).ok());
  EXPECT_EQ(static_cast<int8_t>(q[8]), 127);
  EXPECT_EQ(static_cast<int8_t>(q[9]), -64);  // -0.5 / (1/127) = -63.5 rounds half to even
  EXPECT_EQ(static_cast<int8_t>(q[10]), 127);
  const uint16_t h[2] = {fp::floatToHalf(3.0f), fp::floatToHalf(-3.0f)};
  std::vector<unsigned char> q4(quantizedBytes(Codec::Int4, 2, 2));
  ASSERT_TRUE(quantize(Codec::Int4, DataType::Float16, h, 2, 2, q4.data()).ok());
  EXPECT_EQ(q4[4], 0x97) << "7 in the low nibble, -7 (0x9) in the high one";
  float f = 1.0f;
  EXPECT_EQ(quantize(Codec::Int4, DataType::Float32, &f, 1, 3, q4.data()).code(), Errc::InvalidArgument);  // odd block
  EXPECT_EQ(quantize(Codec::Int8, DataType::Int32, &f, 1, 4, q4.data()).code(), Errc::InvalidArgument);
  EXPECT_EQ(quantize(Codec::Int8, DataType::Float32, &f, 1, 0, q4.data()).code(), Errc::InvalidArgument);
  EXPECT_EQ(quantize(static_cast<Codec>(7), DataType::Float32, &f, 1, 4, q4.data()).code(), Errc::InvalidArgument);
}

}  // namespace
}  // namespace cfx::compress::quant
