// SPDX-License-Identifier: Apache-2.0
// Quantise-once reduce-scatter (collectives layer): phase 1 of the quantise-once all-reduce (encoded.h).
//
// Every rank encodes block q of its send buffer once and sends it to rank q, which sums its own block and the n - 1
// decoded ones in fp32 in a fixed order and keeps the sum (divided by n for avg), rounded once to the buffer's type.
// Nobody else holds that block, so the sum is not encoded again. Traffic per rank: (n - 1) / n of the send
// buffer's wire bytes out and in, in one message latency. In place (recvbuff is block r of sendbuff) works: the
// own block is read into the accumulator before anything is written.
#include "collectives/encoded.h"
#include "collectives/scratch.h"

namespace cfx::coll {

Coro reduceScatterQuantOnce(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  QuantOnceGroup g;
  for (int q = 0; q < n; ++q) g.group.push_back(q);
  g.me = prims.rank();
  g.count = args.count * static_cast<size_t>(n);  // chunks of EvenSplit{n count, n}: exactly the blocks
  g.type = args.type;
  g.compress = args.compress.get();
  g.residual = args.compress->residual;
  CFX_CO_TRY_ASSIGN(ScratchBlock accBlock, takeScratch(args.count * sizeof(float)));
  auto* acc = reinterpret_cast<float*>(accBlock.data());
  CFX_CO_TRY(co_await reduceToOwners(g, static_cast<const char*>(args.sendbuff), acc, prims));
  if (args.compress->average) {
    for (size_t i = 0; i < args.count; ++i) acc[i] /= static_cast<float>(n);
  }
  compress::fromFloat(args.type, acc, args.count, args.recvbuff);
  co_return Status();
}

}  // namespace cfx::coll
