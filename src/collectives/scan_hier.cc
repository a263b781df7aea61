// SPDX-License-Identifier: Apache-2.0
// Hierarchical scan (collectives layer): a chain inside each host, recursive doubling across hosts, and the carries
// combined in order.
//
// Where every host's ranks are a run of consecutive ranks (host h holds s_h .. e_h), the prefix of rank r on host h is
// (everything on hosts 0 .. h-1) (+) (the prefix of r within its host). So:
//   1. within each host, a pipelined chain scan (scan_chain.cc) gives every rank its prefix within the host, and the
//      host's last rank the host's total T_h;
//   2. across hosts, the last ranks run an exclusive recursive-doubling scan of the totals: C_h = T_0 ... T_{h-1};
//   3. each host's last rank sends C_h to the other ranks of its host (host 0 has none to send);
//   4. every rank puts C_h on the left of its prefix within the host.
// Latency: (L - 1) hops of shared memory, ceil(log2 H) network latencies, one more local hop, against the flat chain's
// n - 1 hops of which H - 1 cross the network; ZeCO's 256 GPUs on 32 hosts of 8 pay 7 + 5 + 1 instead of 255.
// Where hosts interleave in rank order, or there is one host, the prefix does not split that way: it runs the flat
// recursive-doubling scan, or the chain on one host.
#include <cstring>

#include "collectives/scan.h"
#include "primitives/parallel.h"

namespace cfx::coll {

namespace {

bool contiguousHosts(const Layout& layout) {
  int next = 0;
  for (const std::vector<int>& ranks : layout.hostRanks) {
    for (int r : ranks) {
      if (r != next++) return false;
    }
  }
  return true;
}

}  // namespace

Coro scanHier(const CollArgs& args, Plan plan, prims::Prims& prims) {
  const Layout* layout = plan.layout;
  if (layout == nullptr || layout->nRanks() != prims.nRanks() || layout->nHosts() == 1 || !contiguousHosts(*layout)) {
    if (layout != nullptr && layout->nHosts() == 1) CFX_CO_TRY(co_await scanChain(args, plan, prims));
    else CFX_CO_TRY(co_await scanRecDouble(args, plan, prims));
    co_return Status();
  }
  const ReduceOp& op = args.op;
  const int r = prims.rank();
  const int h = layout->hostOf[static_cast<size_t>(r)];
  const std::vector<int>& local = layout->hostRanks[static_cast<size_t>(h)];
  const bool last = r == local.back();
  const size_t bytes = args.count * dataTypeSize(args.type);
  char* out = static_cast<char*>(args.recvbuff);
  ScratchBlock copy;
  // The exclusive chain folds the input in after it has written the output.
  CFX_CO_TRY_ASSIGN(const char* in, scanInput(args, args.exclusive || op.combine == ReduceOp::Combine::Affine, &copy));
  CFX_CO_TRY_ASSIGN(ScratchBlock totalBlock, takeScratch(bytes));
  CFX_CO_TRY_ASSIGN(ScratchBlock carryBlock, takeScratch(bytes));
  char* carry = carryBlock.data();

  // 1. Within the host.
  ScanGroup host;
  host.ranks = local;
  host.me = layout->localIndex[static_cast<size_t>(r)];
  CFX_CO_TRY(co_await chainScan(host, in, out, args.count, op, args.exclusive, last ? totalBlock.data() : nullptr, prims));
  const bool localEmpty = args.exclusive && host.me == 0;

  // 2. Across hosts, among the hosts' last ranks.
  bool carryEmpty = h == 0;
  if (last && layout->nHosts() > 1) {
    ScanGroup cross;
    for (const std::vector<int>& ranks : layout->hostRanks) cross.ranks.push_back(ranks.back());
    cross.me = h;
    CFX_CO_TRY(co_await doublingScan(cross, totalBlock.data(), carry, args.count, op, /*exclusive=*/true, &carryEmpty, prims));
  }

  // 3. The carry to the host's other ranks (host 0 has none: every rank knows it).
  if (h > 0 && local.size() > 1) {
    std::vector<Coro> strands;
    if (last) {
      for (size_t i = 0; i + 1 < local.size(); ++i) strands.push_back(verbStrand(prims.send(local[i], carry, bytes)));
    } else {
      strands.push_back(verbStrand(prims.recv(local.back(), carry, bytes)));
    }
    CFX_CO_TRY(co_await prims::Parallel(std::move(strands)));
  }

  // 4. The carry on the left.
  if (carryEmpty && localEmpty) {
    CFX_CO_TRY(finishEmptyPrefix(op, out, args.count));
  } else if (localEmpty) {
    std::memcpy(out, carry, bytes);
  } else if (!carryEmpty) {
    combineLocal(op, out, carry, out, args.count);
  }
  co_return Status();
}

}  // namespace cfx::coll
