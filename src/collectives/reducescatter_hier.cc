// SPDX-License-Identifier: Apache-2.0
// Two-level hierarchical reduce-scatter (collectives layer).
//
// With L ranks on each of H hosts, a flat ring carries n - 1 = HL - 1 blocks over every link that crosses between
// hosts. Instead, reduce within the host first, so that the slow links carry data that is already summed over L
// ranks:
//   1. within each host, for every host k in turn, a ring reduce-scatter of the L blocks that belong to host k's
//      ranks (local rank p ends up owning the block of host k's rank p), into a scratch buffer of H blocks; so
//      local rank l holds, for every host k, its host's partial sum of the block of host k's rank l;
//   2. across hosts, the H ranks of local index l reduce-scatter those H partials on a ring of their own (L such
//      rings at once, one per local index), so each rank finishes the block of its own global rank.
// Blocks are found by global rank, never by position: the ranks of a host need not be numbered together (hosts
// may interleave in rank order).
// Bytes through each host's network link, each way: L (H - 1) blocks, against HL - 1 for the flat ring (2 hosts of
// 4 ranks: 4 against 7). Step 1 moves (L - 1) H blocks per rank through shared memory, cheap beside a network link.
// Latency: H (L - 1) + (H - 1) hops per loop of slices, the first H (L - 1) of them through shared memory. Memory:
// H blocks of scratch per rank (scratch.h: kept for the next op).
//
// Pipelining, as in allgather_hier.cc run backwards: every block is cut into segments; in round i the host strand
// reduces segment i within the host while the cross strand reduce-scatters segment i - 1 across hosts
// (prims::Parallel, disjoint FIFOs: peers on this host versus peers on other hosts). Every rank runs the same rounds
// in the same order, so each round needs only the same round of its peers and cannot deadlock.
//
// The op's pre-multiplier is applied once, in step 1, to each rank's own input; its final step (integer average's
// division) once, in step 2, where a block is finished. Each element is reduced in one fixed order (host ring, then
// cross ring), on one rank per partial, so the result's bits are the same from run to run.
//
// In place (recvbuff == sendbuff + r * count): segment i of this rank's block is written in round i + 1, after
// step 1 read it in round i; the host strand of round i + 1 reads only segment i + 1 of every block.
//
// Needs every host to run the same number of ranks (Layout::uniform); otherwise, or with one host or one rank per
// host, it is the flat ring, which is what it reduces to there.
#include <algorithm>

#include "collectives/pipeline.h"
#include "collectives/ring.h"
#include "collectives/scratch.h"

namespace cfx::coll {

namespace {

struct HierScatter {
  const Layout* layout = nullptr;
  RankRing hostRing;
  RankRing crossRing;
  const char* in = nullptr;
  char* out = nullptr;
  char* partials = nullptr;  // H blocks: partials[k] is this host's sum of the block of host k's rank of my index
  size_t count = 0;          // elements per rank's block
  DataType type = DataType::Float32;
  EvenSplit segments{0, 1};
  ReduceOp hostOp;   // pre-multiplies, leaves the final step to the cross-host ring
  ReduceOp crossOp;  // combines partials that are already pre-multiplied

  size_t elt() const { return dataTypeSize(type); }
  // Segment `seg` of the `block`-th block of a buffer of such blocks.
  ElemRange piece(int block, size_t seg) const { return blockSegment(count, segments, block, seg); }
};

// Step 1 for segment `seg`: one host ring reduce-scatter per host k, of the blocks of host k's ranks.
Coro hostReduceScatter(const HierScatter& s, size_t seg, prims::Prims& prims) {
  for (int k = 0; k < s.layout->nHosts(); ++k) {
    std::vector<ElemRange> blocks;
    for (int rank : s.layout->hostRanks[static_cast<size_t>(k)]) blocks.push_back(s.piece(rank, seg));
    char* mine = s.partials + s.piece(k, seg).offset * s.elt();
    CFX_CO_TRY(co_await ringReduceScatter(s.hostRing, s.in, std::move(blocks), mine, s.type, s.hostOp, prims));
  }
  co_return Status();
}

// Step 2 for segment `seg`: the partials of hosts 0..H-1 at ring positions 0..H-1; position h finishes host h's.
Coro crossReduceScatter(const HierScatter& s, size_t seg, prims::Prims& prims) {
  std::vector<ElemRange> blocks;
  for (int k = 0; k < s.crossRing.n(); ++k) blocks.push_back(s.piece(k, seg));
  char* mine = s.out + s.segments.begin(static_cast<int>(seg)) * s.elt();
  return ringReduceScatter(s.crossRing, s.partials, std::move(blocks), mine, s.type, s.crossOp, prims);
}

}  // namespace

Coro reduceScatterHier(const CollArgs& args, Plan plan, prims::Prims& prims) {
  const Layout* layout = plan.layout;
  if (layout == nullptr || layout->nRanks() != prims.nRanks()) {
    co_return Status::error(Errc::InvalidUsage,
                            "hierarchical reduce-scatter needs the communicator's layout of ranks on hosts");
  }
  if (!layout->hierarchical()) {
    CFX_CO_TRY(co_await reduceScatterRing(args, plan, prims));
    co_return Status();
  }
  const int r = prims.rank();
  const int h = layout->hostOf[static_cast<size_t>(r)];
  const int l = layout->localIndex[static_cast<size_t>(r)];
  const size_t elt = dataTypeSize(args.type);
  const size_t nHosts = static_cast<size_t>(layout->nHosts());
  // Lives in this frame until the last round: the cross strand reads it one round after the host strand wrote it.
  Result<ScratchBlock> partials = takeScratch(nHosts * args.count * elt);
  if (!partials.ok()) {
    co_return Status::error(Errc::SystemError,
                            strprintf("rank %d: %s for a hierarchical reduce-scatter; use a smaller count or "
                                      "NCCL_ALGO=reducescatter:ring",
                                      r, partials.status().message().c_str()));
  }
  HierScatter s;
  s.layout = layout;
  s.hostRing = RankRing{layout->hostRanks[static_cast<size_t>(h)], l};
  for (const std::vector<int>& ranks : layout->hostRanks) s.crossRing.ranks.push_back(ranks[static_cast<size_t>(l)]);
  s.crossRing.me = h;
  s.in = static_cast<const char*>(args.sendbuff);
  s.out = static_cast<char*>(args.recvbuff);
  s.partials = partials.value().data();
  s.count = args.count;
  s.type = args.type;
  s.hostOp = firstOfChain(args.op);
  s.crossOp = lastOfChain(args.op);
  // The all-gather's segment rule, on the bytes each rank reduce-scatters across hosts (its H partials); every rank
  // derives the same count from the op alone.
  const size_t k = hierBlockSegments(args.count, elt, layout->nHosts(), prims.sliceBytes());
  s.segments = EvenSplit{args.count, static_cast<int>(k)};
  CFX_CO_TRY(co_await pipelinedRounds(k + 1, [&](size_t round) {
    std::vector<Coro> strands;
    if (pipelineHas(round, 0, s.segments.n)) strands.push_back(hostReduceScatter(s, round, prims));
    if (pipelineHas(round, 1, s.segments.n)) strands.push_back(crossReduceScatter(s, round - 1, prims));
    return strands;
  }));
  co_return Status();
}

}  // namespace cfx::coll
