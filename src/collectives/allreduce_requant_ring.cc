// SPDX-License-Identifier: Apache-2.0
// Requantising ring all-reduce (collectives layer): the ring of allreduce_ring.cc carrying a codec, re-encoding the
// partial sum at every hop. An option (NCCL_ALGO=Ring with a codec), kept to show what quantise-once avoids.
//
// Within a loop of n chunks of one slice's worth of values each, rank r encodes chunk r and sends it on; each of the
// next n - 2 ranks decodes the partial sum, adds its own values in fp32 and encodes the new partial for its
// neighbour; the last one finishes the sum (divides by n for avg), encodes it once and keeps what it decodes from
// those bytes, and the all-gather half forwards them verbatim for everyone to decode.
//
//   step:   0             1..n-2               n-1                       n..2n-3       2n-2
//   verb:   sendEncoded   recvRequantizeSend   recvRequantizeCopySend    recvForward   recvDecoded
//
// Every rank still holds the same bits (the finished chunk is encoded once and forwarded), but an element's
// partial sum is rounded to the codec n - 1 times on its way, each time with the scale of a larger sum, so the error
// grows with n and depends on the ring's order (PCCL's scheme; docs/notes/compression.md has the numbers). No error
// feedback: a hop re-encodes a sum of several ranks, and no rank owns what it drops. Traffic and latency as the
// plain ring's, at the codec's wire bytes; a chunk is one slice, so the ring's one-slice-per-verb rule holds.
#include "collectives/encoded.h"

namespace cfx::coll {

Coro allReduceRequantRing(const CollArgs& args, Plan plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  if (n == 1) {
    CFX_CO_TRY(co_await allReduceQuantOnce(args, plan, prims));  // one encoding and its decode, as everywhere else
    co_return Status();
  }
  CFX_CO_TRY_ASSIGN(const Framing f, framingOf(args.compress->codec, prims));
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  const size_t elt = dataTypeSize(args.type);
  const int next = mod(r + 1, n);
  const int prev = mod(r - 1, n);
  const size_t loopElems = f.pieceElems * static_cast<size_t>(n);
  const size_t loops = (args.count + loopElems - 1) / loopElems;
  auto loopBegin = [&](size_t i) { return args.count / loops * i + std::min(i, args.count % loops); };
  for (size_t loop = 0; loop < loops; ++loop) {
    const size_t base = loopBegin(loop);
    const EvenSplit split{loopBegin(loop + 1) - base, n};
    // Each verb's Encoded lives in this frame until its verb has finished.
    auto encodedFor = [&](int chunk, bool last) {
      prims::Encoded e;
      e.codec = &args.compress->codec;
      e.valueType = args.type;
      e.ctx.firstElem = base + split.begin(chunk);
      e.ctx.seed = encodingSeed(prims.opSeq(), r, last);
      e.divide = last && args.compress->average ? static_cast<float>(n) : 1.0f;
      return e;
    };
    auto at = [&](const char* p, int chunk) { return p + (base + split.begin(chunk)) * elt; };
    auto atOut = [&](int chunk) { return out + (base + split.begin(chunk)) * elt; };
    int c = r;
    prims::Encoded e = encodedFor(c, false);
    CFX_CO_TRY(co_await prims.sendEncoded(next, at(in, c), split.size(c), e));
    for (int s = 1; s < n - 1; ++s) {
      c = mod(r - s, n);
      e = encodedFor(c, false);
      CFX_CO_TRY(co_await prims.recvRequantizeSend(prev, next, at(in, c), split.size(c), e));
    }
    c = mod(r + 1, n);
    e = encodedFor(c, true);
    CFX_CO_TRY(co_await prims.recvRequantizeCopySend(prev, next, at(in, c), atOut(c), split.size(c), e));
    for (int s = 1; s < n - 1; ++s) {
      c = mod(r + 1 - s, n);
      e = encodedFor(c, false);
      CFX_CO_TRY(co_await prims.recvForward(prev, next, atOut(c), split.size(c), e));
    }
    c = mod(r + 2, n);
    e = encodedFor(c, false);
    CFX_CO_TRY(co_await prims.recvDecoded(prev, atOut(c), split.size(c), e));
  }
  co_return Status();
}

}  // namespace cfx::coll
