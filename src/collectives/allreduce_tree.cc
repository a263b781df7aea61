// SPDX-License-Identifier: Apache-2.0
// Double binary tree all-reduce (collectives layer): NCCL's "Tree", for latency-bound all-reduce on many ranks.
//
// Two binary trees span the ranks. T0 is the in-order tree on rank numbers: a rank's parent is found from its
// lowest set bit (r -> (r ^ low) | (low << 1), or r ^ low where that would be past the end), so odd ranks are
// leaves, rank 0 is the root with one child, and the depth is ceil(log2 n). T1 is the same tree on the ranks
// shifted by one (position p holds rank p + 1 mod n), so the ranks that are leaves in T0 are mostly interior in T1
// and the two trees share the work of combining. The buffer is cut in two halves, one per tree; each half is
// reduced up its tree to the root (each rank combines its own data with its children's partials and sends the
// result to its parent) and the root's bytes go back down. Halves larger than a slice are cut into slice-sized
// segments.
//
//   n = 6   T0: 0 <- 4 <- {2, 5}, 2 <- {1, 3}        T1 (shifted): 1 <- 5 <- {3, 0}, 3 <- {2, 4}
//
// Order: every rank runs the same global sequence of phases, segment by segment: T0 up, T1 up, T0 down, T1 down.
// A phase's messages only flow along one tree in one direction, so no wait within a phase is circular, and since
// every rank walks the phases in the same order, each connection carries its messages in the same order at both
// ends (the two trees may share a connection, even in opposite directions). Sends run ahead into the FIFOs.
//
// Bit-identical results: only the root of each tree holds the final bytes of its half (post-op applied there,
// once), and every other rank receives exactly those bytes.
//
// Cost: per segment, 2 * depth message latencies of half the segment (recursive doubling: 2 log2(p) of the whole
// buffer, plus 2 more off powers of two). Segments are not pipelined across tree levels, so the planner prices it
// for what it is: a latency algorithm that the model picks only where its hops are the cheapest.
#include <algorithm>

#include "collectives/collective.h"

namespace cfx::coll {

namespace {

struct TreeNode {
  int parent = -1;
  int children[2] = {-1, -1};
  int nChildren = 0;
};

// Parent of position p in the in-order binary tree on positions 0..n-1 (root 0).
int inOrderParent(int n, int p) {
  if (p == 0) return -1;
  const int low = p & -p;
  const int up = (p ^ low) | (low << 1);
  return up < n ? up : (p ^ low);
}

// Rank `rank`'s place in tree `which` (0: on rank numbers, 1: on ranks shifted by one). Children ascending.
TreeNode treeNode(int n, int which, int rank) {
  const int shift = which == 0 ? 0 : 1;
  auto rankAt = [&](int pos) { return (pos + shift) % n; };
  const int pos = (rank - shift + n) % n;
  TreeNode node;
  const int parentPos = inOrderParent(n, pos);
  node.parent = parentPos < 0 ? -1 : rankAt(parentPos);
  // A position's children differ from it in bits below its lowest set bit; scanning all positions keeps this
  // obviously consistent with inOrderParent (n is a rank count: the scan costs nothing next to a message).
  for (int q = 0; q < n && node.nChildren < 2; ++q) {
    if (q != pos && inOrderParent(n, q) == pos) node.children[node.nChildren++] = rankAt(q);
  }
  return node;
}

// One segment of one tree, reduced towards the root: `cnt` elements of this rank's input at `in`; the root (and an
// interior rank with two children, as scratch) writes into `out`.
prims::Coro treeUp(const TreeNode& t, const char* in, char* out, size_t cnt, const CollArgs& args,
                   prims::Prims& prims) {
  const ReduceOp& op = args.op;
  if (t.nChildren == 0) {
    if (t.parent >= 0) CFX_CO_TRY(co_await prims.sendPre(t.parent, in, cnt, op));
    co_return Status();
  }
  const bool root = t.parent < 0;
  if (t.nChildren == 1) {
    if (root) {
      CFX_CO_TRY(co_await prims.recvReduceCopy(t.children[0], in, out, cnt, op, /*post=*/true));
    } else {
      CFX_CO_TRY(co_await prims.recvReduceSend(t.children[0], t.parent, in, cnt, op));
    }
    co_return Status();
  }
  CFX_CO_TRY(co_await prims.recvReduceCopy(t.children[0], in, out, cnt, op, /*post=*/false));
  if (root) {
    CFX_CO_TRY(co_await prims.recvCombineCopy(t.children[1], out, out, cnt, op, /*post=*/true));
  } else {
    CFX_CO_TRY(co_await prims.recvCombineSend(t.children[1], t.parent, out, cnt, op));
  }
  co_return Status();
}

// The root's bytes of one segment, down the tree into `out`.
prims::Coro treeDown(const TreeNode& t, char* out, size_t bytes, prims::Prims& prims) {
  if (t.parent >= 0) {
    if (t.nChildren > 0) {
      CFX_CO_TRY(co_await prims.recvCopySend(t.parent, t.children[0], out, bytes));
    } else {
      CFX_CO_TRY(co_await prims.recv(t.parent, out, bytes));
    }
  } else if (t.nChildren > 0) {
    CFX_CO_TRY(co_await prims.send(t.children[0], out, bytes));
  }
  if (t.nChildren > 1) CFX_CO_TRY(co_await prims.send(t.children[1], out, bytes));
  co_return Status();
}

}  // namespace

int treeDepth(int nRanks) {
  // T1 is T0 on relabelled ranks, so both have T0's depth; walking parents alone keeps this O(n log n), which the
  // planner pays when it prices the tree.
  int depth = 0;
  for (int p = 1; p < nRanks; ++p) {
    int d = 0;
    for (int x = p; x != 0; x = inOrderParent(nRanks, x)) ++d;
    depth = std::max(depth, d);
  }
  return depth;
}

Coro allReduceTree(const CollArgs& args, Plan, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t elt = dataTypeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  if (n == 1) {
    prims::Prims::prepare(out, in, args.count, args.op, /*post=*/true);
    co_return Status();
  }
  const TreeNode trees[2] = {treeNode(n, 0, r), treeNode(n, 1, r)};
  const size_t half[2] = {args.count / 2, args.count - args.count / 2};
  const size_t first[2] = {0, args.count / 2};
  const size_t seg = std::max<size_t>(1, prims.sliceBytes() / elt);
  const size_t nSegs = (half[1] + seg - 1) / seg;  // half[1] >= half[0]
  for (size_t k = 0; k < nSegs; ++k) {
    size_t begin[2], cnt[2];
    for (int t = 0; t < 2; ++t) {
      begin[t] = first[t] + std::min(half[t], k * seg);
      cnt[t] = std::min(half[t], (k + 1) * seg) - std::min(half[t], k * seg);
    }
    for (int t = 0; t < 2; ++t) {
      if (cnt[t] == 0) continue;
      CFX_CO_TRY(co_await treeUp(trees[t], in + begin[t] * elt, out + begin[t] * elt, cnt[t], args, prims));
    }
    for (int t = 0; t < 2; ++t) {
      if (cnt[t] == 0) continue;
      CFX_CO_TRY(co_await treeDown(trees[t], out + begin[t] * elt, cnt[t] * elt, prims));
    }
  }
  co_return Status();
}

}  // namespace cfx::coll
