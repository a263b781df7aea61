// SPDX-License-Identifier: Apache-2.0
// Codecs: every format against an fp32 reference on Gaussian, uniform, heavy-tailed and all-zero data, at counts of 1,
// block +- 1, odd tails and several MiB, each element within the documented bound; pieces that fit their slots and
// decode alone; error feedback; stochastic rounding that is the same from run to run; names and bad specs.
#include "compress/codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/float_types.h"

namespace cfx::compress {
namespace {

enum class Data { Gaussian, Uniform, HeavyTailed, Zero };

std::vector<float> makeData(Data kind, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 2.0f);
  std::uniform_real_distribution<float> uni(-5.0f, 5.0f);
  std::student_t_distribution<float> heavy(1.5f);  // infinite variance: occasional huge values
  std::vector<float> v(count);
  for (float& x : v) {
    switch (kind) {
      case Data::Gaussian: x = gauss(rng); break;
      case Data::Uniform: x = uni(rng); break;
      case Data::HeavyTailed: x = heavy(rng); break;
      case Data::Zero: x = 0.0f; break;
    }
  }
  return v;
}

std::vector<CodecSpec> everyFormat() {
  std::vector<CodecSpec> specs;
  for (Format f : {Format::Bf16, Format::Fp16, Format::Int8, Format::MxInt8, Format::MxFp8, Format::Int4, Format::Fp8}) {
    CodecSpec s;
    s.format = f;
    specs.push_back(s);
  }
  for (SparseValues v : {SparseValues::Fp32, SparseValues::Bf16, SparseValues::Int8, SparseValues::Bits2}) {
    CodecSpec s;
    s.format = Format::TopK;
    s.fraction = 0.05f;
    s.values = v;
    s.block = 512;
    specs.push_back(s);
  }
  return specs;
}

// Encodes x as one piece, decodes it, and checks every element against the documented bound. Returns the relative
// L2 error.
double roundTrip(const Codec& c, const std::vector<float>& x) {
  std::vector<unsigned char> wire(c.pieceBytes(x.size()) + 1, 0xAB);
  c.encode(x.data(), DataType::Float32, x.size(), wire.data(), {});
  EXPECT_EQ(wire.back(), 0xAB) << "the encoder wrote past pieceBytes";
  std::vector<float> y(x.size(), -7.0f);
  c.decode(wire.data(), x.size(), y.data(), false);
  std::vector<float> bound(x.size());
  c.elementBounds(x.data(), x.size(), bound.data());
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double e = std::fabs(static_cast<double>(y[i]) - x[i]);
    if (!(e <= bound[i])) {
      ADD_FAILURE() << codecText(c.spec()) << " element " << i << " of " << x.size() << ": " << x[i] << " -> " << y[i]
                    << ", bound " << bound[i];
      return 1.0;
    }
    err2 += e * e;
    ref2 += static_cast<double>(x[i]) * x[i];
  }
  return ref2 == 0 ? std::sqrt(err2) : std::sqrt(err2 / ref2);
}

TEST(Codec, EveryFormatStaysWithinItsBoundOnEveryKindOfData) {
  for (const CodecSpec& spec : everyFormat()) {
    auto made = Codec::make(spec, DataType::Float32);
    ASSERT_TRUE(made.ok()) << made.status().message();
    const Codec& c = *made;
    const size_t b = c.block();
    for (size_t count : {size_t{1}, b - 1, b, b + 1, 3 * b + 7, size_t{100003}}) {
      if (count == 0) continue;
      for (Data d : {Data::Gaussian, Data::Uniform, Data::HeavyTailed, Data::Zero}) {
        const double rel = roundTrip(c, makeData(d, count, static_cast<uint32_t>(count)));
        if (d == Data::Zero) {
          EXPECT_EQ(rel, 0.0) << codecText(spec) << ": zeros come back as zeros";
        }
        if (spec.format == Format::Int8 && d == Data::Gaussian && count > 1000) {
          EXPECT_LT(rel, 0.01);
        }
        if (spec.format == Format::Bf16 && d != Data::Zero) {
          EXPECT_LT(rel, 0.004);
        }
      }
    }
  }
}

