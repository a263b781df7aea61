// SPDX-License-Identifier: Apache-2.0
// Unit tests for the reduction kernels: every type x operator x call shape against an independent scalar reference
// (exact double arithmetic, brute-force nearest-even rounding), odd counts, unaligned pointers, in-place use, both
// instruction-set variants, and the NCCL corner cases (wrapping, truncating average, NaN and zero ordering, FP8
// saturation).
#include "primitives/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/float_types.h"
#include "common/types.h"

namespace cfx::prims {
namespace {

using Combine = ReduceOp::Combine;

constexpr DataType kAllTypes[] = {DataType::Int8,    DataType::Uint8,    DataType::Int32,   DataType::Uint32,
                                  DataType::Int64,   DataType::Uint64,   DataType::Float16, DataType::Float32,
                                  DataType::Float64, DataType::Bfloat16, DataType::Fp8E4M3, DataType::Fp8E5M2};
constexpr size_t kCounts[] = {0, 1, 7, 63, 64, 65, 1000, 4099};

bool isSigned(DataType t) { return t == DataType::Int8 || t == DataType::Int32 || t == DataType::Int64; }

// ---- reference rounding: nearest value of a format, ties to the even code ----

struct Grid {
  std::vector<std::pair<double, uint32_t>> values;  // non-negative finite values, ascending
  uint32_t signBit = 0;
  double overflowAt = 0;  // |x| >= this rounds to overflowCode (infinity); 0 for a saturating format
  uint32_t overflowCode = 0;

