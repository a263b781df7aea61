// SPDX-License-Identifier: Apache-2.0
// How many host lanes a communicator uses (core/host_lanes.h, resolveHostLanes): what CFX_HOST_LANES says, or
// with the automatic 0, lanes only across a long round trip.
#include <gtest/gtest.h>

#include "core/host_lanes.h"

namespace cfx::core {
namespace {

TEST(ResolveHostLanes, AConfiguredCountIsKeptWhateverThePath) {
  for (int configured : {1, 2, 4, 16}) {
    EXPECT_EQ(resolveHostLanes(configured, 0), configured);
    EXPECT_EQ(resolveHostLanes(configured, 0.05), configured);
  }
}

TEST(ResolveHostLanes, AutomaticGivesLanesFromTheThresholdRoundTripOn) {
  EXPECT_EQ(resolveHostLanes(0, 0), 1) << "one host, or no tcp pair";
  EXPECT_EQ(resolveHostLanes(0, 100e-6), 1) << "a LAN";
  EXPECT_EQ(resolveHostLanes(0, kAutoHostLanesRttSeconds * 0.99), 1);
  EXPECT_EQ(resolveHostLanes(0, kAutoHostLanesRttSeconds), kAutoHostLanes);
  EXPECT_EQ(resolveHostLanes(0, 0.05), kAutoHostLanes) << "the 50 ms wide-area bed";
}

}  // namespace
}  // namespace cfx::core