TEST(Codec, SeveralMebibytesInPiecesDecodeAloneAndAgreeWithOneWholePiece) {
  const std::vector<float> x = makeData(Data::Gaussian, (size_t{6} << 20) / 4 + 13, 5);
  for (const CodecSpec& spec : everyFormat()) {
    const Codec c = *Codec::make(spec, DataType::Float32);
    const size_t slot = size_t{128} << 10;
    const size_t per = c.pieceElems(slot);
    ASSERT_GT(per, 0u);
    const bool cast = spec.format == Format::Bf16 || spec.format == Format::Fp16;
    const size_t step = cast ? 1 : c.block();
    ASSERT_EQ(per % step, 0u);
    ASSERT_LE(c.pieceBytes(per), slot);
    EXPECT_GT(c.pieceBytes(per + step), slot) << "pieceElems leaves no whole block of room";
    std::vector<float> y(x.size());
    std::vector<unsigned char> wire(c.framedBytes(x.size(), per));
    size_t off = 0;
    for (size_t first = 0; first < x.size(); first += per) {
      const size_t n = std::min(per, x.size() - first);
      EncodeContext ctx;
      ctx.firstElem = first;
      c.encode(x.data() + first, DataType::Float32, n, wire.data() + off, ctx);
      off += c.pieceBytes(n);
    }
    ASSERT_EQ(off, wire.size());
    off = 0;
    for (size_t first = 0; first < x.size(); first += per) {
      const size_t n = std::min(per, x.size() - first);
      c.decode(wire.data() + off, n, y.data() + first, false);
      off += c.pieceBytes(n);
    }
    std::vector<float> bound(x.size());
    c.elementBounds(x.data(), x.size(), bound.data());
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), bound[i]) << codecText(spec) << " element " << i;
    }
  }
}

TEST(Codec, Bf16AndFp16InputsEncodeLikeTheirFp32Values) {
  std::vector<float> x = makeData(Data::Gaussian, 1000, 3);
  std::vector<uint16_t> bf(x.size()), h(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    bf[i] = fp::floatToBf16(x[i]);
    h[i] = fp::floatToHalf(x[i]);
  }
  for (const CodecSpec& spec : everyFormat()) {
    for (DataType t : {DataType::Bfloat16, DataType::Float16}) {
      const Codec c = *Codec::make(spec, t);
      std::vector<float> widened(x.size());
      for (size_t i = 0; i < x.size(); ++i) widened[i] = t == DataType::Bfloat16 ? fp::bf16ToFloat(bf[i]) : fp::halfToFloat(h[i]);
      std::vector<unsigned char> a(c.pieceBytes(x.size())), b(a.size());
      c.encode(t == DataType::Bfloat16 ? static_cast<const void*>(bf.data()) : h.data(), t, x.size(), a.data(), {});
      c.encode(widened.data(), DataType::Float32, x.size(), b.data(), {});
      EXPECT_EQ(a, b) << codecText(spec) << " from " << dataTypeName(t);
      std::vector<uint16_t> back(x.size());
      c.decodeTo(a.data(), x.size(), t, back.data());
      std::vector<float> f32(x.size());
      c.decode(a.data(), x.size(), f32.data(), false);
      for (size_t i = 0; i < x.size(); ++i) {
        const uint16_t want = t == DataType::Bfloat16 ? fp::floatToBf16(f32[i]) : fp::floatToHalf(f32[i]);
        ASSERT_EQ(back[i], want) << "decodeTo rounds the fp32 decode to nearest even";
      }
    }
  }
}

