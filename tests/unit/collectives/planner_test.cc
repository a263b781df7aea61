// SPDX-License-Identifier: Apache-2.0
// The planner alone: algorithm choice per collective and size, and NCCL_ALGO parsing.
#include "collectives/planner.h"

#include <gtest/gtest.h>

namespace cfx::coll {
namespace {

constexpr size_t kSlice = 128 * 1024;

Algorithm choose(Collective coll, size_t bytes, int nRanks, const PlannerOptions& opts = {}) {
  return choosePlan({coll, bytes, nRanks, kSlice}, opts).algorithm;
}

PlannerOptions parse(std::string_view spec) {
  Result<PlannerOptions> r = parseAlgoSpec(spec);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r.value() : PlannerOptions{};
}

TEST(Planner, SmallAllReduceExchangesOnPowersOfTwoAndDoublesOtherwiseUpToOneSlice) {
  EXPECT_EQ(choose(Collective::AllReduce, 0, 8), Algorithm::Exchange);
  EXPECT_EQ(choose(Collective::AllReduce, 4, 2), Algorithm::Exchange);
  EXPECT_EQ(choose(Collective::AllReduce, kSlice, 4), Algorithm::Exchange);
  EXPECT_EQ(choose(Collective::AllReduce, kSlice + 1, 2), Algorithm::Ring);
  EXPECT_EQ(choose(Collective::AllReduce, 4, 3), Algorithm::RecDouble);
  EXPECT_EQ(choose(Collective::AllReduce, kSlice, 7), Algorithm::RecDouble);
  EXPECT_EQ(choose(Collective::AllReduce, kSlice + 1, 7), Algorithm::Ring);
  EXPECT_EQ(choose(Collective::AllReduce, size_t{1} << 30, 8), Algorithm::Ring);
}

TEST(Planner, ExchangeCanBeExcludedOrForced) {
  EXPECT_EQ(choose(Collective::AllReduce, 64, 8, parse("^exchange")), Algorithm::RecDouble);
  EXPECT_EQ(choose(Collective::AllReduce, 64, 8, parse("allreduce:recdouble,ring")), Algorithm::RecDouble);
  EXPECT_EQ(choose(Collective::AllReduce, 64, 8, parse("allreduce:Exchange")), Algorithm::Exchange);
  // Not applicable on 6 ranks or above one slice: the default choice instead.
  EXPECT_EQ(choose(Collective::AllReduce, 64, 6, parse("allreduce:exchange")), Algorithm::RecDouble);
  EXPECT_EQ(choose(Collective::AllReduce, kSlice + 1, 8, parse("allreduce:exchange")), Algorithm::Ring);
}

TEST(Planner, SingleRankAllReduceUsesRing) { EXPECT_EQ(choose(Collective::AllReduce, 16, 1), Algorithm::Ring); }

TEST(Planner, EveryOtherCollectiveHasItsDefault) {
  for (size_t bytes : {size_t{0}, size_t{64}, kSlice * 100}) {
    for (int n : {1, 2, 5, 8}) {
      EXPECT_EQ(choose(Collective::AllGather, bytes, n), Algorithm::Ring);
      EXPECT_EQ(choose(Collective::ReduceScatter, bytes, n), Algorithm::Ring);
      EXPECT_EQ(choose(Collective::Broadcast, bytes, n), Algorithm::Chain);
      EXPECT_EQ(choose(Collective::Reduce, bytes, n), Algorithm::Chain);
      EXPECT_EQ(choose(Collective::AlltoAll, bytes, n), Algorithm::Direct);
      EXPECT_EQ(choose(Collective::Gather, bytes, n), Algorithm::Direct);
      EXPECT_EQ(choose(Collective::Scatter, bytes, n), Algorithm::Direct);
    }
  }
}

TEST(Planner, EveryChoiceIsImplemented) {
  const PlannerOptions specs[] = {PlannerOptions{}, parse("ring"), parse("^ring,recdouble"), parse("chain"),
                                  parse("direct"), parse("exchange")};
  for (const PlannerOptions& opts : specs) {
    for (int c = 0; c < kNumCollectives; ++c) {
      for (size_t bytes : {size_t{0}, kSlice, kSlice + 1}) {
        for (int n : {1, 2, 3, 4}) {
          const auto coll = static_cast<Collective>(c);
          EXPECT_TRUE(hasAlgorithm(coll, choose(coll, bytes, n, opts))) << collectiveName(coll) << " " << opts.algoSpec;
        }
      }
    }
  }
}

TEST(Planner, NcclAlgoRestrictsTheChoice) {
  EXPECT_EQ(choose(Collective::AllReduce, 64, 8, parse("ring")), Algorithm::Ring);
  EXPECT_EQ(choose(Collective::AllReduce, 64, 8, parse("RING")), Algorithm::Ring);
  EXPECT_EQ(choose(Collective::AllReduce, 64, 8, parse("^recdouble,exchange")), Algorithm::Ring);
  EXPECT_EQ(choose(Collective::AllReduce, 64, 8, parse("allreduce:Ring")), Algorithm::Ring);
  EXPECT_EQ(choose(Collective::AllReduce, 64, 8, parse("allreduce:ring,recdouble")), Algorithm::RecDouble);
  EXPECT_EQ(choose(Collective::AllReduce, 64, 8, parse("broadcast:chain")), Algorithm::Exchange);
  EXPECT_EQ(choose(Collective::AllReduce, 64, 7, parse("broadcast:chain")), Algorithm::RecDouble);
}

TEST(Planner, LaterSectionsReplaceEarlierOnes) {
  const PlannerOptions opts = parse(" ring ; AllReduce : RecDouble ");
  EXPECT_EQ(choose(Collective::AllReduce, 64, 8, opts), Algorithm::RecDouble);
  EXPECT_EQ(choose(Collective::AllGather, 64, 8, opts), Algorithm::Ring);
  const PlannerOptions back = parse("allreduce:ring;recdouble,ring");
  EXPECT_EQ(choose(Collective::AllReduce, 64, 8, back), Algorithm::RecDouble);
}

TEST(Planner, InapplicableForcedAlgorithmFallsBackToTheDefault) {
  const PlannerOptions opts = parse("allreduce:recdouble");
  EXPECT_EQ(choose(Collective::AllReduce, kSlice * 4, 8, opts), Algorithm::Ring);
  EXPECT_EQ(choose(Collective::AllReduce, 64, 1, opts), Algorithm::Ring);
  const PlanRequest req{Collective::AllReduce, kSlice * 4, 8, kSlice};
  EXPECT_NE(describePlan(req, choosePlan(req, opts), opts).find("allows no algorithm"), std::string::npos);
}

TEST(Planner, GlobalListThatExcludesACollectivesOnlyAlgorithmFallsBack) {
  const PlannerOptions opts = parse("ring");
  EXPECT_EQ(choose(Collective::Broadcast, 64, 4, opts), Algorithm::Chain);
  EXPECT_EQ(choose(Collective::AlltoAll, 64, 4, opts), Algorithm::Direct);
}

TEST(Planner, EmptySpecAllowsEverything) {
  for (std::string_view spec : {"", "   "}) {
    const PlannerOptions opts = parse(spec);
    for (int c = 0; c < kNumCollectives; ++c) {
      for (int a = 0; a < kNumAlgorithms; ++a) {
        EXPECT_TRUE(opts.allows(static_cast<Collective>(c), static_cast<Algorithm>(a)));
      }
    }
  }
}

TEST(Planner, ExclusionListExcludesOnlyTheNamed) {
  const PlannerOptions opts = parse("allreduce:^ring");
  EXPECT_FALSE(opts.allows(Collective::AllReduce, Algorithm::Ring));
  EXPECT_TRUE(opts.allows(Collective::AllReduce, Algorithm::RecDouble));
  EXPECT_TRUE(opts.allows(Collective::AllGather, Algorithm::Ring));
}

TEST(Planner, ParserRejectsBadSpecsWithAReason) {
  struct Case {
    const char* spec;
    const char* mentions;
  };
  const Case cases[] = {
      {"collnet", "unknown algorithm \"collnet\""},
      {"broadcast:tree", "Broadcast has no Tree algorithm"},
      {"ring,nvlsx", "unknown algorithm \"nvlsx\""},
      {"allreduce:ring;bcast:chain", "unknown collective \"bcast\""},
      {"broadcast:ring", "Broadcast has no Ring algorithm"},
      {"allreduce:^chain", "AllReduce has no Chain algorithm"},
      {"ring,,chain", "empty algorithm name"},
      {"allreduce:", "empty algorithm name"},
      {"ring;", "empty algorithm name"},
      {"^", "empty algorithm name"},
  };
  for (const Case& c : cases) {
    Result<PlannerOptions> r = parseAlgoSpec(c.spec);
    ASSERT_FALSE(r.ok()) << c.spec;
    EXPECT_EQ(r.status().code(), Errc::InvalidArgument) << c.spec;
    EXPECT_NE(r.status().message().find(c.mentions), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("NCCL_ALGO"), std::string::npos) << r.status().message();
  }
}

TEST(Planner, NcclsAlgorithmsWeLackAreSkippedAndTheRestApplies) {
  std::vector<std::string> skipped;
  // PyTorch's deterministic mode sets ^NVLS: it excludes nothing here, where it used to discard the whole spec.
  Result<PlannerOptions> r = parseAlgoSpec("^NVLS", &skipped);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(skipped, std::vector<std::string>{"NVLS"});
  for (int a = 0; a < kNumAlgorithms; ++a) {
    EXPECT_TRUE(r.value().allows(Collective::AllReduce, static_cast<Algorithm>(a)));
  }

  r = parseAlgoSpec("nvls,Tree,nvlstree", &skipped);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(skipped, (std::vector<std::string>{"NVLS", "NVLSTree"}));  // NCCL's spelling, each once
  EXPECT_EQ(choose(Collective::AllReduce, size_t{1} << 24, 8, r.value()), Algorithm::Tree);
  EXPECT_FALSE(r.value().allows(Collective::AllReduce, Algorithm::Ring));

  r = parseAlgoSpec("allreduce:^CollNetDirect,CollNetChain,PAT,Ring;broadcast:^NVLS", &skipped);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(skipped, (std::vector<std::string>{"CollNetDirect", "CollNetChain", "PAT", "NVLS"}));
  EXPECT_FALSE(r.value().allows(Collective::AllReduce, Algorithm::Ring));
  EXPECT_TRUE(r.value().allows(Collective::AllReduce, Algorithm::Tree));
  EXPECT_TRUE(r.value().allows(Collective::Broadcast, Algorithm::Chain));

  // Only NCCL's names in an allow list: nothing this library has is allowed, so the default choice runs and the
  // op's INFO/TUNING line says so.
  r = parseAlgoSpec("NVLS", &skipped);
  ASSERT_TRUE(r.ok());
  const PlanRequest req{Collective::AllReduce, 4096, 8, kSlice};
  EXPECT_NE(describePlan(req, choosePlan(req, r.value()), r.value()).find("allows no algorithm"), std::string::npos);

  // A misspelt name is still refused, and the message lists NCCL's names that are accepted.
  r = parseAlgoSpec("^NVSL", &skipped);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("NVLSTree and PAT are accepted and skipped"), std::string::npos);
}

TEST(Planner, DescribePlanIsOneLineWithTheDecision) {
  const PlanRequest req{Collective::AllReduce, 4096, 8, kSlice};
  EXPECT_EQ(describePlan(req, choosePlan(req, {}), {}), "AllReduce 4096 B on 8 ranks: Exchange, slice 131072 B");
  const PlannerOptions opts = parse("allreduce:ring");
  EXPECT_EQ(describePlan(req, choosePlan(req, opts), opts),
            "AllReduce 4096 B on 8 ranks: Ring, slice 131072 B (chosen by NCCL_ALGO=allreduce:ring)");
}

TEST(Planner, NcclProtoIsParsedAndAnExcludedSimpleIsReported) {
  PlannerOptions opts;
  ASSERT_TRUE(parseProtoSpec("LL,LL128,Simple", opts).ok());
  EXPECT_EQ(opts.simpleExcluded, 0u);
  ASSERT_TRUE(parseProtoSpec("allreduce:^simple", opts).ok());
  EXPECT_EQ(opts.simpleExcluded, 1u << static_cast<unsigned>(Collective::AllReduce));
  ASSERT_TRUE(parseProtoSpec("LL128;broadcast:simple", opts).ok());
  EXPECT_EQ(opts.simpleExcluded & (1u << static_cast<unsigned>(Collective::Broadcast)), 0u);
  EXPECT_NE(opts.simpleExcluded & (1u << static_cast<unsigned>(Collective::AllGather)), 0u);
  const PlanRequest req{Collective::AllGather, 4096, 8, kSlice};
  EXPECT_NE(describePlan(req, choosePlan(req, opts), opts).find("NCCL_PROTO=LL128;broadcast:simple excludes Simple"),
            std::string::npos);
  Status st = parseProtoSpec("LL64", opts);
  EXPECT_EQ(st.code(), Errc::InvalidArgument);
  EXPECT_NE(st.message().find("unknown protocol \"LL64\""), std::string::npos) << st.message();
  EXPECT_EQ(parseProtoSpec("bcast:ll", opts).code(), Errc::InvalidArgument);
}

TEST(Planner, NamesMatchNcclsSpelling) {
  EXPECT_STREQ(collectiveName(Collective::AllReduce), "AllReduce");
  EXPECT_STREQ(collectiveName(Collective::ReduceScatter), "ReduceScatter");
  EXPECT_STREQ(collectiveName(Collective::AlltoAll), "AlltoAll");
  EXPECT_STREQ(algorithmName(Algorithm::RecDouble), "RecDouble");
  EXPECT_STREQ(algorithmName(Algorithm::Exchange), "Exchange");
}

}  // namespace
}  // namespace cfx::coll
