// SPDX-License-Identifier: Apache-2.0
// Exchange all-reduce (recursive doubling by exchange) for small messages on a power-of-two rank count
// (collectives layer).
//
// In round k (mask = 2^k) rank r and its partner q = r ^ mask swap their partials and BOTH combine them, in one
// fixed operand order: lower rank's partial ⊕ upper rank's partial. After log2(n) rounds every rank holds the full
// result. Recursive doubling (allreduce_recdouble.cc) lets only the upper rank combine and then sends the result
// back; exchanging instead halves the message latencies per round, which is what small messages pay for.
//
//   n = 4        round mask 1                round mask 2 (post)
//                0 <-> 1: both x0 ⊕ x1       0 <-> 2: both (x0 ⊕ x1) ⊕ (x2 ⊕ x3)
//                2 <-> 3: both x2 ⊕ x3       1 <-> 3: both (x0 ⊕ x1) ⊕ (x2 ⊕ x3)
//
// Bit-identical results: in round 1 both ranks of a pair evaluate pre(x_lower) ⊕ pre(x_upper) with the same
// elementwise function; the sender pre-multiplies its own input into the message (sendPre), the receiver
// pre-multiplies its own copy with the same kernel, so the operands are the same bits on both sides. By induction
// the two partials of every later pair are equal on both ranks, and recvCombineCopy's partialFirst flag puts the
// lower rank's operand first on both. The post-op (integer average) runs in the last round only, on equal bits.
// The association is the same as recursive doubling's, so both algorithms give the same bits.
//
// Messages larger than one slice go slice by slice, every round per slice before the next slice: a rank has at most
// two slices in flight to a partner (this round's and the previous slice's, not yet consumed), so FIFOs of two
// slots never deadlock. Within a pair each rank sends before it receives, and a rank waits only for its partner of
// the current (slice, round), which is there or still finishing an earlier one.
//
// Cost: log2(n) message latencies (recursive doubling: 2 log2(n), ring: 2 (n - 1)), each moving the whole buffer
// both ways, and log2(n) reductions of the whole buffer on every rank: n log2(n) / (2 (n - 1)) times the ring's
// traffic, so the planner uses it while the message is latency-bound.
#include "collectives/collective.h"

namespace cfx::coll {

Coro allReduceExchange(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t elt = dataTypeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  if (n == 1) {
    prims::Prims::prepare(out, in, args.count, args.op, /*post=*/true);
    co_return Status();
  }
  if ((n & (n - 1)) != 0) {
    co_return Status::error(Errc::InvalidUsage,
                            strprintf("exchange AllReduce needs a power-of-two rank count, got %d ranks; use "
                                      "RecDouble or Ring (NCCL_ALGO) instead",
                                      n));
  }
  const size_t sliceElems = std::max<size_t>(1, prims.sliceBytes() / elt);
  for (size_t base = 0; base < args.count; base += sliceElems) {
    const size_t count = std::min(sliceElems, args.count - base);
    const char* mine = in + base * elt;
    char* result = out + base * elt;
    for (int mask = 1; mask < n; mask <<= 1) {
      const int q = r ^ mask;
      const bool lower = r < q;
      const bool last = 2 * mask == n;
      if (mask == 1) {
        // Our first message is pre(input), written by the send itself: no pass over the buffer before it.
        CFX_CO_TRY(co_await prims.sendPre(q, mine, count, args.op));
        if (!lower) {
          CFX_CO_TRY(co_await prims.recvReduceCopy(q, mine, result, count, args.op, /*post=*/last));
          continue;
        }
        if (!args.op.identityPre()) {
          // The input becomes a partial first (in place is safe: the send above has copied it out).
          prims::Prims::prepare(result, mine, count, args.op, /*post=*/false);
          mine = result;
        }
        CFX_CO_TRY(co_await prims.recvCombineCopy(q, mine, result, count, args.op, /*post=*/last,
                                                  /*partialFirst=*/true));
        continue;
      }
      CFX_CO_TRY(co_await prims.send(q, result, count * elt));
      CFX_CO_TRY(co_await prims.recvCombineCopy(q, result, result, count, args.op, /*post=*/last,
                                                /*partialFirst=*/lower));
    }
  }
  co_return Status();
}

}  // namespace cfx::coll
