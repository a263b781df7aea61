// SPDX-License-Identifier: Apache-2.0
// Framed bytes and the quantise-once phases (collectives layer); see encoded.h.
#include "collectives/encoded.h"

#include <algorithm>
#include <memory>

#include "collectives/scratch.h"
#include "primitives/parallel.h"

namespace cfx::coll {

Result<Framing> framingOf(const compress::Codec& codec, const prims::Prims& prims) {
  Framing f;
  f.codec = &codec;
  f.pieceElems = codec.pieceElems(prims.unitSliceBytes());
  if (f.pieceElems == 0) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("codec %s: one block does not fit a FIFO slot of %zu bytes; use a smaller block",
                                   compress::codecText(codec.spec()).c_str(), prims.unitSliceBytes()));
  }
  return f;
}

void encodeFramed(const Framing& f, const void* values, DataType type, size_t count, char* framed,
                  compress::EncodeContext ctx) {
  const auto* v = static_cast<const char*>(values);
  const size_t elt = dataTypeSize(type);
  for (size_t first = 0; first < count; first += f.pieceElems) {
    const size_t n = std::min(f.pieceElems, count - first);
    compress::EncodeContext piece = ctx;
    piece.firstElem += first;
    if (piece.residual != nullptr) piece.residual += first;
    f.codec->encode(v + first * elt, type, n, framed, piece);
    framed += f.codec->pieceBytes(n);
  }
}

void decodeFramed(const Framing& f, const char* framed, size_t count, DataType type, void* out) {
  auto* o = static_cast<char*>(out);
  const size_t elt = dataTypeSize(type);
  for (size_t first = 0; first < count; first += f.pieceElems) {
    const size_t n = std::min(f.pieceElems, count - first);
    f.codec->decodeTo(framed, n, type, o + first * elt);
    framed += f.codec->pieceBytes(n);
  }
}

void accumulateFramed(const Framing& f, const char* framed, size_t count, float* acc) {
  for (size_t first = 0; first < count; first += f.pieceElems) {
    const size_t n = std::min(f.pieceElems, count - first);
    f.codec->decode(framed, n, acc + first, /*accumulate=*/true);
    framed += f.codec->pieceBytes(n);
  }
}

uint64_t encodingSeed(uint32_t opSeq, int rank, bool result) {
  return (static_cast<uint64_t>(opSeq) << 24) ^ (static_cast<uint64_t>(rank) << 1) ^ (result ? 1u : 0u);
}

namespace {

// The Encoded of a message of group chunk `q` of this rank's buffer.
prims::Encoded encodedOf(const QuantOnceGroup& g, int q, const prims::Prims& prims) {
  prims::Encoded e;
  e.codec = &g.compress->codec;
  e.valueType = g.type;
  e.ctx.firstElem = g.elemBase + g.chunks().begin(q);
  e.ctx.residual = g.residual != nullptr ? g.residual + g.chunks().begin(q) : nullptr;
  e.ctx.seed = encodingSeed(prims.opSeq(), prims.rank(), false);
  return e;
}

}  // namespace

