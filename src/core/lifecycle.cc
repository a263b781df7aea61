// SPDX-License-Identifier: Apache-2.0
// Split and shrink (core layer). Both reduce to "the members agree on a list, the first member creates a fresh
// unique id and sends it to the others over the parent's bootstrap, and everyone joins a new communicator".
#include "core/lifecycle.h"

#include <algorithm>

#include "common/log.h"

namespace cfx::core {

namespace {

constexpr uint64_t kSplitTagBase = 0x5350000000000000ull;   // "SP"
constexpr uint64_t kShrinkTagBase = 0x5348000000000000ull;  // "SH"

// Members are parent ranks in child order. The first member creates the id; every member joins.
Result<std::unique_ptr<Communicator>> formChild(Communicator& parent, const std::vector<int>& members, uint64_t tag,
                                                const CommConfig& config, const CommOptions& options) {
  const auto me = std::find(members.begin(), members.end(), parent.rank());
  const int newRank = static_cast<int>(me - members.begin());
  const int nNew = static_cast<int>(members.size());
  uint8_t wire[transport::UniqueId::kBytes] = {};
  if (newRank == 0) {
    CFX_TRY_ASSIGN(transport::UniqueId id, transport::createUniqueId(options.bootstrap.options));
    id.encode(wire);
    for (int i = 1; i < nNew; ++i) CFX_TRY(parent.bootstrap().send(members[static_cast<size_t>(i)], tag, wire, sizeof(wire)));
  } else {
    CFX_TRY(parent.bootstrap().recv(members[0], tag, wire, sizeof(wire)));
  }
  CFX_TRY_ASSIGN(transport::UniqueId id, transport::UniqueId::decode(wire));
  return Communicator::create(id, newRank, nNew, config, options);
}

}  // namespace

Result<std::unique_ptr<Communicator>> splitComm(Communicator& parent, int color, int key, const CommConfig& config,
                                                const CommOptions& options) {
  struct Entry {
    int color;
    int key;
  };
  std::vector<Entry> all(static_cast<size_t>(parent.nRanks()));
  all[static_cast<size_t>(parent.rank())] = {color, key};
  const uint32_t splitCount = parent.nextSplitCount();
  CFX_TRY(parent.bootstrap().allGather(all.data(), sizeof(Entry)));
  if (color < 0) {
    CFX_INFO(log::Sys::Init, "Rank %d has color with NCCL_SPLIT_NOCOLOR, not creating a new communicator", parent.rank());
    return std::unique_ptr<Communicator>();
  }
  std::vector<int> members;
  for (int r = 0; r < parent.nRanks(); ++r) {
    if (all[static_cast<size_t>(r)].color == color) members.push_back(r);
  }
  // Stable: equal keys keep parent-rank order, as NCCL does.
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[static_cast<size_t>(a)].key < all[static_cast<size_t>(b)].key;
  });
  return formChild(parent, members, kSplitTagBase | splitCount, config, options);
}

Result<std::unique_ptr<Communicator>> shrinkComm(Communicator& parent, std::vector<int> exclude, const CommConfig& config,
                                                 const CommOptions& options) {
  std::sort(exclude.begin(), exclude.end());
  exclude.erase(std::unique(exclude.begin(), exclude.end()), exclude.end());
  for (int r : exclude) {
    if (r < 0 || r >= parent.nRanks()) {
      return Status::error(Errc::InvalidArgument, strprintf("excluded rank %d is out of range 0..%d", r, parent.nRanks() - 1));
    }
  }
  if (std::binary_search(exclude.begin(), exclude.end(), parent.rank())) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("rank %d is in the exclude list: excluded ranks must not call ncclCommShrink", parent.rank()));
  }
  std::vector<int> members;
  for (int r = 0; r < parent.nRanks(); ++r) {
    if (!std::binary_search(exclude.begin(), exclude.end(), r)) members.push_back(r);
  }
  return formChild(parent, members, kShrinkTagBase | parent.nextSplitCount(), config, options);
}

}  // namespace cfx::core
