// SPDX-License-Identifier: Apache-2.0
// Rabenseifner's all-reduce: recursive-halving reduce-scatter, then recursive-doubling all-gather (collectives
// layer).
//
// Let p be the largest power of two <= n. Ranks p..n-1 first fold their input into partner r - p (as in
// allreduce_recdouble.cc), leaving p ranks and the buffer cut into p blocks. Reduce-scatter: in round mask =
// p/2, p/4, ..., 1, rank r and q = r ^ mask split the blocks they both still hold; each sends the half it gives up
// and combines the half it keeps with what arrives. After log2(p) rounds rank r holds block r, finished. The
// all-gather runs the rounds backwards (mask = 1, 2, ..., p/2), each rank sending everything it holds to q and
// receiving q's part, until every rank holds every block; the folded ranks get the whole result back.
//
//   rank r        fold                       each round with q = r ^ mask                    unfold
//   r >= p        sendPre(r - p)             -                                               recv(r - p)
//   r < n - p     recvReduceCopy(r + p)      send(q, give) || recvCombineCopy(q, keep)       send(r + p)
//   others        -                          (first round: sendPre || recvReduceCopy)        -
//
// Both verbs of a round run at once as two strands (prims::Parallel), on the FIFO to q and the FIFO from q, so a
// half larger than the FIFOs cannot deadlock the pair whatever its size.
//
// Cost: 2 log2(p) rounds (plus 2 when n is not a power of two), moving 2 (p - 1) / p * bytes per rank like the
// ring, which needs 2 (n - 1) steps: the bandwidth of the ring at logarithmic latency, for mid-sized messages on
// many ranks. Partners at distance p/2 must be as well connected as neighbours, which a ring of point-to-point
// links is not; the planner prices that. Bit-identical results: each element is finished on the one rank that
// owns its block, and every other rank receives those bytes.
#include <bit>

#include "collectives/collective.h"
#include "primitives/parallel.h"

namespace cfx::coll {

Coro allReduceRabenseifner(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t elt = dataTypeSize(args.type);
  const size_t bytes = args.count * elt;
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  if (n == 1) {
    prims::Prims::prepare(out, in, args.count, args.op, /*post=*/true);
    co_return Status();
  }
  const int p = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int nFolded = n - p;
  if (r >= p) {
    CFX_CO_TRY(co_await prims.sendPre(r - p, in, args.count, args.op));
    CFX_CO_TRY(co_await prims.recv(r - p, out, bytes));
    co_return Status();
  }
  // Whether this rank's data is a partial in `out` (already pre-multiplied) or still its input in `in`.
  bool partial = false;
  if (r < nFolded) {
    CFX_CO_TRY(co_await prims.recvReduceCopy(r + p, in, out, args.count, args.op, /*post=*/false));
    partial = true;
  }
  const EvenSplit blocks{args.count, p};
  auto elems = [&](int lo, int hi) { return blocks.begin(hi) - blocks.begin(lo); };
  int lo = 0;
  int hi = p;
  for (int mask = p / 2; mask >= 1; mask >>= 1) {
    const int q = r ^ mask;
    const int mid = lo + (hi - lo) / 2;
    const bool keepLower = (r & mask) == 0;
    const int keepLo = keepLower ? lo : mid;
    const int keepHi = keepLower ? mid : hi;
    const int giveLo = keepLower ? mid : lo;
    const int giveHi = keepLower ? hi : mid;
    const size_t keepAt = blocks.begin(keepLo) * elt;
    const size_t giveAt = blocks.begin(giveLo) * elt;
    const bool last = mask == 1;
    if (partial) {
      CFX_CO_TRY(co_await prims::Parallel(
          prims.send(q, out + giveAt, elems(giveLo, giveHi) * elt),
          prims.recvCombineCopy(q, out + keepAt, out + keepAt, elems(keepLo, keepHi), args.op, last)));
    } else {
      CFX_CO_TRY(co_await prims::Parallel(
          prims.sendPre(q, in + giveAt, elems(giveLo, giveHi), args.op),
          prims.recvReduceCopy(q, in + keepAt, out + keepAt, elems(keepLo, keepHi), args.op, last)));
    }
    partial = true;
    lo = keepLo;
    hi = keepHi;
  }
  for (int mask = 1; mask < p; mask <<= 1) {
    const int q = r ^ mask;
    const int width = hi - lo;
    const int theirLo = (r & mask) == 0 ? hi : lo - width;
    const int theirHi = theirLo + width;
    CFX_CO_TRY(co_await prims::Parallel(prims.send(q, out + blocks.begin(lo) * elt, elems(lo, hi) * elt),
                                        prims.recv(q, out + blocks.begin(theirLo) * elt, elems(theirLo, theirHi) * elt)));
    lo = std::min(lo, theirLo);
    hi = std::max(hi, theirHi);
  }
  if (r < nFolded) CFX_CO_TRY(co_await prims.send(r + p, out, bytes));
  co_return Status();
}

}  // namespace cfx::coll