// Each phase runs as two strands, the sends in step order and the receives in step order, so that neither waits for
// the other at every step: in lockstep a rank's send of step s + 1 waited for its slowest receive of step s, and the
// link idled through every step's tail (a 4-host int8 all-reduce at 100 Mbit/s used half the line rate). The pairs
// still meet in the same order (step s: this rank sends to me - s, and me - s receives from me at its step s), and
// the receives still fold in a fixed order, so the sums, and every rank's bits, are as before.
namespace {

// Phase 1's sends: chunk me - s to its owner at step s, each encoded as it goes.
Coro sendToOwners(const QuantOnceGroup& g, const char* in, prims::Prims& prims) {
  const EvenSplit chunks = g.chunks();
  const size_t elt = dataTypeSize(g.type);
  for (int s = 1; s < g.n(); ++s) {
    const int to = mod(g.me - s, g.n());
    const prims::Encoded e = encodedOf(g, to, prims);  // the verb keeps a pointer to it: a named local, not a temporary
    CFX_CO_TRY(co_await prims.sendEncoded(g.group[static_cast<size_t>(to)], in + chunks.begin(to) * elt,
                                          chunks.size(to), e));
  }
  co_return Status();
}

// Phase 1's receives: this rank's chunk from me + s at step s, folded into acc in that order.
Coro foldOwnChunk(const QuantOnceGroup& g, float* acc, prims::Prims& prims) {
  const prims::Encoded mine = encodedOf(g, g.me, prims);
  const size_t count = g.chunks().size(g.me);
  for (int s = 1; s < g.n(); ++s) {
    const int from = mod(g.me + s, g.n());
    CFX_CO_TRY(co_await prims.recvAccumulate(g.group[static_cast<size_t>(from)], acc, count, mine));
  }
  co_return Status();
}

// Phase 2's sends: this rank's framed result to me - s at step s, as it is.
Coro sendResult(const QuantOnceGroup& g, const char* framed, prims::Prims& prims) {
  prims::Encoded mine = encodedOf(g, g.me, prims);
  mine.framed = const_cast<char*>(framed);  // sent as it is, never written
  const size_t count = g.chunks().size(g.me);
  for (int s = 1; s < g.n(); ++s) {
    CFX_CO_TRY(co_await prims.sendEncoded(g.group[static_cast<size_t>(mod(g.me - s, g.n()))], nullptr, count, mine));
  }
  co_return Status();
}

// Phase 2's receives: chunk me + s from its owner at step s, decoded into out.
Coro decodeResults(const QuantOnceGroup& g, char* out, prims::Prims& prims) {
  const EvenSplit chunks = g.chunks();
  const size_t elt = dataTypeSize(g.type);
  for (int s = 1; s < g.n(); ++s) {
    const int from = mod(g.me + s, g.n());
    const prims::Encoded e = encodedOf(g, from, prims);
    CFX_CO_TRY(co_await prims.recvDecoded(g.group[static_cast<size_t>(from)], out + chunks.begin(from) * elt,
                                          chunks.size(from), e));
  }
  co_return Status();
}

}  // namespace

Coro reduceToOwners(const QuantOnceGroup& g, const char* in, float* acc, prims::Prims& prims) {
  const EvenSplit chunks = g.chunks();
  const size_t elt = dataTypeSize(g.type);
  compress::toFloat(g.type, in + chunks.begin(g.me) * elt, chunks.size(g.me), acc);
  CFX_CO_TRY(co_await prims::Parallel(sendToOwners(g, in, prims), foldOwnChunk(g, acc, prims)));
  co_return Status();
}

Coro shareFromOwners(const QuantOnceGroup& g, const char* framed, char* out, prims::Prims& prims) {
  CFX_CO_TRY(co_await prims::Parallel(sendResult(g, framed, prims), decodeResults(g, out, prims)));
  co_return Status();
}

Coro quantOnceAllReduce(const QuantOnceGroup& g, const char* in, char* out, float divide, prims::Prims& prims) {
  CFX_CO_TRY_ASSIGN(const Framing f, framingOf(g.compress->codec, prims));
  const size_t mine = g.chunks().size(g.me);
  CFX_CO_TRY_ASSIGN(ScratchBlock accBlock, takeScratch(mine * sizeof(float)));
  CFX_CO_TRY_ASSIGN(ScratchBlock framedBlock, takeScratch(f.bytes(mine)));
  auto* acc = reinterpret_cast<float*>(accBlock.data());
  CFX_CO_TRY(co_await reduceToOwners(g, in, acc, prims));
  if (divide != 1.0f) {
    for (size_t i = 0; i < mine; ++i) acc[i] /= divide;
  }
  // The result is encoded once; this rank keeps what it decodes from those bytes, as every other rank will.
  compress::EncodeContext ctx;
  ctx.firstElem = g.elemBase + g.chunks().begin(g.me);
  ctx.seed = encodingSeed(prims.opSeq(), prims.rank(), true);
  encodeFramed(f, acc, DataType::Float32, mine, framedBlock.data(), ctx);
  const size_t elt = dataTypeSize(g.type);
  decodeFramed(f, framedBlock.data(), mine, g.type, out + g.chunks().begin(g.me) * elt);
  CFX_CO_TRY(co_await shareFromOwners(g, framedBlock.data(), out, prims));
  co_return Status();
}

}  // namespace cfx::coll
