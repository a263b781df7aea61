// SPDX-License-Identifier: Apache-2.0
// Names of collectives and algorithms, and the table that maps a (collective, algorithm) pair to the function
// that runs it (collectives layer). The table is the one place that says which pairs exist: runCollective
// dispatches through it and the planner asks it before choosing.
#include "collectives/collective.h"

#include <utility>

namespace cfx::coll {

namespace {

using AlgorithmFn = Coro (*)(const CollArgs&, Plan, prims::Prims&);

struct Entry {
  Collective coll;
  Algorithm algorithm;
  AlgorithmFn run;
};

constexpr Entry kTable[] = {
    {Collective::AllReduce, Algorithm::Ring, &allReduceRing},
    {Collective::AllReduce, Algorithm::RecDouble, &allReduceRecDouble},
    {Collective::AllReduce, Algorithm::Exchange, &allReduceExchange},
    {Collective::AllGather, Algorithm::Ring, &allGatherRing},
    {Collective::ReduceScatter, Algorithm::Ring, &reduceScatterRing},
    {Collective::Broadcast, Algorithm::Chain, &broadcastChain},
    {Collective::Reduce, Algorithm::Chain, &reduceChain},
    {Collective::AlltoAll, Algorithm::Direct, &alltoAllDirect},
    {Collective::Gather, Algorithm::Direct, &gatherDirect},
    {Collective::Scatter, Algorithm::Direct, &scatterDirect},
    {Collective::AllReduce, Algorithm::BiRing, &allReduceBiRing},
    {Collective::AllGather, Algorithm::BiRing, &allGatherBiRing},
    {Collective::ReduceScatter, Algorithm::BiRing, &reduceScatterBiRing},
    {Collective::AllReduce, Algorithm::Hier, &allReduceHier},
    {Collective::AllReduce, Algorithm::Rabenseifner, &allReduceRabenseifner},
    {Collective::AllGather, Algorithm::Hier, &allGatherHier},
    {Collective::AllGather, Algorithm::Direct, &allGatherDirect},
    {Collective::AllReduce, Algorithm::Direct, &allReduceDirect},
    {Collective::ReduceScatter, Algorithm::Direct, &reduceScatterDirect},
    {Collective::Broadcast, Algorithm::Direct, &broadcastDirect},
    {Collective::AllReduce, Algorithm::Tree, &allReduceTree},
    {Collective::Broadcast, Algorithm::Hier, &broadcastHier},
    {Collective::ReduceScatter, Algorithm::Hier, &reduceScatterHier},
    {Collective::AllReduce, Algorithm::Hier3, &allReduceHier3},
    {Collective::AllGather, Algorithm::Hier3, &allGatherHier3},
    {Collective::ReduceScatter, Algorithm::Hier3, &reduceScatterHier3},
    {Collective::BroadcastDelta, Algorithm::Chain, &broadcastDeltaChain},
    {Collective::Scan, Algorithm::Chain, &scanChain},
    {Collective::Scan, Algorithm::RecDouble, &scanRecDouble},
    {Collective::Scan, Algorithm::Blelloch, &scanBlelloch},
    {Collective::Scan, Algorithm::Hier, &scanHier},
    {Collective::AllToAllv, Algorithm::Direct, &allToAllvDirect},
    {Collective::MoeDispatch, Algorithm::Direct, &moeDispatchDirect},
    {Collective::MoeCombine, Algorithm::Direct, &moeCombineDirect},
};

// The compressed forms: what runs when the plan carries a codec.
constexpr Entry kCompressedTable[] = {
    {Collective::AllReduce, Algorithm::QuantOnce, &allReduceQuantOnce},
    {Collective::AllReduce, Algorithm::Hier, &allReduceHier},  // its cross-host step runs QuantOnce
    {Collective::AllReduce, Algorithm::Ring, &allReduceRequantRing},
    {Collective::AllReduce, Algorithm::SparseGather, &allReduceSparseGather},
    {Collective::ReduceScatter, Algorithm::QuantOnce, &reduceScatterQuantOnce},
    {Collective::AllGather, Algorithm::QuantOnce, &allGatherQuantOnce},
    {Collective::Broadcast, Algorithm::Chain, &broadcastEncoded},
};

template <size_t N>
AlgorithmFn findIn(const Entry (&table)[N], Collective coll, Algorithm algorithm) {
  for (const Entry& e : table) {
    if (e.coll == coll && e.algorithm == algorithm) return e.run;
  }
  return nullptr;
}

AlgorithmFn find(Collective coll, Algorithm algorithm) { return findIn(kTable, coll, algorithm); }

// A Coro that finishes at once with `status`: lets runCollective hand back either the algorithm's own Coro or
// an error without wrapping every algorithm in a second coroutine frame.
Coro fail(Status status) { co_return status; }

}  // namespace

Coro verbStrand(prims::TransferAwaiter verb) { co_return co_await verb; }

Coro copyStrand(void* dst, const void* src, size_t bytes, size_t opBytes) {
  prims::Prims::copy(dst, src, bytes, opBytes);
  co_return Status();
}

Coro reduceFromPeers(const char* own, char* out, size_t count, const ReduceOp& op, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  CFX_CO_TRY(co_await prims.recvReduceCopy(mod(r + 1, n), own, out, count, op, /*post=*/n == 2));
  for (int s = 2; s < n; ++s) {
    CFX_CO_TRY(co_await prims.recvCombineCopy(mod(r + s, n), out, out, count, op, /*post=*/s == n - 1,
                                              /*partialFirst=*/true));
  }
  co_return Status();
}

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "AllReduce";
    case Collective::Broadcast: return "Broadcast";
    case Collective::Reduce: return "Reduce";
    case Collective::AllGather: return "AllGather";
    case Collective::ReduceScatter: return "ReduceScatter";
    case Collective::AlltoAll: return "AlltoAll";
    case Collective::Gather: return "Gather";
    case Collective::Scatter: return "Scatter";
    case Collective::BroadcastDelta: return "BroadcastDelta";
    case Collective::Scan: return "Scan";
    case Collective::AllToAllv: return "AllToAllv";
    case Collective::MoeDispatch: return "MoeDispatch";
    case Collective::MoeCombine: return "MoeCombine";
  }
  return "unknown";
}

