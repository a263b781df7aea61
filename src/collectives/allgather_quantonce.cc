// SPDX-License-Identifier: Apache-2.0
// Encoded all-gather (collectives layer): every rank's block encoded once, by its owner, for everyone.
//
// Rank r encodes its send buffer once (with its error feedback, if any), decodes its own block from those bytes into
// block r of the receive buffer, and sends the bytes to every other rank, which decodes them into block r (phase 2
// of quantise-once, encoded.h). Every rank ends with the same bits in every block. Traffic per rank: (n - 1) blocks
// of wire bytes out and in, in one message latency, as the direct all-gather. In place (sendbuff is block r of
// recvbuff) works: the block is encoded before it is overwritten by its decoded form.
#include "collectives/encoded.h"
#include "collectives/scratch.h"

namespace cfx::coll {

Coro allGatherQuantOnce(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  QuantOnceGroup g;
  for (int q = 0; q < n; ++q) g.group.push_back(q);
  g.me = r;
  g.count = args.count * static_cast<size_t>(n);  // chunk q is block q of the receive buffer
  g.type = args.type;
  g.compress = args.compress.get();
  CFX_CO_TRY_ASSIGN(const Framing f, framingOf(args.compress->codec, prims));
  CFX_CO_TRY_ASSIGN(ScratchBlock framed, takeScratch(f.bytes(args.count)));
  compress::EncodeContext ctx;
  ctx.residual = args.compress->residual;
  ctx.seed = encodingSeed(prims.opSeq(), r, false);
  encodeFramed(f, args.sendbuff, args.type, args.count, framed.data(), ctx);
  char* out = static_cast<char*>(args.recvbuff);
  decodeFramed(f, framed.data(), args.count, args.type, out + static_cast<size_t>(r) * args.count * dataTypeSize(args.type));
  CFX_CO_TRY(co_await shareFromOwners(g, framed.data(), out, prims));
  co_return Status();
}

}  // namespace cfx::coll
