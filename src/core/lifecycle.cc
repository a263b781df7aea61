// SPDX-License-Identifier: Apache-2.0
// Split, shrink and grow (core layer). Split and shrink reduce to "the members agree on a list, the first member
// creates a fresh unique id and sends it to the others over the parent's bootstrap, and everyone joins a new
// communicator"; grow is the same with the id made beforehand (ncclCommGetUniqueId) and known to the new ranks.
#include "core/lifecycle.h"

#include <algorithm>
#include <cstring>

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

Result<transport::UniqueId> agreeGrowId(Communicator& parent, int nRanks, const transport::UniqueId* given) {
  enum : uint8_t { kNoId = 0, kValidId = 1, kForeignId = 2 };
  struct Entry {
    int32_t nRanks;
    uint8_t id;  // kNoId, kValidId, kForeignId
    uint8_t wire[transport::UniqueId::kBytes];
  };
  std::vector<Entry> all(static_cast<size_t>(parent.nRanks()));
  Entry& mine = all[static_cast<size_t>(parent.rank())];
  std::memset(&mine, 0, sizeof(mine));
  mine.nRanks = nRanks;
  if (given != nullptr) {
    // Consumed here, before any rank can join: a second grow with the same id is refused even if this one fails.
    mine.id = parent.takeGrowId(*given) ? kValidId : kForeignId;
    given->encode(mine.wire);
  }
  CFX_TRY(parent.bootstrap().allGather(all.data(), sizeof(Entry)));

  int holder = -1;
  for (int r = 0; r < parent.nRanks(); ++r) {
    const Entry& e = all[static_cast<size_t>(r)];
    if (e.nRanks != nRanks) {
      return Status::error(Errc::InvalidUsage, strprintf("ncclCommGrow: rank %d asks for %d ranks and rank %d for %d: "
                                                         "every rank must pass the same nRanks",
                                                         parent.rank(), nRanks, r, e.nRanks));
    }
    if (e.id == kForeignId) {
      return Status::error(Errc::InvalidUsage,
                           strprintf("ncclCommGrow: rank %d passed a unique id that ncclCommGetUniqueId on this "
                                     "communicator did not hand out, or one an earlier grow already used",
                                     r));
    }
    if (e.id == kValidId) {
      if (holder >= 0) {
        return Status::error(Errc::InvalidUsage,
                             strprintf("ncclCommGrow: ranks %d and %d both passed a unique id; exactly one existing "
                                       "rank (the one that called ncclCommGetUniqueId) passes it, the others NULL",
                                       holder, r));
      }
      holder = r;
    }
  }
  if (holder < 0) {
    return Status::error(Errc::InvalidUsage,
                         "ncclCommGrow: no existing rank passed the unique id; the rank that called "
                         "ncclCommGetUniqueId must pass it");
  }
  CFX_INFO(log::Sys::Init, "grow: rank %d of %d joins a communicator of %d ranks (id from rank %d)", parent.rank(),
           parent.nRanks(), nRanks, holder);
  return transport::UniqueId::decode(all[static_cast<size_t>(holder)].wire);
}

}  // namespace cfx::core
