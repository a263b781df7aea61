// SPDX-License-Identifier: Apache-2.0
// Quantise-once all-reduce (collectives layer): the compressed all-reduce whose error does not grow with the ranks.
//
// Over all n ranks (encoded.h): every rank encodes chunk q of its buffer once and sends it to rank q; rank q sums
// its own chunk and the n - 1 decoded ones in fp32, in a fixed order, divides by n for avg, encodes the sum once, and
// sends those bytes to every rank, which decodes them (rank q decodes its own copy too). So every element meets two
// roundings, its contribution's encoding and the result's, however many ranks there are, and every rank holds the
// same bits (the per-hop requantising ring, allreduce_requant_ring.cc, re-encodes a growing partial sum n - 1
// times, and its error grows with n).
//
//   phase:  1 (reduce to owners)                      2 (share from owners)
//   rank r: send encode(chunk q) to q, for each q     send framed(sum r) to each q
//           sum r = own + decode(from r+1, r+2, ...)   decode chunk q from q, for each q
//
// Traffic per rank: (n - 1) / n of the buffer's wire bytes out and in, per phase: what a ring moves, in 2 message
// latencies instead of 2 (n - 1). CPU: the buffer encoded once ((n - 1) / n of it sent), (n - 1) / n decoded and
// summed at the owners, 1 / n encoded as the result, and (n - 1) / n decoded again. In place works: a chunk is only
// overwritten after every send of phase 1 has read it.
#include "collectives/encoded.h"

namespace cfx::coll {

Coro allReduceQuantOnce(const CollArgs& args, Plan, prims::Prims& prims) {
  QuantOnceGroup g;
  for (int q = 0; q < prims.nRanks(); ++q) g.group.push_back(q);
  g.me = prims.rank();
  g.count = args.count;
  g.type = args.type;
  g.compress = args.compress.get();
  g.residual = args.compress->residual;
  const float divide = args.compress->average ? static_cast<float>(prims.nRanks()) : 1.0f;
  CFX_CO_TRY(co_await quantOnceAllReduce(g, static_cast<const char*>(args.sendbuff), static_cast<char*>(args.recvbuff),
                                         divide, prims));
  co_return Status();
}

}  // namespace cfx::coll
