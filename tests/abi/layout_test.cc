// SPDX-License-Identifier: Apache-2.0
// Our nccl.h against NVIDIA's 2.28.9 nccl.h: struct sizes and offsets, enum values, constants, initializers and
// the type of every function must be identical (tests/abi).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "abi/abi_facts.h"

namespace cfx::abitest {
namespace {

// Compares two fact maps key by key, so a failure names each differing fact instead of dumping both maps.
template <typename V>
void expectSameFacts(const std::map<std::string, V>& reference, const std::map<std::string, V>& ours,
                     const char* what) {
  for (const auto& [key, value] : reference) {
    auto it = ours.find(key);
    if (it == ours.end()) {
      ADD_FAILURE() << what << " " << key << " is recorded for the reference but not for ours";
      continue;
    }
    EXPECT_EQ(value, it->second) << what << " " << key << " differs (reference vs ours)";
  }
  for (const auto& [key, value] : ours) {
    if (reference.find(key) == reference.end()) ADD_FAILURE() << what << " " << key << " is only recorded for ours";
  }
}

void expectSameAbi(const AbiFacts& reference, const AbiFacts& ours) {
  expectSameFacts(reference.values, ours.values, "value");
  expectSameFacts(reference.types, ours.types, "type");
  expectSameFacts(reference.strings, ours.strings, "string");
}

TEST(HeaderAbi, OurHeaderRecordsEveryFact) {
  AbiFacts ours = ourAbiFacts();
  // A guard against the collector silently recording nothing, which would make the comparisons vacuous.
  EXPECT_GT(ours.values.size(), 140u);
  EXPECT_EQ(ours.types.count("ncclAllReduce"), 1u);
  EXPECT_EQ(ours.types.count("pncclAllReduce"), 1u);
  EXPECT_EQ(ours.values.at("sizeof(ncclConfig_t)"), 80);
  EXPECT_EQ(ours.values.at("sizeof(ncclUniqueId)"), 128);
  EXPECT_EQ(ours.values.at("NCCL_VERSION_CODE"), 22809);
  EXPECT_EQ(ours.types.at("cudaStream_t"), "CUstream_st*");
}

TEST(HeaderAbi, MatchesNvidiaHeader) {
#if CFX_HAVE_NVIDIA_NCCL_H
  expectSameAbi(nvidiaAbiFacts(), ourAbiFacts());
#else
  GTEST_SKIP() << "NVIDIA's nccl.h was not found at configure time (CFX_NVIDIA_NCCL_INCLUDE_DIR)";
#endif
}

TEST(HeaderAbi, SameWithAndWithoutCudaHeaders) {
#if CFX_HAVE_CUDA_HEADERS
  expectSameAbi(ourAbiFacts(), ourAbiFactsWithCuda());
#else
  GTEST_SKIP() << "CUDA headers were not found at configure time";
#endif
}

}  // namespace
}  // namespace cfx::abitest
