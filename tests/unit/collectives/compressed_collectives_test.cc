// SPDX-License-Identifier: Apache-2.0
// Compressed collectives over ranks as threads: every algorithm against a sequential reference that encodes, sums and
// decodes as the algorithm promises (bit for bit where the promise is exact: quantise-once, the encoded all-gather
// and broadcast, top-k gathering), or within the documented bound (the requantising ring, hierarchical); every rank
// holding the same bits; the same bits on a second run; 1 to 8 ranks, odd counts, in place and not, three value types.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "collectives/collective.h"
#include "collectives/encoded.h"
#include "common/float_types.h"
#include "loopback.h"

namespace cfx::testing {
namespace {

using coll::Algorithm;
using coll::Collective;

constexpr size_t kSlot = 1024;

compress::Codec codecOf(const char* text, DataType type) { return *compress::Codec::make(*compress::parseCodec(text), type); }

std::vector<float> values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// fp32 values as a buffer of `type` (rounded), and back.
std::vector<char> asType(const std::vector<float>& v, DataType type) {
  std::vector<char> b(v.size() * dataTypeSize(type));
  compress::fromFloat(type, v.data(), v.size(), b.data());
  return b;
}
std::vector<float> asFloats(const char* b, size_t n, DataType type) {
  std::vector<float> v(n);
  compress::toFloat(type, b, n, v.data());
  return v;
}

// The framed pieces of `count` values of `type` as the verbs cut them on kSlot slots, encoded and decoded back.
struct Ref {
  const compress::Codec& c;
  coll::Framing f{&c, c.pieceElems(kSlot)};
  std::vector<float> roundTrip(const char* v, DataType type, size_t count) const {
    std::vector<char> framed(f.bytes(count));
    coll::encodeFramed(f, v, type, count, framed.data(), {});
    std::vector<float> out(count);
    coll::decodeFramed(f, framed.data(), count, DataType::Float32, out.data());
    return out;
  }
  // What the owner of a chunk ends up with: own chunk as fp32, plus the others' decoded chunks in the order
  // me + 1, me + 2, ...; divided; encoded once and decoded, in `type`.
  std::vector<char> ownerResult(const std::vector<std::vector<char>>& in, DataType type, size_t begin, size_t n,
                                int me, float divide, bool encodeResult) const {
    const int nr = static_cast<int>(in.size());
    const size_t elt = dataTypeSize(type);
    std::vector<float> acc = asFloats(in[static_cast<size_t>(me)].data() + begin * elt, n, type);
    for (int s = 1; s < nr; ++s) {
      const std::vector<float> d = roundTrip(in[static_cast<size_t>((me + s) % nr)].data() + begin * elt, type, n);
      for (size_t i = 0; i < n; ++i) acc[i] += d[i];
    }
    if (divide != 1.0f) {
      for (float& x : acc) x /= divide;
    }
    if (encodeResult) acc = roundTrip(reinterpret_cast<const char*>(acc.data()), DataType::Float32, n);
    return asType(acc, type);
  }
};

struct Outcome {
  std::vector<std::vector<char>> out;
};

// Runs one compressed collective on n ranks; returns every rank's output buffer.
Outcome run(Collective collective, Algorithm algorithm, const compress::Codec& codec, int n, size_t count,
            DataType type, bool average, bool inPlace, const std::vector<std::vector<char>>& inputs,
            const std::vector<uint64_t>& hosts = {}, int root = 0) {
  const size_t elt = dataTypeSize(type);
  const size_t outCount = collective == Collective::AllGather ? count * n : count;
  const size_t inCount = collective == Collective::ReduceScatter ? count * n : count;
  Outcome o;
  std::vector<std::vector<char>> bufs(static_cast<size_t>(n));
  std::vector<coll::CollArgs> args(static_cast<size_t>(n));
  auto compressArgs = std::make_shared<coll::CompressArgs>(codec);
  compressArgs->average = average;
  for (int r = 0; r < n; ++r) {
    std::vector<char>& b = bufs[static_cast<size_t>(r)];
    b.assign(std::max(inCount, outCount) * elt + (inPlace ? 0 : inCount * elt), 0);
    coll::CollArgs& a = args[static_cast<size_t>(r)];
    a.coll = collective;
    a.count = count;
    a.type = type;
    a.root = root;
    a.op = ReduceOp::builtin(type, average ? RedOpKind::Avg : RedOpKind::Sum, n);
    a.compress = compressArgs;
    char* recv = b.data();
    char* send = inPlace ? recv : b.data() + outCount * elt;
    if (inPlace && collective == Collective::AllGather) send = recv + static_cast<size_t>(r) * count * elt;
    if (inPlace && collective == Collective::ReduceScatter) recv = send + static_cast<size_t>(r) * count * elt;
    std::memcpy(send, inputs[static_cast<size_t>(r)].data(), inCount * elt);
    a.sendbuff = send;
    a.recvbuff = recv;
  }
  LoopbackWorld world(n, {kSlot, 2});
  const coll::Layout layout = coll::Layout::fromHostIds(hosts.empty() ? std::vector<uint64_t>(static_cast<size_t>(n), 0) : hosts);
  coll::Plan plan{algorithm, &layout};
  plan.codec = &compressArgs->codec;
  const auto st = world.runRanks([&](int r, prims::Prims& p) { return coll::runCollective(args[static_cast<size_t>(r)], plan, p); });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << st[static_cast<size_t>(r)].message();
  for (int r = 0; r < n; ++r) {
    const char* recv = static_cast<const char*>(args[static_cast<size_t>(r)].recvbuff);
    o.out.emplace_back(recv, recv + outCount * elt);
  }
  return o;
}

std::vector<std::vector<char>> inputsFor(int n, size_t count, DataType type, uint32_t seed) {
  std::vector<std::vector<char>> in;
  for (int r = 0; r < n; ++r) in.push_back(asType(values(count, seed + static_cast<uint32_t>(r)), type));
  return in;
}

constexpr DataType kTypes[] = {DataType::Float32, DataType::Bfloat16, DataType::Float16};
constexpr const char* kDense[] = {"int8:block=32", "mxint8", "mxfp8", "int4:block=32", "bf16", "fp8:block=32"};

std::vector<size_t> countsFor(int n) { return {0, 1, static_cast<size_t>(n) - 1 + 7, 33, 1000, 4099}; }

TEST(CompressedCollectives, QuantOnceAllReduceIsTheSequentialReferenceBitForBitOnEveryRank) {
  for (const char* name : kDense) {
    for (DataType type : kTypes) {
      const compress::Codec c = codecOf(name, type);
      const Ref ref{c};
      for (int n : {1, 2, 3, 4, 5, 8}) {
        for (size_t count : countsFor(n)) {
          const bool inPlace = count % 2 == 1;
          const bool average = n % 2 == 0;
          const auto in = inputsFor(n, count, type, static_cast<uint32_t>(count + 11 * n));
          const Outcome o = run(Collective::AllReduce, Algorithm::QuantOnce, c, n, count, type, average, inPlace, in);
          std::vector<char> want;
          const coll::EvenSplit chunks{count, n};
          for (int q = 0; q < n; ++q) {
            const auto part = ref.ownerResult(in, type, chunks.begin(q), chunks.size(q), q, average ? n : 1, true);
            want.insert(want.end(), part.begin(), part.end());
          }
          for (int r = 0; r < n; ++r) {
            ASSERT_EQ(o.out[static_cast<size_t>(r)], want) << name << " " << dataTypeName(type) << " n=" << n
                                                           << " count=" << count << " rank " << r;
          }
        }
      }
    }
  }
}

TEST(CompressedCollectives, ReduceScatterAllGatherAndBroadcastMatchTheirReferences) {
  for (const char* name : {"int8:block=32", "mxfp8", "bf16"}) {
    for (DataType type : kTypes) {
      const compress::Codec c = codecOf(name, type);
      const Ref ref{c};
      const size_t elt = dataTypeSize(type);
      for (int n : {1, 2, 3, 7}) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{45}, size_t{2001}}) {
          const bool inPlace = count % 2 == 1;
          // Reduce-scatter: each rank's block is its owner's fp32 sum, not encoded again.
          auto in = inputsFor(n, count * n, type, 5);
          Outcome o = run(Collective::ReduceScatter, Algorithm::QuantOnce, c, n, count, type, true, inPlace, in);
          for (int r = 0; r < n; ++r) {
            ASSERT_EQ(o.out[static_cast<size_t>(r)], ref.ownerResult(in, type, count * r, count, r, n, false))
                << "reduce-scatter " << name << " n=" << n << " count=" << count;
          }
          // All-gather: every block is its owner's encoding, decoded, the same on every rank.
          in = inputsFor(n, count, type, 6);
          o = run(Collective::AllGather, Algorithm::QuantOnce, c, n, count, type, false, inPlace, in);
          std::vector<char> want;
          for (int q = 0; q < n; ++q) {
            const auto part = asType(ref.roundTrip(in[static_cast<size_t>(q)].data(), type, count), type);
            want.insert(want.end(), part.begin(), part.end());
          }
          for (int r = 0; r < n; ++r) ASSERT_EQ(o.out[static_cast<size_t>(r)], want) << "all-gather " << name << " n=" << n;
          // Broadcast from the last rank: the root's encoding, decoded, on every rank (the root too).
          o = run(Collective::Broadcast, Algorithm::Chain, c, n, count, type, false, inPlace, in, {}, n - 1);
          want = asType(ref.roundTrip(in[static_cast<size_t>(n - 1)].data(), type, count), type);
          for (int r = 0; r < n; ++r) ASSERT_EQ(o.out[static_cast<size_t>(r)], want) << "broadcast " << name << " n=" << n;
          (void)elt;
        }
      }
    }
  }
}

