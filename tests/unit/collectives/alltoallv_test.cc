// SPDX-License-Identifier: Apache-2.0
// All-to-all-v over ranks as threads (collectives/alltoallv_direct.cc): random counts with zeros, gaps between
// blocks, a rank sending to itself, in place, over tiny slots and direct messages, against a reference built from
// the counts alone; and a size disagreement named by the receiver.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "collectives/collective.h"
#include "loopback.h"

namespace cfx::testing {
namespace {

using coll::AlltoallvArgs;
using coll::CollArgs;
using prims::Prims;
using prims::Coro;

// counts[s][d]: bytes rank s sends rank d. Every rank's blocks lie in rank order with a gap of `gap` bytes before
// each, on both sides.
struct Shape {
  std::vector<std::vector<size_t>> counts;
  size_t gap = 0;
};

AlltoallvArgs argsOf(const Shape& shape, int r, bool inPlace) {
  const size_t n = shape.counts.size();
  const auto ur = static_cast<size_t>(r);
  AlltoallvArgs v;
  size_t sendAt = 0;
  size_t recvAt = 0;
  for (size_t p = 0; p < n; ++p) {
    sendAt += shape.gap;
    recvAt += shape.gap;
    v.sendBytes.push_back(shape.counts[ur][p]);
    v.sendOffset.push_back(sendAt);
    v.recvBytes.push_back(shape.counts[p][ur]);
    v.recvOffset.push_back(recvAt);
    sendAt += shape.counts[ur][p];
    recvAt += shape.counts[p][ur];
  }
  v.sendExtent = sendAt;
  v.recvExtent = recvAt;
  v.inPlace = inPlace;
  return v;
}

uint8_t byteOf(size_t from, size_t to, size_t i) { return static_cast<uint8_t>(from * 31 + to * 7 + i * 13 + 1); }

void runShape(const Shape& shape, transport::FifoGeometry geometry, size_t direct, bool inPlace) {
  const int n = static_cast<int>(shape.counts.size());
  // In place needs the same blocks both ways on every rank.
  std::vector<AlltoallvArgs> v;
  std::vector<std::vector<uint8_t>> send(static_cast<size_t>(n));
  std::vector<std::vector<uint8_t>> recv(static_cast<size_t>(n));
  std::vector<CollArgs> args(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<size_t>(r);
    v.push_back(argsOf(shape, r, inPlace));
    send[ur].assign(v[ur].sendExtent, 0xee);
    for (size_t p = 0; p < static_cast<size_t>(n); ++p) {
      for (size_t i = 0; i < v[ur].sendBytes[p]; ++i) send[ur][v[ur].sendOffset[p] + i] = byteOf(ur, p, i);
    }
    recv[ur] = inPlace ? send[ur] : std::vector<uint8_t>(v[ur].recvExtent, 0xee);
    args[ur].coll = coll::Collective::AllToAllv;
    args[ur].type = DataType::Uint8;
    args[ur].sendbuff = inPlace ? recv[ur].data() : send[ur].data();
    args[ur].recvbuff = recv[ur].data();
    args[ur].alltoallv = std::make_shared<AlltoallvArgs>(v[ur]);
  }
  LoopbackWorld world(n, geometry, direct);
  const auto st = world.runRanks([&](int r, Prims& p) -> Coro {
    return coll::runCollective(args[static_cast<size_t>(r)], coll::Plan{coll::Algorithm::Direct}, p);
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << st[static_cast<size_t>(r)].message();
  for (size_t r = 0; r < static_cast<size_t>(n); ++r) {
    size_t at = 0;
    for (size_t p = 0; p < static_cast<size_t>(n); ++p) {
      for (size_t g = 0; g < shape.gap; ++g, ++at) ASSERT_EQ(recv[r][at], 0xee) << "gap before block " << p << " on rank " << r;
      for (size_t i = 0; i < shape.counts[p][r]; ++i, ++at) {
        ASSERT_EQ(recv[r][at], byteOf(p, r, i)) << "rank " << r << " block from " << p << " byte " << i;
      }
    }
  }
}

Shape randomShape(int n, std::mt19937& rng, size_t maxBytes, size_t gap, bool symmetric) {
  Shape s;
  s.gap = gap;
  s.counts.assign(static_cast<size_t>(n), std::vector<size_t>(static_cast<size_t>(n), 0));
  std::uniform_int_distribution<size_t> size(0, maxBytes);
  for (auto& row : s.counts) {
    for (size_t& c : row) c = rng() % 3 == 0 ? 0 : size(rng);  // a third of the pairs send nothing
  }
  if (symmetric) {  // in place: what a rank sends a peer is the size of what it receives back
    for (size_t a = 0; a < s.counts.size(); ++a) {
      for (size_t b = 0; b < a; ++b) s.counts[b][a] = s.counts[a][b];
    }
  }
  return s;
}

TEST(AllToAllv, RandomCountsWithZerosMatchTheReference) {
  std::mt19937 rng(33);
  for (int n : {1, 2, 3, 4, 5, 8}) {
    for (size_t gap : {size_t{0}, size_t{5}}) {
      SCOPED_TRACE(::testing::Message() << n << " ranks, gap " << gap);
      runShape(randomShape(n, rng, 700, gap, false), {256, 2}, 0, false);
      runShape(randomShape(n, rng, 3000, gap, false), {1024, 4}, 512, false);  // large blocks go direct
    }
  }
}

TEST(AllToAllv, InPlaceSendsFromACopy) {
  std::mt19937 rng(7);
  for (int n : {1, 2, 3, 6}) {
    SCOPED_TRACE(::testing::Message() << n << " ranks");
    runShape(randomShape(n, rng, 900, 3, true), {256, 2}, 0, true);
  }
}

TEST(AllToAllv, EveryPairEmptyOrOnlySelf) {
  Shape none;
  none.counts.assign(4, std::vector<size_t>(4, 0));
  runShape(none, {256, 2}, 0, false);
  Shape self = none;
  for (size_t r = 0; r < 4; ++r) self.counts[r][r] = 100 + r;
  runShape(self, {256, 2}, 0, false);
}

TEST(AllToAllv, ARankExpectingAnotherSizeNamesTheSender) {
  Shape shape;
  shape.counts = {{0, 300}, {300, 0}};
  std::vector<AlltoallvArgs> v = {argsOf(shape, 0, false), argsOf(shape, 1, false)};
  v[1].recvBytes[0] = 200;  // rank 1 expects 200 bytes from rank 0, which sends 300
  std::vector<std::vector<uint8_t>> bufs(4, std::vector<uint8_t>(300));
  std::vector<CollArgs> args(2);
  for (size_t r = 0; r < 2; ++r) {
    args[r].coll = coll::Collective::AllToAllv;
    args[r].sendbuff = bufs[2 * r].data();
    args[r].recvbuff = bufs[2 * r + 1].data();
    args[r].alltoallv = std::make_shared<AlltoallvArgs>(v[r]);
  }
  LoopbackWorld world(2, {256, 2});
  const auto st = world.runRanks(
      [&](int r, Prims& p) -> Coro {
        return coll::runCollective(args[static_cast<size_t>(r)], coll::Plan{coll::Algorithm::Direct}, p);
      },
      std::chrono::seconds(2));
  ASSERT_FALSE(st[1].ok());
  EXPECT_EQ(st[1].code(), Errc::InvalidUsage) << st[1].message();
  EXPECT_NE(st[1].message().find("rank 0"), std::string::npos) << st[1].message();
}

}  // namespace
}  // namespace cfx::testing
