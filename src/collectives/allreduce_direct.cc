// SPDX-License-Identifier: Apache-2.0
// Direct all-reduce (collectives layer): a direct reduce-scatter, then a direct all-gather of the results.
//
// Why: on one host, where a receiver can read a sender's buffer in place (a direct message: ranks as threads, or
// ncclMemAlloc blocks that peers map), rank r reduces block r straight out of every peer's sendbuff into its
// recvbuff, and then every rank copies every other finished block straight out of its owner's recvbuff. Each
// input byte is read once, each result byte written once per rank, and nothing passes through a FIFO; the ring
// moves every byte through a FIFO 2(n - 1) times.
//
//   phase 1, one strand each:  sendPre(q, sendbuff block q) for every q != r;
//                              recvReduceCopy(r + 1), recvCombineCopy(r + 2), ..., (r - 1, post) into block r
//   phase 2, one strand each:  send(q, recvbuff block r) for every q != r;  recv(q, block q) for every q != r
//
// Blocks follow the ring's split (ring.h: HalvedBlocks' rule of equal blocks, the last one shorter), every block
// is reduced by its owner alone in the fixed order own, r + 1, r + 2, ..., and copied bit for bit by everyone
// else, so every rank holds identical bits. Deadlock: within a phase sends never wait for receives and every
// receive waits for one sender that posted first thing; the phases are separated by the end of phase 1 on each
// rank, and a rank's phase-2 receive only needs its sender to have reached phase 2. In place (sendbuff ==
// recvbuff): in phase 1 peers read blocks q != r while rank r writes block r; phase 2 starts only once every peer
// released what it read of this rank's buffer. Operations whose pre-multiplier is not the identity send slices
// in phase 1 (the scaled copy is made on the way); buffers peers cannot map (malloc'd, between processes) travel
// as slices too. Cost per rank: (n - 1) blocks read and reduced, (n - 1) blocks copied, two message latencies.
#include <algorithm>

#include "collectives/collective.h"
#include "primitives/parallel.h"

namespace cfx::coll {

namespace {

struct Blocks {
  size_t per;    // elements in every block but possibly the last
  size_t count;  // all elements
  size_t begin(int b) const { return std::min(count, static_cast<size_t>(b) * per); }
  size_t size(int b) const { return std::min(count, begin(b) + per) - begin(b); }
};

}  // namespace

Coro allReduceDirect(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t elt = dataTypeSize(args.type);
  if (n == 1) {
    prims::Prims::prepare(args.recvbuff, args.sendbuff, args.count, args.op, /*post=*/true);
    co_return Status();
  }
  const Blocks blocks{(args.count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n), args.count};
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);

  std::vector<Coro> reduce;
  reduce.reserve(static_cast<size_t>(n));
  for (int s = 1; s < n; ++s) {
    const int q = mod(r + s, n);
    reduce.push_back(verbStrand(prims.sendPre(q, in + blocks.begin(q) * elt, blocks.size(q), args.op, /*ownStrand=*/true)));
  }
  reduce.push_back(reduceFromPeers(in + blocks.begin(r) * elt, out + blocks.begin(r) * elt, blocks.size(r), args.op,
                                   prims));
  CFX_CO_TRY(co_await prims::Parallel(std::move(reduce)));

  std::vector<Coro> gather;
  gather.reserve(2 * static_cast<size_t>(n) - 2);
  for (int s = 1; s < n; ++s) {
    gather.push_back(verbStrand(prims.send(mod(r + s, n), out + blocks.begin(r) * elt, blocks.size(r) * elt, /*ownStrand=*/true)));
  }
  for (int s = 1; s < n; ++s) {
    const int q = mod(r - s, n);
    gather.push_back(verbStrand(prims.recv(q, out + blocks.begin(q) * elt, blocks.size(q) * elt)));
  }
  co_return co_await prims::Parallel(std::move(gather));
}

}  // namespace cfx::coll