TEST(Codec, NonFiniteInputsBecomeNaNNeverAFiniteValue) {
  std::vector<float> x(64, 1.5f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[9] = std::numeric_limits<float>::infinity();
  x[40] = -std::numeric_limits<float>::infinity();
  for (Format f : {Format::Int8, Format::Int4, Format::Fp8, Format::MxInt8, Format::MxFp8}) {
    CodecSpec spec;
    spec.format = f;
    spec.block = 32;
    const Codec c = *Codec::make(spec, DataType::Float32);
    std::vector<unsigned char> wire(c.pieceBytes(x.size()));
    c.encode(x.data(), DataType::Float32, x.size(), wire.data(), {});
    std::vector<float> y(x.size(), 0.0f);
    c.decode(wire.data(), x.size(), y.data(), true);
    for (size_t i : {3, 9, 40}) EXPECT_TRUE(std::isnan(y[i])) << formatName(f) << " element " << i;
    EXPECT_NEAR(y[0], 1.5f, 0.1f) << formatName(f) << ": finite neighbours keep their values";
    EXPECT_NEAR(y[63], 1.5f, 0.1f) << formatName(f);
  }
  CodecSpec cast;
  cast.format = Format::Bf16;
  const Codec c = *Codec::make(cast, DataType::Float32);
  std::vector<unsigned char> wire(c.pieceBytes(x.size()));
  c.encode(x.data(), DataType::Float32, x.size(), wire.data(), {});
  std::vector<float> y(x.size());
  c.decode(wire.data(), x.size(), y.data(), false);
  EXPECT_TRUE(std::isnan(y[3]));
  EXPECT_EQ(y[9], std::numeric_limits<float>::infinity()) << "casts keep IEEE infinities";
}

// SparseLoCo-style error feedback: over 200 steps of a fixed random stream, the running sum of what was sent tracks
// the exact running sum, because the residual holds exactly what is still owed and stays bounded.
TEST(Codec, TopKWithErrorFeedbackTracksTheExactRunningSum) {
  for (SparseValues values : {SparseValues::Fp32, SparseValues::Int8, SparseValues::Bits2}) {
    CodecSpec spec;
    spec.format = Format::TopK;
    spec.fraction = 0.02f;
    spec.values = values;
    spec.block = 1024;
    const Codec c = *Codec::make(spec, DataType::Float32);
    const size_t n = 8192;
    std::vector<float> residual(n, 0.0f), sent(n, 0.0f);
    std::vector<double> exact(n, 0.0);
    std::vector<unsigned char> wire(c.pieceBytes(n));
    double maxResidual = 0;
    for (int step = 0; step < 200; ++step) {
      const std::vector<float> g = makeData(Data::Gaussian, n, 1000u + static_cast<uint32_t>(step));
      EncodeContext ctx;
      ctx.residual = residual.data();
      c.encode(g.data(), DataType::Float32, n, wire.data(), ctx);
      c.decode(wire.data(), n, sent.data(), true);
      for (size_t i = 0; i < n; ++i) exact[i] += g[i];
      for (size_t i = 0; i < n; ++i) {
        // sent + residual == exact, up to fp32 rounding of the running values.
        ASSERT_NEAR(sent[i] + residual[i], exact[i], 1e-3 * (1 + std::fabs(exact[i]))) << "step " << step;
      }
      for (float e : residual) maxResidual = std::max(maxResidual, static_cast<double>(std::fabs(e)));
    }
    // The stream's running sum grows like sqrt(steps) * 2 (about 28 here); what is owed stays a few draws' worth.
    EXPECT_LT(maxResidual, 40.0) << "the residual stays bounded (values " << static_cast<int>(values) << ")";
  }
}

TEST(Codec, StochasticRoundingIsUnbiasedAndTheSameFromRunToRun) {
  for (Format f : {Format::Int8, Format::Int4, Format::MxInt8, Format::Bf16}) {
    CodecSpec spec;
    spec.format = f;
    spec.rounding = Rounding::Stochastic;
    spec.seed = 42;
    spec.block = f == Format::MxInt8 ? 32 : 64;
    const Codec c = *Codec::make(spec, DataType::Float32);
    const std::vector<float> x = makeData(Data::Uniform, 4096, 9);
    std::vector<unsigned char> a(c.pieceBytes(x.size())), b(a.size());
    EncodeContext ctx;
    ctx.seed = 17;
    c.encode(x.data(), DataType::Float32, x.size(), a.data(), ctx);
    c.encode(x.data(), DataType::Float32, x.size(), b.data(), ctx);
    EXPECT_EQ(a, b) << formatName(f) << ": same seed and op, same bytes";
    ctx.seed = 18;
    c.encode(x.data(), DataType::Float32, x.size(), b.data(), ctx);
    EXPECT_NE(a, b) << formatName(f) << ": the op's seed draws fresh bits";
    // Unbiased: the mean error over many draws of one value is near zero, where nearest rounding has a fixed bias.
    std::vector<float> same(64, 0.3f), dec(64);
    same[0] = 1.0f;  // sets the block's scale: 0.3 lies between two levels
    double mean = 0;
    for (uint64_t s = 0; s < 400; ++s) {
      ctx.seed = s;
      c.encode(same.data(), DataType::Float32, same.size(), b.data(), ctx);
      c.decode(b.data(), same.size(), dec.data(), false);
      for (size_t i = 1; i < same.size(); ++i) mean += dec[i] - 0.3;
    }
    mean /= 400.0 * 63;
    EXPECT_LT(std::fabs(mean), 0.003) << formatName(f);
  }
}

TEST(Codec, NamesParseAndPrintBack) {
  for (const char* text : {"int8", "bf16", "fp16", "mxint8", "mxfp8", "int4", "fp8", "topk:0.01:values=int8",
                           "topk:0.5:values=2bit:block=1024", "int8:block=512:sr:seed=7"}) {
    auto spec = parseCodec(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status().message();
    auto again = parseCodec(codecText(*spec));
    ASSERT_TRUE(again.ok()) << codecText(*spec);
    EXPECT_EQ(codecText(*again), codecText(*spec));
  }
  EXPECT_EQ(parseCodec("topk:0.01")->values, SparseValues::Int8) << "top-k values are int8 by default";
  for (const char* text : {"int9", "topk", "topk:0", "topk:1.5", "topk:x", "int8:block=abc", "int8:frob", "topk:0.1:values=int3"}) {
    EXPECT_EQ(parseCodec(text).status().code(), Errc::InvalidArgument) << text;
  }
}

TEST(Codec, BadSpecsAreRefusedByName) {
  auto refuse = [](CodecSpec s, DataType t, const char* word) {
    auto made = Codec::make(s, t);
    ASSERT_FALSE(made.ok());
    EXPECT_EQ(made.status().code(), Errc::InvalidArgument);
    EXPECT_NE(made.status().message().find(word), std::string::npos) << made.status().message();
  };
  CodecSpec s;
  refuse(s, DataType::Float32, "not a codec");
  s.format = static_cast<Format>(99);
  refuse(s, DataType::Float32, "not a codec");
  s.format = Format::Int8;
  refuse(s, DataType::Int32, "int32");
  refuse(s, DataType::Float64, "double");
  s.block = (1u << 20) + 1;
  refuse(s, DataType::Float32, "2^20");
  s.format = Format::Int4;
  s.block = 33;
  refuse(s, DataType::Float32, "even");
  s.format = Format::MxFp8;
  s.block = 64;
  refuse(s, DataType::Float32, "32");
  s = CodecSpec{};
  s.format = Format::TopK;
  refuse(s, DataType::Float32, "fraction");
  s.format = Format::Fp16;
  s.rounding = Rounding::Stochastic;
  refuse(s, DataType::Float32, "stochastic");
  // A block too large for a slot: pieceElems says 0, which the collectives refuse.
  s = CodecSpec{};
  s.format = Format::Int8;
  s.block = 1u << 20;
  EXPECT_EQ(Codec::make(s, DataType::Float32)->pieceElems(128 << 10), 0u);
}

TEST(Codec, TheSignatureTellsSpecsApart) {
  CodecSpec a;
  a.format = Format::Int8;
  CodecSpec b = a;
  b.block = 512;
  EXPECT_NE(Codec::make(a, DataType::Float32)->signature(), Codec::make(b, DataType::Float32)->signature());
  EXPECT_NE(Codec::make(a, DataType::Float32)->signature(), Codec::make(a, DataType::Bfloat16)->signature());
  EXPECT_EQ(Codec::make(a, DataType::Float32)->signature(), Codec::make(a, DataType::Float32)->signature());
}

}  // namespace
}  // namespace cfx::compress
