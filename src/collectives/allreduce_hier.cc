// SPDX-License-Identifier: Apache-2.0
// Two-level hierarchical all-reduce (collectives layer).
//
// With L ranks on each of H hosts, the slow links between hosts should carry as few bytes as possible. The
// buffer is cut into L parts, and:
//   1. within each host, a ring reduce-scatter leaves local rank l holding part l summed over its host;
//   2. across hosts, the H ranks of local index l all-reduce part l on a ring of their own (L such rings run at
//      once, one per local index, so every rank of a host uses the host's network at the same time);
//   3. within each host, a ring all-gather gives every rank every part.
// Bytes through each host's network link, each way: 2 (H - 1) / H * bytes, against 2 (n - 1) / n * bytes for a
// flat ring over all n = H L ranks that crosses between hosts; 2 hosts of 4 ranks: 1 against 1.75. The host-local
// steps move (L - 1) / L * bytes each through shared memory, which is cheap beside a network link. Latency:
// 2 (L - 1) + 2 (H - 1) hops per loop, against 2 (n - 1).
//
// Pipelining: the steps of one part of the buffer depend on each other, but the host-local steps of one segment
// can run while the cross-host step of another crosses the network. A large buffer is cut into segments and run in
// rounds; in round i a rank's host strand runs all-gather(i - 2) then reduce-scatter(i), while its cross strand
// runs the all-reduce of segment i - 1 (prims::Parallel). The strands use disjoint FIFOs (peers on this host
// versus peers on other hosts), and every rank runs the same rounds in the same order, so each round needs only
// the same round of its peers and cannot deadlock. The slower step hides the faster: with a network far slower
// than shared memory the op costs about the cross-host step plus one segment's host steps.
//
// The op's pre-multiplier is applied once, in step 1, to each rank's own input; its final step (integer average's
// division) once, in step 2, where a part is finished. Each element is reduced in one fixed order (host ring,
// then cross ring) and every other rank receives those bytes, so all ranks hold the same bits.
//
// Needs every host to run the same number of ranks (Layout::uniform); otherwise, or with one host or one rank per
// host, it is the flat ring, which is what it reduces to there.
//
// Compressed (a plan with a codec): steps 1 and 3 stay plain, since shared memory moves bytes faster than a codec
// encodes them, and step 2 is the quantise-once all-reduce (encoded.h) of part l among the H ranks of index l, so
// only the slow links carry the codec. Its result is the same bits on every host, and step 3 copies bytes, so every
// rank still holds the same bits. Where the layout is not hierarchical it is the flat quantise-once all-reduce.
#include <algorithm>

#include "collectives/encoded.h"
#include "collectives/pipeline.h"
#include "collectives/ring.h"

namespace cfx::coll {

namespace {

// Fewer than this many slices per rank and segment, and the extra ring latencies cost more than the overlap saves
// (1 MiB with the usual 128 KiB slices).
constexpr size_t kMinSegmentSlicesPerRank = 8;
constexpr size_t kMaxSegments = 8;

// One rank's view of a hierarchical all-reduce: its rings, the segments, and the two ops.
struct HierOp {
  RankRing hostRing;
  RankRing crossRing;
  const char* in = nullptr;
  char* out = nullptr;
  DataType type = DataType::Float32;
  EvenSplit segments{0, 1};
  ReduceOp hostOp;   // pre-multiplies, leaves the final step to the cross-host ring
  ReduceOp crossOp;  // combines partials that are already pre-multiplied
  const CompressArgs* compress = nullptr;  // compressed: the cross-host step's codec

