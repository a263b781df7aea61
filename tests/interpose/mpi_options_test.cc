// SPDX-License-Identifier: Apache-2.0
// The interposer's size rule without MPI: parsing of the CFX_MPI_<COLL>_MPI_BAND knobs (strict: anything
// malformed is rejected, never half-read) and the routing decision at the edges of the minimum and the bands.
#include "interpose/mpi_options.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace cfx::interpose {
namespace {

TEST(interpose_mpi_band, NoneAndEmptyMeanNoBand) {
  ByteBands b;
  b.count = 3;
  EXPECT_FALSE(parseByteBands("none", b));
  EXPECT_EQ(b.count, 0u);
  b.count = 3;
  EXPECT_FALSE(parseByteBands("", b));
  EXPECT_EQ(b.count, 0u);
}

TEST(interpose_mpi_band, ParsesRangesWithBinarySuffixes) {
  ByteBands b;
  ASSERT_FALSE(parseByteBands("256K-16M,1G-2G,100-101", b));
  ASSERT_EQ(b.count, 3u);
  EXPECT_EQ(b.band[0].lo, 256 << 10);
  EXPECT_EQ(b.band[0].hi, 16 << 20);
  EXPECT_EQ(b.band[1].lo, int64_t{1} << 30);
  EXPECT_EQ(b.band[1].hi, int64_t{2} << 30);
  EXPECT_EQ(b.band[2].lo, 100);
  EXPECT_EQ(b.band[2].hi, 101);
}

TEST(interpose_mpi_band, RejectsMalformedValuesAndLeavesOutAlone) {
  for (const char* bad :
       {"256K", "256K-", "-16M", "16M-256K", "4K-4K", "1k-2k", "1K-2KB", "1K-2K,", ",1K-2K", "1K-2K;4K-8K", " 1K-2K",
        "1K - 2K", "0x10-0x20", "1-2,3-4,5-6,7-8,9-10", "99999999999999999999-1", "9000000000G-9000000001G", "None"}) {
    ByteBands b;
    b.count = 1;
    b.band[0] = {7, 9};
    EXPECT_TRUE(parseByteBands(bad, b)) << bad;
    EXPECT_EQ(b.count, 1u) << bad;
    EXPECT_EQ(b.band[0].lo, 7) << bad;
  }
  ByteBands four;
  EXPECT_FALSE(parseByteBands("1-2,3-4,5-6,7-8", four));
  EXPECT_EQ(four.count, 4u);
}

// Minimum 8 KiB, MPI keeps [256 KiB, 16 MiB): routed in [8 KiB, 256 KiB) and from 16 MiB on, for the blocking
// and the non-blocking form alike; other collectives are unaffected.
TEST(interpose_mpi_band, SizeRuleAtTheEdges) {
  MpiOptions o;
  const auto i = static_cast<size_t>(MpiColl::Allgather);
  o.minBytes[i] = 8 << 10;
  ASSERT_FALSE(parseByteBands("256K-16M", o.mpiBands[i]));
  for (MpiColl c : {MpiColl::Allgather, MpiColl::Iallgather}) {
    EXPECT_FALSE(sizeRoutes(o, c, 0));
    EXPECT_FALSE(sizeRoutes(o, c, (8 << 10) - 1));
    EXPECT_TRUE(sizeRoutes(o, c, 8 << 10));
    EXPECT_TRUE(sizeRoutes(o, c, (256 << 10) - 1));
    EXPECT_FALSE(sizeRoutes(o, c, 256 << 10));
    EXPECT_FALSE(sizeRoutes(o, c, (16 << 20) - 1));
    EXPECT_TRUE(sizeRoutes(o, c, 16 << 20));
    EXPECT_TRUE(sizeRoutes(o, c, int64_t{1} << 40));
  }
  EXPECT_TRUE(sizeRoutes(o, MpiColl::Alltoall, 256 << 10));  // minimum 0, no band
}

// The shipped defaults parse (a bad default band would silently mean "no band") and route the largest calls,
// where Conflux won for every collective in docs/notes/mpi_interposer.md.
TEST(interpose_mpi_band, DefaultsParseAndRouteLargeCalls) {
  const MpiOptions& o = mpiOptions();
  for (size_t c = 0; c < kNumBlockingColls; ++c) {
    if (static_cast<MpiColl>(c) == MpiColl::Barrier) continue;
    EXPECT_TRUE(sizeRoutes(o, static_cast<MpiColl>(c), int64_t{256} << 20)) << mpiCollName(static_cast<MpiColl>(c));
  }
}

}  // namespace
}  // namespace cfx::interpose