const char* algorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::Ring: return "Ring";
    case Algorithm::Chain: return "Chain";
    case Algorithm::Direct: return "Direct";
    case Algorithm::RecDouble: return "RecDouble";
    case Algorithm::Exchange: return "Exchange";
    case Algorithm::BiRing: return "BiRing";
    case Algorithm::Hier: return "Hier";
    case Algorithm::Rabenseifner: return "Rabenseifner";
    case Algorithm::Tree: return "Tree";
    case Algorithm::Hier3: return "Hier3";
    case Algorithm::QuantOnce: return "QuantOnce";
    case Algorithm::SparseGather: return "SparseGather";
    case Algorithm::Blelloch: return "Blelloch";
    case Algorithm::IpcScratch: return "IpcScratch";
    case Algorithm::IpcZeroCopy: return "IpcZeroCopy";
    case Algorithm::IpcOneShot: return "IpcOneShot";
  }
  return "unknown";
}

bool Layout::uniform() const {
  for (const std::vector<int>& ranks : hostRanks) {
    if (ranks.size() != hostRanks.front().size()) return false;
  }
  return true;
}

Layout Layout::fromHostIds(const std::vector<uint64_t>& hostIds) {
  Layout layout;
  std::vector<uint64_t> seen;
  for (size_t r = 0; r < hostIds.size(); ++r) {
    size_t h = 0;
    while (h < seen.size() && seen[h] != hostIds[r]) ++h;
    if (h == seen.size()) {
      seen.push_back(hostIds[r]);
      layout.hostRanks.emplace_back();
    }
    layout.hostOf.push_back(static_cast<int>(h));
    layout.localIndex.push_back(static_cast<int>(layout.hostRanks[h].size()));
    layout.hostRanks[h].push_back(static_cast<int>(r));
  }
  return layout;
}

Layout Layout::fromPlaces(const std::vector<uint64_t>& hostIds, const std::vector<int64_t>& deviceIds) {
  Layout layout = fromHostIds(hostIds);
  layout.hostDevices.resize(layout.hostRanks.size());
  std::vector<std::pair<int, int64_t>> seen;  // (host, device id) of each device so far
  for (size_t r = 0; r < hostIds.size(); ++r) {
    const int h = layout.hostOf[r];
    const std::pair<int, int64_t> key{h, r < deviceIds.size() ? deviceIds[r] : 0};
    size_t d = 0;
    while (d < seen.size() && seen[d] != key) ++d;
    if (d == seen.size()) {
      seen.push_back(key);
      layout.deviceRanks.emplace_back();
      layout.hostDevices[static_cast<size_t>(h)].push_back(static_cast<int>(d));
    }
    layout.deviceOf.push_back(static_cast<int>(d));
    layout.deviceIndex.push_back(static_cast<int>(layout.deviceRanks[d].size()));
    layout.deviceRanks[d].push_back(static_cast<int>(r));
  }
  return layout;
}

bool Layout::threeLevel() const {
  if (!hierarchical() || hostDevices.size() != hostRanks.size() || deviceRanks.empty()) return false;
  const size_t devices = hostDevices.front().size();
  const size_t perDevice = deviceRanks.front().size();
  if (devices < 2 || perDevice < 2) return false;
  for (const std::vector<int>& d : hostDevices) {
    if (d.size() != devices) return false;
  }
  for (const std::vector<int>& ranks : deviceRanks) {
    if (ranks.size() != perDevice) return false;
  }
  return true;
}

bool hasAlgorithm(Collective coll, Algorithm algorithm) { return find(coll, algorithm) != nullptr; }

bool hasCompressedAlgorithm(Collective coll, Algorithm algorithm, compress::Format format) {
  const bool sparse = format == compress::Format::TopK;
  if (sparse != (algorithm == Algorithm::SparseGather)) return false;  // top-k sums are exact only gathered whole
  return findIn(kCompressedTable, coll, algorithm) != nullptr;
}

Coro runCollective(const CollArgs& args, Plan plan, prims::Prims& prims) {
  if (plan.codec != nullptr) {
    if (args.compress == nullptr) return fail(Status::error(Errc::InternalError, "a compressed plan for a plain op"));
    if (hasCompressedAlgorithm(args.coll, plan.algorithm, plan.codec->format())) {
      return findIn(kCompressedTable, args.coll, plan.algorithm)(args, plan, prims);
    }
    return fail(Status::error(Errc::InvalidUsage,
                              strprintf("%s has no compressed %s algorithm for codec %s", collectiveName(args.coll),
                                        algorithmName(plan.algorithm), compress::formatName(plan.codec->format()))));
  }
  if (AlgorithmFn run = find(args.coll, plan.algorithm)) return run(args, plan, prims);
  return fail(Status::error(Errc::InvalidUsage,
                            strprintf("%s has no %s algorithm; choose one the planner offers for it (NCCL_ALGO)",
                                      collectiveName(args.coll), algorithmName(plan.algorithm))));
}

}  // namespace cfx::coll