  uint32_t round(double x) const {
    const uint32_t sign = std::signbit(x) ? signBit : 0;
    const double a = std::fabs(x);
    if (overflowAt > 0 && a >= overflowAt) return sign | overflowCode;
    auto hi = std::lower_bound(values.begin(), values.end(), a, [](const auto& l, double r) { return l.first < r; });
    if (hi == values.end()) return sign | values.back().second;  // saturate
    if (hi->first == a || hi == values.begin()) return sign | hi->second;
    auto lo = hi - 1;
    const double dLo = a - lo->first;
    const double dHi = hi->first - a;
    if (dLo != dHi) return sign | (dLo < dHi ? lo->second : hi->second);
    return sign | ((lo->second & 1) == 0 ? lo->second : hi->second);
  }
};

template <class Decode>
Grid makeGrid(uint32_t signBit, Decode decode, double overflowAt, uint32_t overflowCode) {
  Grid g;
  g.signBit = signBit;
  g.overflowAt = overflowAt;
  g.overflowCode = overflowCode;
  for (uint32_t c = 0; c < signBit; ++c) {
    const double v = decode(c);
    if (std::isfinite(v)) g.values.emplace_back(v, c);
  }
  return g;
}

const Grid& halfGrid() {
  static const Grid g = makeGrid(
      0x8000, [](uint32_t c) { return double(fp::halfToFloat(uint16_t(c))); }, 65520.0, 0x7C00);
  return g;
}
const Grid& bf16Grid() {
  static const Grid g = makeGrid(
      0x8000, [](uint32_t c) { return double(fp::bf16ToFloat(uint16_t(c))); }, (2.0 - 0x1p-8) * 0x1p127, 0x7F80);
  return g;
}
const Grid& e4m3Grid() {
  static const Grid g = makeGrid(
      0x80, [](uint32_t c) { return double(fp::e4m3ToFloat(uint8_t(c))); }, 0, 0);
  return g;
}
const Grid& e5m2Grid() {
  static const Grid g = makeGrid(
      0x80, [](uint32_t c) { return double(fp::e5m2ToFloat(uint8_t(c))); }, 0, 0);
  return g;
}

// ---- reference semantics on element bits ----

double widen(DataType t, uint64_t bits) {
  switch (t) {
    case DataType::Float16:
      return fp::halfToFloat(uint16_t(bits));
    case DataType::Bfloat16:
      return fp::bf16ToFloat(uint16_t(bits));
    case DataType::Fp8E4M3:
      return fp::e4m3ToFloat(uint8_t(bits));
    case DataType::Fp8E5M2:
      return fp::e5m2ToFloat(uint8_t(bits));
    case DataType::Float32:
      return std::bit_cast<float>(uint32_t(bits));
    case DataType::Float64:
      return std::bit_cast<double>(bits);
    default:
      return 0;
  }
}

// Rounds an exact (or innocuously double-rounded) result to the type, with NCCL's NaN/overflow rules. FP8 goes
// through half first, as NCCL's half-precision FP8 arithmetic does.
uint64_t roundTo(DataType t, double x) {
  switch (t) {
    case DataType::Float16:
      return std::isnan(x) ? 0x7FFF : halfGrid().round(x);
    case DataType::Bfloat16:
      return std::isnan(x) ? 0x7FFF : bf16Grid().round(x);
    case DataType::Fp8E4M3:
      return std::isnan(x) ? 0x7F : e4m3Grid().round(fp::halfToFloat(uint16_t(halfGrid().round(x))));
    case DataType::Fp8E5M2:
      return std::isnan(x) ? 0x7F : e5m2Grid().round(fp::halfToFloat(uint16_t(halfGrid().round(x))));
    case DataType::Float32:
      return std::bit_cast<uint32_t>(float(x));
    case DataType::Float64:
      return std::bit_cast<uint64_t>(x);
    default:
      return 0;
  }
}

uint64_t mask(DataType t) {
  const size_t bits = dataTypeSize(t) * 8;
  return bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
}

int64_t signExtend(DataType t, uint64_t v) {
  const unsigned shift = unsigned(64 - dataTypeSize(t) * 8);
  return int64_t(v << shift) >> shift;
}

uint64_t refCombine(const ReduceOp& op, uint64_t a, uint64_t b) {
  const DataType t = op.type;
  if (!isFloating(t)) {
    const bool lessAB = isSigned(t) ? signExtend(t, a) < signExtend(t, b) : a < b;
    switch (op.combine) {
      case Combine::Sum:
        return (a + b) & mask(t);
      case Combine::Prod:
        return (a * b) & mask(t);
      case Combine::Max:
        return lessAB ? b : a;
      case Combine::Min:
        return lessAB ? a : b;
      case Combine::Affine:
      case Combine::User:
        break;  // ordered combines have their own test (ordered_combine_test.cc)
    }
  }
  const double x = widen(t, a);
  const double y = widen(t, b);
  double r = 0;
  switch (op.combine) {
    case Combine::Sum:
      r = x + y;
      break;
    case Combine::Prod:
      r = x * y;
      break;
    case Combine::Affine:
    case Combine::User:
      break;
    case Combine::Max:
    case Combine::Min: {
      const bool isMax = op.combine == Combine::Max;
      if (std::isnan(x)) {
        r = y;
      } else if (std::isnan(y)) {
        r = x;
      } else if (x == y) {
        // +0 is above -0: max takes the positive one, min the negative one.
        r = (std::signbit(x) == isMax) ? y : x;
      } else {
        r = isMax ? std::max(x, y) : std::min(x, y);
      }
      break;
    }
  }
  return roundTo(t, r);
}

uint64_t refPre(const ReduceOp& op, uint64_t x) {
  if (!op.preMultiply) return x;
  uint64_t s = 0;
  std::memcpy(&s, op.scalar, dataTypeSize(op.type));
  if (!isFloating(op.type)) return (x * s) & mask(op.type);
  return roundTo(op.type, widen(op.type, x) * widen(op.type, s));
}

uint64_t refPost(const ReduceOp& op, uint64_t x, bool applyPost) {
  if (!applyPost || !op.postDivide) return x;
  if (isSigned(op.type)) return uint64_t(signExtend(op.type, x) / int64_t(op.divisor)) & mask(op.type);
  return x / op.divisor;
}

bool sameResult(DataType t, uint64_t got, uint64_t want) {
  // float/double NaN payloads follow host arithmetic; any NaN is the right answer for a NaN result.
  if (t == DataType::Float32 || t == DataType::Float64) {
    if (std::isnan(widen(t, got)) && std::isnan(widen(t, want))) return true;
  }
  return got == want;
}

// ---- inputs ----

uint64_t randomElement(DataType t, std::mt19937_64& rng) {
  const uint64_t bits = rng();
  const unsigned pick = unsigned(rng() % 16);
  if (!isFloating(t)) {
    if (pick == 0) return 0;
    if (pick == 1) return mask(t);                                    // -1 / max
    if (pick == 2) return (mask(t) >> 1) + 1;                         // INT_MIN / 2^(w-1)
    if (pick < 8) return uint64_t(int64_t(bits % 19) - 9) & mask(t);  // small values, products stay interesting
    return bits & mask(t);
  }
  if (pick < 6) return roundTo(t, double(int64_t(bits % 33) - 16) * 0.125);  // small exact values, ties in sums
  if (pick < 10) return roundTo(t, std::ldexp(double(bits % 100000) / 100000.0 - 0.5, int(rng() % 24) - 12));
  if (pick < 13) return bits & mask(t);  // any pattern: NaN, infinity, subnormals
  static constexpr double kSpecials[] = {0.0, -0.0, 1e300, -1e300, 1e-300, 65504.0, 448.0, 57344.0};
  return roundTo(t, kSpecials[rng() % std::size(kSpecials)]);
}

std::vector<ReduceOp> opsFor(DataType t, std::mt19937_64& rng) {
  std::vector<ReduceOp> ops;
  for (RedOpKind kind : {RedOpKind::Sum, RedOpKind::Prod, RedOpKind::Max, RedOpKind::Min}) {
    ops.push_back(ReduceOp::builtin(t, kind, 4));
  }
  ops.push_back(ReduceOp::builtin(t, RedOpKind::Avg, 3));
  ops.push_back(ReduceOp::builtin(t, RedOpKind::Avg, 8));
  uint64_t scalar = isFloating(t) ? roundTo(t, 0.7) : 3;
  ops.push_back(ReduceOp::preMulSum(t, &scalar));
  scalar = randomElement(t, rng);
  ops.push_back(ReduceOp::preMulSum(t, &scalar));
  return ops;
}

std::string describe(const ReduceOp& op) {
  static const char* const kCombine[] = {"sum", "prod", "max", "min"};
  return std::string(dataTypeName(op.type)) + " " + kCombine[int(op.combine)] + (op.preMultiply ? " pre" : "") +
         (op.postDivide ? " post/" + std::to_string(op.divisor) : "");
}

// ---- one checked call ----

enum class Shape { ReduceLocal, PrepareLocal, CombinePartials };
enum class Alias { None, OutIsFirst, OutIsSecond };

// A byte buffer with guard bytes on both sides, holding `count` elements starting `misalign` bytes into it.
struct Buffer {
  static constexpr size_t kGuard = 24;
  static constexpr unsigned char kGuardByte = 0xA5;
  std::vector<unsigned char> bytes;
  size_t offset;
  size_t size;