// Top-k: the exact dense sum, in rank order, of what every rank's encoding carries; the same bits everywhere.
TEST(CompressedCollectives, SparseGatherSumsEveryRanksTopKInRankOrder) {
  for (const char* name : {"topk:0.05:block=64", "topk:0.2:values=2bit:block=128", "topk:0.01:values=fp32:block=512"}) {
    for (DataType type : kTypes) {
      const compress::Codec c = codecOf(name, type);
      const Ref ref{c};
      for (int n : {1, 2, 4, 5}) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{129}, size_t{5000}}) {
          const auto in = inputsFor(n, count, type, 9);
          const Outcome o = run(Collective::AllReduce, Algorithm::SparseGather, c, n, count, type, n == 4, false, in);
          std::vector<float> acc(count, 0.0f);
          for (int q = 0; q < n; ++q) {
            const auto d = ref.roundTrip(in[static_cast<size_t>(q)].data(), type, count);
            for (size_t i = 0; i < count; ++i) acc[i] += d[i];
          }
          if (n == 4) {
            for (float& x : acc) x /= 4.0f;
          }
          const std::vector<char> want = asType(acc, type);
          for (int r = 0; r < n; ++r) ASSERT_EQ(o.out[static_cast<size_t>(r)], want) << name << " n=" << n << " count=" << count;
        }
      }
    }
  }
}