  size_t elt() const { return dataTypeSize(type); }
  // The parts of segment `seg`, one per local rank, as ranges of the whole buffer.
  std::vector<ElemRange> parts(size_t seg) const {
    const int nLocal = hostRing.n();
    const EvenSplit split{segments.size(static_cast<int>(seg)), nLocal};
    std::vector<ElemRange> blocks(static_cast<size_t>(nLocal));
    for (int p = 0; p < nLocal; ++p) {
      blocks[static_cast<size_t>(p)] = {segments.begin(static_cast<int>(seg)) + split.begin(p), split.size(p)};
    }
    return blocks;
  }
};

Coro reduceScatterStep(const HierOp& op, size_t seg, prims::Prims& prims) {
  std::vector<ElemRange> blocks = op.parts(seg);
  char* mine = op.out + blocks[static_cast<size_t>(op.hostRing.me)].offset * op.elt();
  return ringReduceScatter(op.hostRing, op.in, std::move(blocks), mine, op.type, op.hostOp, prims);
}

// A coroutine of its own, compressed: the group it describes must live in a frame while its all-reduce runs.
Coro compressedCrossStep(const HierOp& op, ElemRange part, char* mine, prims::Prims& prims) {
  QuantOnceGroup g;
  g.group = op.crossRing.ranks;
  g.me = op.crossRing.me;
  g.count = part.count;
  g.type = op.type;
  g.compress = op.compress;
  g.elemBase = part.offset;
  g.residual = op.compress->residual != nullptr ? op.compress->residual + part.offset : nullptr;
  // Float avg was lowered to a pre-multiplier, applied in step 1: the cross step only sums.
  co_return co_await quantOnceAllReduce(g, mine, mine, 1.0f, prims);
}

Coro crossStep(const HierOp& op, size_t seg, prims::Prims& prims) {
  const ElemRange part = op.parts(seg)[static_cast<size_t>(op.hostRing.me)];
  char* mine = op.out + part.offset * op.elt();
  if (op.compress != nullptr) return compressedCrossStep(op, part, mine, prims);
  return ringAllReduce(op.crossRing, mine, mine, part.count, op.type, op.crossOp, prims);
}


Coro allGatherStep(const HierOp& op, size_t seg, prims::Prims& prims) {
  return ringAllGather(op.hostRing, op.out, op.parts(seg), op.type, prims);
}

// Round i's host strand: all-gather of segment i - 2, then reduce-scatter of segment i (either may be absent).
Coro hostRound(const HierOp& op, size_t round, prims::Prims& prims) {
  if (pipelineHas(round, 2, op.segments.n)) CFX_CO_TRY(co_await allGatherStep(op, round - 2, prims));
  if (pipelineHas(round, 0, op.segments.n)) CFX_CO_TRY(co_await reduceScatterStep(op, round, prims));
  co_return Status();
}

}  // namespace

size_t hierSegments(size_t bytes, int localRanks, size_t sliceBytes) {
  const size_t perRank = bytes / static_cast<size_t>(std::max(localRanks, 1));
  return std::clamp<size_t>(perRank / (kMinSegmentSlicesPerRank * std::max<size_t>(sliceBytes, 1)), 1, kMaxSegments);
}

size_t hierBlockSegments(size_t count, size_t eltBytes, int nHosts, size_t sliceBytes) {
  return std::min(hierSegments(count * eltBytes * static_cast<size_t>(nHosts), 1, sliceBytes),
                  std::max<size_t>(count, 1));
}

Coro allReduceHier(const CollArgs& args, Plan plan, prims::Prims& prims) {
  const Layout* layout = plan.layout;
  if (layout == nullptr || layout->nRanks() != prims.nRanks()) {
    co_return Status::error(Errc::InvalidUsage, "hierarchical all-reduce needs the communicator's layout of ranks on hosts");
  }
  const int r = prims.rank();
  const int h = layout->hostOf[static_cast<size_t>(r)];
  const std::vector<int>& local = layout->hostRanks[static_cast<size_t>(h)];
  if (!layout->hierarchical()) {
    if (plan.codec != nullptr) CFX_CO_TRY(co_await allReduceQuantOnce(args, plan, prims));
    else CFX_CO_TRY(co_await allReduceRing(args, plan, prims));
    co_return Status();
  }
  HierOp op;
  const int l = layout->localIndex[static_cast<size_t>(r)];
  op.hostRing = RankRing{local, l};
  for (const std::vector<int>& ranks : layout->hostRanks) op.crossRing.ranks.push_back(ranks[static_cast<size_t>(l)]);
  op.crossRing.me = h;
  op.in = static_cast<const char*>(args.sendbuff);
  op.out = static_cast<char*>(args.recvbuff);
  op.type = args.type;
  op.hostOp = firstOfChain(args.op);
  op.crossOp = lastOfChain(args.op);
  if (plan.codec != nullptr) op.compress = args.compress.get();
  // Every rank derives the same segment count from the op alone.
  const size_t k = hierSegments(args.count * dataTypeSize(args.type), op.hostRing.n(), prims.sliceBytes());
  op.segments = EvenSplit{args.count, static_cast<int>(k)};

  CFX_CO_TRY(co_await pipelinedRounds(k + 2, [&](size_t round) {
    std::vector<Coro> strands;
    if (pipelineHas(round, 0, op.segments.n) || pipelineHas(round, 2, op.segments.n)) {
      strands.push_back(hostRound(op, round, prims));
    }
    if (pipelineHas(round, 1, op.segments.n)) strands.push_back(crossStep(op, round - 1, prims));
    return strands;
  }));
  co_return Status();
}

}  // namespace cfx::coll
