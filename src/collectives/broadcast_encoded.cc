// SPDX-License-Identifier: Apache-2.0
// Encoded chain broadcast (collectives layer): the root encodes once, every other rank forwards the bytes verbatim.
//
// The chain of broadcast_chain.cc (root -> root + 1 -> ... -> root - 1) carrying the codec's pieces: the root
// encodes its buffer once (with its error feedback, if any) and decodes its own result from those bytes; a middle
// rank forwards each piece as it arrives and decodes it into its buffer; the last one only decodes. Every rank holds
// the same bits, the root included. One verb per rank: encoded messages always travel as slices, so the chain
// pipelines slice by slice whatever the size, and it has no cycle, so no deadlock.
#include "collectives/encoded.h"
#include "collectives/scratch.h"

namespace cfx::coll {

Coro broadcastEncoded(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const int pos = mod(r - args.root, n);
  const int next = mod(r + 1, n);
  const int prev = mod(r - 1, n);
  prims::Encoded e;
  e.codec = &args.compress->codec;
  e.valueType = args.type;
  if (pos != 0) {
    if (pos == n - 1) CFX_CO_TRY(co_await prims.recvDecoded(prev, args.recvbuff, args.count, e));
    else CFX_CO_TRY(co_await prims.recvForward(prev, next, args.recvbuff, args.count, e));
    co_return Status();
  }
  CFX_CO_TRY_ASSIGN(const Framing f, framingOf(args.compress->codec, prims));
  CFX_CO_TRY_ASSIGN(ScratchBlock framed, takeScratch(f.bytes(args.count)));
  compress::EncodeContext ctx;
  ctx.residual = args.compress->residual;
  ctx.seed = encodingSeed(prims.opSeq(), r, false);
  encodeFramed(f, args.sendbuff, args.type, args.count, framed.data(), ctx);
  decodeFramed(f, framed.data(), args.count, args.type, args.recvbuff);
  e.framed = framed.data();
  if (n > 1) CFX_CO_TRY(co_await prims.sendEncoded(next, nullptr, args.count, e));
  co_return Status();
}

}  // namespace cfx::coll