  Buffer(size_t count, size_t elementSize, size_t misalign)
      : bytes(count * elementSize + 2 * kGuard + misalign, kGuardByte), offset(kGuard + misalign), size(elementSize) {}
  unsigned char* data() { return bytes.data() + offset; }
  uint64_t get(size_t i) const {
    uint64_t v = 0;
    std::memcpy(&v, bytes.data() + offset + i * size, size);
    return v;
  }
  void set(size_t i, uint64_t v) { std::memcpy(bytes.data() + offset + i * size, &v, size); }
  bool guardsIntact(size_t count) const {
    for (size_t i = 0; i < bytes.size(); ++i) {
      if ((i < offset || i >= offset + count * size) && bytes[i] != kGuardByte) return false;
    }
    return true;
  }
};

void checkCall(const ReduceOp& op, Shape shape, Alias alias, size_t count, size_t misalign, bool applyPost,
               std::mt19937_64& rng) {
  const size_t size = dataTypeSize(op.type);
  Buffer first(count, size, misalign);
  Buffer second(count, size, misalign + 1);
  Buffer separate(count, size, misalign + 2);
  for (size_t i = 0; i < count; ++i) {
    first.set(i, randomElement(op.type, rng));
    second.set(i, randomElement(op.type, rng));
  }
  std::vector<uint64_t> expected(count);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t a = first.get(i);
    const uint64_t b = second.get(i);
    uint64_t r = 0;
    switch (shape) {
      case Shape::ReduceLocal:
        r = refCombine(op, a, refPre(op, b));
        break;
      case Shape::PrepareLocal:
        r = refPre(op, a);
        break;
      case Shape::CombinePartials:
        r = refCombine(op, a, b);
        break;
    }
    expected[i] = refPost(op, r, applyPost);
  }
  Buffer* out = alias == Alias::OutIsFirst ? &first : alias == Alias::OutIsSecond ? &second : &separate;
  switch (shape) {
    case Shape::ReduceLocal:
      reduceLocal(op, out->data(), first.data(), second.data(), count, applyPost);
      break;
    case Shape::PrepareLocal:
      prepareLocal(op, out->data(), first.data(), count, applyPost);
      break;
    case Shape::CombinePartials:
      combinePartials(op, out->data(), first.data(), second.data(), count, applyPost);
      break;
  }
  const std::string where = describe(op) + " shape " + std::to_string(int(shape)) + " alias " +
                            std::to_string(int(alias)) + " count " + std::to_string(count) + " misalign " +
                            std::to_string(misalign) + (applyPost ? " applyPost" : "");
  ASSERT_TRUE(out->guardsIntact(count)) << where;
  for (size_t i = 0; i < count; ++i) {
    ASSERT_TRUE(sameResult(op.type, out->get(i), expected[i]))
        << where << " element " << i << std::hex << ": got 0x" << out->get(i) << " want 0x" << expected[i]
        << " inputs 0x" << first.get(i) << " 0x" << second.get(i);
  }
}

// ---- tests ----

class ReduceKernels : public ::testing::TestWithParam<ReduceIsa> {
 protected:
  void SetUp() override {
    if (!reduceIsaSupported(GetParam())) GTEST_SKIP() << "this CPU cannot run this instruction-set variant";
    saved_ = activeReduceIsa();
    setReduceIsa(GetParam());
  }
  void TearDown() override { setReduceIsa(saved_); }

