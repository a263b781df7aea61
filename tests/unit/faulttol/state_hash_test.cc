// SPDX-License-Identifier: Apache-2.0
// StateHasher: XXH3-128's published value, independence from how the bytes are split, and sensitivity to every
// byte (faulttol layer).
#include "faulttol/state_hash.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace cfx::ft {
namespace {

TEST(StateHash, EmptyInputHasXxh3sPublishedDigest) {
  // XXH3_128bits("", 0) with the default seed, as xxhsum -H2 prints it.
  EXPECT_EQ(hashBytes128(nullptr, 0).hex(), "99aa06d3014798d86001c324468d497f");
  StateHasher h;
  EXPECT_EQ(h.digest().hex(), "99aa06d3014798d86001c324468d497f");
}

TEST(StateHash, SplittingTheBytesDoesNotChangeTheDigest) {
  std::vector<uint8_t> bytes(1 << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  const StateHash whole = hashBytes128(bytes.data(), bytes.size());
  for (size_t cut : {size_t{1}, size_t{63}, size_t{240}, size_t{4097}, bytes.size() - 1}) {
    StateHasher h;
    h.update(bytes.data(), cut);
    h.update(bytes.data() + cut, 0);
    h.update(bytes.data() + cut, bytes.size() - cut);
    EXPECT_EQ(h.digest(), whole) << "cut at " << cut;
  }
}

TEST(StateHash, EveryByteAndTheLengthMatter) {
  std::vector<uint8_t> bytes(3000, 0x5a);
  const StateHash base = hashBytes128(bytes.data(), bytes.size());
  for (size_t at : {size_t{0}, size_t{1499}, size_t{2999}}) {
    bytes[at] ^= 1;
    EXPECT_NE(hashBytes128(bytes.data(), bytes.size()), base) << "byte " << at;
    bytes[at] ^= 1;
  }
  EXPECT_NE(hashBytes128(bytes.data(), bytes.size() - 1), base);
  EXPECT_EQ(hashBytes128(bytes.data(), bytes.size()), base);
}

}  // namespace
}  // namespace cfx::ft
