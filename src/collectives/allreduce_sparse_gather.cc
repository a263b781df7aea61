// SPDX-License-Identifier: Apache-2.0
// Sparse all-reduce by gathering (collectives layer): top-k contributions to everyone, summed in rank order on each.
//
// A sum of top-k codes is not a top-k code (the supports differ), so top-k cannot be reduced hop by hop or encoded
// again by an owner without dropping entries. Instead every rank encodes its whole buffer once (selecting with its
// error feedback, SparseLoCo and DGC style), sends those bytes to every other rank, and each rank adds the n decoded
// contributions into an fp32 accumulator in rank order 0, 1, ..., n - 1, its own included, then divides by n for avg
// and rounds to the buffer's type. Every rank adds the same bytes in the same order: the same bits everywhere. The
// result is the exact dense sum of what every rank sent; where the union of the supports grows dense the result is
// dense too, and nothing is dropped (the rule conflux.h documents).
//
// Traffic per rank: (n - 1) times its own wire bytes out and in (k of every block's entries, a few bytes each), one
// message latency. Memory: the n framed contributions and an fp32 accumulator of the whole buffer.
#include <cstring>

#include "collectives/encoded.h"
#include "collectives/scratch.h"
#include "primitives/parallel.h"

namespace cfx::coll {

Coro allReduceSparseGather(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  CFX_CO_TRY_ASSIGN(const Framing f, framingOf(args.compress->codec, prims));
  const size_t wire = f.bytes(args.count);
  CFX_CO_TRY_ASSIGN(ScratchBlock all, takeScratch(wire * static_cast<size_t>(n)));
  const bool fp32Out = args.type == DataType::Float32;
  CFX_CO_TRY_ASSIGN(ScratchBlock accBlock, takeScratch(fp32Out ? 1 : args.count * sizeof(float)));
  auto framedOf = [&](int q) { return all.data() + static_cast<size_t>(q) * wire; };
  compress::EncodeContext ctx;
  ctx.residual = args.compress->residual;
  ctx.seed = encodingSeed(prims.opSeq(), r, false);
  encodeFramed(f, args.sendbuff, args.type, args.count, framedOf(r), ctx);
  if (n > 1) {
    std::vector<prims::Encoded> enc(static_cast<size_t>(n));
    std::vector<Coro> strands;
    for (int q = 0; q < n; ++q) {
      enc[static_cast<size_t>(q)].codec = &args.compress->codec;
      enc[static_cast<size_t>(q)].valueType = args.type;
      enc[static_cast<size_t>(q)].framed = framedOf(q);
    }
    for (int s = 1; s < n; ++s) {
      strands.push_back(verbStrand(prims.sendEncoded(mod(r + s, n), nullptr, args.count, enc[static_cast<size_t>(r)])));
    }
    for (int s = 1; s < n; ++s) {
      const int q = mod(r - s, n);
      strands.push_back(verbStrand(prims.recvDecoded(q, nullptr, args.count, enc[static_cast<size_t>(q)])));
    }
    CFX_CO_TRY(co_await prims::Parallel(std::move(strands)));
  }
  // An fp32 receive buffer is the accumulator itself (this rank's input was encoded before, and its own bytes are
  // in framedOf(r)); other types sum in scratch and round once.
  const bool direct = args.type == DataType::Float32 && reinterpret_cast<uintptr_t>(args.recvbuff) % alignof(float) == 0;
  auto* acc = direct ? static_cast<float*>(args.recvbuff) : reinterpret_cast<float*>(accBlock.data());
  if (args.count != 0) std::memset(acc, 0, args.count * sizeof(float));  // acc may be null when empty
  for (int q = 0; q < n; ++q) accumulateFramed(f, framedOf(q), args.count, acc);
  if (args.compress->average) {
    for (size_t i = 0; i < args.count; ++i) acc[i] /= static_cast<float>(n);
  }
  if (!direct) compress::fromFloat(args.type, acc, args.count, args.recvbuff);
  co_return Status();
}

}  // namespace cfx::coll
