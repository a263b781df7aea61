// SPDX-License-Identifier: Apache-2.0
// Recursive-doubling all-reduce for small messages (collectives layer).
//
// Let p be the largest power of two <= n. Ranks p..n-1 first fold their input into partner r - p, leaving p
// ranks. In round k (mask = 2^k) rank r pairs with q = r ^ mask; after the round every aligned group of 2 * mask
// ranks holds the same partial, so after log2(p) rounds every rank holds the full result, and the folded
// ranks get it back from their partners.
//
// Bit-identical results: in each pair only the upper rank combines, as slot ⊕ local = lower ⊕ upper, and sends
// the bytes back, so both ranks of a pair hold the same bytes. By induction every group holds equal bytes, and
// pairs of one round combine equal operands with the same elementwise function, so they produce equal bytes
// too. The post-op (integer average) is applied in the last round only, so once per element of every result.
//
//   n = 6, p = 4     fold        round mask 1        round mask 2 (post)     unfold
//                    4 -> 0      0 -> 1 ⊕ -> 0       0 -> 2 ⊕ -> 0           0 -> 4
//                    5 -> 1      2 -> 3 ⊕ -> 2       1 -> 3 ⊕ -> 1           1 -> 5
//                    ("a -> b ⊕ -> a": a sends its partial, b combines and sends the result back)
//
//   rank r        fold                         round, peer q = r ^ mask                unfold
//   r >= p        sendPre(r - p)               -                                       recv(r - p)
//   r < n - p     recvReduceCopy(r + p)        r < q: send(q), recv(q)                 send(r + p)
//   others        prepare (local)              r > q: recvCombineCopy(q), send(q)      -
//
// Deadlock: within a pair the lower rank sends before it receives and the upper rank receives before it
// sends, and a rank waits only on its partner of the current round, which reaches that round or is still
// finishing an earlier one; so no wait is ever circular, whatever the size.
//
// Precondition (the planner's contract): the whole buffer is one slice, count * elt <= sliceBytes; otherwise
// InvalidUsage. Every round is store-and-forward of the whole buffer, which only pays while the message is
// latency-bound. Cost: 2 log2(p) message latencies, plus 2 when n is not a power of two, each of the whole
// buffer (ring: 2 (n - 1) latencies). On power-of-two rank counts the planner prefers allreduce_exchange.cc,
// where both ranks of a pair combine (in the same operand order) and one message per round suffices; this
// algorithm remains for the other rank counts, whose folded ranks need the result sent back anyway.
#include <bit>

#include "collectives/collective.h"

namespace cfx::coll {

Coro allReduceRecDouble(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t bytes = args.count * dataTypeSize(args.type);
  const void* in = args.sendbuff;
  void* out = args.recvbuff;
  if (n == 1) {
    prims::Prims::prepare(out, in, args.count, args.op, /*post=*/true);
    co_return Status();
  }
  if (bytes > prims.sliceBytes()) {
    co_return Status::error(Errc::InvalidUsage,
                            strprintf("recursive-doubling AllReduce takes at most one slice (%zu B), got %zu B; "
                                      "use the ring algorithm (NCCL_ALGO) for larger messages",
                                      prims.sliceBytes(), bytes));
  }
  const int p = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int nFolded = n - p;
  if (r >= p) {
    CFX_CO_TRY(co_await prims.sendPre(r - p, in, args.count, args.op));
    CFX_CO_TRY(co_await prims.recv(r - p, out, bytes));
    co_return Status();
  }
  if (r < nFolded) {
    CFX_CO_TRY(co_await prims.recvReduceCopy(r + p, in, out, args.count, args.op, /*post=*/false));
  } else {
    prims::Prims::prepare(out, in, args.count, args.op, /*post=*/false);
  }
  for (int mask = 1; mask < p; mask <<= 1) {
    const int q = r ^ mask;
    if (r < q) {
      CFX_CO_TRY(co_await prims.send(q, out, bytes));
      CFX_CO_TRY(co_await prims.recv(q, out, bytes));
    } else {
      const bool last = 2 * mask == p;
      CFX_CO_TRY(co_await prims.recvCombineCopy(q, out, out, args.count, args.op, /*post=*/last));
      CFX_CO_TRY(co_await prims.send(q, out, bytes));
    }
  }
  if (r < nFolded) CFX_CO_TRY(co_await prims.send(r + p, out, bytes));
  co_return Status();
}

}  // namespace cfx::coll
