// SPDX-License-Identifier: Apache-2.0
// The wider verb contract (primitives/prims.h) over ranks as threads: codec messages sliced into pieces, decoded on
// arrival, forwarded verbatim, accumulated and re-encoded; codec and count mismatches named on the first slice;
// ordered (Affine, User) combines across slices with the slot as the lower operand; rows gathered into slices and
// scattered out of them, over FIFO slices and direct messages alike.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "collectives/collective.h"
#include "common/float_types.h"
#include "compress/codec.h"
#include "loopback.h"
#include "primitives/ordered_combine.h"

namespace cfx::testing {
namespace {

using prims::Encoded;
using prims::Prims;
using prims::Region;
using prims::Coro;

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

compress::Codec codecOf(const char* text, DataType type = DataType::Float32) {
  return *compress::Codec::make(*compress::parseCodec(text), type);
}

// What one encode/decode of `x` gives, piece by piece as the verbs cut it.
std::vector<float> roundTrip(const compress::Codec& c, const std::vector<float>& x, size_t slice) {
  const size_t per = c.pieceElems(slice);
  std::vector<float> y(x.size());
  std::vector<unsigned char> w(c.pieceBytes(per));
  for (size_t first = 0; first < x.size(); first += per) {
    const size_t n = std::min(per, x.size() - first);
    compress::EncodeContext ctx;
    ctx.firstElem = first;
    c.encode(x.data() + first, DataType::Float32, n, w.data(), ctx);
    c.decode(w.data(), n, y.data() + first, false);
  }
  return y;
}

// A chain 0 -> 1 -> 2: rank 0 encodes, rank 1 forwards verbatim and decodes, rank 2 decodes and keeps the framed
// bytes. Every rank that decodes holds the same bits, which are one round trip of the input.
TEST(VerbsContract, EncodedChainDecodesEverySliceOnArrivalAndForwardsItVerbatim) {
  for (const char* name : {"int8:block=32", "mxfp8", "bf16", "int4:block=64", "topk:0.1:values=2bit:block=512"}) {
    const compress::Codec c = codecOf(name);
    LoopbackWorld world(3, {256, 2});
    const std::vector<float> x = gaussian(5000, 7);
    std::vector<std::vector<float>> out(3, std::vector<float>(x.size(), -1.0f));
    std::vector<char> framed(c.framedBytes(x.size(), c.pieceElems(256)));
    std::vector<Encoded> enc(3);
    for (auto& e : enc) e.codec = &c;
    enc[2].framed = framed.data();
    const auto st = world.runRanks([&](int r, Prims& p) -> Coro {
      switch (r) {
        case 0: return coll::verbStrand(p.sendEncoded(1, x.data(), x.size(), enc[0]));
        case 1: return coll::verbStrand(p.recvForward(0, 2, out[1].data(), x.size(), enc[1]));
        default: return coll::verbStrand(p.recvDecoded(1, out[2].data(), x.size(), enc[2]));
      }
    });
    for (const Status& s : st) ASSERT_TRUE(s.ok()) << name << ": " << s.message();
    const std::vector<float> want = roundTrip(c, x, 256);
    EXPECT_EQ(0, std::memcmp(out[1].data(), want.data(), want.size() * 4)) << name;
    EXPECT_EQ(0, std::memcmp(out[2].data(), want.data(), want.size() * 4)) << name;
    // The kept framed bytes decode, piece by piece, to the same values.
    std::vector<float> again(x.size());
    const size_t per = c.pieceElems(256);
    for (size_t first = 0, off = 0; first < x.size(); first += per) {
      const size_t n = std::min(per, x.size() - first);
      c.decode(framed.data() + off, n, again.data() + first, false);
      off += c.pieceBytes(n);
    }
    EXPECT_EQ(again, want) << name;
  }
}

// Two senders into one fp32 accumulator, in a fixed order; then one hop of a requantising ring, whose sender and
// receiver both hold the decoded bits of the one code that travels on.
TEST(VerbsContract, AccumulateAndRequantizeHops) {
  const compress::Codec c = codecOf("int8:block=100");
  LoopbackWorld world(3, {512, 2});
  const size_t n = 3000;
  const std::vector<float> a = gaussian(n, 1), b = gaussian(n, 2), mine = gaussian(n, 3);
  std::vector<float> acc(mine), fwd(n), last(n);
  std::vector<Encoded> enc(3);
  for (auto& e : enc) e.codec = &c;
  enc[1].divide = 3.0f;
  auto st = world.runRanks([&](int r, Prims& p) -> Coro {
    if (r == 0) return coll::verbStrand(p.sendEncoded(2, a.data(), n, enc[0]));
    if (r == 1) return coll::verbStrand(p.sendEncoded(2, b.data(), n, enc[1]));
    return [](Prims& pr, float* accp, size_t cnt, const Encoded& e) -> Coro {
      CFX_CO_TRY(co_await pr.recvAccumulate(0, accp, cnt, e));
      CFX_CO_TRY(co_await pr.recvAccumulate(1, accp, cnt, e));
      co_return Status();
    }(p, acc.data(), n, enc[2]);
  });
  for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.message();
  const std::vector<float> ra = roundTrip(c, a, 512), rb = roundTrip(c, b, 512);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(acc[i], (mine[i] + ra[i]) + rb[i]) << i;

  // 0 encodes a, 1 adds its own values, divides by 3 and re-encodes for 2, keeping what it sent.
  st = world.runRanks([&](int r, Prims& p) -> Coro {
    if (r == 0) return coll::verbStrand(p.sendEncoded(1, a.data(), n, enc[0]));
    if (r == 1) return coll::verbStrand(p.recvRequantizeCopySend(0, 2, b.data(), fwd.data(), n, enc[1]));
    return coll::verbStrand(p.recvDecoded(1, last.data(), n, enc[2]));
  });
  for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(fwd, last) << "the rank that re-encodes keeps the bits its receiver decodes";
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(last[i], (ra[i] + b[i]) / 3.0f, 0.05f) << i;
}

TEST(VerbsContract, RanksThatDisagreeOnTheCodecOrCountFailWithANamedMismatch) {
  const compress::Codec int8 = codecOf("int8:block=32");
  const compress::Codec int8b = codecOf("int8:block=64");
  const std::vector<float> x = gaussian(200, 4);  // one slice: the sender finishes whatever the receiver does
  std::vector<float> y(x.size());
  for (int which = 0; which < 2; ++which) {
    LoopbackWorld world(2, {256, 2});
    Encoded sendEnc, recvEnc;
    sendEnc.codec = &int8;
    recvEnc.codec = which == 0 ? &int8b : &int8;
    const size_t recvCount = which == 0 ? x.size() : x.size() - 1;
    const auto st = world.runRanks([&](int r, Prims& p) -> Coro {
      if (r == 0) return coll::verbStrand(p.sendEncoded(1, x.data(), x.size(), sendEnc));
      return coll::verbStrand(p.recvDecoded(0, y.data(), recvCount, recvEnc));
    }, std::chrono::seconds(3));
    EXPECT_EQ(st[1].code(), Errc::InvalidUsage) << st[1].message();
    EXPECT_NE(st[1].message().find("codec"), std::string::npos) << st[1].message();
  }
}

// Affine across slices: a chunk that starts in the middle of a group, cut into slices that split groups, gives
// the same bits as one whole-buffer combine. The slot is the lower rank's value.
TEST(VerbsContract, AffineCombinesSliceBySliceWithTheSlotAsTheLowerOperand) {
  ReduceOp op;
  op.type = DataType::Float32;
  op.combine = ReduceOp::Combine::Affine;
  op.rows = 3;
  op.cols = 5;
  const size_t group = op.groupElems();  // 3 + 15
  const size_t n = group * 7;
  const std::vector<float> lower = gaussian(n, 5), upper = gaussian(n, 6);
  std::vector<float> want(n);
  prims::combineOrdered(op, want.data(), lower.data(), upper.data(), n, 0, upper.data());
  for (size_t g = 0; g < 7; ++g) {  // spot-check the arithmetic itself
    for (size_t i = 0; i < 3; ++i) ASSERT_EQ(want[g * group + i], lower[g * group + i] * upper[g * group + i]);
    const size_t s = g * group + 3 + 2 * 5 + 4;  // row 2, column 4
    ASSERT_EQ(want[s], upper[g * group + 2] * lower[s] + upper[s]);
  }
  LoopbackWorld world(2, {64, 2});  // 16 floats a slice: slices split every group
  std::vector<float> got(n, 0.0f);
  const size_t first = 11;  // a chunk starting inside the first group
  const auto st = world.runRanks([&](int r, Prims& p) -> Coro {
    if (r == 0) return coll::verbStrand(p.send(1, lower.data() + first, (n - first) * 4));
    return coll::verbStrand(p.recvReduceCopyAt(0, upper.data() + first, got.data() + first, n - first, op, first));
  });
  for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(0, std::memcmp(got.data() + first, want.data() + first, (n - first) * 4));
}

// A User op over 2x2 matrices (non-commutative): slices hold whole units only, and the exclusive chain's verb
// keeps the incoming prefix while forwarding prefix (+) own.
TEST(VerbsContract, UserOpsSeeWholeUnitsAndTheExclusiveChainVerbKeepsThePrefix) {
  ReduceOp op;
  op.type = DataType::Float64;
  op.combine = ReduceOp::Combine::User;
  op.unitElems = 4;
  op.userFn = [](const void* in, void* inout, size_t count, int, void*) {
    ASSERT_EQ(count % 4, 0u) << "a unit split across slices";
    const auto* a = static_cast<const double*>(in);
    auto* b = static_cast<double*>(inout);
    for (size_t m = 0; m < count; m += 4) {
      const double r[4] = {a[m] * b[m] + a[m + 1] * b[m + 2], a[m] * b[m + 1] + a[m + 1] * b[m + 3],
                           a[m + 2] * b[m] + a[m + 3] * b[m + 2], a[m + 2] * b[m + 1] + a[m + 3] * b[m + 3]};
      std::memcpy(b + m, r, sizeof(r));
    }
  };
  const size_t n = 4 * 37;
  std::vector<double> m0(n), m1(n), m2(n);
  std::mt19937 rng(3);
  for (auto* v : {&m0, &m1, &m2}) for (double& x : *v) x = static_cast<double>(rng() % 5) - 2.0;
  std::vector<double> prefix1(n), prefix2(n), fwd2(n);
  LoopbackWorld world(3, {56, 2});  // 7 doubles a slice: a unit of 4 must not be split
  const auto st = world.runRanks([&](int r, Prims& p) -> Coro {
    p.setSliceUnit(4 * sizeof(double));
    if (r == 0) return coll::verbStrand(p.send(1, m0.data(), n * 8));
    if (r == 1) return coll::verbStrand(p.recvCopyReduceSend(0, 2, m1.data(), prefix1.data(), n, op));
    return coll::verbStrand(p.recvReduceCopy(1, m2.data(), fwd2.data(), n, op, false));
  });
  for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(prefix1, m0) << "rank 1's exclusive prefix is rank 0's value";
  std::vector<double> want01(m1), want(m2);
  op.userFn(m0.data(), want01.data(), n, 0, nullptr);  // m0 * m1
  op.userFn(want01.data(), want.data(), n, 0, nullptr);  // (m0 * m1) * m2
  EXPECT_EQ(fwd2, want) << "rank 2 gets m0 * m1 * m2, in rank order";
}

// Rows: a gather of repeated, out-of-order rows into slices, scattered into other rows; the same when the sender
// posts one plain message that the receiver scatters, over slices and as a direct (single-copy) message.
TEST(VerbsContract, RowsAreGatheredIntoSlicesAndScatteredOutOfThem) {
  for (size_t direct : {size_t{0}, size_t{64}}) {
    const size_t rowBytes = 24;  // rows straddle 256-byte slices
    std::vector<char> table(40 * rowBytes);
    std::iota(table.begin(), table.end(), 0);
    const std::vector<int64_t> pick = {7, 3, 3, 39, 0, 12, 25, 25, 25, 8, 1, 30, 31, 32, 33, 2, 5, 6, 9, 10, 11, 13, 14};
    const std::vector<int64_t> place = {22, 0, 5, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
    std::vector<char> got(23 * rowBytes, 0);
    Region from{table.data(), rowBytes, rowBytes, pick.data(), pick.size()};
    Region to{got.data(), rowBytes, rowBytes, place.data(), place.size()};
    LoopbackWorld world(2, {256, 2}, direct);
    auto st = world.runRanks([&](int r, Prims& p) -> Coro {
      if (r == 0) return coll::verbStrand(p.sendRows(1, from));
      return coll::verbStrand(p.recvRows(0, to));
    });
    for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.message();
    for (size_t i = 0; i < pick.size(); ++i) {
      ASSERT_EQ(0, std::memcmp(got.data() + place[i] * rowBytes, table.data() + pick[i] * rowBytes, rowBytes)) << i;
    }
    // A plain send of the gathered bytes, scattered by the receiver (direct when the world offers it).
    std::vector<char> packed(pick.size() * rowBytes);
    for (size_t i = 0; i < pick.size(); ++i) std::memcpy(packed.data() + i * rowBytes, table.data() + pick[i] * rowBytes, rowBytes);
    std::fill(got.begin(), got.end(), 0);
    st = world.runRanks([&](int r, Prims& p) -> Coro {
      if (r == 0) return coll::verbStrand(p.send(1, packed.data(), packed.size()));
      return coll::verbStrand(p.recvRows(0, to));
    });
    for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.message();
    for (size_t i = 0; i < pick.size(); ++i) {
      ASSERT_EQ(0, std::memcmp(got.data() + place[i] * rowBytes, packed.data() + i * rowBytes, rowBytes))
          << "direct threshold " << direct << " row " << i;
    }
  }
}

// Negative entries in a row list: a gather sends zeros for them, a scatter drops their bytes.
TEST(VerbsContract, RowListHolesSendZerosAndDropBytes) {
  const size_t rowBytes = 40;
  std::vector<char> table(6 * rowBytes);
  std::iota(table.begin(), table.end(), 1);
  const std::vector<int64_t> pick = {4, -1, 0, -1, 5};
  const std::vector<int64_t> place = {3, 0, -1, 1, 4};
  std::vector<char> got(5 * rowBytes, 7);
  Region from{table.data(), rowBytes, rowBytes, pick.data(), pick.size()};
  Region to{got.data(), rowBytes, rowBytes, place.data(), place.size()};
  LoopbackWorld world(2, {64, 2});
  const auto st = world.runRanks([&](int r, Prims& p) -> Coro {
    if (r == 0) return coll::verbStrand(p.sendRows(1, from));
    return coll::verbStrand(p.recvRows(0, to));
  });
  for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(0, std::memcmp(got.data() + 3 * rowBytes, table.data() + 4 * rowBytes, rowBytes));
  EXPECT_EQ(0, std::memcmp(got.data() + 4 * rowBytes, table.data() + 5 * rowBytes, rowBytes));
  EXPECT_EQ(std::vector<char>(got.begin(), got.begin() + rowBytes), std::vector<char>(rowBytes, 0)) << "a hole sends zeros";
  EXPECT_EQ(std::vector<char>(got.begin() + rowBytes, got.begin() + 2 * rowBytes), std::vector<char>(rowBytes, 0));
  EXPECT_EQ(std::vector<char>(got.begin() + 2 * rowBytes, got.begin() + 3 * rowBytes), std::vector<char>(rowBytes, 7))
      << "row 2 was named by no entry and keeps its bytes";
}

// A receiver that knows the sender's row list gets the rows straight from the sender's memory (one direct message
// of the rows' span), scattered or folded where they belong; holes send zeros either way.
TEST(VerbsContract, RowsTheReceiverKnowsGoDirectFromTheSendersMemory) {
  const size_t rowBytes = 32;  // 8 floats
  std::vector<float> table(50 * 8);
  std::iota(table.begin(), table.end(), 1.0f);
  const std::vector<int64_t> pick = {40, 3, -1, 17, 17, 9, 44, 20, 21, 22};
  const std::vector<int64_t> place = {9, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  Region from{reinterpret_cast<char*>(table.data()), rowBytes, rowBytes, pick.data(), pick.size()};
  Region src{nullptr, rowBytes, rowBytes, pick.data(), pick.size()};
  for (size_t direct : {size_t{0}, size_t{64}}) {
    SCOPED_TRACE(::testing::Message() << "direct threshold " << direct);
    std::vector<float> got(10 * 8, -1.0f);
    Region to{reinterpret_cast<char*>(got.data()), rowBytes, rowBytes, place.data(), place.size()};
    LoopbackWorld world(2, {64, 2}, direct);
    auto st = world.runRanks([&](int r, Prims& p) -> Coro {
      if (r == 0) return coll::verbStrand(p.sendRows(1, from, /*receiverKnowsRows=*/true));
      return coll::verbStrand(p.recvRows(0, to, &src));
    });
    for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(world.directReads() > 0, direct > 0);
    for (size_t i = 0; i < pick.size(); ++i) {
      for (size_t h = 0; h < 8; ++h) {
        const float want = pick[i] < 0 ? 0.0f : table[static_cast<size_t>(pick[i]) * 8 + h];
        ASSERT_EQ(got[static_cast<size_t>(place[i]) * 8 + h], want) << "row " << i;
      }
    }
    // Folded: each row times 2 into its own token, one contribution each.
    std::vector<prims::RowFold::Step> steps(pick.size(), prims::RowFold::Step::Only);
    std::vector<float> weights(pick.size(), 2.0f);
    std::vector<float> out(10 * 8, -1.0f);
    prims::RowFold fold;
    fold.rowElems = 8;
    fold.out = reinterpret_cast<char*>(out.data());
    fold.outStride = rowBytes;
    fold.tokens = place.data();
    fold.weights = weights.data();
    fold.steps = steps.data();
    fold.nRows = pick.size();
    st = world.runRanks([&](int r, Prims& p) -> Coro {
      if (r == 0) return coll::verbStrand(p.sendRows(1, from, /*receiverKnowsRows=*/true));
      return coll::verbStrand(p.recvFoldRows(0, fold, &src));
    });
    for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.message();
    for (size_t i = 0; i < pick.size(); ++i) {
      const float want = pick[i] < 0 ? 0.0f : 2.0f * table[static_cast<size_t>(pick[i]) * 8 + 5];
      ASSERT_EQ(out[static_cast<size_t>(place[i]) * 8 + 5], want) << "folded row " << i;
    }
  }
}

// recvFoldRows: rows folded into per-token fp32 sums in message order, across slices that cut rows, over FIFO slices
// and direct messages; the first contribution sets the sum, the last rounds into the output row.
TEST(VerbsContract, FoldedRowsSumIntoTheirTokensInMessageOrder) {
  using Step = prims::RowFold::Step;
  const size_t hidden = 13;  // 52-byte fp32 rows, 26-byte bf16 rows: slices of 64 bytes cut them
  for (DataType type : {DataType::Float32, DataType::Bfloat16}) {
    for (size_t direct : {size_t{0}, size_t{64}}) {
      SCOPED_TRACE(::testing::Message() << dataTypeName(type) << ", direct threshold " << direct);
      const size_t elt = dataTypeSize(type);
      // Tokens 0 (three contributions), 1 (one), 2 (two).
      const std::vector<int64_t> tokens = {0, 2, 1, 0, 2, 0};
      const std::vector<Step> steps = {Step::First, Step::First, Step::Only, Step::Middle, Step::Last, Step::Last};
      const std::vector<float> weights = {0.5f, -1.0f, 2.0f, 0.25f, 3.0f, -0.75f};
      const std::vector<float> x = gaussian(tokens.size() * hidden, 3);
      std::vector<char> rows(tokens.size() * hidden * elt);
      for (size_t i = 0; i < x.size(); ++i) {
        if (type == DataType::Bfloat16) {
          const uint16_t b = fp::floatToBf16(x[i]);
          std::memcpy(rows.data() + 2 * i, &b, 2);
        } else {
          std::memcpy(rows.data() + 4 * i, &x[i], 4);
        }
      }
      auto value = [&](size_t i) {
        uint16_t b;
        std::memcpy(&b, rows.data() + 2 * i, 2);
        return type == DataType::Bfloat16 ? fp::bf16ToFloat(b) : x[i];
      };
      std::vector<float> acc(3 * hidden, 99.0f);
      std::vector<char> out(3 * hidden * elt, 0);
      prims::RowFold fold;
      fold.valueType = type;
      fold.rowElems = hidden;
      fold.acc = acc.data();
      fold.accStride = hidden;
      fold.out = out.data();
      fold.outStride = hidden * elt;
      fold.tokens = tokens.data();
      fold.weights = weights.data();
      fold.steps = steps.data();
      fold.nRows = tokens.size();
      LoopbackWorld world(2, {64, 2}, direct);
      const auto st = world.runRanks([&](int r, Prims& p) -> Coro {
        if (r == 0) return coll::verbStrand(p.send(1, rows.data(), rows.size()));
        return coll::verbStrand(p.recvFoldRows(0, fold));
      });
      for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.message();
      for (size_t t = 0; t < 3; ++t) {
        for (size_t h = 0; h < hidden; ++h) {
          float sum = 0;
          bool first = true;
          for (size_t i = 0; i < tokens.size(); ++i) {
            if (tokens[i] != static_cast<int64_t>(t)) continue;
            const float term = weights[i] * value(i * hidden + h);
            sum = first ? term : sum + term;
            first = false;
          }
          float want = sum;
          if (type == DataType::Bfloat16) want = fp::bf16ToFloat(fp::floatToBf16(sum));
          float got;
          if (type == DataType::Bfloat16) {
            uint16_t b;
            std::memcpy(&b, out.data() + (t * hidden + h) * 2, 2);
            got = fp::bf16ToFloat(b);
          } else {
            std::memcpy(&got, out.data() + (t * hidden + h) * 4, 4);
          }
          ASSERT_EQ(got, want) << "token " << t << " value " << h;
        }
      }
    }
  }
}

}  // namespace
}  // namespace cfx::testing
