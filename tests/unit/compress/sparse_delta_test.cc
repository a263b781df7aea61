// SPDX-License-Identifier: Apache-2.0
// Lossless sparse deltas: every encoding rebuilds the new state bit for bit, the smallest one is chosen, and bytes
// that cannot be an encoding are refused without touching the state.
#include "compress/sparse_delta.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace cfx::compress {
namespace {

template <class T>
void roundTrip(size_t count, double fraction, uint32_t seed, DeltaMode expectMode) {
  std::mt19937 rng(seed);
  std::vector<T> prev(count), next;
  for (T& v : prev) v = static_cast<T>(rng() % 100);  // small: +1..7 always changes the value
  next = prev;
  std::bernoulli_distribution change(fraction);
  size_t changed = 0;
  for (T& v : next) {
    if (change(rng)) {
      v = static_cast<T>(v + 1 + rng() % 7);
      ++changed;
    }
  }
  const DeltaPlan plan = planDelta(next.data(), prev.data(), count, sizeof(T));
  EXPECT_EQ(plan.changed, changed);
  EXPECT_EQ(plan.mode, expectMode) << "fraction " << fraction;
  std::vector<unsigned char> enc(plan.bytes);
  encodeDelta(plan, next.data(), prev.data(), count, sizeof(T), enc.data());
  std::vector<T> rebuilt = prev;
  ASSERT_TRUE(applyDelta(plan.mode, enc.data(), enc.size(), plan.changed, rebuilt.data(), count, sizeof(T)).ok());
  EXPECT_EQ(0, std::memcmp(rebuilt.data(), next.data(), count * sizeof(T)));
}

TEST(SparseDelta, EveryEncodingRebuildsTheStateAndTheSmallestIsChosen) {
  roundTrip<float>(100000, 0.01, 1, DeltaMode::Indices);
  roundTrip<float>(100000, 0.2, 2, DeltaMode::Bitmap);
  roundTrip<float>(100000, 0.99, 3, DeltaMode::Full);
  roundTrip<uint8_t>(100003, 0.05, 4, DeltaMode::Bitmap);
  roundTrip<double>(77, 0.0, 5, DeltaMode::Indices);  // nothing changed: an empty index list
  roundTrip<uint16_t>(1, 1.0, 6, DeltaMode::Full);
  // 1 % of fp32: at most 1/25 of the buffer (8 bytes per changed element against 4 per element).
  EXPECT_LE(deltaBytes(DeltaMode::Indices, 10000, 1000000, 4) * 25, 1000000u * 4);
}

TEST(SparseDelta, SignedZerosAndNaNPayloadsCountAsChanges) {
  std::vector<float> prev = {0.0f, 1.0f, 2.0f}, next = {-0.0f, 1.0f, 2.0f};
  EXPECT_EQ(planDelta(next.data(), prev.data(), 3, 4).changed, 1u);
}

TEST(SparseDelta, MalformedEncodingsAreRefusedAndLeaveTheStateAlone) {
  std::vector<float> state(64, 1.0f);
  const std::vector<float> before = state;
  std::vector<unsigned char> enc(2 * 8, 0);
  auto refuse = [&](DeltaMode mode, uint64_t bytes, uint64_t changed) {
    EXPECT_EQ(applyDelta(mode, enc.data(), bytes, changed, state.data(), state.size(), 4).code(), Errc::InvalidArgument);
    EXPECT_EQ(state, before);
  };
  // Indices out of range and not ascending.
  const uint32_t bad[2] = {70, 3};
  std::memcpy(enc.data(), bad, 8);
  refuse(DeltaMode::Indices, 16, 2);
  const uint32_t unsorted[2] = {9, 9};
  std::memcpy(enc.data(), unsorted, 8);
  refuse(DeltaMode::Indices, 16, 2);
  refuse(DeltaMode::Indices, 15, 2);  // a size that is not 2 entries
  refuse(DeltaMode::Full, 16, 0);
  refuse(static_cast<DeltaMode>(7), 16, 2);
  refuse(DeltaMode::Indices, 16, 65);  // more changes than elements
  // A bitmap counting another number of elements than announced.
  std::vector<unsigned char> map(8 + 4, 0);
  map[0] = 0x3;
  EXPECT_EQ(applyDelta(DeltaMode::Bitmap, map.data(), map.size(), 1, state.data(), 64, 4).code(), Errc::InvalidArgument);
  std::vector<float> odd(5, 1.0f);
  std::vector<unsigned char> oddMap(1 + 4, 0);
  oddMap[0] = 0x80;  // bit 7 of a 5-element map: past the end
  EXPECT_EQ(applyDelta(DeltaMode::Bitmap, oddMap.data(), oddMap.size(), 1, odd.data(), 5, 4).code(), Errc::InvalidArgument);
  EXPECT_EQ(state, before);
}

}  // namespace
}  // namespace cfx::compress
