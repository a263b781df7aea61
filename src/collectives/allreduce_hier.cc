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
// The op's pre-multiplier is applied once, in step 1, to each rank's own input; its final step (integer average's
// division) once, in step 2, where a part is finished. Each element is reduced in one fixed order (host ring,
// then cross ring) and every other rank receives those bytes, so all ranks hold the same bits.
//
// Needs every host to run the same number of ranks (Layout::uniform); otherwise, or with one host or one rank per
// host, it is the flat ring, which is what it reduces to there.
#include "collectives/ring.h"

namespace cfx::coll {

Task allReduceHier(const CollArgs& args, Plan plan, prims::Prims& prims) {
  const Layout* layout = plan.layout;
  if (layout == nullptr || layout->nRanks() != prims.nRanks()) {
    co_return Status::error(Errc::InvalidUsage, "hierarchical all-reduce needs the communicator's layout of ranks on hosts");
  }
  const int r = prims.rank();
  const int h = layout->hostOf[static_cast<size_t>(r)];
  const std::vector<int>& local = layout->hostRanks[static_cast<size_t>(h)];
  const int nLocal = static_cast<int>(local.size());
  if (layout->nHosts() == 1 || nLocal == 1 || !layout->uniform()) {
    CFX_CO_TRY(co_await allReduceRing(args, plan, prims));
    co_return Status();
  }
  const int l = layout->localIndex[static_cast<size_t>(r)];
  const RankRing hostRing{local, l};
  RankRing crossRing;
  for (const std::vector<int>& ranks : layout->hostRanks) crossRing.ranks.push_back(ranks[static_cast<size_t>(l)]);
  crossRing.me = h;

  const size_t elt = dataTypeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  const EvenSplit parts{args.count, nLocal};
  std::vector<ElemRange> blocks(static_cast<size_t>(nLocal));
  for (int p = 0; p < nLocal; ++p) blocks[static_cast<size_t>(p)] = {parts.begin(p), parts.size(p)};
  char* mine = out + parts.begin(l) * elt;
  ReduceOp hostOp = args.op;  // pre-multiplies, leaves the final step to the cross-host ring
  hostOp.postDivide = false;
  ReduceOp crossOp = args.op;  // combines partials that are already pre-multiplied
  crossOp.preMultiply = false;

  CFX_CO_TRY(co_await ringReduceScatter(hostRing, in, blocks, mine, args.type, hostOp, prims));
  CFX_CO_TRY(co_await ringAllReduce(crossRing, mine, mine, parts.size(l), args.type, crossOp, prims));
  CFX_CO_TRY(co_await ringAllGather(hostRing, out, std::move(blocks), args.type, prims));
  co_return Status();
}

}  // namespace cfx::coll