 private:
  ReduceIsa saved_ = ReduceIsa::Portable;
};

TEST_P(ReduceKernels, EveryTypeAndOperatorMatchesTheReference) {
  std::mt19937_64 rng(2024);
  for (DataType type : kAllTypes) {
    for (const ReduceOp& op : opsFor(type, rng)) {
      for (size_t count : kCounts) {
        const size_t misalign = count % 3;  // 0, 1 or 2 bytes off: unaligned for every multi-byte type
        for (bool applyPost : {true, false}) {
          checkCall(op, Shape::ReduceLocal, Alias::None, count, misalign, applyPost, rng);
          checkCall(op, Shape::PrepareLocal, Alias::None, count, misalign, applyPost, rng);
          checkCall(op, Shape::CombinePartials, Alias::None, count, misalign, applyPost, rng);
          if (HasFatalFailure() || !op.postDivide) break;  // applyPost only changes integer average
        }
      }
    }
  }
}

TEST_P(ReduceKernels, InPlaceCallsMatchTheReference) {
  std::mt19937_64 rng(7);
  for (DataType type : kAllTypes) {
    for (const ReduceOp& op : opsFor(type, rng)) {
      for (size_t count : {size_t(1), size_t(65), size_t(4099)}) {
        checkCall(op, Shape::ReduceLocal, Alias::OutIsFirst, count, 1, true, rng);
        checkCall(op, Shape::ReduceLocal, Alias::OutIsSecond, count, 0, true, rng);
        checkCall(op, Shape::PrepareLocal, Alias::OutIsFirst, count, 3, true, rng);
        checkCall(op, Shape::CombinePartials, Alias::OutIsFirst, count, 0, false, rng);
        checkCall(op, Shape::CombinePartials, Alias::OutIsSecond, count, 5, false, rng);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_P(ReduceKernels, ZeroCountTouchesNothing) {
  for (DataType type : kAllTypes) {
    const ReduceOp op = ReduceOp::builtin(type, RedOpKind::Avg, 3);
    reduceLocal(op, nullptr, nullptr, nullptr, 0, true);
    prepareLocal(op, nullptr, nullptr, 0, true);
    combinePartials(op, nullptr, nullptr, nullptr, 0, true);
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, ReduceKernels, ::testing::Values(ReduceIsa::Portable, ReduceIsa::Avx2),
                         [](const ::testing::TestParamInfo<ReduceIsa>& isa) {
                           return isa.param == ReduceIsa::Portable ? "Portable" : "Avx2";
                         });

TEST(ReduceIsaVariants, GiveIdenticalBitsOnLargeBuffers) {
  if (!reduceIsaSupported(ReduceIsa::Avx2)) GTEST_SKIP() << "no AVX2 + F16C on this CPU";
  const ReduceIsa saved = activeReduceIsa();
  std::mt19937_64 rng(99);
  constexpr size_t kCount = 100003;
  for (DataType type : kAllTypes) {
    const size_t size = dataTypeSize(type);
    std::vector<unsigned char> a(kCount * size + 1), b(kCount * size + 1), outPortable(kCount * size),
        outAvx2(kCount * size);
    for (size_t i = 0; i < kCount; ++i) {
      const uint64_t x = randomElement(type, rng), y = randomElement(type, rng);
      std::memcpy(&a[1 + i * size], &x, size);
      std::memcpy(&b[1 + i * size], &y, size);
    }
    for (const ReduceOp& op : opsFor(type, rng)) {
      setReduceIsa(ReduceIsa::Portable);
      reduceLocal(op, outPortable.data(), &a[1], &b[1], kCount, true);
      setReduceIsa(ReduceIsa::Avx2);
      reduceLocal(op, outAvx2.data(), &a[1], &b[1], kCount, true);
      for (size_t i = 0; i < kCount; ++i) {
        uint64_t p = 0, v = 0;
        std::memcpy(&p, &outPortable[i * size], size);
        std::memcpy(&v, &outAvx2[i * size], size);
        ASSERT_TRUE(sameResult(type, v, p)) << describe(op) << " element " << i;
      }
    }
  }
  setReduceIsa(saved);
}

// ---- NCCL corner cases, spelled out ----

template <class T>
T combineOne(const ReduceOp& op, T a, T b) {
  T out;
  combinePartials(op, &out, &a, &b, 1, true);
  return out;
}

TEST(ReduceSemantics, IntegerSumAndProductWrap) {
  EXPECT_EQ(combineOne<int32_t>(ReduceOp::builtin(DataType::Int32, RedOpKind::Sum, 2), INT32_MAX, 1), INT32_MIN);
  EXPECT_EQ(combineOne<uint8_t>(ReduceOp::builtin(DataType::Uint8, RedOpKind::Prod, 2), 200, 2), 144);
  EXPECT_EQ(combineOne<int8_t>(ReduceOp::builtin(DataType::Int8, RedOpKind::Prod, 2), -128, -1), -128);
  EXPECT_EQ(combineOne<int64_t>(ReduceOp::builtin(DataType::Int64, RedOpKind::Sum, 2), INT64_MIN, -1), INT64_MAX);
  EXPECT_EQ(combineOne<int8_t>(ReduceOp::builtin(DataType::Int8, RedOpKind::Min, 2), -1, 1), -1);
  EXPECT_EQ(combineOne<uint8_t>(ReduceOp::builtin(DataType::Uint8, RedOpKind::Max, 2), 0xFF, 1), 0xFF);
}

TEST(ReduceSemantics, IntegerAverageSumsThenTruncatesTowardZero) {
  const ReduceOp avg = ReduceOp::builtin(DataType::Int32, RedOpKind::Avg, 3);
  EXPECT_EQ(combineOne<int32_t>(avg, -4, -3), -2);  // -7 / 3
  EXPECT_EQ(combineOne<int32_t>(avg, 4, 3), 2);
  EXPECT_EQ(combineOne<int32_t>(avg, INT32_MIN, 0), INT32_MIN / 3);
  EXPECT_EQ(combineOne<int32_t>(avg, INT32_MAX, 1), INT32_MIN / 3);  // the sum wraps first, as NCCL's does
  const ReduceOp avg8 = ReduceOp::builtin(DataType::Int8, RedOpKind::Avg, 3);
  EXPECT_EQ(combineOne<int8_t>(avg8, -128, 0), -42);
  const ReduceOp avgU64 = ReduceOp::builtin(DataType::Uint64, RedOpKind::Avg, 3);
  EXPECT_EQ(combineOne<uint64_t>(avgU64, UINT64_MAX, 0), UINT64_MAX / 3);
  const ReduceOp avgI64 = ReduceOp::builtin(DataType::Int64, RedOpKind::Avg, 7);
  EXPECT_EQ(combineOne<int64_t>(avgI64, INT64_MIN, 0), INT64_MIN / 7);
  // Without applyPost the partial stays a plain sum.
  int32_t a = -4, b = -3, out = 0;
  combinePartials(avg, &out, &a, &b, 1, false);
  EXPECT_EQ(out, -7);
}

TEST(ReduceSemantics, FloatMaxMinIgnoreNanAndOrderSignedZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const ReduceOp max = ReduceOp::builtin(DataType::Float32, RedOpKind::Max, 2);
  const ReduceOp min = ReduceOp::builtin(DataType::Float32, RedOpKind::Min, 2);
  EXPECT_EQ(combineOne<float>(max, nan, 1.0f), 1.0f);
  EXPECT_EQ(combineOne<float>(max, 1.0f, nan), 1.0f);
  EXPECT_TRUE(std::isnan(combineOne<float>(max, nan, nan)));
  EXPECT_FALSE(std::signbit(combineOne<float>(max, -0.0f, 0.0f)));
  EXPECT_FALSE(std::signbit(combineOne<float>(max, 0.0f, -0.0f)));
  EXPECT_TRUE(std::signbit(combineOne<float>(min, -0.0f, 0.0f)));
  EXPECT_TRUE(std::signbit(combineOne<float>(min, 0.0f, -0.0f)));
  const ReduceOp maxD = ReduceOp::builtin(DataType::Float64, RedOpKind::Max, 2);
  EXPECT_EQ(combineOne<double>(maxD, std::numeric_limits<double>::quiet_NaN(), -2.0), -2.0);
}

TEST(ReduceSemantics, HalfArithmeticRoundsOnceAndCanonicalisesNan) {
  const ReduceOp sum = ReduceOp::builtin(DataType::Float16, RedOpKind::Sum, 2);
  const ReduceOp max = ReduceOp::builtin(DataType::Float16, RedOpKind::Max, 2);
  EXPECT_EQ(combineOne<uint16_t>(sum, 0x7C00, 0xFC00), 0x7FFF);  // inf - inf -> canonical NaN
  EXPECT_EQ(combineOne<uint16_t>(sum, 0x7BFF, 0x4C00), 0x7C00);  // 65504 + 16 = 65520: tie -> infinity
  EXPECT_EQ(combineOne<uint16_t>(sum, 0x3C00, 0x1000), 0x3C00);  // 1 + 2^-11: tie -> even (1)
  EXPECT_EQ(combineOne<uint16_t>(max, 0x7E00, 0x3C00), 0x3C00);  // NaN ignored
  EXPECT_EQ(combineOne<uint16_t>(max, 0x7E01, 0xFE02), 0x7FFF);  // both NaN -> canonical
  EXPECT_EQ(combineOne<uint16_t>(max, 0x8000, 0x0000), 0x0000);
  const ReduceOp bmax = ReduceOp::builtin(DataType::Bfloat16, RedOpKind::Min, 2);
  EXPECT_EQ(combineOne<uint16_t>(bmax, 0x0000, 0x8000), 0x8000);
}

TEST(ReduceSemantics, Fp8ResultsSaturateLikeSatfinite) {
  const ReduceOp e4sum = ReduceOp::builtin(DataType::Fp8E4M3, RedOpKind::Sum, 2);
  EXPECT_EQ(combineOne<uint8_t>(e4sum, 0x7E, 0x7E), 0x7E);  // 448 + 448 -> 448
  EXPECT_EQ(combineOne<uint8_t>(e4sum, 0xFE, 0xFE), 0xFE);
  EXPECT_EQ(combineOne<uint8_t>(e4sum, 0x7F, 0x38), 0x7F);  // NaN + 1 -> NaN
  EXPECT_EQ(combineOne<uint8_t>(e4sum, 0xFF, 0x38), 0x7F);  // any NaN -> 0x7F
  const ReduceOp e5sum = ReduceOp::builtin(DataType::Fp8E5M2, RedOpKind::Sum, 2);
  EXPECT_EQ(combineOne<uint8_t>(e5sum, 0x7C, 0x3C), 0x7B);  // inf + 1 -> 57344 (infinity saturates)
  EXPECT_EQ(combineOne<uint8_t>(e5sum, 0x7C, 0xFC), 0x7F);  // inf - inf -> NaN
  const ReduceOp e5max = ReduceOp::builtin(DataType::Fp8E5M2, RedOpKind::Max, 2);
  EXPECT_EQ(combineOne<uint8_t>(e5max, 0x7C, 0x3C), 0x7B);  // even max goes back through SATFINITE
  const ReduceOp e4max = ReduceOp::builtin(DataType::Fp8E4M3, RedOpKind::Max, 2);
  EXPECT_EQ(combineOne<uint8_t>(e4max, 0x80, 0x00), 0x00);
  EXPECT_EQ(combineOne<uint8_t>(e4max, 0x7F, 0xB8), 0xB8);  // NaN ignored: -1
}

// NCCL rounds an FP8 result to half first, then to FP8; the kernels round once. That is only allowed because, for
// every sum and product of two FP8 values, the two routes agree. Checked here over all pairs.
TEST(ReduceSemantics, Fp8RoundingThroughHalfNeverChangesPairwiseResults) {
  for (uint32_t a = 0; a < 256; ++a) {
    for (uint32_t b = 0; b < 256; ++b) {
      const float x4 = fp::e4m3ToFloat(uint8_t(a)), y4 = fp::e4m3ToFloat(uint8_t(b));
      const float x5 = fp::e5m2ToFloat(uint8_t(a)), y5 = fp::e5m2ToFloat(uint8_t(b));
      for (float r : {x4 + y4, x4 * y4}) {
        ASSERT_EQ(fp::floatToE4M3(r), fp::halfToE4M3(fp::floatToHalf(r))) << std::hex << a << " " << b;
      }
      for (float r : {x5 + y5, x5 * y5}) {
        ASSERT_EQ(fp::floatToE5M2(r), fp::halfToE5M2(fp::floatToHalf(r))) << std::hex << a << " " << b;
      }
    }
  }
}

TEST(ReduceSemantics, FloatAveragePreMultipliesEachLocalInputOnce) {
  // Three ranks of a chain: prepare, fold, fold-and-finish; each input is scaled by 1/3 exactly once.
  const ReduceOp avg = ReduceOp::builtin(DataType::Float32, RedOpKind::Avg, 3);
  const float inputs[3] = {3.0f, 6.0f, 9.0f};
  const float third = 1.0f / 3.0f;
  float partial;
  prepareLocal(avg, &partial, &inputs[0], 1, false);
  EXPECT_EQ(partial, 3.0f * third);
  reduceLocal(avg, &partial, &partial, &inputs[1], 1, false);
  reduceLocal(avg, &partial, &partial, &inputs[2], 1, true);
  EXPECT_EQ(partial, (3.0f * third + 6.0f * third) + 9.0f * third);
  // Combining two partials never scales again.
  float other = 1.5f;
  combinePartials(avg, &other, &other, &partial, 1, true);
  EXPECT_EQ(other, 1.5f + partial);
}

TEST(ReduceSemantics, PrepareWithNothingToApplyCopies) {
  const ReduceOp sum = ReduceOp::builtin(DataType::Float64, RedOpKind::Sum, 4);
  const double in[5] = {1, -2, 3.5, std::numeric_limits<double>::quiet_NaN(), -0.0};
  double out[5] = {};
  prepareLocal(sum, out, in, 5, true);
  EXPECT_EQ(std::memcmp(in, out, sizeof(in)), 0);
  prepareLocal(sum, out, out, 5, true);  // in place: no change
  EXPECT_EQ(std::memcmp(in, out, sizeof(in)), 0);
}

}  // namespace
}  // namespace cfx::prims
