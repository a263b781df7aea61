// SPDX-License-Identifier: Apache-2.0
// Work-efficient scan (collectives layer): Blelloch's up-sweep and down-sweep over a binary tree whose leaves are the
// ranks, for large states.
//
// The tree is the one over 2^ceil(log2 n) leaves, with the missing leaves past rank n - 1 left out. A node of size 2d
// (children of size d) has index i = 2d j + 2d - 1; its value lives on rank min(i, n - 1), the last rank of its
// subtree, and its left child's on rank i - d. Up-sweep, d = 1, 2, 4, ...: wherever the right child is not empty
// (i - d < n - 1), the left child's rank sends its subtree's value to the node's rank, which folds it in on the left.
// Down-sweep, d from the top down: the node's rank holds `pre`, the combination of every rank before the node's
// subtree; the left child's pre is the node's (sent to it), the right child's is pre (+) the left child's up-sweep
// value (sent back). Leaves end with their exclusive prefix; the inclusive one folds the rank's own value in.
// A pre that covers no ranks (the node's subtree starts at rank 0) is known to be empty by every rank, so it is
// never sent and no identity is needed (User ops have none).
//
//   n = 5, up:   d=1: 0->1, 2->3    d=2: 1->3    d=4: 3->4
//          down: d=4: 3->4 (x0..x3)    d=2: 1->3 (x0 x1)    d=1: 0->1 (x0), 3->2 (x0 x1), 2->3 (x2)
//
// Cost: 2 ceil(log2 n) rounds, but only 2 (n - 1) states cross the network in all (recursive doubling: about
// n log2 n), and a rank takes part in few rounds: the one that pays off where many ranks share a link.
#include <bit>
#include <cstring>

#include "collectives/scan.h"
#include "primitives/parallel.h"

namespace cfx::coll {

namespace {

// The rank holding the right child of a node whose left child rank `r` holds at level d, or -1 when r holds no such
// left child (or the right child is empty).
int rightOf(int r, int d, int n) {
  if ((r + 1) % (2 * d) != d || r >= n - 1) return -1;
  return std::min(r + d, n - 1);
}

// The left child's rank of the node that rank `r` holds at level d, or -1. Sets *startsAtZero when that node's
// subtree starts at rank 0 (its pre is empty).
int leftOf(int r, int d, int n, bool* startsAtZero) {
  const int span = 2 * d;
  const int i = r == n - 1 ? (n + span - 1) / span * span - 1 : r;  // the last rank also holds truncated nodes
  if ((i + 1) % span != 0 || std::min(i, n - 1) != r) return -1;
  const int left = i - d;
  if (left < 0 || left >= n - 1) return -1;
  *startsAtZero = i == span - 1;
  return left;
}

}  // namespace

Coro scanBlelloch(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const ReduceOp& op = args.op;
  const size_t bytes = args.count * dataTypeSize(args.type);
  const auto* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  CFX_CO_TRY_ASSIGN(ScratchBlock upBlock, takeScratch(bytes));
  CFX_CO_TRY_ASSIGN(ScratchBlock preBlock, takeScratch(bytes));
  CFX_CO_TRY_ASSIGN(ScratchBlock tmpBlock, takeScratch(bytes));
  char* up = upBlock.data();
  char* pre = preBlock.data();
  char* tmp = tmpBlock.data();
  std::memcpy(up, in, bytes);
  const int top = static_cast<int>(std::bit_ceil(static_cast<unsigned>(n)));

  for (int d = 1; d < top; d *= 2) {
    bool unused = false;
    if (const int right = rightOf(r, d, n); right >= 0) {
      CFX_CO_TRY(co_await prims.send(right, up, bytes));
    } else if (const int left = leftOf(r, d, n, &unused); left >= 0) {
      CFX_CO_TRY(co_await prims.recv(left, tmp, bytes));
      combineLocal(op, up, tmp, up, args.count);
    }
  }

  bool preEmpty = true;  // rank n - 1 holds the root, whose pre is empty; every other rank learns its own below
  for (int d = top / 2; d >= 1; d /= 2) {
    bool nodeEmpty = false;
    if (const int right = rightOf(r, d, n); right >= 0) {
      // A left child: its pre is its parent's, which is empty exactly when this child starts at rank 0.
      std::vector<Coro> strands;
      strands.push_back(verbStrand(prims.send(right, up, bytes)));
      preEmpty = r == d - 1;
      if (!preEmpty) strands.push_back(verbStrand(prims.recv(right, pre, bytes)));
      CFX_CO_TRY(co_await prims::Parallel(std::move(strands)));
    } else if (const int left = leftOf(r, d, n, &nodeEmpty); left >= 0) {
      // The node's rank: it hands its pre to the left child and takes pre (+) left's value for the right child.
      std::vector<Coro> strands;
      if (!nodeEmpty) strands.push_back(verbStrand(prims.send(left, pre, bytes)));
      strands.push_back(verbStrand(prims.recv(left, tmp, bytes)));
      CFX_CO_TRY(co_await prims::Parallel(std::move(strands)));
      if (nodeEmpty) std::memcpy(pre, tmp, bytes);
      else combineLocal(op, pre, pre, tmp, args.count);
      preEmpty = false;
    }
  }

  if (args.exclusive) {
    if (preEmpty) CFX_CO_TRY(finishEmptyPrefix(op, out, args.count));
    else std::memcpy(out, pre, bytes);
  } else if (preEmpty) {
    if (out != in) std::memcpy(out, in, bytes);
  } else {
    combineLocal(op, out, pre, in, args.count);
  }
  co_return Status();
}

}  // namespace cfx::coll
