// SPDX-License-Identifier: Apache-2.0
// Two-level hierarchical broadcast (collectives layer).
//
// A flat chain (broadcast_chain.cc) visits ranks in rank order: it crosses between hosts once per host only when
// each host's ranks are numbered together, and its latency grows with every rank. Instead, one leader per host:
//   across hosts  the root -> the leader of the next host -> ... (hosts in order from the root's), one chain;
//   within hosts  every leader -> the other ranks of its host in rank order, one chain per host.
// The root leads its own host; elsewhere the leader is the rank with the root's local index where the host has
// one, else the host's first rank, so with uniform hosts the cross chain uses one local index's links. Where the
// layout knows devices (a GPU, a NUMA node), the chain within a host goes device by device, starting with the
// leader's, so a 3-level machine's links between devices carry the message once each.
// A leader forwards each piece down the cross chain first, then into its host, so the pieces cross every host
// link once and the hosts fill in parallel. Time: about (H - 1) + (L - 1) + bytes / sliceBytes slice transfers
// (flat chain: n - 2 + bytes / sliceBytes), and each host's network link carries the message once.
//
// Pieces of two slices, as in the chain (a piece always travels as slices, so forwarding pipelines). Each rank
// receives only from its one predecessor and the graph is a tree, so every FIFO drains from the leaves up: no
// deadlock for any size or FIFO depth. The out-of-place root copies sendbuff to recvbuff at the end.
#include <algorithm>
#include <utility>

#include "collectives/collective.h"

namespace cfx::coll {

namespace {

// Rank `r`'s neighbours in the broadcast tree: whom it receives from and whom it forwards to, in order.
struct HierLinks {
  int from = -1;
  int to[2] = {-1, -1};
  int nTo = 0;
};

HierLinks hierLinks(const Layout& layout, int root, int r) {
  const int nHosts = layout.nHosts();
  const int rootHost = layout.hostOf[static_cast<size_t>(root)];
  const int rootIndex = layout.localIndex[static_cast<size_t>(root)];
  auto leaderOf = [&](int h) {
    const std::vector<int>& ranks = layout.hostRanks[static_cast<size_t>(h)];
    if (h == rootHost) return root;
    return rootIndex < static_cast<int>(ranks.size()) ? ranks[static_cast<size_t>(rootIndex)] : ranks.front();
  };
  const int h = layout.hostOf[static_cast<size_t>(r)];
  const int hostPos = mod(h - rootHost, nHosts);  // position in the cross chain
  const int leader = leaderOf(h);
  HierLinks links;
  // Within the host: the leader first, then the other ranks of its device, then every other device's ranks, devices
  // in order, each in rank order: the chain crosses each link between devices once, however ranks are numbered.
  std::vector<int> chain{leader};
  for (int q : layout.hostRanks[static_cast<size_t>(h)]) {
    if (q != leader) chain.push_back(q);
  }
  if (!layout.deviceOf.empty()) {
    const int leaderDevice = layout.deviceOf[static_cast<size_t>(leader)];
    std::stable_sort(chain.begin() + 1, chain.end(), [&](int a, int b) {
      const int da = layout.deviceOf[static_cast<size_t>(a)];
      const int db = layout.deviceOf[static_cast<size_t>(b)];
      return std::make_pair(da != leaderDevice, da) < std::make_pair(db != leaderDevice, db);
    });
  }
  const auto at = static_cast<size_t>(std::find(chain.begin(), chain.end(), r) - chain.begin());
  if (r == leader) {
    if (hostPos > 0) links.from = leaderOf(mod(h - 1, nHosts));
    if (hostPos < nHosts - 1) links.to[links.nTo++] = leaderOf(mod(h + 1, nHosts));
  } else {
    links.from = chain[at - 1];
  }
  if (at + 1 < chain.size()) links.to[links.nTo++] = chain[at + 1];
  return links;
}

}  // namespace

Coro broadcastHier(const CollArgs& args, Plan plan, prims::Prims& prims) {
  const Layout* layout = plan.layout;
  if (layout == nullptr || layout->nRanks() != prims.nRanks()) {
    co_return Status::error(Errc::InvalidUsage, "hierarchical broadcast needs the communicator's layout of ranks on hosts");
  }
  if (layout->nHosts() < 2) {
    CFX_CO_TRY(co_await broadcastChain(args, plan, prims));
    co_return Status();
  }
  const int r = prims.rank();
  const size_t bytes = args.count * dataTypeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  const HierLinks links = hierLinks(*layout, args.root, r);
  const size_t pieceBytes = 2 * prims.sliceBytes();
  for (size_t off = 0; off < bytes; off += pieceBytes) {
    const size_t len = std::min(pieceBytes, bytes - off);
    if (links.from < 0) {  // the root
      for (int i = 0; i < links.nTo; ++i) CFX_CO_TRY(co_await prims.send(links.to[i], in + off, len));
    } else if (links.nTo == 0) {
      CFX_CO_TRY(co_await prims.recv(links.from, out + off, len));
    } else {
      CFX_CO_TRY(co_await prims.recvCopySend(links.from, links.to[0], out + off, len));
      if (links.nTo > 1) CFX_CO_TRY(co_await prims.send(links.to[1], out + off, len));
    }
  }
  if (links.from < 0) prims::Prims::copy(out, in, bytes);
  co_return Status();
}

}  // namespace cfx::coll