// The requantising ring and the hierarchical form: the same bits on every rank and on a second run, and within the
// bound of their roundings (every element's contributions and partial sums, each at most its block's absmax).
TEST(CompressedCollectives, RequantisingRingAndHierarchicalStayWithinTheirBoundsAndAgree) {
  const compress::Codec c = codecOf("int8:block=32", DataType::Float32);
  struct Shape {
    Algorithm algorithm;
    std::vector<uint64_t> hosts;
  };
  const std::vector<Shape> shapes = {{Algorithm::Ring, {0, 0, 0}},        {Algorithm::Ring, {0, 0, 0, 0, 0, 0, 0}},
                                     {Algorithm::Hier, {0, 0, 1, 1}},     {Algorithm::Hier, {0, 0, 0, 1, 1, 1}},
                                     {Algorithm::Hier, {0, 1, 0, 1, 0, 1}}, {Algorithm::Hier, {0, 1, 2}}};
  for (const Shape& s : shapes) {
    const int n = static_cast<int>(s.hosts.size());
    for (size_t count : {size_t{0}, size_t{5}, size_t{3000}, size_t{20011}}) {
      SCOPED_TRACE(strprintf("%s on %d ranks, %zu values", coll::algorithmName(s.algorithm), n, count));
      const auto in = inputsFor(n, count, DataType::Float32, 21);
      const Outcome a = run(Collective::AllReduce, s.algorithm, c, n, count, DataType::Float32, false, count % 2 == 1, in, s.hosts);
      const Outcome b = run(Collective::AllReduce, s.algorithm, c, n, count, DataType::Float32, false, count % 2 == 1, in, s.hosts);
      double absSum = 0;
      for (const auto& v : in) {
        for (float x : asFloats(v.data(), count, DataType::Float32)) absSum = std::max(absSum, std::fabs(static_cast<double>(x)));
      }
      const double bound = (n + 2) * n * absSum / 254.0 * 1.001 + 1e-6;
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(a.out[static_cast<size_t>(r)], a.out[0]) << "rank " << r << " differs";
        ASSERT_EQ(b.out[static_cast<size_t>(r)], a.out[0]) << "a second run differs";
      }
      const std::vector<float> got = asFloats(a.out[0].data(), count, DataType::Float32);
      for (size_t i = 0; i < count; ++i) {
        double exact = 0;
        for (const auto& v : in) exact += asFloats(v.data() + 4 * i, 1, DataType::Float32)[0];
        ASSERT_LE(std::fabs(got[i] - exact), bound) << "algorithm " << coll::algorithmName(s.algorithm) << " n=" << n
                                                    << " element " << i;
      }
    }
  }
}

TEST(CompressedCollectives, ABlockTooLargeForASlotFailsByName) {
  const compress::Codec c = codecOf("int8:block=4096", DataType::Float32);
  const auto in = inputsFor(2, 10000, DataType::Float32, 1);
  std::vector<coll::CollArgs> args(2);
  std::vector<std::vector<float>> out(2, std::vector<float>(10000));
  auto ca = std::make_shared<coll::CompressArgs>(c);
  for (int r = 0; r < 2; ++r) {
    args[static_cast<size_t>(r)].coll = Collective::AllReduce;
    args[static_cast<size_t>(r)].count = 10000;
    args[static_cast<size_t>(r)].sendbuff = in[static_cast<size_t>(r)].data();
    args[static_cast<size_t>(r)].recvbuff = out[static_cast<size_t>(r)].data();
    args[static_cast<size_t>(r)].compress = ca;
  }
  LoopbackWorld world(2, {kSlot, 2});
  coll::Plan plan{Algorithm::QuantOnce};
  plan.codec = &ca->codec;
  const auto st = world.runRanks([&](int r, prims::Prims& p) { return coll::runCollective(args[static_cast<size_t>(r)], plan, p); });
  for (const Status& s : st) {
    EXPECT_EQ(s.code(), Errc::InvalidArgument);
    EXPECT_NE(s.message().find("does not fit"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace cfx::testing
