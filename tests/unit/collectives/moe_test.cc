// SPDX-License-Identifier: Apache-2.0
// MoE dispatch and combine over ranks as threads (collectives/moe_*.cc), against the sequential reference of
// tests/moe_reference.h: every received row and count, and every combined value bit for bit (the reference adds in
// the documented order), for the routings the issue lists, 1 to 8 ranks, every token type, both modes, contiguous and
// explicit expert maps, weighted and not; bounded drops reported; disagreements and bad ids named on every rank.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "../../moe_reference.h"
#include "collectives/moe.h"
#include "common/float_types.h"
#include "loopback.h"

namespace cfx::testing {
namespace {

using coll::CollArgs;
using coll::MoeArgs;
using coll::MoeState;
using prims::Prims;
using prims::Coro;

float toFloat(DataType t, const uint8_t* p) {
  uint16_t h;
  float f;
  switch (t) {
    case DataType::Bfloat16: std::memcpy(&h, p, 2); return fp::bf16ToFloat(h);
    case DataType::Float16: std::memcpy(&h, p, 2); return fp::halfToFloat(h);
    case DataType::Fp8E4M3: return fp::e4m3ToFloat(*p);
    default: std::memcpy(&f, p, 4); return f;
  }
}

void fromFloat(DataType t, float v, uint8_t* p) {
  uint16_t h;
  switch (t) {
    case DataType::Bfloat16: h = fp::floatToBf16(v); std::memcpy(p, &h, 2); break;
    case DataType::Float16: h = fp::floatToHalf(v); std::memcpy(p, &h, 2); break;
    case DataType::Fp8E4M3: *p = fp::floatToE4M3(v); break;
    default: std::memcpy(p, &v, 4); break;
  }
}

struct Case {
  moetest::Setup setup;
  size_t hidden = 24;
  size_t foldChunkBytes = 5 * 24 * 4;  // the combine's chunks: 5 tokens of 24 values, so most cases take several
  DataType tokenType = DataType::Bfloat16;
  DataType outType = DataType::Bfloat16;
  DataType idType = DataType::Int32;
  bool weighted = true;
  std::vector<std::vector<int64_t>> ids;  // per rank, tokens x topk
  transport::FifoGeometry geometry{256, 2};
};

// Each rank's buffers and the op's arguments, which must outlive the run.
struct Rank {
  std::shared_ptr<MoeState> state;
  std::vector<uint8_t> idBytes, tokens, recv, expertOut, out;
  std::vector<float> weights, scales, recvScales;
  std::vector<int32_t> counts;
  CollArgs args;
};

coll::MoeConfig configOf(const Case& c) {
  coll::MoeConfig m;
  m.nExperts = c.setup.nExperts;
  m.topk = c.setup.topk;
  m.hidden = c.hidden;
  m.tokenType = c.tokenType;
  m.outType = c.outType;
  m.idType = c.idType;
  m.foldChunkBytes = c.foldChunkBytes;
  m.bounded = c.setup.bounded;
  m.capacity = c.setup.capacity;
  for (int e = 0; e < m.nExperts; ++e) m.expertRank.push_back(c.setup.rankOf(e));
  m.derive(c.setup.nRanks);
  return m;
}

std::vector<Status> runPhase(LoopbackWorld& world, std::vector<Rank>& ranks, MoeArgs::Phase phase) {
  for (Rank& rk : ranks) {
    rk.args.coll = phase == MoeArgs::Phase::Combine ? coll::Collective::MoeCombine : coll::Collective::MoeDispatch;
    rk.args.moe->phase = phase;
  }
  return world.runRanks([&](int r, Prims& p) -> Coro {
    return coll::runCollective(ranks[static_cast<size_t>(r)].args, coll::Plan{coll::Algorithm::Direct}, p);
  });
}

// The expert "computation" between dispatch and combine: row value times (1 + local expert index).
float expertScale(int localExpert) { return 1.0f + 0.5f * static_cast<float>(localExpert); }

void runCase(const Case& c, uint32_t seed = 1) {
  const int n = c.setup.nRanks;
  const auto un = static_cast<size_t>(n);
  const auto k = static_cast<size_t>(c.setup.topk);
  const coll::MoeConfig config = configOf(c);
  const size_t tokenRow = config.tokenRowBytes();
  const size_t scaleRow = config.scaleRowBytes();
  const size_t outRow = config.outRowBytes();
  const size_t elt = dataTypeSize(c.tokenType);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<Rank> ranks(un);
  for (size_t r = 0; r < un; ++r) {
    Rank& rk = ranks[r];
    const size_t t = c.ids[r].size() / k;
    rk.state = std::make_shared<MoeState>();
    rk.state->config = config;
    rk.idBytes.resize(c.ids[r].size() * dataTypeSize(c.idType));
    for (size_t i = 0; i < c.ids[r].size(); ++i) {
      if (c.idType == DataType::Int64) {
        std::memcpy(rk.idBytes.data() + 8 * i, &c.ids[r][i], 8);
      } else {
        const auto v = static_cast<int32_t>(c.ids[r][i]);
        std::memcpy(rk.idBytes.data() + 4 * i, &v, 4);
      }
    }
    rk.tokens.resize(t * tokenRow);
    for (size_t i = 0; i < t * c.hidden; ++i) fromFloat(c.tokenType, value(rng), rk.tokens.data() + i * elt);
    rk.scales.resize(t * scaleRow / 4);
    for (float& s : rk.scales) s = std::ldexp(1.0f, static_cast<int>(rng() % 5) - 2);
    rk.weights.resize(t * k);
    for (float& w : rk.weights) w = value(rng);
    rk.args.moe = std::make_shared<MoeArgs>();
    MoeArgs& a = *rk.args.moe;
    a.state = rk.state;
    a.nTokens = t;
    a.buffers[MoeArgs::Ids].p = rk.idBytes.data();
    a.buffers[MoeArgs::Tokens].p = rk.tokens.data();
    a.buffers[MoeArgs::Scales].p = rk.scales.data();
    a.buffers[MoeArgs::Weights].p = c.weighted ? rk.weights.data() : nullptr;
    a.unweighted = !c.weighted;
  }
  LoopbackWorld world(n, c.geometry, seed % 2 ? 64 : 0);  // direct (single-copy) rows or slices
  if (!c.setup.bounded) {
    const auto st = runPhase(world, ranks, MoeArgs::Phase::Exchange);
    for (size_t r = 0; r < un; ++r) ASSERT_TRUE(st[r].ok()) << "exchange, rank " << r << ": " << st[r].message();
  }
  // The expert-major rows every rank must receive (the reference), sizing the receive buffers.
  std::vector<std::vector<moetest::Slot>> want(un);
  std::vector<size_t> dropped(un);
  std::vector<std::vector<long long>> perLocal(un);
  for (size_t r = 0; r < un; ++r) {
    want[r] = moetest::expertMajor(c.setup, c.ids, static_cast<int>(r), &dropped[r], &perLocal[r]);
    Rank& rk = ranks[r];
    const size_t rows = c.setup.bounded ? c.setup.capacity : want[r].size();
    if (!c.setup.bounded) {
      ASSERT_EQ(rk.state->routing.recvRows, rows) << "rank " << r;
    }
    rk.recv.assign(rows * tokenRow, 0);
    rk.recvScales.assign(rows * scaleRow / 4, 0);
    rk.counts.assign(perLocal[r].size() + 1, -1);
    MoeArgs& a = *rk.args.moe;
    a.buffers[MoeArgs::RecvTokens].p = rk.recv.data();
    a.buffers[MoeArgs::RecvScales].p = rk.recvScales.data();
    a.buffers[MoeArgs::RecvCounts].p = rk.counts.data();
  }
  auto st = runPhase(world, ranks, c.setup.bounded ? MoeArgs::Phase::Both : MoeArgs::Phase::Dispatch);
  for (size_t r = 0; r < un; ++r) ASSERT_TRUE(st[r].ok()) << "dispatch, rank " << r << ": " << st[r].message();
  for (size_t r = 0; r < un; ++r) {
    Rank& rk = ranks[r];
    for (size_t e = 0; e < perLocal[r].size(); ++e) EXPECT_EQ(rk.counts[e], perLocal[r][e]) << "rank " << r << " expert " << e;
    EXPECT_EQ(rk.counts.back(), static_cast<int32_t>(dropped[r])) << "rank " << r << " dropped";
    EXPECT_EQ(rk.state->routing.dropped, dropped[r]);
    for (size_t i = 0; i < want[r].size(); ++i) {
      const moetest::Slot& s = want[r][i];
      const Rank& from = ranks[static_cast<size_t>(s.source)];
      ASSERT_EQ(0, std::memcmp(rk.recv.data() + i * tokenRow, from.tokens.data() + s.token * tokenRow, tokenRow))
          << "rank " << r << " row " << i << " (from rank " << s.source << " token " << s.token << " k " << s.k << ")";
      if (scaleRow > 0) {
        ASSERT_EQ(0, std::memcmp(rk.recvScales.data() + i * scaleRow / 4, from.scales.data() + s.token * scaleRow / 4,
                                 scaleRow));
      }
    }
    // Experts: each row times its expert's scale, dequantised (fp8), in outType.
    rk.expertOut.assign(rk.recv.size() / std::max<size_t>(elt, 1) * dataTypeSize(c.outType), 0);
    for (size_t i = 0; i < want[r].size(); ++i) {
      for (size_t h = 0; h < c.hidden; ++h) {
        float x = toFloat(c.tokenType, rk.recv.data() + i * tokenRow + h * elt);
        if (scaleRow > 0) x *= rk.recvScales[i * scaleRow / 4 + h / coll::MoeConfig::kScaleBlock];
        fromFloat(c.outType, x * expertScale(want[r][i].localExpert), rk.expertOut.data() + i * outRow + h * dataTypeSize(c.outType));
      }
    }
    rk.out.assign((rk.tokens.size() / tokenRow) * outRow, 0xcd);
    rk.args.moe->buffers[MoeArgs::ExpertOut].p = rk.expertOut.data();
    rk.args.moe->buffers[MoeArgs::Out].p = rk.out.data();
  }
  st = runPhase(world, ranks, MoeArgs::Phase::Combine);
  for (size_t r = 0; r < un; ++r) ASSERT_TRUE(st[r].ok()) << "combine, rank " << r << ": " << st[r].message();
  // The combine's reference: each token's contributions folded in fp32 in the documented order, rounded once.
  const std::vector<std::vector<int64_t>> where = moetest::positions(c.setup, c.ids);
  const size_t outElt = dataTypeSize(c.outType);
  for (size_t r = 0; r < un; ++r) {
    const Rank& rk = ranks[r];
    const size_t tokens = rk.tokens.size() / tokenRow;
    for (size_t t = 0; t < tokens; ++t) {
      const std::vector<int> order = moetest::foldOrder(c.setup, static_cast<int>(r), c.ids[r].data() + t * k);
      for (size_t h = 0; h < c.hidden; ++h) {
        float acc = 0;
        for (size_t j = 0; j < order.size(); ++j) {
          const size_t kk = static_cast<size_t>(order[j]);
          const int64_t pos = where[r][t * k + kk];
          const auto p = static_cast<size_t>(c.setup.rankOf(static_cast<int>(c.ids[r][t * k + kk])));
          const float y = pos < 0 ? 0.0f : toFloat(c.outType, ranks[p].expertOut.data() + static_cast<size_t>(pos) * outRow + h * outElt);
          const float w = c.weighted ? rk.weights[t * k + kk] : 1.0f;
          acc = j == 0 ? w * y : acc + w * y;
        }
        uint8_t expect[4];
        fromFloat(c.outType, acc, expect);
        ASSERT_EQ(0, std::memcmp(expect, rk.out.data() + t * outRow + h * outElt, outElt))
            << "rank " << r << " token " << t << " value " << h << ": want " << acc << ", got "
            << toFloat(c.outType, rk.out.data() + t * outRow + h * outElt);
      }
    }
  }
}

// ids for `tokens[r]` tokens per rank, from a generator of one token's topk ids.
std::vector<std::vector<int64_t>> makeIds(const std::vector<size_t>& tokens, size_t k,
                                          const std::function<void(int, size_t, int64_t*)>& token) {
  std::vector<std::vector<int64_t>> ids(tokens.size());
  for (size_t r = 0; r < tokens.size(); ++r) {
    ids[r].resize(tokens[r] * k);
    for (size_t t = 0; t < tokens[r]; ++t) token(static_cast<int>(r), t, ids[r].data() + t * k);
  }
  return ids;
}

// K distinct experts out of E, uniformly.
void distinct(std::mt19937& rng, int experts, size_t k, int64_t* out) {
  std::vector<int64_t> all(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) all[static_cast<size_t>(e)] = e;
  std::shuffle(all.begin(), all.end(), rng);
  std::copy(all.begin(), all.begin() + static_cast<ptrdiff_t>(k), out);
}

enum class Routing { Uniform, OneExpert, OneRank, Duplicates, SomeRanksEmpty, AllEmpty };

Case routed(int n, int experts, int topk, Routing routing, uint32_t seed) {
  std::mt19937 rng(seed);
  Case c;
  c.setup.nRanks = n;
  c.setup.nExperts = experts;
  c.setup.topk = topk;
  std::vector<size_t> tokens(static_cast<size_t>(n));
  for (size_t& t : tokens) t = 1 + rng() % 23;
  if (routing == Routing::SomeRanksEmpty) {
    for (size_t r = 0; r < tokens.size(); r += 2) tokens[r] = 0;
  }
  if (routing == Routing::AllEmpty) tokens.assign(tokens.size(), 0);
  const auto k = static_cast<size_t>(topk);
  const int hot = experts - 1;
  const std::vector<int> last = c.setup.localExperts(c.setup.rankOf(hot));
  c.ids = makeIds(tokens, k, [&](int, size_t, int64_t* out) {
    switch (routing) {
      case Routing::OneExpert: std::fill(out, out + k, hot); break;
      case Routing::OneRank:
        for (size_t j = 0; j < k; ++j) out[j] = last[(j + rng()) % last.size()];
        break;
      case Routing::Duplicates:
        distinct(rng, experts, k, out);
        out[k - 1] = out[0];
        break;
      default: distinct(rng, experts, k, out); break;
    }
  });
  return c;
}

TEST(Moe, EveryRoutingOnOneToEightRanksMatchesTheReference) {
  const Routing routings[] = {Routing::Uniform,    Routing::OneExpert,      Routing::OneRank,
                              Routing::Duplicates, Routing::SomeRanksEmpty, Routing::AllEmpty};
  uint32_t seed = 1;
  for (int n : {1, 2, 3, 4, 5, 8}) {
    for (Routing routing : routings) {
      for (int topk : {1, 2, 4}) {
        if (topk > 2 * n + 1) continue;  // topk <= experts
        SCOPED_TRACE(::testing::Message() << n << " ranks, routing " << static_cast<int>(routing) << ", topk " << topk);
        Case c = routed(n, 2 * n + 1, topk, routing, ++seed);
        c.weighted = seed % 3 != 0;
        runCase(c, seed);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(Moe, EveryTokenTypeAndIdTypeWithAnExplicitExpertMap) {
  uint32_t seed = 100;
  for (DataType token : {DataType::Bfloat16, DataType::Float16, DataType::Float32, DataType::Fp8E4M3}) {
    for (DataType out : {DataType::Bfloat16, DataType::Float32}) {
      SCOPED_TRACE(::testing::Message() << dataTypeName(token) << " -> " << dataTypeName(out));
      Case c = routed(4, 9, 3, Routing::Uniform, ++seed);
      c.setup.expertRank = {3, 0, 3, 1, 0, 0, 3, 1, 3};  // rank 2 holds no expert
      c.ids = routed(4, 9, 3, Routing::Duplicates, seed).ids;
      c.tokenType = token;
      c.outType = out;
      c.idType = seed % 2 ? DataType::Int64 : DataType::Int32;
      c.hidden = token == DataType::Fp8E4M3 ? 256 : 40;
      c.foldChunkBytes = seed % 2 ? 1 : size_t{1} << 20;  // one token per chunk, or all in one
      c.geometry = {512, 2};
      runCase(c, seed);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(Moe, BoundedModeDropsRowsPastItsBoundAndReportsThem) {
  for (size_t capacity : {size_t{1}, size_t{7}, size_t{200}}) {
    SCOPED_TRACE(::testing::Message() << "capacity " << capacity);
    Case c = routed(3, 6, 2, Routing::Uniform, static_cast<uint32_t>(capacity));
    c.setup.bounded = true;
    c.setup.capacity = capacity;
    runCase(c, 5);
    if (HasFatalFailure()) return;
  }
}

TEST(Moe, TheSameRoutingGivesTheSameBitsFromRunToRun) {
  // runCase checks the bits against one fixed order; twice over, with the same seed, they must also agree.
  Case c = routed(5, 16, 4, Routing::Uniform, 9);
  c.outType = DataType::Float32;
  runCase(c, 77);
  runCase(c, 77);
}

// Each rank runs `config(r)`; every rank's dispatch must fail with InvalidArgument naming `word`.
void expectRefused(int n, const std::function<void(int, coll::MoeConfig&, std::vector<int32_t>&)>& tweak,
                   const char* word) {
  Case c = routed(n, 2 * n, 2, Routing::Uniform, 3);
  std::vector<Rank> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    Rank& rk = ranks[static_cast<size_t>(r)];
    rk.state = std::make_shared<MoeState>();
    rk.state->config = configOf(c);
    std::vector<int32_t> ids(8);  // 4 tokens, 2 experts each
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i + static_cast<size_t>(r)) % static_cast<size_t>(2 * n));
    tweak(r, rk.state->config, ids);
    rk.idBytes.assign(reinterpret_cast<const uint8_t*>(ids.data()), reinterpret_cast<const uint8_t*>(ids.data() + ids.size()));
    rk.args.moe = std::make_shared<MoeArgs>();
    rk.args.moe->state = rk.state;
    rk.args.moe->nTokens = ids.size() / 2;
    rk.args.moe->buffers[MoeArgs::Ids].p = rk.idBytes.data();
  }
  LoopbackWorld world(n, {256, 2});
  const auto st = runPhase(world, ranks, MoeArgs::Phase::Exchange);
  for (int r = 0; r < n; ++r) {
    const Status& s = st[static_cast<size_t>(r)];
    EXPECT_EQ(s.code(), Errc::InvalidArgument) << "rank " << r << ": " << s.message();
    EXPECT_NE(s.message().find(word), std::string::npos) << "rank " << r << ": " << s.message();
  }
}

TEST(Moe, RanksThatDisagreeOnTheConfigurationFailTogetherByName) {
  expectRefused(3, [](int r, coll::MoeConfig& m, std::vector<int32_t>&) { if (r == 1) m.hidden = 48; }, "hidden");
  expectRefused(4, [](int r, coll::MoeConfig& m, std::vector<int32_t>&) { if (r == 3) m.tokenType = DataType::Float16; },
                "token type");
  expectRefused(2, [](int r, coll::MoeConfig& m, std::vector<int32_t>&) {
    if (r == 0) {
      std::swap(m.expertRank.front(), m.expertRank.back());
      m.derive(2);
    }
  }, "expert-to-rank map");
}

TEST(Moe, ExpertIdsOutOfRangeFailEveryRankNamingTheRankAndToken) {
  expectRefused(3, [](int r, coll::MoeConfig&, std::vector<int32_t>& ids) { if (r == 2) ids[5] = 99; },
                "rank 2's expert ids are out of range: its token 2 has expert id 99");
  expectRefused(2, [](int r, coll::MoeConfig&, std::vector<int32_t>& ids) { if (r == 0) ids[0] = -1; }, "expert id -1");
}

}  // namespace
}  // namespace cfx::testing
